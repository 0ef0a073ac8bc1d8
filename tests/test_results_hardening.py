"""Results files written by hand or by another tool: text that is no Unicode, text that would drive the terminal,
many shapes, a NUL in a case log, and a run written where it cannot be read back.

Every bad file is built in `tmp_path` from the shipped test data; nothing under tests/data is written.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import sys

import pytest
from rich.console import Console

from driver_gemm.cli import EXIT_OK, EXIT_USAGE, main
from driver_gemm.cli.common import _Stream
from driver_gemm.errors import UsageError
from driver_gemm.measure.stats import gflops, summarize
from driver_gemm.output_files import OutputError
from driver_gemm.report import clock_figures
from driver_gemm.report.formats import run_markdown
from driver_gemm.report.notes import markdown_notes
from driver_gemm.report.tables import print_run
from driver_gemm.results.read import load_results, read_results
from driver_gemm.results.records import CaseDevice, CaseResult, RunResult
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status

from conftest import ROOT

SEED = ROOT / "tests" / "data" / "results" / "seed-h200.json"
# Any control character a terminal acts on, as it would reach one (a line's own end aside).
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def seed() -> dict:
    return json.loads(SEED.read_text())


def write_json(tmp_path, document: dict, name: str = "a.json"):
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def case_log(document: dict) -> str:
    """`document` (a whole results file) as the case log a run writes beside it."""
    header = {"type": "run", **{key: value for key, value in document.items() if key != "cases"}}
    return "\n".join([json.dumps(header), *(json.dumps({"type": "case", **case}) for case in document["cases"])]) \
        + "\n"


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------------------------ lone surrogates

@pytest.mark.parametrize("command", [["show"], ["show", "--csv"], ["show", "--markdown"], ["compare", str(SEED)]])
def test_a_lone_surrogate_is_refused_naming_the_file_and_the_field(command, tmp_path, capsys):
    path = tmp_path / "a.json"
    path.write_bytes(SEED.read_bytes().replace(b'"kernel": "v0"', b'"kernel": "v0\\ud800"', 1))
    assert main([command[0], str(path), *command[1:]]) == EXIT_USAGE
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"driver-gemm: {path}: cases[1].kernel: ") and "surrogate" in line, line
    assert "closed" not in line


def test_a_lone_surrogate_in_a_key_or_a_case_log_is_refused_too(tmp_path):
    document = seed()
    document["cases"][2]["params"] = {"TILE\udc00": 32}
    with pytest.raises(UsageError, match="a key 'TILE\\\\udc00' holds \\\\udc00") as info:
        load_results(write_json(tmp_path, document))
    assert info.value.field == "cases[2].params"

    document = seed()
    document["cases"][3]["message"] = "low half \udfff alone"
    path = tmp_path / "a.jsonl"
    path.write_text(case_log(document))     # json.dumps writes the surrogate as an escape: ASCII text
    with pytest.raises(UsageError) as info:
        read_results(path)
    assert (info.value.where, info.value.field) == (f"{path}:5", "message")


def test_a_surrogate_pair_is_one_character_and_reads(tmp_path, capsys):
    document = seed()
    document["cases"][1]["kernel"] = "v0\U0001F600"
    path = write_json(tmp_path, document)
    assert "\\ud83d\\ude00" in path.read_text()       # the ASCII-only writer's spelling of it
    assert load_results(path).cases[1].kernel == "v0\U0001F600"
    assert main(["show", str(path)]) == EXIT_OK
    assert "v0\U0001F600" in capsys.readouterr().out


def _stdout(monkeypatch, encoding: str) -> io.BytesIO:
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding=encoding, write_through=True))
    return raw


def test_text_stdout_cannot_encode_is_written_escaped_not_called_closed(monkeypatch):
    raw = _stdout(monkeypatch, "ascii")
    stream = _Stream("stdout")
    stream.write("v0 \u03bb \ud800 done\n")
    stream.flush()
    assert raw.getvalue() == b"v0 \\u03bb \\ud800 done\n"


def test_a_failure_to_write_stdout_says_what_it_was(monkeypatch):
    _stdout(monkeypatch, "utf-8")
    sys.stdout.close()
    with pytest.raises(OutputError, match=r"stdout could not be written \(it is closed\)"):
        _Stream("stdout").write("x")

    class Odd(io.StringIO):
        def write(self, text):
            raise ValueError("odd stream")

    monkeypatch.setattr(sys, "stdout", Odd())
    with pytest.raises(OutputError, match=r"stdout could not be written \(ValueError: odd stream\)"):
        _Stream("stdout").write("x")


# ------------------------------------------------------------------------------------ many shapes

class CountedCases(list):
    """A run's cases that count the passes made over them."""

    passes = 0

    def __iter__(self):
        self.passes += 1
        return super().__iter__()


