"""Clock-aware figures on recorded-like runs: the SM clock shown where a row ran under the maximum, % of cuBLAS
also at equal clock (marked) when a kernel's and its vendor row's clocks differ by more than 2%, and `compare`
flagging runs whose clocks differ and comparing them at one clock with --equal-clock."""

from __future__ import annotations

import dataclasses

import pytest
from rich.console import Console

from driver_gemm.cli import EXIT_OK, EXIT_USAGE, main
from driver_gemm.report import clock_figures
from driver_gemm.report.comparison import compare_runs
from driver_gemm.report.tables import print_run
from driver_gemm.results.read import read_results

from conftest import ROOT

DATA = ROOT / "tests" / "data" / "results"
OLD, NEW = DATA / "clocks-h200.json", DATA / "clocks-later-h200.json"


def load(path):
    return read_results(path).run


def case(run, kernel):
    return next(c for c in run.cases if c.kernel == kernel)


def with_clock(case, mhz, maximum=1980.0):
    return dataclasses.replace(case, timing=dataclasses.replace(case.timing, sm_clock_mhz=mhz,
                                                                sm_clock_reference_mhz=maximum))


def test_equal_clock_pct_scales_the_kernels_time_by_the_clock_ratio():
    run = load(OLD)
    v12p, v11 = case(run, "v12p"), case(run, "v11")
    baseline = clock_figures.baseline_case(run, v12p)
    assert baseline.kernel == "cublaslt-bf16-TN"
    # 1545 MHz against 1590: the kernel at the vendor's clock would take 1545/1590 of its time
    assert clock_figures.equal_clock_pct(v12p, baseline) == pytest.approx(v12p.pct_cublas * 1590 / 1545)
    assert clock_figures.equal_clock_pct(v11, baseline) is None           # 1580 against 1590: within 2%
    assert clock_figures.equal_clock_pct(baseline, baseline) is None
    assert clock_figures.equal_clock_pct(with_clock(v12p, None), baseline) is None   # no NVML: nothing to scale


def test_the_table_shows_the_clock_and_the_marked_equal_clock_figure():
    console = Console(width=200, record=True)
    print_run(load(OLD), console)
    text = console.export_text()
    header = next(line for line in text.splitlines() if line.startswith("kernel"))
    assert "SM MHz" in header and "% cuBLAS @clk" in header
    v12p = next(line for line in text.splitlines() if line.startswith("v12p"))
    assert "1545" in v12p and "97.9*" in v12p
    v11 = next(line for line in text.splitlines() if line.startswith("v11"))
    assert v11.rstrip().endswith("-")
    assert "* v12p: 95.2% of cublaslt-bf16-TN as measured (1545 MHz against 1590 MHz), 97.9% with its time " \
           "scaled to the same clock" in text


def test_rows_at_the_maximum_clock_or_without_one_add_no_column():
    run = load(OLD)
    for clock in (1980.0, None):
        at_max = dataclasses.replace(run, cases=[with_clock(c, clock) for c in run.cases])
        assert clock_figures.clock_columns(at_max, at_max.cases) == []
    console = Console(width=200, record=True)
    print_run(dataclasses.replace(run, cases=[with_clock(c, 1980.0) for c in run.cases]), console)
    assert "SM MHz" not in console.export_text() and "*" not in console.export_text()


def test_compare_flags_a_clock_difference_and_equal_clock_calls_it_same():
    old, new = load(OLD), load(NEW)
    comparisons = compare_runs(old, new)
    assert {c.kernel: c.verdict for c in comparisons}["v12p"] == "FASTER"
    (line,) = clock_figures.clock_differences(comparisons)
    assert line.startswith("v12p at 4096x4096x4096 on NVIDIA H200: SM clock 1545 -> 1668 MHz (+8.0%)")
    clock = clock_figures.target_clock(old, new)
    assert clock == 1980.0
    scaled = [clock_figures.at_clock(run, clock)[0] for run in (old, new)]
    assert {c.kernel: c.verdict for c in compare_runs(*scaled)} == {"cublaslt-bf16-TN": "SAME", "v12p": "SAME",
                                                                    "v11": "SAME"}
    v12p = case(scaled[0], "v12p")
    assert v12p.timing.median_ms == pytest.approx(case(old, "v12p").timing.median_ms * 1545 / 1980)
    assert v12p.timing.sm_clock_mhz == 1545.0             # the clock stays as measured
    assert max(v12p.timing.samples_ms) <= v12p.timing.max_ms * 1.001


def test_compare_command_says_the_clock_and_scales_on_request(capsys):
    assert main(["compare", str(OLD), str(NEW)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "FASTER" in out and "SM clock 1545 -> 1668 MHz (+8.0%): part of the change is the clock" in out
    assert main(["compare", str(OLD), str(NEW), "--equal-clock"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "times scaled to 1980 MHz" in out and "FASTER" not in out and "compared at one clock" in out


def test_equal_clock_needs_a_recorded_clock(capsys):
    seed = DATA / "seed-h200.json"
    assert main(["compare", str(seed), str(seed), "--equal-clock"]) == EXIT_USAGE
    assert "--equal-clock: neither run recorded an SM clock" in capsys.readouterr().err


def test_markdown_tables_carry_the_same_notes_after_them(capsys):
    assert main(["show", str(OLD), "--markdown"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.index("| v11 |") < out.index("- 4096x4096x4096: cublaslt-bf16-TN: best of 8: heuristic #2")
    assert "- 4096x4096x4096: * v12p: 95.2% of cublaslt-bf16-TN as measured" in out
    assert main(["show", str(DATA / "seed-h200.json"), "--markdown"]) == EXIT_OK
    assert "\n- " not in capsys.readouterr().out          # nothing to say: the tables as they were
