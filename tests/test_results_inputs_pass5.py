"""Results files and outputs from the fifth pass of hostile inputs: files of many repeated cases, names that hold
control characters drawn in pictures, figures no run gives, keys given twice, pictures that cannot be written where
they are named, and --help or --version into a full disk.

Every bad file is built in `tmp_path` from the shipped test data; nothing under tests/data is written.
"""

from __future__ import annotations

import copy
import gc
import io
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from rich.console import Console

from driver_gemm import output_files
from driver_gemm.cli import EXIT_OK, EXIT_USAGE, main
from driver_gemm.errors import UsageError
from driver_gemm.measure.stats import gflops, summarize
from driver_gemm.report import clock_figures, plots, tables
from driver_gemm.report.comparison import compare_runs
from driver_gemm.results import document_checks, read
from driver_gemm.results.records import CaseDevice, CaseResult, RunResult
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status

from conftest import ROOT, SPECS
from test_results_hardening import case_log, one_error_line, seed, write_json

SEED = ROOT / "tests" / "data" / "results" / "seed-h200.json"
SPEC = SPECS / "seed.yaml"
ESCAPE_NAME = "\x1b[2J\x1b[31mEVIL"


# ------------------------------------------------------------------------------------ many repeated cases

def _repeated_run(repeats: int) -> RunResult:
    """A run whose baseline row and kernel row, at one shape on one GPU, are repeated `repeats` times."""
    shape, device = Shape(1024, 512, 1024), CaseDevice(name="NVIDIA H200", uuid="GPU-1")
    cases = []
    for _ in range(repeats):
        for kernel, ms in (("cublas", 0.04), ("v1", 0.18)):
            cases.append(CaseResult(kernel=kernel, name=kernel, shape=shape, status=Status.PASS,
                                    timing=summarize([ms, ms * 1.01, ms * 0.99]), gflops=shape.flops / (ms * 1e6),
                                    pct_cublas=100.0 * 0.04 / ms, device=device))
    return RunResult(spec="seed", spec_path=None, cases=cases, environment={"device": {"name": "NVIDIA H200"}})


def test_the_baseline_row_of_each_case_is_looked_up_not_searched_for(monkeypatch):
    """A file repeating a (kernel, shape) row thousands of times: each case's baseline row is found by a look-up,
    not by a pass over every row of its baseline's kernel and shape (which made `show` of such a file quadratic)."""
    run = _repeated_run(400)
    calls = [0]
    key = CaseDevice.key

    def counted(device):
        calls[0] += 1
        return key.fget(device)

    monkeypatch.setattr(CaseDevice, "key", property(counted))
    rows = clock_figures.TimedRows(run)
    found = [rows.baseline_case(case) for case in run.cases]
    assert calls[0] <= 3 * len(run.cases), calls[0]       # a search per case made 400 x 400
    assert all(row is run.cases[0] for row in found[1::2]) and found[0::2] == [None] * 400
    calls[0] = 0
    print_run(run)
    assert calls[0] <= 10 * len(run.cases), calls[0]


def print_run(run: RunResult) -> str:
    console = Console(file=io.StringIO(), width=100)
    tables.print_run(run, console)
    return console.file.getvalue()


def test_the_baseline_row_on_the_case_s_own_gpu_wins_and_another_gpu_s_stands_in():
    shape = Shape(64, 64, 64)
    on = [CaseDevice(name="H200", uuid=f"GPU-{index}") for index in range(2)]
    timing = summarize([0.01, 0.0101, 0.0099])
    cublas = [CaseResult(kernel="cublas", name="cublas", shape=shape, status=Status.PASS, timing=timing, device=gpu)
              for gpu in on]
    kernel = CaseResult(kernel="v1", name="v1", shape=shape, status=Status.PASS, timing=timing, device=on[1])
    alone = CaseResult(kernel="v1", name="v1", shape=shape, status=Status.PASS, timing=timing,
                       device=CaseDevice(name="H200", uuid="GPU-9"))
    rows = clock_figures.TimedRows(RunResult(spec="s", spec_path=None, cases=[*cublas, kernel, alone]))
    assert rows.baseline_case(kernel) is cublas[1]
    assert rows.baseline_case(alone) is cublas[0]