def _many_shapes_run(shapes: int) -> RunResult:
    cases = CountedCases()
    device = CaseDevice(name="NVIDIA H200", uuid="GPU-1")
    for index in range(shapes):
        shape = Shape(64 + index, 64, 64)
        for kernel, ms in (("cublas", 0.01), ("v1", 0.02)):
            cases.append(CaseResult(kernel=kernel, name=kernel, shape=shape, status=Status.PASS,
                                    timing=summarize([ms, ms * 1.01, ms * 0.99]), gflops=shape.flops / (ms * 1e6),
                                    pct_cublas=50.0, device=device))
    return RunResult(spec="many", spec_path=None, cases=cases, environment={"device": {"name": "NVIDIA H200"}})


@pytest.mark.parametrize("plain", [False, True])
def test_the_tables_and_notes_pass_over_a_run_a_few_times_not_once_a_shape(plain, monkeypatch):
    """`show` of tens of thousands of shapes takes seconds: no shape's table or notes looks through every case."""
    if plain:
        monkeypatch.setattr("driver_gemm.report.tables.PLAIN_RESULTS_CASES", 0)
    run = _many_shapes_run(60)
    print_run(run, Console(file=io.StringIO(), width=100))
    assert run.cases.passes < 30, run.cases.passes
    run.cases.passes = 0
    run_markdown(run) + markdown_notes(run)
    assert run.cases.passes < 10, run.cases.passes


def test_baseline_rows_looked_up_once_find_what_a_search_finds():
    run = _many_shapes_run(3)
    rows = clock_figures.TimedRows(run)
    for case in run.cases:
        found = clock_figures.baseline_case(run, case, rows)
        assert found is clock_figures.baseline_case(run, case)
        assert (found is None) == (case.kernel == "cublas")
        assert found is None or (found.kernel, found.shape) == ("cublas", case.shape)


# ------------------------------------------------------------------------------------ control characters

def test_printable_escapes_c0_del_and_c1_and_keeps_the_rest():
    from driver_gemm.results.text import printable

    assert printable("v0\nFAKE\tx\r\x1b[2J\x07\x7f\x9b ok \u00e9\u03bb") == \
        "v0\\nFAKE\\tx\\r\\x1b[2J\\x07\\x7f\\x9b ok \u00e9\u03bb"
    text = "v4[BM=64,BN=64] at 1024x512x1024"
    assert printable(text) is text


def _hostile_run(labels: bool = False) -> dict:
    """A run whose text holds control characters. `labels`: in its kernel labels too, as only a run made in Python
    (the API) can hold them: a file holding one is refused on reading (`test_malformed_results`), as no run writes
    one and `tune --from` would copy it into a spec."""
    document = seed()
    document["spec"] = "\x1b[2Jseed"
    document["environment"]["device"]["name"] = "\x1b]0;title\x07H200"
    if labels:
        document["cases"][1].update(kernel="\x1b[2J\x1b[31mEVIL", name="evil")
        document["cases"][2].update(kernel="v1\nFAKE LINE PASS", name="v1")
        document["cases"][3].update(kernel="v2[TILE=32,\x1b[31mLONG_ENOUGH_TO_BE_SHORTENED]")
    document["cases"][4].update(status="FAIL", message="\x1b]0;pwned\x07bad\nsecond \x9b31m line")
    document["cases"][4]["verification"]["status"] = "FAIL"    # as a run records a FAIL: its check says so too
    for case in document["cases"]:
        case["device"]["name"] = "\x1b[2JGPU"
    return document


@pytest.mark.parametrize("form", [[], ["--markdown"]])
def test_show_escapes_control_characters_from_the_file(form, tmp_path, capsys):
    path = write_json(tmp_path, _hostile_run())
    main(["show", str(path), *form])     # exit 1: a case FAILs
    out, err = capsys.readouterr()
    for text in (out, err):
        assert not RAW_CONTROL.search(text), RAW_CONTROL.search(text)
    assert not any(line.lstrip().startswith("FAKE LINE") for line in out.splitlines())
    if not form:
        assert "\\x1b[2Jseed" in out and "\\x1b]0;pwned\\x07bad" in out and "second \\x9b31m line" in out


def test_a_run_made_in_python_has_its_kernel_labels_escaped_too():
    """A RunResult made by the API is not read from a file: its labels are escaped where they are shown."""
    run = RunResult.from_dict(_hostile_run(labels=True))
    console = Console(file=io.StringIO(), width=200)
    print_run(run, console)
    out = console.file.getvalue()
    assert not RAW_CONTROL.search(out), RAW_CONTROL.search(out)
    assert not any(line.startswith("FAKE LINE") for line in out.splitlines())
    assert "\\x1b[2J\\x1b[31mEVIL" in out and "v1\\nFAKE LINE PASS" in out
    assert "\\x1b[31mLONG_ENOUGH_TO_BE_SHORTENED]" in out     # its legend line
    markdown = run_markdown(run)
    assert not RAW_CONTROL.search(markdown) and "\\x1b[2J\\x1b[31mEVIL" in markdown


