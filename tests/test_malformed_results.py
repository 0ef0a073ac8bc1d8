"""Results files that cannot be trusted, read by every command that reads results.

Each malformed variant, given to ``compare A B``, ``plot A -o x.png``,
``tune SPEC --from A`` and ``run SPEC --resume A.jsonl``, must end in exit 2
with one line on stderr that names the file (and the line of a case log, or the
JSON path of the bad field), no traceback, and nothing written.
"""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys

import pytest

from driver_gemm.cli import EXIT_OK, EXIT_USAGE, main
from driver_gemm.measure.stats import gflops, summarize
from driver_gemm.errors import UsageError
from driver_gemm.results import read
from driver_gemm.results.records import CaseDevice, CaseResult, RunResult
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status

from conftest import ROOT, SPECS

GOOD = ROOT / "tests" / "data" / "results" / "seed-h200.json"
SPEC = SPECS / "seed.yaml"


def good_run() -> dict:
    """A small, valid run of the seed spec's kernels (so that tune --from finds its cases)."""
    shape = Shape(1024, 512, 1024)
    cases = [CaseResult(kernel=kernel, name=kernel.split("[")[0], shape=shape, status=Status.PASS,
                        timing=summarize([ms, ms * 1.01, ms * 0.99, ms * 1.02]), gflops=shape.flops / (ms * 1.005e6),
                        pct_cublas=100.0 * 0.04 / ms, device=CaseDevice(name="NVIDIA H200", uuid="GPU-1"))
             for kernel, ms in (("cublas", 0.04), ("v1", 0.18), ("v2[TILE=32]", 0.13))]
    return RunResult(spec="seed", spec_path="specs/seed.yaml", cases=cases,
                     environment={"device": {"name": "NVIDIA H200", "sm_count": 132}}).as_dict()


def changed(path: str, value, *, delete: bool = False):
    """A mutation of the good run: set (or delete) the value at a dotted path such as cases.0.timing.median_ms."""
    def mutate(document):
        *parents, last = path.split(".")
        target = document
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        key = int(last) if isinstance(target, list) else last
        if delete:
            del target[key]
        else:
            target[key] = value
        return document
    return mutate


def _log_lines(run: dict) -> list[str]:
    header = {"type": "run", **{k: v for k, v in run.items() if k != "cases"}}
    return [json.dumps(header)] + [json.dumps({"type": "case", **case}) for case in run["cases"]]


