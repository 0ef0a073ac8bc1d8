"""Reading results files back, checked: whole runs (``.json``) and case logs (``.jsonl``), gzipped or not.

Every file `show`, `compare`, `plot`, `tune --from` and `run --resume` read goes through `read_results`,
which refuses anything it cannot trust with one `UsageError` naming the file, the line or JSON path
and what is wrong (the checks are `document_checks`', which `RunResult.write_json` applies too). A case log
whose last line is torn (the run was killed mid-write) is read without it, as `ResultsFile.notes` says.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import re
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..errors import FilePath, UsageError, path_argument
from ..measure.stats import gflops
from .document_checks import (LEAST_MS, MOST_GFLOPS, MOST_MS, MOST_PCT, SUMMARY_TOLERANCE, check_against_schema,
                              check_case_consistency, check_results_document, check_run_record, check_text, json_path,
                              json_type, results_schema)
from .records import CaseResult, RunResult, latest_rows
from .provenance import Provenance
from .settings import RunSettings
from .text import printable, shortened

# The bounds of figures a file may hold, and the schema's checker, are `document_checks`'; named here too, where the
# reader's callers (plots, tests) have found them.
__all__ = ["MAX_RESULTS_BYTES", "LEAST_MS", "MOST_GFLOPS", "MOST_MS", "MOST_PCT", "ResultsFile", "check_against_schema",
           "load_results", "read_case_log", "read_finished_cases", "read_results", "results_schema"]

# Far more cases than any sweep makes; a bigger file is refused before it is parsed, so that a wrong
# path (a core dump, a video) costs no memory.
MAX_RESULTS_BYTES = 64 * 2**20


@dataclass
class ResultsFile:
    """A results file as read: the run, and what reading it had to skip."""

    path: Path
    run: RunResult
    header: dict = field(default_factory=dict)     # a case log's first line (empty for a .json file)
    skipped_lines: int = 0
    notes: list[str] = field(default_factory=list)



def read_results(path: FilePath) -> ResultsFile:
    """Read and check a results file, whole (``.json``) or a case log (``.jsonl``).

    Raises `UsageError` (where: the file, or ``file:line``; field: the JSON
    path) for any file that is not a results file driver-gemm could have
    written; never returns a run with a non-finite or non-positive time, a
    figure no GPU run gives (`MOST_GFLOPS`, `MOST_PCT`, `LEAST_MS` to
    `MOST_MS`, ...), or a key given twice in one object.
    """
    given = path_argument("read_results", "path", path)
    if not given.strip():    # as a Path it would be ".", the current folder
        raise UsageError(f"an empty path ({given!r}) names no results file: give the path of one (.json, .jsonl, or "
                         "either .gz)")
    path = Path(given)
    text = _read_text(path)
    with _collector_paused():
        if _kind(path) == ".jsonl":
            return _read_case_log(path, text)
        document = _parse_json(text, str(path))
        check_results_document(document, text, str(path))
        run = RunResult.from_dict(document)
        device = _recorded_device(run.environment)
        for index, case in enumerate(run.cases):
            _check_rates(case, device, str(path), f"cases[{index}].")
    return ResultsFile(path, run)


# How far a case's GFLOP/s may be from its FLOPs over its median: a run computes the one from the other as written;
# a file made by hand that rounds them to four significant digits, as its samples are kept, still reads.
_GFLOPS_TOLERANCE = SUMMARY_TOLERANCE


def _recorded_device(environment: Any) -> dict | None:
    """The GPU a run's environment records (``environment.device``), which its cases' % of peak are of."""
    device = environment.get("device") if isinstance(environment, dict) else None
    return device if isinstance(device, dict) else None


def _check_rates(case: CaseResult, device: dict | None, where: str, prefix: str) -> None:
    """Refuse a case's GFLOP/s or % of peak that are not what a run computes from its other figures: the tables,
    plots and notes print them as they are. `prefix` goes before each field's name (``cases[3].``)."""
    if case.gflops is None:
        return
    _check_gflops(case, where, f"{prefix}gflops")
    _check_pct_peak(case, device, where, f"{prefix}pct_peak")