def test_show_plain_text_tables_escape_too(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("driver_gemm.report.tables.PLAIN_RESULTS_CASES", 0)
    main(["show", str(write_json(tmp_path, _hostile_run()))])
    out = capsys.readouterr().out
    assert not RAW_CONTROL.search(out) and "\\x1b[2Jseed" in out and "second \\x9b31m line" in out


def test_csv_keeps_the_file_text_as_it_is(tmp_path, capsys):
    main(["show", str(write_json(tmp_path, _hostile_run())), "--csv"])
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {row["gpu"] for row in rows} == {"\x1b[2JGPU"}
    assert "\x1b]0;pwned\x07bad" in [row["message"] for row in rows]


@pytest.mark.parametrize("form", [[], ["--markdown"]])
def test_compare_escapes_control_characters_from_either_file(form, tmp_path, capsys):
    old = _hostile_run()
    old["environment"]["device"]["uuid"] = "GPU-\x1b[2Jother"
    main(["compare", str(write_json(tmp_path, old, "old.json")), str(SEED), *form])
    out, err = capsys.readouterr()
    for text in (out, err):
        assert not RAW_CONTROL.search(text), (text, RAW_CONTROL.search(text))
    assert "\\x1b[2JGPU" in out
    assert "GPU-\\x1b[2Jother" in out + err      # the warning that the GPUs differ


# ------------------------------------------------------------------------------------ writing a run

def test_write_json_refuses_a_gz_name_and_writes_nothing(tmp_path):
    run = load_results(SEED)
    for name in ("r.json.gz", "r.JSON.GZ"):
        with pytest.raises(ValueError, match=f"{re.escape(str(tmp_path / name))}: a .gz name is for a compressed"):
            run.write_json(tmp_path / name)
    assert list(tmp_path.iterdir()) == []
    assert load_results(run.write_json(tmp_path / "r.json")).cases == run.cases


def test_write_json_refuses_a_jsonl_name_which_the_readers_take_for_a_case_log(tmp_path):
    """A whole results file under a .jsonl name would be written, then refused by every reader as no case log."""
    run = load_results(SEED)
    for name in ("r.jsonl", "r.JSONL"):
        with pytest.raises(ValueError, match=f"{re.escape(str(tmp_path / name))}: a .jsonl name is for a case log"):
            run.write_json(tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_write_json_writes_numpy_numbers_as_python_ones_and_nan_as_null(tmp_path):
    np = pytest.importorskip("numpy")
    run = load_results(SEED)
    first, second = run.cases[0], run.cases[1]
    rate = gflops(first.flops, 0.375)      # of the timing below, whose median is 0.375 ms
    first.pct_peak = first.pct_peak * rate / first.gflops     # of the same peak
    first.gflops = np.float32(rate)
    first.params = {**first.params, "TILE": np.int64(32)}
    first.pct_cublas = np.float64("nan")
    second.pct_peak = np.float32("inf")
    second.phases = {"launch": np.float32(0.25)}
    run.environment = {**run.environment, "gpus": np.int64(2)}
    run.settings.scalars = {"alpha": np.float32(1.0), "beta": np.int64(0)}
    # Raw samples take a fast path (one sum for the whole list) that leaves NumPy's numbers to the encoder.
    first.timing = dataclasses.replace(summarize([0.5, 0.25]), samples_ms=[np.float32(0.5), np.float32(0.25)])
    back = load_results(run.write_json(tmp_path / "r.json"))
    one, two = back.cases[0], back.cases[1]
    assert one.gflops == float(np.float32(rate)) and type(one.gflops) is float
    assert one.params["TILE"] == 32 and type(one.params["TILE"]) is int
    assert one.pct_cublas is None and two.pct_peak is None      # JSON has no NaN or infinity: null, read as None
    assert two.phases == {"launch": 0.25}
    assert back.environment["gpus"] == 2 and back.settings.scalars == {"alpha": 1.0, "beta": 0}
    assert list(one.timing.samples_ms) == [0.5, 0.25]
    with pytest.raises(TypeError, match="a record holds object"):
        first.gflops = object()    # type: ignore[assignment]
        run.write_json(tmp_path / "bad.json")


# ------------------------------------------------------------------------------------ a NUL in a case log

def test_a_nul_byte_in_a_case_log_is_named_with_its_line(tmp_path):
    text = case_log(seed())
    lines = text.split("\n")
    lines[2] = lines[2][:40] + "\0" + lines[2][40:]
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(lines))
    offset = len(lines[0]) + len(lines[1]) + 2 + 40
    with pytest.raises(UsageError, match=f"a NUL byte at offset {offset}, line 3"):
        read_results(path)
