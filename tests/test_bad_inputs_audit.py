"""Inputs a fuzzing audit found answered with an internal error, and two misleading messages.

Each must now end in one line on stderr naming what was wrong and where, with the exit code of its kind: a results
file whose case holds a malformed ``dispatch``, ``measured_against``, ``operands`` or ``device`` object, or a whole
number too long for Python to read (2); a ``--scheduler`` address out of range or without its TLS settings (2), or
with nothing answering there (3); a compile time bound past what the operating system can wait (2); no NVRTC
library (3); a symbolic link loop given as a results file, and a missing ``--resume`` log, said as such.
"""

from __future__ import annotations

import json

import pytest

from driver_gemm.cli import EXIT_NO_GPU, EXIT_OK, EXIT_USAGE, main
from driver_gemm.cuda import bounded
from driver_gemm.errors import ToolMissingError, UsageError
from driver_gemm.measure.stats import summarize
from driver_gemm.results import read
from driver_gemm.results.records import BaselineRow, CaseDevice, CaseResult, DispatchChoice, OperandsRecord, RunResult
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status

from conftest import SPECS

SPEC = SPECS / "seed.yaml"
KERNEL_CASE = 1        # the case of `good_run` that holds every nested object


def good_run() -> dict:
    """A small valid run of the seed spec (named as it is, for run --resume), whose v1 case has a dispatch entry,
    the baseline it was measured against, and typed operands."""
    shape = Shape(1024, 512, 1024)
    device = CaseDevice(name="NVIDIA H200", uuid="GPU-1", ordinal=0)
    cases = [CaseResult(kernel=kernel, name=kernel.split("[")[0], shape=shape, status=Status.PASS,
                        timing=summarize([ms, ms * 1.01, ms * 0.99]), gflops=shape.flops / (ms * 1e6), device=device)
             for kernel, ms in (("cublas", 0.04), ("v1", 0.18), ("v2[TILE=32]", 0.13))]
    cases[KERNEL_CASE].dispatch = DispatchChoice(entry=0, shape=shape.label, rule="exact")
    cases[KERNEL_CASE].measured_against = BaselineRow(kernel="cublas", shape=shape.label, device=device)
    cases[KERNEL_CASE].operands = OperandsRecord(types={"a": "fp32", "b": "fp32", "c": "fp32", "accumulate": "fp32"},
                                                 layout="NN", batch=1, ld={"a": 1024, "b": 512, "c": 512},
                                                 batch_stride={"a": 0, "b": 0, "c": 0})
    return RunResult(spec="seed", spec_path=str(SPEC), cases=cases,
                     environment={"device": {"name": "NVIDIA H200", "sm_count": 132}}).as_dict()


def _log_text(run: dict) -> str:
    header = {"type": "run", **{key: value for key, value in run.items() if key != "cases"}}
    return "\n".join([json.dumps(header)] + [json.dumps({"type": "case", **case}) for case in run["cases"]]) + "\n"


def _with_case_field(name: str, value) -> dict:
    run = good_run()
    run["cases"][KERNEL_CASE][name] = value
    return run


def _readers(json_file, log_file, tmp_path) -> dict[str, tuple[list[str], object]]:
    """Every command that reads a results file: its command line, and the file it reads."""
    out = tmp_path / "out"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(good_run()))
    return {
        "show": (["show", str(json_file)], json_file),
        "show --csv": (["show", "--csv", str(json_file)], json_file),
        "compare first": (["compare", str(json_file), str(other)], json_file),
        "compare second": (["compare", str(other), str(json_file)], json_file),
        "tune --from": (["tune", str(SPEC), "--from", str(json_file), "--out", str(out / "w.yaml")], json_file),
        "run --baseline-results": (["run", str(SPEC), "--baseline-results", str(json_file), "--json",
                                    str(out / "r.json")], json_file),
        "show a log": (["show", str(log_file)], log_file),
        "run --resume": (["run", str(SPEC), "--resume", str(log_file)], log_file),
    }


def _refused(argv, named, expected: list[str], capsys, monkeypatch, tmp_path) -> str:
    """Run `argv` and check: exit 2, one line, naming the file `named` and every text of `expected`."""
    monkeypatch.chdir(tmp_path)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == EXIT_USAGE, (argv, err)
    assert "internal error" not in err and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"driver-gemm: {named}"), lines[0]
    for text in expected:
        assert text in lines[0], (text, lines[0])
    return lines[0]