# name: (bytes of the file, text that the one-line message must contain besides the file's name)
def _json_variants() -> dict[str, tuple[bytes, str]]:
    def dump(document) -> bytes:
        return json.dumps(document).encode()

    variants: dict[str, tuple[bytes, str]] = {
        "empty": (b"", "empty file"),
        "blank": (b"  \n\t\n", "empty file"),
        "binary": (bytes(range(256)) * 4, "binary data"),
        "png": (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "binary data"),
        "gzip": (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", "binary data"),
        "invalid utf8": (b'{"spec": "\xff\xfe", "cases": []}', "not UTF-8 text (byte 0xff at offset 10, line 1)"),
        "latin1": ('{"spec": "caf\xe9", "cases": []}'.encode("latin-1"), "not UTF-8"),
        "utf16": (json.dumps(good_run()).encode("utf-16"), "binary data"),
        "not json": (b"hello, world\n", "not valid JSON"),
        "truncated": (dump(good_run())[:-40], "not valid JSON"),
        "trailing garbage": (dump(good_run()) + b" }", "not valid JSON"),
        "yaml": (b"spec: seed\ncases: []\n", "not valid JSON"),
        "bom": (b"\xef\xbb\xbf" + json.dumps(good_run()).encode(), "not valid JSON: Unexpected UTF-8 BOM"),
        "case log named .json": (("\n".join(_log_lines(good_run())) + "\n").encode(),
                                 "not valid JSON: Extra data at line 2, column 1 (a case log, one JSON record a line?"),
        "deep nesting": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        "top array": (b"[]", "must be object, got an array"),
        "top string": (b'"results"', "must be object, got a string"),
        "top number": (b"42", "must be object, got an integer"),
        "top null": (b"null", "must be object, got null"),
        "top true": (b"true", "must be object, got a boolean"),
        "empty object": (b"{}", "missing fields spec, cases"),
    }
    mutations = {
        # missing fields
        "no spec": (changed("spec", None, delete=True), "missing field spec"),
        "no cases": (changed("cases", None, delete=True), "missing field cases"),
        "no kernel": (changed("cases.1.kernel", None, delete=True), "cases[1]: missing field kernel"),
        "no name": (changed("cases.1.name", None, delete=True), "cases[1]: missing field name"),
        "no shape": (changed("cases.0.shape", None, delete=True), "cases[0]: missing field shape"),
        "no status": (changed("cases.2.status", None, delete=True), "cases[2]: missing field status"),
        "no M": (changed("cases.0.shape.M", None, delete=True), "cases[0].shape: missing field M"),
        "no median": (changed("cases.0.timing.median_ms", None, delete=True), "cases[0].timing: missing field"),
        "no q3": (changed("cases.1.timing.q3_ms", None, delete=True), "cases[1].timing: missing field q3_ms"),
        "no samples": (changed("cases.1.timing.samples", None, delete=True), "missing field samples"),
        # wrong types
        "spec number": (changed("spec", 5), "spec: must be string"),
        "cases object": (changed("cases", {}), "cases: must be array"),
        "cases string": (changed("cases", "v1"), "cases: must be array"),
        "case list": (changed("cases.0", [1, 2]), "cases[0]: must be object"),
        "case null": (changed("cases.0", None), "cases[0]: must be object"),
        "kernel number": (changed("cases.0.kernel", 3), "cases[0].kernel: must be string"),
        "kernel empty": (changed("cases.0.kernel", ""), "cases[0].kernel: must not be empty"),
        "status unknown": (changed("cases.0.status", "WEIRD"), "cases[0].status: must be one of"),
        "status number": (changed("cases.0.status", 1), "cases[0].status: must be one of"),
        "status lower": (changed("cases.0.status", "pass"), "cases[0].status: must be one of"),
        "shape string": (changed("cases.0.shape", "1024x512x1024"), "cases[0].shape: must be object"),
        "M string": (changed("cases.0.shape.M", "1024"), "cases[0].shape.M: must be integer"),
        "M float": (changed("cases.0.shape.M", 1024.0), "cases[0].shape.M: must be integer"),
        "M fraction": (changed("cases.0.shape.M", 10.5), "cases[0].shape.M: must be integer"),
        "M bool": (changed("cases.0.shape.M", True), "cases[0].shape.M: must be integer"),
        "M null": (changed("cases.0.shape.M", None), "cases[0].shape.M: must be integer"),
        "timing list": (changed("cases.0.timing", []), "cases[0].timing: must be object"),
        "median string": (changed("cases.0.timing.median_ms", "0.04"), "cases[0].timing.median_ms: must be number"),
        "median bool": (changed("cases.0.timing.median_ms", True), "cases[0].timing.median_ms: must be number"),
        "samples fraction": (changed("cases.0.timing.samples", 2.5), "cases[0].timing.samples: must be integer"),
        "device string": (changed("cases.0.device", "H200"), "cases[0].device: must be object"),
        "gpu name number": (changed("cases.0.device.name", 7), "cases[0].device.name: must be string"),
        "environment list": (changed("environment", []), "environment: must be object"),
        "gflops string": (changed("cases.1.gflops", "fast"), "cases[1].gflops: must be number"),
        "params list": (changed("cases.1.params", []), "cases[1].params: must be object"),
        "precision fp64": (changed("cases.1.precision", "fp64"), "cases[1].precision: must be one of"),
        "message number": (changed("cases.1.message", 3), "cases[1].message: must be string"),
        "problems string": (changed("cases.1.problems", "bad"), "cases[1].problems: must be array"),
        "problems numbers": (changed("cases.1.problems", [1]), "cases[1].problems[0]: must be string"),
        "interrupted string": (changed("interrupted", "no"), "interrupted: must be boolean"),
        # non-finite numbers (Python's json reads NaN and Infinity, which JSON itself has not)
        "median NaN": (changed("cases.1.timing.median_ms", math.nan), "cases[1].timing.median_ms: nan"),
        "median -inf": (changed("cases.1.timing.median_ms", -math.inf), "cases[1].timing.median_ms: -inf"),
        "median inf": (changed("cases.2.timing.median_ms", math.inf), "cases[2].timing.median_ms: inf"),
        "q1 NaN": (changed("cases.1.timing.q1_ms", math.nan), "cases[1].timing.q1_ms: nan"),
        "gflops NaN": (changed("cases.1.gflops", math.nan), "cases[1].gflops: nan"),
        "pct inf": (changed("cases.1.pct_cublas", math.inf), "cases[1].pct_cublas: inf"),
        "settings NaN": (changed("settings", {"noise": math.nan}), "settings.noise: nan"),
        "launch NaN": (changed("cases.0.launch", {"grid": [1, math.nan]}), "cases[0].launch.grid[1]: nan"),
        # zero and negative times and counts
        "median zero": (changed("cases.1.timing.median_ms", 0.0), "cases[1].timing.median_ms: must be greater than 0"),
        "median negative": (changed("cases.1.timing.median_ms", -1.0), "must be greater than 0"),
        "min zero": (changed("cases.1.timing.min_ms", 0), "cases[1].timing.min_ms: must be greater than 0"),
        "q3 negative": (changed("cases.1.timing.q3_ms", -0.1), "cases[1].timing.q3_ms: must be greater than 0"),
        "total zero": (changed("cases.1.timing.total_ms", 0), "cases[1].timing.total_ms: must be greater than 0"),
        "stdev negative": (changed("cases.1.timing.stdev_ms", -1e-3), "cases[1].timing.stdev_ms: must be at least 0"),
        "samples zero": (changed("cases.1.timing.samples", 0), "cases[1].timing.samples: must be at least 1"),
        "samples negative": (changed("cases.1.timing.samples", -3), "cases[1].timing.samples: must be at least 1"),
        "gflops negative": (changed("cases.1.gflops", -5.0), "cases[1].gflops: must be greater than 0"),
        "gflops zero": (changed("cases.1.gflops", 0), "cases[1].gflops: must be greater than 0"),
        "pct negative": (changed("cases.1.pct_cublas", -1), "cases[1].pct_cublas: must be at least 0"),
        # dimensions
        "M zero": (changed("cases.0.shape.M", 0), "cases[0].shape.M: must be at least 1"),
        "N negative": (changed("cases.1.shape.N", -512), "cases[1].shape.N: must be at least 1"),
        "K negative": (changed("cases.2.shape.K", -1), "cases[2].shape.K: must be at least 1"),
        "M huge": (changed("cases.0.shape.M", 2**40 + 1), "cases[0].shape.M: must be at most"),
        "M enormous": (changed("cases.0.shape.M", 10**400), "cases[0].shape.M: must be at most"),
        # whole numbers beyond 64 bits where a float is read: Python cannot convert them
        "error enormous": (changed("cases.0.verification", {"rel_fro_error": 10**400}),
                           "cases[0].verification.rel_fro_error: a whole number of 1329 bits"),
        "clock enormous": (changed("environment.device.clock_khz", 10**30),
                           "environment.device.clock_khz: must be at most 100000000, got"),
        "peak enormous": (changed("environment.device.fp32_peak_gflops", 10**30),
                          "environment.device.fp32_peak_gflops: must be at most 1000000000000, got"),
        "settings enormous": (changed("settings", {"noise": 10**30}), "settings.noise: a whole number of 100 bits"),
        # the device's architecture, read to find its peak: a number there is refused, not met inside the report
        "arch number": (changed("environment.device.arch", 90), "environment.device.arch: must be string"),
        "capability text": (changed("environment.device.compute_capability", "9.0"),
                            "environment.device.compute_capability: must be array"),
        # the timing fields beside the quartiles, which are read into the summary as they are
        "throttle reasons number": (changed("cases.1.timing.throttle_reasons", 0),
                                    "cases[1].timing.throttle_reasons: must be array"),
        "throttle reasons null": (changed("cases.1.timing.throttle_reasons", None),
                                  "cases[1].timing.throttle_reasons: must be array"),
        "throttled fraction 2": (changed("cases.1.timing.throttled_fraction", 2.0),
                                 "cases[1].timing.throttled_fraction: must be at most 1"),
        "launches zero": (changed("cases.1.timing.launches_per_sample", 0),
                          "cases[1].timing.launches_per_sample: must be at least 1"),
        "clock text": (changed("cases.1.timing.sm_clock_mhz", "fast"), "cases[1].timing.sm_clock_mhz: must be number"),
        # what the schema cannot say
        "quartiles reversed": (changed("cases.1.timing.q1_ms", 1.0), "cases[1].timing.q1_ms: q1_ms = 1.0 is above"),
        "min above max": (changed("cases.1.timing.max_ms", 0.0001), "is above max_ms"),
        "label wrong": (changed("cases.0.shape.label", "1x2x3"), "cases[0].shape.label"),
        # the sub-records' figures the notes, tables and plots do arithmetic on (a wave count rounded up, a
        # percentage formatted, bytes divided): typed and bounded, never met inside a report
        "waves string": (changed("cases.0.occupancy", {"driver_waves": "1.5"}),
                         "cases[0].occupancy.driver_waves: must be number or null, got a string"),
        "waves list": (changed("cases.0.occupancy", {"driver_waves": []}), "cases[0].occupancy.driver_waves: must be"),
        "waves object": (changed("cases.0.occupancy", {"driver_waves": {}}),
                         "cases[0].occupancy.driver_waves: must be"),
        "cluster waves string": (changed("cases.0.occupancy", {"driver_cluster_waves": "2"}),
                                 "cases[0].occupancy.driver_cluster_waves: must be number"),
        "waves negative": (changed("cases.0.occupancy", {"driver_waves": -5}),
                           "cases[0].occupancy.driver_waves: must be at least 0"),
        "waves huge": (changed("cases.0.occupancy", {"driver_waves": 1e300}),
                       "cases[0].occupancy.driver_waves: 1e+300 waves is no figure a GPU run gives"),
        "cluster zero": (changed("cases.0.occupancy", {"cluster": [0, 1, 1]}),
                         "cases[0].occupancy.cluster[0]: must be at least 1"),
        "occupancy above 1": (changed("cases.0.occupancy", {"occupancy": 2.5}),
                              "cases[0].occupancy.occupancy: must be at most 1"),
        "total blocks text": (changed("cases.0.launch", {"total_blocks": "132"}),
                              "cases[0].launch.total_blocks: must be integer"),
        "profile dram text": (changed("cases.0.profile", {"dram_bytes": "1e9"}),
                              "cases[0].profile.dram_bytes: must be number"),
        "profile pct huge": (changed("cases.0.profile", {"fma_pipe_pct": 1e200}),
                             "cases[0].profile.fma_pipe_pct: 1e+200% is no figure"),
        "profile stall unnamed": (changed("cases.0.profile", {"top_stalls": [{"cycles_per_issue": 1.0}]}),
                                  "cases[0].profile.top_stalls[0]: missing field reason"),
        "mismatch expected text": (changed("cases.0.diagnosis", {"first_mismatches": [
                                       {"row": 0, "col": 0, "expected": "1", "got": None}]}),
                                   "cases[0].diagnosis.first_mismatches[0].expected: must be number"),
        "sanitizer summary numbers": (changed("cases.0.sanitizer", {"summary": [1]}),
                                      "cases[0].sanitizer.summary[0]: must be string"),
        # a time in rounds is a time as the timing's are: no shorter than LEAST_MS (the memory note divides by it)
        "rounds time denormal": (changed("cases.0.interleaved", {"kernel_ms": 5e-324, "vendor_ms": 0.04}),
                                 "cases[0].interleaved.kernel_ms: 4.94066e-324 ms is no figure"),
        "rounds time zero": (changed("cases.0.interleaved", {"kernel_ms": 0, "vendor_ms": 0.04}),
                             "cases[0].interleaved.kernel_ms: must be greater than 0"),
        "rounds vendor zero": (changed("cases.0.interleaved", {"kernel_ms": 0.04, "vendor_ms": 0.0}),
                               "cases[0].interleaved.vendor_ms: must be greater than 0"),
        "round time tiny": (changed("cases.0.interleaved", {"kernel_round_ms": [0.04, 1e-300]}),
                            "cases[0].interleaved.kernel_round_ms[1]: must be at least 1e-06"),
        # control characters in a name or label: no run writes one, and tune --from would copy it into YAML
        "name escape": (changed("cases.1.name", "\x1b[31m\n"),
                        "cases[1].name: '\\x1b[31m\\n' holds the control character '\\x1b'"),
        "kernel newline": (changed("cases.2.kernel", "v2\nforged row"), "cases[2].kernel: "),
    }
    for name, (mutate, expected) in mutations.items():
        variants[name] = (json.dumps(mutate(copy.deepcopy(good_run()))).encode(), expected)
    variants["median 1e999"] = (json.dumps(good_run()).replace('"median_ms": 0.04', '"median_ms": 1e999', 1).encode(),
                                "cases[0].timing.median_ms: inf")
    return variants


JSON_VARIANTS = _json_variants()


def _jsonl_variants() -> dict[str, tuple[bytes, str]]:
    """Case logs: a bad line anywhere names its line number."""
    good = _log_lines(good_run())

    def log(lines) -> bytes:
        return ("\n".join(lines) + "\n").encode()

    def with_line(number: int, text: str) -> bytes:
        lines = list(good)
        lines[number - 1] = text
        return log(lines)

    def case_with(index: int, mutate) -> str:
        case = json.loads(good[index])
        mutate(case)
        return json.dumps(case)

    return {
        "log empty": (b"", "empty file"),
        "log binary": (b"\0\1\2\3" * 64, "binary data"),
        "log latin1": ('{"type": "run", "spec": "caf\xe9"}\n'.encode("latin-1"), "not UTF-8"),
        "log only torn": (good[1][:30].encode(), ":1: the only line is torn (a run stopped while writing it)"),
        "log torn middle": (with_line(3, good[2][:25]), ":3: not a JSON line"),
        "log garbage line": (with_line(2, "hello"), ":2: not a JSON line"),
        "log array line": (with_line(2, "[1, 2]"), ":2: a line of a case log is a JSON object"),
        "log number line": (with_line(4, "7"), ":4: a line of a case log is a JSON object"),
        "log unknown type": (with_line(2, json.dumps({"type": "note", "text": "x"})), ":2: type: record type 'note'"),
        "log no type": (with_line(3, json.dumps({k: v for k, v in json.loads(good[2]).items() if k != "type"})),
                        ":3: type: record type None"),
        "log header late": (log(good[1:] + good[:1]), ":4: a run header after the first record"),
        "log two headers": (log(good[:1] + good), ":2: a run header after the first record"),
        "log header spec number": (with_line(1, json.dumps({"type": "run", "spec": 3})), ":1: spec: must be string"),
        "log NaN time": (with_line(3, case_with(2, lambda c: c["timing"].update(median_ms=math.nan))),
                         ":3: timing.median_ms: nan"),
        "log -inf time": (with_line(4, case_with(3, lambda c: c["timing"].update(median_ms=-math.inf))),
                          ":4: timing.median_ms: -inf"),
        "log zero time": (with_line(2, case_with(1, lambda c: c["timing"].update(median_ms=0))),
                          ":2: timing.median_ms: must be greater than 0"),
        "log M zero": (with_line(2, case_with(1, lambda c: c["shape"].update(M=0))), ":2: shape.M: must be at least 1"),
        "log K float": (with_line(2, case_with(1, lambda c: c["shape"].update(K=7.5))), ":2: shape.K: must be integer"),
        "log missing shape": (with_line(3, case_with(2, lambda c: c.pop("shape"))), ":3: missing field shape"),
        "log bad status": (with_line(3, case_with(2, lambda c: c.update(status="OK"))), ":3: status: must be one of"),
        "log pretty json": (json.dumps(good_run(), indent=1).encode(),
                            ":1: not a JSON line of a case log: this is a whole"),
        "log deep": (b"[" * 100_000 + b"\n", ":1: not a JSON line"),
        # NULs before the last line break are not a torn line's: the file is refused as binary
        "log NUL line": (log(good[:2] + ["\0" * 64] + good[2:]), "binary data (a NUL byte at offset"),
        "log NULs only": (b"\0" * 4096, "binary data (a NUL byte at offset 0, line 1)"),
    }


JSONL_VARIANTS = _jsonl_variants()


def _commands(bad, tmp_path):
    return {
        "compare": ["compare", str(bad), str(GOOD)],
        "compare second": ["compare", str(GOOD), str(bad)],
        "plot": ["plot", str(bad), "-o", str(tmp_path / "out" / "x.png")],
        "tune": ["tune", str(SPEC), "--from", str(bad), "--out", str(tmp_path / "out" / "winners.yaml")],
        "run": ["run", str(SPEC), "--resume", str(bad), "--json", str(tmp_path / "out" / "run.json")],
    }


def _check_refused(argv, bad, expected, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)   # anything written by default (results/...) would land here
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(argv) == EXIT_USAGE, argv
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"driver-gemm: {bad}"), lines[0]
    assert expected in lines[0], (expected, lines[0])
    assert sorted(p.name for p in tmp_path.rglob("*")) == before   # nothing written