def _check_gflops(case: CaseResult, where: str, field: str) -> None:
    """Refuse GFLOP/s that are not the case's FLOPs (`CaseResult.flops`: its shape, batch or groups) over its median,
    as every run computes them (`measure.stats.gflops`)."""
    if case.median_ms is None:
        raise UsageError(f"gflops = {case.gflops!r} without a timing to be the rate of: these results were not "
                         "written by a run as they are", where=where, field=field)
    expected = gflops(case.flops, case.median_ms)
    if abs(case.gflops - expected) > _GFLOPS_TOLERANCE * expected:
        raise UsageError(f"gflops = {case.gflops!r}, but {case.flops:,} FLOPs in a median of {case.median_ms!r} ms "
                         f"make {expected:.6g}: these results were not written by a run as they are", where=where,
                         field=field, hint="GFLOP/s are 2 M N K per matrix (2 N K per row of a grouped GEMM) over "
                                           "the median")


def _check_pct_peak(case: CaseResult, device: dict | None, where: str, field: str) -> None:
    """Refuse a % of peak that is not the case's GFLOP/s over the dense peak of its math on the run's GPU
    (`CaseResult.peak_gflops`: at the clock the driver reports), as a run computes it. A case measured on a GPU other
    than the one the file records (a run over several) is of its own GPU's peak, which the file does not hold."""
    if case.pct_peak is None or device is None:
        return
    if case.device is not None and case.device.name and device.get("name") and case.device.name != device["name"]:
        return
    peak = case.peak_gflops(device)
    if not peak:
        return
    expected = 100.0 * case.gflops / peak
    if abs(case.pct_peak - expected) > _GFLOPS_TOLERANCE * expected:
        raise UsageError(f"pct_peak = {case.pct_peak!r}, but {case.gflops:.6g} GFLOP/s of a {case.math} peak of "
                         f"{peak:.6g} GFLOP/s on {shortened(printable(str(device.get('name') or 'its GPU')))} make "
                         f"{expected:.6g}%: these results were not written by a run as they are", where=where,
                         field=field)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector held off while a file is read: a large file makes millions of objects, and the
    collector, run again and again as they are made, walks them all each time (nearly half of the time reading
    took). What reading makes is a tree (JSON, then records), freed by reference counts without the collector."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _empty_file_hint(path: Path) -> str | None:
    """Where the cases of an empty ``.json`` may be: a run takes its results file's name by creating it empty, and
    writes its cases to the case log beside it as they finish, so a run killed before its end leaves both."""
    if path.suffix.lower() != ".json":   # a run writes plain .json; a compressed or .jsonl file was made otherwise
        return None
    log = path.with_suffix(".jsonl")
    if log.is_file():
        return f"a run stopped before writing it; the cases it finished are in its case log {log}"
    return "a run takes its results file's name by creating it empty: one stopped before its end leaves it so"


def read_case_log(path: str | Path) -> tuple[dict, list[CaseResult]]:
    """A case log's header and its finished cases, checked as `read_results` checks them."""
    path = Path(path)
    text = _read_text(path)
    with _collector_paused():
        loaded = _read_case_log(path, text)
    return loaded.header, loaded.run.cases


def _kind(path: Path) -> str:
    """``.json`` or ``.jsonl`` (whatever else the name ends in), under a ``.gz`` if the file is compressed."""
    named = Path(path.stem) if path.suffix.lower() == ".gz" else path
    return named.suffix.lower()