# name: (the case's field, its malformed value, what the message must say besides the file)
MALFORMED_PARTS = {
    "dispatch empty": ("dispatch", {}, ["dispatch", "missing fields entry, shape, rule"]),
    "dispatch partial": ("dispatch", {"entry": 0}, ["dispatch", "missing fields shape, rule"]),
    "dispatch entry not a number": ("dispatch", {"entry": "x", "shape": "1x1x1", "rule": "exact"},
                                    ["dispatch.entry", "must be integer"]),
    "dispatch unknown rule": ("dispatch", {"entry": 0, "shape": "1x1x1", "rule": "best"}, ["dispatch.rule"]),
    "dispatch not an object": ("dispatch", [0], ["dispatch", "must be object or null"]),
    "measured_against empty": ("measured_against", {}, ["measured_against", "missing fields kernel, shape"]),
    "measured_against no shape": ("measured_against", {"kernel": "cublas"},
                                  ["measured_against", "missing field shape"]),
    "measured_against kernel a number": ("measured_against", {"kernel": 5, "shape": "1x1x1"},
                                         ["measured_against.kernel", "must be string"]),
    "measured_against device a list": ("measured_against", {"kernel": "cublas", "shape": "1x1x1", "device": []},
                                       ["measured_against.device"]),
    "measured_against algorithm empty": ("measured_against", {"kernel": "cublas", "shape": "1x1x1", "algorithm": {}},
                                         ["measured_against.algorithm", "missing field rank"]),
    "operands types a string": ("operands", {"types": "x"}, ["operands.types", "must be object or null"]),
    "operands type a number": ("operands", {"types": {"a": 5}}, ["operands.types.a", "must be string"]),
    "operands batch a string": ("operands", {"batch": "x"}, ["operands.batch", "must be integer or null"]),
    "operands ld a list": ("operands", {"ld": []}, ["operands.ld"]),
    "operands stride a string": ("operands", {"batch_stride": {"a": "x"}}, ["operands.batch_stride.a"]),
    "interleaved vendor clock 0": ("interleaved", {"vendor": "cublas", "rounds": 1, "kernel_ms": 0.2, "vendor_ms": 0.1,
                                                   "vendor_sm_clock_mhz": 0},
                                   ["interleaved.vendor_sm_clock_mhz", "must be greater than 0"]),
    "device ordinal a list": ("device", {"name": "x", "ordinal": [1]}, ["device.ordinal", "must be integer or null"]),
}


@pytest.mark.parametrize("reader", ["show", "show --csv", "compare first", "compare second", "tune --from",
                                    "run --baseline-results", "show a log", "run --resume"])
@pytest.mark.parametrize("variant", sorted(MALFORMED_PARTS))
def test_a_malformed_nested_object_of_a_case_is_named_by_every_reader(variant, reader, tmp_path, capsys,
                                                                      monkeypatch):
    name, value, expected = MALFORMED_PARTS[variant]
    run = _with_case_field(name, value)
    json_file, log_file = tmp_path / "bad.json", tmp_path / "bad.jsonl"
    json_file.write_text(json.dumps(run))
    log_file.write_text(_log_text(run))
    argv, named = _readers(json_file, log_file, tmp_path)[reader]
    line = _refused(argv, named, expected, capsys, monkeypatch, tmp_path)
    # a whole file names the case by its index; a case log names the line (the header is line 1)
    place = (f"{json_file}: cases[{KERNEL_CASE}].{name}" if named == json_file
             else f"{log_file}:{KERNEL_CASE + 2}: {name}")
    assert line.startswith(f"driver-gemm: {place}"), line


def test_the_base_of_those_variants_reads_and_keeps_its_nested_objects(tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(good_run()))
    assert main(["show", str(good)]) == EXIT_OK
    case = read.read_results(good).run.cases[KERNEL_CASE]
    assert case.dispatch == DispatchChoice(entry=0, shape="1024x512x1024", rule="exact")
    assert case.measured_against is not None and case.measured_against.kernel == "cublas"
    assert case.operands is not None and case.operands.ld == {"a": 1024, "b": 512, "c": 512}