@pytest.mark.parametrize("command", ["compare", "compare second", "plot", "tune"])
@pytest.mark.parametrize("variant", sorted(JSON_VARIANTS))
def test_malformed_json_results_are_refused(variant, command, tmp_path, capsys, monkeypatch):
    data, expected = JSON_VARIANTS[variant]
    bad = tmp_path / "bad.json"
    bad.write_bytes(data)
    _check_refused(_commands(bad, tmp_path)[command], bad, expected, tmp_path, capsys, monkeypatch)


@pytest.mark.parametrize("command", ["compare", "plot", "tune", "run"])
@pytest.mark.parametrize("variant", sorted(JSONL_VARIANTS))
def test_malformed_case_logs_are_refused(variant, command, tmp_path, capsys, monkeypatch):
    data, expected = JSONL_VARIANTS[variant]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(data)
    _check_refused(_commands(bad, tmp_path)[command], bad, expected, tmp_path, capsys, monkeypatch)


@pytest.mark.parametrize("variant", ["median NaN", "median -inf", "M zero", "not json", "binary"])
def test_a_whole_file_given_to_resume_is_refused_too(variant, tmp_path, capsys, monkeypatch):
    data, _ = JSON_VARIANTS[variant]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(data)
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(SPEC), "--resume", str(bad)]) == EXIT_USAGE
    assert capsys.readouterr().err.startswith(f"driver-gemm: {bad}")