def _gunzip(data: bytes, where: str) -> bytes:
    """A gzip-compressed results file's text, decompressed no further than the size a results file may have."""
    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        text = decompressor.decompress(data, MAX_RESULTS_BYTES + 1)
    except zlib.error as exc:
        raise UsageError(f"named .gz but not gzip data that can be read ({exc})", where=where) from None
    if len(text) > MAX_RESULTS_BYTES:
        raise UsageError(f"decompresses to more than the {MAX_RESULTS_BYTES >> 20} MiB a results file may be",
                         where=where)
    if not decompressor.eof:
        raise UsageError("a torn gzip file: it ends before its compressed data does", where=where)
    if decompressor.unused_data:
        raise UsageError(f"{len(decompressor.unused_data)} bytes after the gzip data (several files joined?): "
                         "a results file is one compressed file", where=where)
    return text


def _refuse_missing(path: Path, where: str) -> None:
    """A `UsageError` where `path` names no file: none there, or a loop of symbolic links on the way (which
    `Path.exists` would call missing too); another failure to look (no permission) is the caller's OSError."""
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError("a loop of symbolic links (each names the next, none a file), not a results file",
                             where=where) from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise UsageError("no such results file", where=where) from None
        raise


def _read_text(path: Path) -> str:
    """The text of a results file (``.gz``: decompressed), or a `UsageError` saying why it has none."""
    where = str(path)
    try:
        _refuse_missing(path, where)
        if path.is_dir():
            raise UsageError("is a directory, not a results file", where=where)
        if not path.is_file():
            raise UsageError("is not a regular file", where=where)
        with open(path, "rb") as handle:
            data = handle.read(MAX_RESULTS_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read results: {exc.strerror or exc}", where=where) from None
    if len(data) > MAX_RESULTS_BYTES:
        raise UsageError(f"larger than the {MAX_RESULTS_BYTES >> 20} MiB a results file may be", where=where)
    if path.suffix.lower() == ".gz":
        data = _gunzip(data, where)
    elif data.startswith(GZIP_MAGIC):
        plain = path.name if path.suffix else f"{path.name}.json"
        raise UsageError("binary data: gzip data (a compressed file) under a name without .gz, and results are "
                         "read compressed only by a .gz name", where=where, hint=f"rename it {plain}.gz, or gunzip it")
    if not data.strip():
        raise UsageError("empty file: no results in it", where=where, hint=_empty_file_hint(path))
    _refuse_other_encodings(data, where)
    tail = ""
    if _kind(path) == ".jsonl":
        data, tail = _torn_tail(data)
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise UsageError(f"binary data (a NUL byte at offset {nul}, line {line}), not a results file", where=where)
    try:
        return data.decode("utf-8") + tail
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UsageError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}, line {line}): "
                         "not a results file", where=where) from None


GZIP_MAGIC = b"\x1f\x8b"     # the first two bytes of every gzip file (RFC 1952)
# The top-level keys of a spec that say it is one (a name or a description alone could be any YAML's).
_WORDS_OF_ANY_YAML = ("name", "description")


def _spec_given(path: Path, text: str) -> str | None:
    """Where a spec (YAML) was given as results (`show spec.yaml`): what to say instead of a JSON error, else None."""
    named = path.suffix.lower() in (".yaml", ".yml")
    if not named:
        # lazy: only a file that did not read as JSON gets here, and reading results needs no spec reader
        from ..specfile.load import TOP_KEYS

        keys = "|".join(key for key in TOP_KEYS if key not in _WORDS_OF_ANY_YAML)
        # a spec begins a line with one of its keys; no JSON results file has a line starting so
        if re.search(rf"^({keys})\s*:", text, re.MULTILINE) is None:
            return None
    what = "by its name" if named else "with kernels and shapes"
    return f"this looks like a spec (YAML, {what}), which driver-gemm plan and run read, not a results file"