def test_a_key_a_later_version_adds_to_dispatch_is_read_past_as_a_case_s_own_are(tmp_path, capsys):
    """A newer writer's extra key is no malformation: the case reads, as a case with a key this version does not
    know reads."""
    run = _with_case_field("dispatch", {"entry": 2, "shape": "1x1x1", "rule": "nearest", "table": None, "zzz": 1})
    run["cases"][KERNEL_CASE]["zzz"] = 1
    for path, text in ((tmp_path / "extra.json", json.dumps(run)), (tmp_path / "extra.jsonl", _log_text(run))):
        path.write_text(text)
        assert main(["show", str(path)]) == EXIT_OK, capsys.readouterr().err
        assert read.read_results(path).run.cases[KERNEL_CASE].dispatch == DispatchChoice(2, "1x1x1", "nearest")


# ------------------------------------------------------------------------------ whole numbers too long to read

HUGE = "9" * 5000


def _huge_variants(tmp_path) -> dict[str, tuple[object, str]]:
    """name: (the file, where the message must point)."""
    text = json.dumps(good_run())
    whole = tmp_path / "huge.json"
    whole.write_text(text.replace('"spec": "seed"', f'"spec": "seed", "seed": {HUGE}', 1))
    lines = _log_text(good_run()).splitlines()
    header = tmp_path / "huge-header.jsonl"
    header.write_text("\n".join([lines[0][:-1] + f', "seed": {HUGE}}}'] + lines[1:]) + "\n")
    case_line = tmp_path / "huge-case.jsonl"
    case_line.write_text("\n".join(lines[:2] + [lines[2].replace('"seed": null', f'"seed": {HUGE}')] + lines[3:])
                         + "\n")
    assert HUGE in case_line.read_text()
    return {"whole": (whole, f"{whole}: "), "header": (header, f"{header}:1: "),
            "case line": (case_line, f"{case_line}:3: ")}


@pytest.mark.parametrize("variant", ["whole", "header", "case line"])
@pytest.mark.parametrize("reader", ["show", "show --csv", "compare first", "compare second", "tune --from",
                                    "run"])
def test_a_whole_number_too_long_to_read_is_a_malformed_file(variant, reader, tmp_path, capsys, monkeypatch):
    bad, place = _huge_variants(tmp_path)[variant]
    commands = _readers(bad, bad, tmp_path)
    argv = commands["run --resume" if bad.suffix == ".jsonl" else "run --baseline-results"][0] if reader == "run" \
        else commands[reader][0]
    line = _refused(argv, bad, ["4300 digits"], capsys, monkeypatch, tmp_path)
    assert line.startswith(f"driver-gemm: {place}"), line


# ---------------------------------------------------------------------------------------------- run --scheduler

@pytest.mark.parametrize("address, port", [("127.0.0.1:99999", 99999), ("tcp://HOST:0", 0),
                                           ("tls://[::1]:70000", 70000)])
def test_a_scheduler_port_out_of_range_is_refused_before_connecting(address, port, tmp_path, capsys, monkeypatch):
    line = _refused(["run", str(SPEC), "--scheduler", address], "--scheduler", [address, f"port {port}", "65535"],
                    capsys, monkeypatch, tmp_path)
    assert "Dask" not in line     # said before Dask is asked anything