@pytest.mark.parametrize("command", ["compare", "plot", "tune", "run"])
def test_missing_files_directories_and_huge_files(command, tmp_path, capsys, monkeypatch):
    for bad, expected in ((tmp_path / "nope.jsonl", "no such results file"),
                          (tmp_path / "adir.jsonl", "is a directory")):
        if "adir" in bad.name:
            bad.mkdir()
        _check_refused(_commands(bad, tmp_path)[command], bad, expected, tmp_path, capsys, monkeypatch)
    monkeypatch.setattr(read, "MAX_RESULTS_BYTES", 1000)
    huge = tmp_path / "huge.jsonl"
    huge.write_text("\n".join(_log_lines(good_run())) + "\n")
    assert huge.stat().st_size > 1000
    _check_refused(_commands(huge, tmp_path)[command], huge, "larger than the", tmp_path, capsys, monkeypatch)


def test_nan_is_never_faster_and_minus_inf_never_wins(tmp_path, capsys):
    """The two failures that started this: compare calling NaN FASTER, tune crowning a -inf winner."""
    run = good_run()
    run["cases"][1]["timing"]["median_ms"] = math.nan
    nan_file = tmp_path / "nan.json"
    nan_file.write_text(json.dumps(run))
    assert main(["compare", str(GOOD), str(nan_file)]) == EXIT_USAGE
    assert "FASTER" not in capsys.readouterr().out
    run = good_run()
    run["cases"][2]["timing"]["median_ms"] = -math.inf
    inf_file = tmp_path / "inf.json"
    inf_file.write_text(json.dumps(run))
    assert main(["tune", str(SPEC), "--from", str(inf_file), "--out", str(tmp_path / "w.yaml")]) == EXIT_USAGE
    assert not (tmp_path / "w.yaml").exists()