# Byte-order marks, longest first (UTF-32's little-endian mark begins with UTF-16's), and the first bytes of a JSON
# text (an object) in each of those encodings without one.
_ENCODINGS = ((b"\xff\xfe\0\0", "UTF-32"), (b"\0\0\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
              (b"\xfe\xff", "UTF-16"))
_UNMARKED = ((b"{\0\0\0", "UTF-32"), (b"\0\0\0{", "UTF-32"), (b"{\0", "UTF-16"), (b"\0{", "UTF-16"))


def _refuse_other_encodings(data: bytes, where: str) -> None:
    """A results file in another encoding than UTF-8 (as a Windows editor or PowerShell may save it) said as such:
    UTF-16 or UTF-32 text would otherwise read as binary data, and a UTF-8 byte-order mark as a JSON error."""
    how = "begins with the byte-order mark of"
    encoding = next((name for mark, name in _ENCODINGS if data.startswith(mark)), None)
    if encoding is None:
        how = "reads as"
        encoding = next((name for start, name in _UNMARKED if data.lstrip(b" \t\r\n").startswith(start)), None)
    if encoding is not None:
        raise UsageError(f"{encoding} text (the file {how} {encoding}; to a UTF-8 reader, binary data): a results "
                         "file is UTF-8", where=where,
                         hint=f"convert it, e.g. iconv -f {encoding} -t UTF-8 FILE > NEW, or save it as UTF-8")
    if data.startswith(b"\xef\xbb\xbf"):
        raise UsageError("not valid JSON: Unexpected UTF-8 BOM (the file begins with bytes EF BB BF, a byte-order "
                         "mark, which some Windows editors and PowerShell write): a results file is UTF-8 without "
                         "one", where=where, hint="save it as UTF-8 without a BOM, or remove its first three bytes")


def _torn_tail(data: bytes) -> tuple[bytes, str]:
    """A case log's bytes up to its last line break, and after it the text of a torn last line that holds NUL bytes
    or bytes that are not UTF-8 (``""`` where it holds neither).

    A file system that loses power while a line is appended may leave the file's last blocks zero-filled (NULs
    after the torn line's text), or cut a character's bytes in two. Such a line is torn, not binary: the finished
    cases before it are read, and `--resume` cuts it (`output_files._drop_torn_tail`) as it cuts any torn line. The
    text returned holds a NUL for each byte it could not read, so that it never parses as a JSON line and
    `_read_case_log` skips it as torn. A file with no line break at all is not so excused: it holds no
    finished line, and may be any binary file named .jsonl."""
    end = data.rfind(b"\n") + 1
    if not end or end == len(data):
        return data, ""
    tail = data[end:]
    try:
        if b"\0" not in tail:
            tail.decode("utf-8")
            return data, ""
    except UnicodeDecodeError:
        pass
    return data[:end], tail.decode("utf-8", "replace").replace("\ufffd", "\0")


def _parse_json(text: str, where: str) -> Any:
    try:
        return _loads(text, where, "")
    except json.JSONDecodeError as exc:
        spec = _spec_given(Path(where), text)
        if spec is not None:
            raise UsageError(spec, where=where, hint=f"run it with driver-gemm run {where} (or plan it, no GPU "
                                                     "needed); show, compare and plot read what a run writes") from None
        hint = " (a case log, one JSON record a line? its name ends in .jsonl)" if _is_case_log(text) else ""
        raise UsageError(f"not valid JSON: {_json_problem(exc)} at line {exc.lineno}, column {exc.colno}{hint}",
                         where=where) from None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"not a results file: {_unparsable(exc, text)}", where=where) from None