def test_a_scheduler_nobody_answers_at_is_named_with_exit_3(tmp_path, capsys, monkeypatch):
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    monkeypatch.chdir(tmp_path)
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):    # refused at once; Dask retries till then
        code = main(["run", str(SPEC), "--scheduler", "tcp://127.0.0.1:1", "--json", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == EXIT_NO_GPU, err
    assert "internal error" not in err and len(err.strip().splitlines()) == 1
    assert "no Dask scheduler answered at tcp://127.0.0.1:1" in err


@pytest.mark.parametrize("address, expected", [("tls://127.0.0.1:1", "TLS settings"),
                                               ("nosuchscheme://127.0.0.1:1", "unknown address scheme")])
def test_a_scheduler_address_dask_cannot_use_is_named(address, expected, tmp_path, capsys, monkeypatch):
    pytest.importorskip("distributed")
    _refused(["run", str(SPEC), "--scheduler", address, "--json", str(tmp_path / "r.json")], "--scheduler",
             [address, expected], capsys, monkeypatch, tmp_path)


# -------------------------------------------------------------------------------- DRIVER_GEMM_COMPILE_TIMEOUT_S

@pytest.mark.parametrize("value", ["1e7", "1e10", "99999999999999999999999", str(bounded.MAX_TIMEOUT_S + 1)])
def test_a_compile_time_bound_past_what_can_be_waited_is_refused(value, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(bounded.TIMEOUT_VARIABLE, value)
    with pytest.raises(UsageError, match=f"{bounded.TIMEOUT_VARIABLE}: must be at most {bounded.MAX_TIMEOUT_S} s"):
        bounded.compile_bounds()
    monkeypatch.setenv("DRIVER_GEMM_NO_CACHE", "1")
    _refused(["plan", str(SPEC)], bounded.TIMEOUT_VARIABLE, [repr(value)], capsys, monkeypatch, tmp_path)


def test_the_longest_compile_time_bound_can_be_waited_for(monkeypatch):
    monkeypatch.setenv(bounded.TIMEOUT_VARIABLE, str(bounded.MAX_TIMEOUT_S))
    seconds = bounded.compile_bounds().seconds
    assert seconds == bounded.MAX_TIMEOUT_S
    command, env = bounded.python_child("json.tool")
    done = bounded.run_bounded(command, b"[1]", seconds, env=env)    # poll(2) takes the wait: no OverflowError
    assert done.returncode == 0 and json.loads(done.stdout) == [1]


# --------------------------------------------------------------------------------------------------- no NVRTC

class _NoNvrtc:
    """NVRTC's bindings on a machine without its library: the first call fails to load it."""

    def __getattr__(self, name):
        def call(*arguments):
            # cuda.pathfinder's own error, as the bindings raise it
            from cuda.pathfinder import DynamicLibNotFoundError
            raise DynamicLibNotFoundError('Failure finding "libnvrtc.so.13 or libnvrtc.so.12": No such file: '
                                          'libnvrtc.so.13 or libnvrtc.so.12\nlong details')
        return call


@pytest.mark.parametrize("command", [["info"], ["plan", str(SPEC)], ["plan", str(SPEC), "--arch", "sm_90"]])
def test_no_nvrtc_library_is_a_missing_tool_named_with_its_wheel(command, monkeypatch, capsys, tmp_path):
    from driver_gemm.cuda import compile as nvrtc_compile

    monkeypatch.setattr(nvrtc_compile, "nvrtc", _NoNvrtc())
    with pytest.raises(ToolMissingError, match="nvidia-cuda-nvrtc"):
        nvrtc_compile.nvrtc_version()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DRIVER_GEMM_NO_CACHE", "1")
    code = main(command)
    err = capsys.readouterr().err
    assert code == EXIT_NO_GPU, err
    assert err.count("\n") == 1 and "internal error" not in err
    assert "NVRTC" in err and "libnvrtc.so.13" in err and "nvidia-cuda-nvrtc" in err and "long details" not in err


# ------------------------------------------------------------------------------------ messages that misled

@pytest.mark.parametrize("reader", ["show", "compare first", "tune --from", "run --baseline-results"])
def test_a_symbolic_link_loop_is_said_to_be_one(reader, tmp_path, capsys, monkeypatch):
    first, second = tmp_path / "loopa.json", tmp_path / "loopb.json"
    first.symlink_to(second.name)
    second.symlink_to(first.name)
    line = _refused(_readers(first, first, tmp_path)[reader][0], first, ["loop of symbolic links"], capsys,
                    monkeypatch, tmp_path)
    assert "no such results file" not in line


def test_a_missing_resume_log_is_said_before_the_results_file_beside_it(tmp_path, capsys, monkeypatch):
    """The results file a resumed run writes goes beside its log; where that cannot be written (here a folder
    stands there), the missing log is still the mistake to say."""
    (tmp_path / "gone.json").mkdir()
    line = _refused(["run", str(SPEC), "--resume", str(tmp_path / "gone.jsonl")], tmp_path / "gone.jsonl",
                    ["no such results file"], capsys, monkeypatch, tmp_path)
    assert "--json" not in line


def test_a_missing_file_is_still_missing_and_a_link_to_nothing_too(tmp_path, capsys, monkeypatch):
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to("nowhere.json")
    for path in (tmp_path / "none.json", dangling, tmp_path / "afile.json" / "under.json"):
        if path.parent.name == "afile.json":
            path.parent.write_text("{}")
        _refused(["show", str(path)], path, ["no such results file"], capsys, monkeypatch, tmp_path)


def test_a_string_shorter_than_its_field_allows_is_not_called_empty(tmp_path, capsys, monkeypatch):
    run = good_run()
    run["provenance"] = {"commit": "abc"}        # a commit is named by 7 hex digits at the least
    bad = tmp_path / "short.json"
    bad.write_text(json.dumps(run))
    line = _refused(["show", str(bad)], bad, ["provenance.commit", "at least 7 characters", '"abc"'], capsys,
                    monkeypatch, tmp_path)
    assert "empty" not in line