def test_a_torn_last_line_is_skipped_and_said(tmp_path, capsys):
    lines = _log_lines(good_run())
    torn = tmp_path / "torn.jsonl"
    torn.write_text("\n".join(lines) + "\n" + lines[1][:40])   # a writer killed mid-line: no newline
    assert main(["compare", str(torn), str(torn)]) == EXIT_OK
    out, err = capsys.readouterr()
    assert f"{torn}:{len(lines) + 1}: the last line is torn" in err and "1 line skipped" in err
    assert f"{len(lines) - 1} finished cases read" in err
    assert f"{len(lines) - 1} cases: {len(lines) - 1} SAME" in out


@pytest.mark.parametrize("tail", [b"\0" * 4096, b'{"type": "case", "ker' + b"\0" * 4096,
                                  '{"type": "case", "kernel": "caf\u00e9'.encode()[:-1]],
                         ids=["zeros", "text then zeros", "a character cut in two"])
def test_a_torn_last_line_of_nuls_or_a_cut_character_is_skipped_as_torn(tail, tmp_path, capsys):
    """A power loss mid-append may leave zero-filled blocks (NULs) after the torn line's text, or cut a character's
    bytes: the finished cases before it are read, for show as for --resume, and the line said torn."""
    lines = _log_lines(good_run())
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(("\n".join(lines) + "\n").encode() + tail)
    loaded = read.read_results(torn)
    assert len(loaded.run.cases) == len(lines) - 1 and loaded.skipped_lines == 1
    assert f"{torn}:{len(lines) + 1}: the last line is torn" in loaded.notes[0]
    header, cases = read.read_finished_cases(torn)     # what run --resume reads
    assert header["spec"] == "seed" and len(cases) == len(lines) - 1
    assert main(["show", str(torn)]) == EXIT_OK
    assert "the last line is torn" in capsys.readouterr().err