def _loads(text: str, where: str, path: str) -> Any:
    """`json.loads` of `text`, refusing (`UsageError`) an object that holds a key twice: a JSON reader keeps the last
    value and drops the others unread (a second ``"cases": []`` would empty the file), and driver-gemm writes each
    key once. `path`: where the text sits in the file's JSON (a line of a case log: at its top)."""
    repeated: list[tuple[dict, str, int]] = []

    def pairs_to_dict(pairs: list) -> dict:
        made = dict(pairs)
        if len(made) != len(pairs) and not repeated:     # the first object closed that repeats a key is said
            counts: dict[str, int] = {}
            for name, _ in pairs:
                counts[name] = counts.get(name, 0) + 1
            key = next(name for name, count in counts.items() if count > 1)
            repeated.append((made, key, counts[key]))
        return made

    value = json.loads(text, object_pairs_hook=pairs_to_dict)
    if repeated:    # the object's place is looked for only here: reading a good file costs one comparison an object
        target, key, count = repeated[0]
        inner = _path_to(value, target, path)
        times = "twice" if count == 2 else f"{count} times"
        raise UsageError(f"the key {printable(json.dumps(key, ensure_ascii=False))} appears {times} in one object "
                         "(a JSON reader keeps the last and drops the rest unread): not written by driver-gemm as it "
                         "is", where=where, field=inner or None)
    return value


def _path_to(value: Any, target: dict, path: str) -> str:
    """The JSON path of the object `target` (by identity) within `value`, whose own path is `path`."""
    stack = [(value, path)]
    while stack:
        item, at = stack.pop()
        if item is target:
            return at
        if isinstance(item, dict):
            stack.extend((child, json_path(at, printable(name))) for name, child in item.items())
        elif isinstance(item, list):
            stack.extend((child, f"{at}[{index}]") for index, child in enumerate(item))
    return path


def _json_problem(error: json.JSONDecodeError) -> str:
    """What JSON's reader found wrong, without the " at" some of its messages end in ("Unterminated string
    starting at"), where it gives the place itself."""
    return error.msg.removesuffix(" at")


def _unparsable(error: ValueError | RecursionError, text: str) -> str:
    """Why `json.loads` refused `text`, in words."""
    if isinstance(error, json.JSONDecodeError):
        return f"{_json_problem(error)} at column {error.colno}"
    if isinstance(error, RecursionError):
        return f"JSON nested too deeply{_deep_place(text)}"
    # The only other ValueError of json.loads: Python refuses to convert a whole number this long.
    return (f"a whole number of more than {sys.get_int_max_str_digits()} digits, which Python does not read and "
            "driver-gemm never writes")


def _read_case_log(path: Path, text: str) -> ResultsFile:
    lines = text.split("\n")
    torn_tail = not text.endswith("\n")
    header: dict = {}
    device: dict | None = None      # the header's GPU, which each case's % of peak is of
    cases: list[CaseResult] = []
    notes: list[str] = []
    skipped = 0
    schema = results_schema()
    last = max(number for number, line in enumerate(lines, 1) if line.strip())
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = _loads(line, where, "")
        except (ValueError, RecursionError) as exc:     # JSONDecodeError is a ValueError
            if number == last and torn_tail:
                if not (cases or header):
                    raise UsageError("the only line is torn (a run stopped while writing it): no complete record",
                                     where=where) from None
                skipped += 1
                notes.append(f"{where}: the last line is torn (a run stopped while writing it): "
                             f"{skipped} line skipped, {len(cases)} finished cases read")
                break
            detail = _unparsable(exc, line)
            if number == 1 and _is_whole_results(text):
                detail = "this is a whole results file, which is read under a .json name; --resume takes a .jsonl"
            spec = _spec_given(path, text) if number == 1 else None
            if spec is not None:
                raise UsageError(spec, where=str(path), hint=f"run it with driver-gemm run {path} (or plan it, no "
                                 "GPU needed); show, compare and plot read what a run writes") from None
            raise UsageError(f"not a JSON line of a case log: {detail}", where=where) from None
        if not isinstance(record, dict):
            raise UsageError(f"a line of a case log is a JSON object, not {json_type(record)}", where=where)
        kind = record.get("type")
        if kind == "run":
            if header or cases:
                raise UsageError("a run header after the first record: a case log has one, on its first line",
                                 where=where)
            check_against_schema(record, schema["$defs"]["run_line"], where)
            check_run_record(record, where)
            check_text(line, record, where)
            header = {k: v for k, v in record.items() if k != "type"}
            device = _recorded_device(header.get("environment"))
        elif kind == "case":
            check_against_schema(record, schema["$defs"]["case_line"], where)
            check_case_consistency(record, "", where)
            check_text(line, record, where)
            case = CaseResult.from_dict({k: v for k, v in record.items() if k != "type"})
            _check_rates(case, device, where, "")
            cases.append(case)
        else:
            raise UsageError(f"record type {shortened(repr(kind), 80)}: a case log has 'run' and 'case' lines only",
                             where=where, field="type")
    if not cases and not header:
        raise UsageError("no complete record: not a case log", where=str(path))
    latest = latest_rows(cases)
    if len(latest) < len(cases):
        # A case written again (given up as "not run", then run by --resume) counts as its later row says.
        notes.append(f"{path}: {len(cases) - len(latest)} case{'s' if len(cases) - len(latest) != 1 else ''} "
                     "written again later (a resumed run): each read as its last row")
        cases = latest
    if not header:
        notes.append(f"{path}: no header line (a run writes one before its first case): the spec's name is taken "
                     f"from the file's name ({path.stem!r}), and the run's GPU, settings and provenance are unknown")
    run = RunResult(spec=header.get("spec", path.stem), spec_path=header.get("spec_path"),
                    environment=header.get("environment", {}),
                    settings=RunSettings.from_json(header.get("settings", {})), cases=cases,
                    started=header.get("started", ""), provenance=Provenance.from_json(header.get("provenance")))
    return ResultsFile(path, run, header=header, skipped_lines=skipped, notes=notes)