def test_show_and_compare_of_a_file_of_repeated_cases(tmp_path, capsys, monkeypatch):
    document = seed()
    document["cases"] = document["cases"] * 200       # 2,400 cases: past the plain-text table's threshold too
    path = write_json(tmp_path, document)
    assert main(["show", str(path)]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.count("cublas ") >= 400 and "━" not in out
    assert main(["compare", str(path), str(path)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "2400 cases: 2400 SAME" in out and "━" not in out     # plain text, not a table measured cell by cell


def test_a_comparison_past_the_plain_threshold_is_plain_text_and_escaped(monkeypatch):
    monkeypatch.setattr(tables, "PLAIN_RESULTS_CASES", 1)
    old = _repeated_run(1)
    old.cases[1].kernel = ESCAPE_NAME
    console = Console(file=io.StringIO(), width=100)
    tables.print_comparison(compare_runs(old, old), "old -> new", console)
    text = console.file.getvalue()
    assert "\x1b" not in text and "\\x1b[2J" in text and "2 cases: 2 SAME" in text and "━" not in text


def test_reading_pauses_the_cycle_collector_and_restores_it(tmp_path, monkeypatch):
    """A large file makes millions of objects: the collector, run again and again as they are made, took nearly half
    of the time reading did."""
    seen = []
    from_dict = RunResult.from_dict
    monkeypatch.setattr(RunResult, "from_dict", lambda document: seen.append(gc.isenabled()) or from_dict(document))
    assert gc.isenabled()
    read.read_results(SEED)
    assert seen == [False] and gc.isenabled()
    bad = tmp_path / "bad.json"
    bad.write_text('{"spec": 1, "cases": []}')
    with pytest.raises(UsageError):
        read.read_results(bad)
    assert gc.isenabled()
    gc.disable()
    try:
        read.read_results(SEED)
        assert not gc.isenabled()      # a caller's own choice is left as it was
    finally:
        gc.enable()


def test_the_compiled_schema_passes_good_files_without_the_walk_that_names_a_problem(monkeypatch):
    """A good file is answered by the compiled predicate; the walk that builds every value's path (most of what
    reading a large file cost) runs only where the predicate finds something wrong."""
    def walk(*args):
        raise AssertionError("the path-building walk ran on a good file")

    monkeypatch.setattr(document_checks, "_check", walk)
    for name in ("seed-h200.json", "fast-h200.json.gz", "tma-bf16-8192-h200.jsonl", "tune-v8-h200.jsonl.gz",
                 "clocks-h200.json"):
        read.read_results(ROOT / "tests" / "data" / "results" / name)


@pytest.mark.parametrize("value, where", [
    (float("nan"), "cases[1].gflops: nan is not a finite number"),
    (-1.0, "cases[1].gflops: must be greater than 0"),
    ("fast", "cases[1].gflops: must be number"),
    (True, "cases[1].gflops: must be number"),
])
def test_the_compiled_schema_leaves_the_message_to_the_walk(tmp_path, value, where):
    document = seed()
    document["cases"][1]["gflops"] = value
    with pytest.raises(UsageError, match=where.replace("[", r"\[").replace("]", r"\]")):
        read.read_results(write_json(tmp_path, document))


# ------------------------------------------------------------------------------------ pictures of odd names

def seed_with_v1_named(tmp_path, name: str):
    """The seed run's results file with kernel v1 renamed `name`."""
    document = seed()
    for case in document["cases"]:
        if case["kernel"] == "v1":
            case["kernel"] = case["name"] = name
    return write_json(tmp_path, document)


def test_a_file_whose_kernel_name_holds_a_control_character_is_refused_before_anything_is_drawn(tmp_path, capsys):
    # No label driver-gemm writes holds one: a file that does was written elsewhere, and is refused at its field
    # (a run's own odd names are drawn escaped: test_drawn_text_escapes_control_characters_and_dollars).
    pytest.importorskip("matplotlib")
    path = seed_with_v1_named(tmp_path, ESCAPE_NAME)
    assert main(["plot", str(path), "-o", str(tmp_path / "p.svg")]) == EXIT_USAGE
    assert "kernel: '\\x1b[2J\\x1b[31mEVIL' holds the control character" in capsys.readouterr().err
    assert not (tmp_path / "p.svg").exists()


@pytest.mark.parametrize("name", ["核函数", "$\\undefinedmacro$"])
def test_a_plot_of_odd_kernel_names_draws_them_escaped_with_no_warning(tmp_path, capsys, name):
    pytest.importorskip("matplotlib")
    path = seed_with_v1_named(tmp_path, name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["plot", str(path), "-o", str(tmp_path / "p.svg")]) == EXIT_OK
    assert not [str(warning.message) for warning in caught], [str(warning.message) for warning in caught]
    err = capsys.readouterr().err
    assert err == "" and "\x1b" not in (tmp_path / "p.svg").read_text()


def test_drawn_text_escapes_control_characters_and_dollars():
    assert plots.drawn_text("a\x1b[2J\nb") == "a\\x1b[2J\\nb"
    assert plots.drawn_text("$x^2$") == "\\$x^2\\$"
    assert plots.drawn_text("v4[BM=64]") == "v4[BM=64]"


def test_the_comparison_picture_escapes_names_and_keeps_to_a_drawable_height():
    pytest.importorskip("matplotlib")
    from driver_gemm.report.figures import MAX_COMPARISON_ROWS, comparison_figure

    old = _repeated_run(MAX_COMPARISON_ROWS)
    for index, case in enumerate(old.cases):
        case.kernel = f"{ESCAPE_NAME}{index}"
    new = copy.deepcopy(old)
    for case in new.cases:
        case.timing = summarize([0.5, 0.505, 0.495])
    figure = comparison_figure(compare_runs(old, new), title="a\x07 -> b")
    try:
        axes = figure.axes[0]
        labels = [label.get_text() for label in axes.get_yticklabels()]
        assert len(labels) == MAX_COMPARISON_ROWS and all("\x1b" not in label for label in labels)
        assert "\\x1b[2J" in labels[0]
        title = axes.get_title()
        assert "\\x07" in title and f"the first {MAX_COMPARISON_ROWS} of {2 * MAX_COMPARISON_ROWS} drawn" in title
        assert figure.get_size_inches()[1] < 100
    finally:
        plots.require_matplotlib().close(figure)


def test_the_percentage_panel_writes_numbers_only_where_they_fit(monkeypatch):
    pytest.importorskip("matplotlib")
    figures = []
    monkeypatch.setattr(plots, "save", lambda figure, output: figures.append(figure) or Path(output))
    timing = summarize([0.02, 0.0202, 0.0198])
    cases = [CaseResult(kernel=kernel, name=kernel, shape=Shape(64 + index, 64, 64), status=Status.PASS,
                        timing=timing, gflops=100.0, pct_cublas=50.0) for index in range(90) for kernel in ("cublas",
                                                                                                          "v1")]
    plots.plot_results([RunResult(spec="s", spec_path=None, cases=cases)], "x.png")
    try:
        share = figures[0].axes[1]
        assert not share.texts                                        # 90 shapes: no number in each cell
        assert len(share.get_xticklabels()) <= plots.MOST_SHAPE_TICKS
    finally:
        plots.require_matplotlib().close(figures[0])


# ------------------------------------------------------------------------------------ figures no run gives

def _set(document: dict, index: int, path: str, value) -> None:
    target = document["cases"][index]
    *parents, last = path.split(".")
    for part in parents:
        target = target.setdefault(part, {})
    target[last] = value


def _with_samples(document: dict, index: int, bad: float) -> None:
    timing = document["cases"][index]["timing"]
    timing["samples_ms"] = [timing["median_ms"]] * 30 + [bad] + [timing["median_ms"]] * 5


ABSURD = {
    "pct_cublas": (lambda d: _set(d, 1, "pct_cublas", 1e308), "cases[1].pct_cublas: 1e+308% is no figure"),
    "gflops": (lambda d: _set(d, 2, "gflops", 1e300), "cases[2].gflops: 1e+300 GFLOP/s is no figure"),
    "pct_peak": (lambda d: _set(d, 2, "pct_peak", 1e200), "cases[2].pct_peak: 1e+200% is no figure"),
    "median huge": (lambda d: [_set(d, 1, f"timing.{name}", 1e308) for name in ("median_ms", "q3_ms", "max_ms")],
                    "cases[1].timing.median_ms: 1e+308 ms is no figure a GPU run gives (1e-06 to 1e+09 ms)"),
    "min tiny": (lambda d: _set(d, 1, "timing.min_ms", 5e-324), "cases[1].timing.min_ms: 4.94066e-324 ms is no"),
    "sample huge": (lambda d: _with_samples(d, 3, 1e308), "cases[3].timing.samples_ms[30]: 1e+308 ms is no"),
    "clock huge": (lambda d: _set(d, 1, "timing.sm_clock_mhz", 1e308), "cases[1].timing.sm_clock_mhz: 1e+308 MHz"),
    "energy huge": (lambda d: _set(d, 1, "energy", {"joules_per_launch": 0.1, "average_w": 1e308}),
                    "cases[1].energy.average_w: 1e+308 W is no figure"),
}


def _commands(bad: Path, tmp_path: Path) -> dict[str, list[str]]:
    return {
        "show": ["show", str(bad)],
        "compare": ["compare", str(SEED), str(bad)],
        "plot": ["plot", str(SEED), str(bad), "-o", str(tmp_path / "out" / "p.png")],
        "tune": ["tune", str(SPEC), "--from", str(bad), "--out", str(tmp_path / "out" / "winners.yaml")],
    }


def _refused(argv, bad, expected, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = sorted(path.name for path in tmp_path.rglob("*"))
    assert main(argv) == EXIT_USAGE, argv
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"driver-gemm: {bad}"), line
    assert expected in line, (expected, line)
    assert sorted(path.name for path in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("command", ["show", "compare", "plot", "tune"])
@pytest.mark.parametrize("variant", sorted(ABSURD))
def test_a_figure_no_run_gives_is_refused_by_every_reader(variant, command, tmp_path, capsys, monkeypatch):
    mutate, expected = ABSURD[variant]
    document = seed()
    mutate(document)
    bad = write_json(tmp_path, document, "bad.json")
    _refused(_commands(bad, tmp_path)[command], bad, expected, tmp_path, capsys, monkeypatch)


@pytest.mark.parametrize("variant", ["pct_cublas", "median huge", "sample huge"])
def test_a_figure_no_run_gives_is_refused_in_a_case_log_by_its_line(variant, tmp_path, capsys, monkeypatch):
    mutate, expected = ABSURD[variant]
    document = seed()
    mutate(document)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(case_log(document))
    index = int(expected.split("]")[0].removeprefix("cases["))
    field = expected.split(": ", 1)[0].split("].", 1)[1]
    for argv in (["show", str(bad)], ["run", str(SPEC), "--resume", str(bad), "--json", str(tmp_path / "r.json")]):
        _refused(argv, f"{bad}:{index + 2}: {field}", "is no figure a GPU run gives", tmp_path, capsys, monkeypatch)


def test_the_table_still_formats_the_largest_figures_a_run_may_give(tmp_path, capsys):
    document = seed()
    timing = document["cases"][1]["timing"]
    for name in ("min_ms", "q1_ms", "median_ms", "q3_ms", "max_ms", "mean_ms"):
        timing[name] = read.MOST_MS
    timing["total_ms"] = read.MOST_MS * timing["samples"]     # the total of that many samples of that mean
    rate = gflops(Shape(1024, 512, 1024).flops, read.MOST_MS)
    document["cases"][1]["pct_peak"] *= rate / document["cases"][1]["gflops"]
    document["cases"][1]["gflops"] = rate
    document["cases"][1]["pct_cublas"] = read.MOST_PCT
    assert main(["show", str(write_json(tmp_path, document))]) == EXIT_OK
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("v0 "))
    assert "1000000000.0" in row and "100,000,000.0" in row and len(row) <= 100, row


# ------------------------------------------------------------------------------------ compare's threshold

@pytest.mark.parametrize("given", ["1e308", "1000000", "-1", "nan"])
def test_the_threshold_s_refusal_states_both_bounds(given, capsys):
    assert main(["compare", str(SEED), str(SEED), "--threshold", given]) == EXIT_USAGE
    line = one_error_line(capsys.readouterr().err)
    assert "--threshold: a threshold is a percentage from 0 to below 1,000,000, got" in line, line


# ------------------------------------------------------------------------------------ keys given twice

def _with_second_key(document: dict, key: str, value) -> str:
    """The JSON text of `document` with `key` given a second time at its end."""
    return json.dumps(document)[:-1] + f", {json.dumps(key)}: {json.dumps(value)}}}"


@pytest.mark.parametrize("key, value", [("cases", []), ("spec", "other")])
@pytest.mark.parametrize("command", ["show", "compare", "plot", "tune"])
def test_a_key_given_twice_at_the_top_is_refused_naming_it(key, value, command, tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.json"
    bad.write_text(_with_second_key(seed(), key, value))
    _refused(_commands(bad, tmp_path)[command], bad, f'the key "{key}" appears twice in one object', tmp_path,
             capsys, monkeypatch)


def test_a_key_given_twice_deep_in_a_case_is_named_with_its_object_s_path(tmp_path, capsys, monkeypatch):
    document = seed()
    text = json.dumps(document)
    head, tail = text.split('"median_ms": ', 1)
    tail = tail.replace('"median_ms": ', '"median_ms": 1.0, "median_ms": ', 1)   # the second case's timing
    bad = tmp_path / "bad.json"
    bad.write_text(head + '"median_ms": ' + tail)
    _refused(["show", str(bad)], f"{bad}: cases[1].timing", 'the key "median_ms" appears twice', tmp_path, capsys,
             monkeypatch)


def test_a_key_given_three_times_says_so(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.json"
    bad.write_text(_with_second_key(json.loads(_with_second_key(seed(), "x", 1)), "x", 2)[:-1]
                   + ', "x": 3}')
    _refused(["show", str(bad)], bad, 'the key "x" appears 3 times', tmp_path, capsys, monkeypatch)


@pytest.mark.parametrize("line", [1, 3])
def test_a_key_given_twice_in_a_case_log_is_refused_by_its_line_also_on_resume(line, tmp_path, capsys, monkeypatch):
    lines = case_log(seed()).splitlines()
    lines[line - 1] = lines[line - 1][:-1] + ', "status": "PASS"}' if line > 1 else \
        lines[0][:-1] + ', "spec": "other"}'
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    key = "status" if line > 1 else "spec"
    for argv in (["show", str(bad)], ["run", str(SPEC), "--resume", str(bad), "--json", str(tmp_path / "r.json")]):
        _refused(argv, f"{bad}:{line}", f'the key "{key}" appears twice', tmp_path, capsys, monkeypatch)


def test_a_good_file_is_never_searched_for_a_repeated_key(monkeypatch):
    def search(*args):
        raise AssertionError("searched a good file for a repeated key")

    monkeypatch.setattr(read, "_path_to", search)
    read.read_results(SEED)
    read.read_results(ROOT / "tests" / "data" / "results" / "tma-bf16-8192-h200.jsonl")


# ------------------------------------------------------------------------------------ pictures that cannot be written

@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
@pytest.mark.parametrize("argv", [["plot", str(SEED), "-o"], ["show", str(SEED), "--plot"],
                                  ["compare", str(SEED), str(SEED), "--plot"]])
def test_a_picture_on_a_file_system_that_takes_no_files_is_refused_before_any_work(argv, capsys, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("results read before the picture was checked")

    monkeypatch.setattr("driver_gemm.cli.common.read_results_files", never)
    for module in ("plot", "show", "compare"):
        monkeypatch.setattr(f"driver_gemm.cli.{module}.read_results_files", never)
    assert main([*argv, "/proc/x.png"]) == EXIT_USAGE
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("driver-gemm: /proc/x.png: --") and "no file can be created in /proc" in line, line


def test_a_folder_on_a_file_system_without_storage_is_tried(tmp_path, monkeypatch):
    """A file system with no storage (/proc's kind) is tried by creating a file there; one that refuses it is said
    before any work, as /proc is on a machine without one."""
    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(output_files.os, "statvfs", lambda path: os.statvfs_result((0,) * 10))
    monkeypatch.setattr(output_files.tempfile, "mkstemp", read_only)
    with pytest.raises(UsageError, match=r"--json: cannot be written there: no file can be created in .*: the file "
                                         r"system is read-only"):
        output_files.check_output(tmp_path / "r.json", "--json")
    with pytest.raises(UsageError, match="--artifacts: cannot be written there"):
        output_files.check_output_folder(tmp_path / "maps", "--artifacts")


def test_a_check_leaves_nothing_behind_and_on_a_disk_tries_nothing(tmp_path, monkeypatch):
    before = tmp_path.stat().st_mtime_ns
    output_files.check_output(tmp_path / "sub" / "r.json", "--json")
    output_files.check_output_folder(tmp_path / "maps", "--artifacts")
    assert list(tmp_path.iterdir()) == [] and tmp_path.stat().st_mtime_ns == before
    monkeypatch.setattr(output_files.os, "statvfs", lambda path: os.statvfs_result((0,) * 10))
    output_files.check_output(tmp_path / "r.json", "--json")     # tried, and taken: nothing left either
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["plot", str(SEED), "-o"], ["show", str(SEED), "--plot"],
                                  ["compare", str(SEED), str(SEED), "--plot"]])
@pytest.mark.parametrize("given, instead", [("p.png/", "p.png"), ("pictures/", "pictures/plot.png")])
def test_a_picture_named_with_a_trailing_separator_is_refused_as_run_json_is(argv, given, instead, tmp_path, capsys,
                                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([*argv, given]) == EXIT_USAGE
    line = one_error_line(capsys.readouterr().err)
    assert f"{given} ends in a separator, so it names a folder: give the file's path (e.g. {instead})" in line
    assert list(tmp_path.iterdir()) == []


def test_output_path_refuses_what_names_no_file():
    assert output_files.output_path("a/p.png", "--output", "plot.png") == Path("a/p.png")
    for given in ("", "  ", "a/", "a//"):
        with pytest.raises(UsageError, match="--output"):
            output_files.output_path(given, "--output", "plot.png")


# ------------------------------------------------------------------------------------ --help and --version

def _driver_gemm(args: list[str], **streams) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "driver_gemm", *args], stderr=subprocess.PIPE, text=True,
                          timeout=60, cwd=ROOT, **streams)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["--version"], ["--help"], ["show", "--help"]])
def test_help_and_version_into_a_full_disk_fail_with_one_line(args):
    with open("/dev/full", "w") as full:
        done = _driver_gemm(args, stdout=full)
    assert done.returncode == 1, done
    assert done.stderr.strip() == ("driver-gemm: stdout could not be written (no space left on the device): the rest "
                                   "of the output is lost"), done.stderr


def test_help_and_version_still_print(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.startswith("driver-gemm ")


def test_version_with_stdout_closed_is_refused_as_any_command_is():
    done = subprocess.run(["sh", "-c", f'"{sys.executable}" -m driver_gemm --version >&-'], stderr=subprocess.PIPE,
                          text=True, timeout=60, cwd=ROOT)
    assert done.returncode == EXIT_USAGE and done.stderr.startswith("driver-gemm: stdout is closed"), done