@pytest.mark.parametrize("variant", ["waves string", "waves list", "waves object", "cluster waves string",
                                     "waves negative", "rounds time denormal", "rounds time zero",
                                     "mismatch expected text", "profile dram text", "name escape"])
def test_show_refuses_a_bad_sub_record_figure_before_printing_anything(variant, tmp_path, capsys):
    """show printed half a table, then met the figure in a note ("internal error: TypeError" for a wave count
    that is text, a ZeroDivisionError for a time of 5e-324 ms, "would take -5" for a negative one)."""
    data, expected = JSON_VARIANTS[variant]
    bad = tmp_path / "bad.json"
    # a cluster launch, so that the residency note reads the waves
    document = json.loads(data)
    document["cases"][0].setdefault("launch", {"total_blocks": 132})
    bad.write_text(json.dumps(document))
    assert main(["show", str(bad)]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and "internal error" not in err and "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()] and expected in err


def test_null_is_said_once_in_a_type_error(tmp_path, capsys):
    bad = tmp_path / "null.json"
    bad.write_text("null")
    assert main(["show", str(bad)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.strip() == f"driver-gemm: {bad}: must be object, got null"


def test_a_spec_path_that_is_not_utf8_is_recorded_escaped_and_reads_back(tmp_path):
    """A spec file whose name holds a byte that is not UTF-8 (Python's surrogate escape, \\udce9) is recorded as
    an escape: the run's .json and its case log's header read back, where the lone surrogate was refused."""
    from driver_gemm.results.records import CaseLog
    from driver_gemm.results.text import path_text

    spec_path = tmp_path / "caf\udce9.yaml"
    recorded = path_text(spec_path)
    assert recorded == f"{tmp_path}/caf\\xe9.yaml" and recorded.encode("utf-8")
    assert path_text("plain.yaml") == "plain.yaml"
    run = RunResult.from_dict({**good_run(), "spec_path": recorded})
    whole = tmp_path / "run.json"
    whole.write_text(json.dumps(run.as_dict()))
    assert read.read_results(whole).run.spec_path == recorded
    log = CaseLog(tmp_path / "run.jsonl", fresh=True)
    log.write_header(run)
    log.append(run.cases[0])
    log.close()
    header, cases = read.read_finished_cases(tmp_path / "run.jsonl")
    assert header["spec_path"] == recorded and len(cases) == 1


def test_good_files_still_read(tmp_path):
    for path in sorted((ROOT / "tests" / "data" / "results").rglob("*.json*")):
        if path.name.startswith("launch-") or path.parent.name == "scripts":   # benchmark scripts' figures, not runs
            continue
        loaded = read.read_results(path)
        assert loaded.run.cases and not loaded.notes, path
    good = tmp_path / "good.json"
    good.write_text(json.dumps(good_run()))
    assert [c.kernel for c in read.read_results(good).run.cases] == ["cublas", "v1", "v2[TILE=32]"]


def test_the_shipped_schema_agrees_with_jsonschema():
    """jsonschema (a test dependency) accepts what the reader accepts, and refuses the schema-level variants."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = read.results_schema()
    validator = jsonschema.Draft202012Validator(schema)
    validator.check_schema(schema)
    for path in sorted((ROOT / "tests" / "data" / "results").glob("*.json")):
        if not path.name.startswith("launch-"):
            assert not list(validator.iter_errors(json.loads(path.read_text()))), path
    case_line = {"$ref": "#/$defs/case_line", "$defs": schema["$defs"]}
    for line in _log_lines(good_run())[1:]:
        assert not list(jsonschema.Draft202012Validator(case_line).iter_errors(json.loads(line)))
    refused_by_both = 0
    for name, (data, _) in JSON_VARIANTS.items():
        try:
            document = json.loads(data)
        except (ValueError, RecursionError):
            continue
        ours = None
        try:
            read.check_against_schema(document, schema, "x")
        except Exception as exc:   # noqa: BLE001 - any refusal counts here
            ours = exc
        theirs = list(validator.iter_errors(document))
        if ours is not None and theirs:
            refused_by_both += 1
        elif theirs:
            pytest.fail(f"{name}: jsonschema refuses what the reader accepts: {theirs[0].message}")
    assert refused_by_both >= 50


def test_one_malformed_file_in_a_real_process(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"spec": "s", "cases": [{"kernel": "k", "name": "k", "shape": {"M": 0, "N": 1, "K": 1}, '
                   '"status": "PASS"}]}')
    done = subprocess.run([sys.executable, "-m", "driver_gemm", "compare", str(bad), str(GOOD)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == EXIT_USAGE and "Traceback" not in done.stderr
    assert done.stderr == f"driver-gemm: {bad}: cases[0].shape.M: must be at least 1, got 0\n"


def test_gzip_compressed_results_read_like_plain_ones_and_bad_ones_say_why(tmp_path):
    import gzip

    plain = tmp_path / "run.json"
    plain.write_text(json.dumps(good_run()))
    packed = tmp_path / "run.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert [c.kernel for c in read.read_results(packed).run.cases] == [c.kernel for c in read.read_results(plain).run.cases]
    log = min((ROOT / "tests" / "data" / "results").rglob("*.jsonl"), key=lambda found: found.stat().st_size)
    lines = tmp_path / "run.jsonl.gz"                     # a case log, compressed: read as a case log
    lines.write_bytes(gzip.compress(log.read_bytes()))
    assert len(read.read_results(lines).run.cases) == len(read.read_results(log).run.cases) > 0
    cases = {
        "not-gzip.json.gz": b"{\"spec\": 1}",
        "torn.json.gz": gzip.compress(plain.read_bytes())[:-20],
        "bomb.json.gz": gzip.compress(b" " * (read.MAX_RESULTS_BYTES + 10)),
        "joined.json.gz": gzip.compress(plain.read_bytes()) * 2,
    }
    expected = {"not-gzip.json.gz": "not gzip data", "torn.json.gz": "torn gzip file",
                "bomb.json.gz": "decompresses to more than", "joined.json.gz": "bytes after the gzip data"}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(UsageError, match=expected[name]) as caught:
            read.read_results(tmp_path / name)
        assert caught.value.where == str(tmp_path / name)


def test_resume_refuses_the_case_log_of_another_spec(tmp_path, capsys, monkeypatch):
    """Its cases would be taken as done and this spec's appended to it: one file holding two runs."""
    run = good_run()
    run["spec"] = "another"
    log = tmp_path / "other.jsonl"
    log.write_text("\n".join(_log_lines(run)) + "\n")
    before = log.read_bytes()
    _check_refused(["run", str(SPEC), "--resume", str(log)], log, "the case log of spec 'another', not 'seed'",
                   tmp_path, capsys, monkeypatch)
    assert log.read_bytes() == before


@pytest.mark.parametrize("bad, message", [
    (float("nan"), "nan is not a finite number"), (0.0, "must be greater than 0"), (-1, "must be greater than 0"),
    (True, "must be number, got a boolean true"), ("0.1", 'must be number, got a string "0.1"'),
    (2 ** 70, "a whole number of 71 bits"),
])
def test_one_bad_sample_among_thousands_is_named_by_its_index(tmp_path, bad, message):
    """Lists of numbers are checked in one sweep (raw samples run to thousands per case); one that fails is
    walked item by item, so the message names the sample, as it would for a short list."""
    run = good_run()
    samples = [0.04 + 1e-6 * i for i in range(10_000)]
    samples[7777] = bad
    run["cases"][1]["timing"]["samples_ms"] = samples
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    with pytest.raises(UsageError, match=message) as raised:
        read.read_results(path)
    assert raised.value.field == "cases[1].timing.samples_ms[7777]"
    samples[7777] = 0.05
    run["cases"][1]["timing"].update(summarize(samples, keep_samples=False).as_dict(), samples_ms=samples)
    run["cases"][1]["gflops"] = gflops(Shape(1024, 512, 1024).flops, run["cases"][1]["timing"]["median_ms"])
    read.read_results(path.write_text(json.dumps(run)) and path)          # all 10,000 pass
    run["settings"] = {"tasks": [1.5] * 5000 + [float("inf")]}       # a free-form list: finite numbers only
    path.write_text(json.dumps(run))
    with pytest.raises(UsageError, match="inf is not a finite number") as raised:
        read.read_results(path)
    assert raised.value.field == "settings.tasks[5000]"


@pytest.mark.parametrize("name", ["run.json", "run"])
def test_resume_names_the_case_log_when_given_the_results_file(name, tmp_path, capsys, monkeypatch):
    given = tmp_path / name
    given.write_text(json.dumps(good_run()))
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(SPEC), "--resume", str(given)]) == EXIT_USAGE
    error = capsys.readouterr().err
    assert "--resume takes the case log a run writes beside its results (FILE.jsonl)" in error
    assert "--json" not in error


def test_an_empty_results_file_says_where_its_runs_cases_are(tmp_path, capsys, monkeypatch):
    """A run takes its results file's name by creating it empty and logs its cases beside it as they finish: one
    killed before its end leaves an empty .json, whose message points at the case log where there is one."""
    empty = tmp_path / "seed-20261206-004500.json"
    empty.write_bytes(b"")
    _check_refused(["show", str(empty)], empty, "stopped before its end leaves it so", tmp_path, capsys, monkeypatch)
    log = empty.with_suffix(".jsonl")
    log.write_text("\n".join(_log_lines(good_run())) + "\n")
    _check_refused(["show", str(empty)], empty, f"the cases it finished are in its case log {log}", tmp_path, capsys,
                   monkeypatch)
    assert main(["show", str(log)]) == EXIT_OK   # and the log reads