# JSON's strings (skipped whole: a bracket in one nests nothing) and its brackets, for `_deep_place`.
_STRINGS_AND_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
DEEPEST_SHOWN = 100     # levels of nesting; a results file driver-gemm writes has fewer than ten


def _deep_place(text: str) -> str:
    """Where `text`, which JSON's reader found nested too deeply to read, first nests more than `DEEPEST_SHOWN`
    levels, as `` (... from line L, column C)`` (a line of a case log: its column), or ``""`` where it does not:
    JSON's reader gives up without a place."""
    depth = 0
    for found in _STRINGS_AND_BRACKETS.finditer(text):
        mark = found.group()
        if mark in "[{":
            depth += 1
            if depth > DEEPEST_SHOWN:
                offset = found.start()
                line, start = text.count("\n", 0, offset) + 1, text.rfind("\n", 0, offset) + 1
                place = f"line {line}, column {offset - start + 1}" if "\n" in text else f"column {offset + 1}"
                return f" (more than {DEEPEST_SHOWN} levels from {place})"
        elif mark in "]}":
            depth -= 1
    return ""


def _is_case_log(text: str) -> bool:
    try:
        first = json.loads(text.split("\n", 1)[0])
    except (ValueError, RecursionError):
        return False
    return isinstance(first, dict) and first.get("type") in ("run", "case")


def _is_whole_results(text: str) -> bool:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(document, dict) and "cases" in document


def read_finished_cases(path: str | Path) -> tuple[dict, list[CaseResult]]:
    """A case log's header and its finished cases; a torn last line is skipped, any other bad line refused.

    A case written twice (a run gave up on it, "not run", and a resumed
    run then ran it) counts once, as its later row says; a baseline is one
    case per GPU. A file that is not a case log driver-gemm could have
    written raises `UsageError` (see `read_case_log`).
    """
    header, cases = read_case_log(path)
    return header, latest_rows(cases)


def load_results(path: FilePath) -> RunResult:
    """A results file, whole (``.json``) or as case lines (``.jsonl``), checked against ``schema.json``.

    Raises `driver_gemm.errors.UsageError` naming the file, the line or JSON
    path, and what is wrong, for anything driver-gemm could not have written.
    """
    return read_results(path_argument("load_results", "path", path)).run
