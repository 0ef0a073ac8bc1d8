"""The geometric mean of % of cuBLAS per kernel over a run's shapes: `run`'s and `show`'s summary lines."""

import math

from rich.console import Console

from driver_gemm.cli import EXIT_FAILED, main
from driver_gemm.report.tables import geometric_mean_lines, print_run
from driver_gemm.results.records import CaseResult, DispatchChoice, RunResult
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status

SHAPES = [Shape(1, 4096, 4096), Shape(4096, 4096, 4096), Shape(8192, 8192, 8192)]


def _case(kernel, name, shape, pct, status=Status.PASS, dispatch=None):
    return CaseResult(kernel=kernel, name=name, shape=shape, status=status, pct_cublas=pct, dispatch=dispatch)


def suite_run() -> RunResult:
    """A vendor row, a fixed kernel on every shape, a dispatched one (other params per shape) with a failed
    shape, and a kernel run on one shape only."""
    cases = []
    for shape in SHAPES:
        cases.append(_case("cublaslt-bf16-NN", "cublaslt-bf16-NN", shape, 100.0, status=Status.REF))
    cases += [_case("v12p[CWG=2]", "v12p", shape, pct) for shape, pct in zip(SHAPES, (25.0, 100.0, 400.0))]
    cases += [_case("v13[SPLITS=8]", "v13", SHAPES[0], 80.0, dispatch=DispatchChoice(0, "1x4096x4096", "exact")),
              _case("v13[SPLITS=1]", "v13", SHAPES[1], 125.0, dispatch=DispatchChoice(1, "4096x4096x4096", "when")),
              _case("v13[SPLITS=1]", "v13", SHAPES[2], None, status=Status.FAIL,
                    dispatch=DispatchChoice(1, "4096x4096x4096", "when"))]
    cases.append(_case("v11", "v11", SHAPES[1], 95.0))
    return RunResult(spec="suite", spec_path="specs/suite.yaml", cases=cases, environment={})


def test_each_kernel_gets_the_geometric_mean_of_its_figures_and_vendor_rows_none():
    lines = geometric_mean_lines(suite_run())
    # 25, 100 and 400: the geometric mean is 100 (the arithmetic mean would be 175), and 25 is named with its shape.
    assert lines[0] == "v12p[CWG=2]: geometric mean of % of cuBLAS over 3 shapes: 100.0%; lowest 25.0% at 1x4096x4096"
    # A dispatched kernel is one kernel whatever params each shape got; its failed shape is named, not averaged.
    assert lines[1] == (f"v13: geometric mean of % of cuBLAS over 2 of its 3 shapes: {math.sqrt(80.0 * 125.0):.1f}%; "
                        "lowest 80.0% at 1x4096x4096")
    assert len(lines) == 2      # no line for the vendor row, nor for v11 on one shape


def test_configurations_of_a_sweep_are_kernels_of_their_own():
    cases = [_case(f"v4[BM={bm}]", "v4", shape, pct) for bm, pct in ((64, 50.0), (128, 200.0)) for shape in SHAPES[:2]]
    lines = geometric_mean_lines(RunResult(spec="sweep", spec_path=None, cases=cases, environment={}))
    assert lines == ["v4[BM=64]: geometric mean of % of cuBLAS over 2 shapes: 50.0%; lowest 50.0% at 1x4096x4096",
                     "v4[BM=128]: geometric mean of % of cuBLAS over 2 shapes: 200.0%; lowest 200.0% at 1x4096x4096"]


def test_a_long_label_is_named_as_its_table_names_it():
    long = "v8[BM=128,BN=256,BK=16,STAGES=3,WM=64,WN=64,TM=8,TN=8,GROUP=16,SPLIT=1]"   # too wide for the table
    cases = [_case(long, "v8", shape, 50.0) for shape in SHAPES[:2]]
    run = RunResult(spec="sweep", spec_path=None, cases=cases, environment={})
    assert geometric_mean_lines(run, {long: "v8#1"}) == [
        "v8#1: geometric mean of % of cuBLAS over 2 shapes: 50.0%; lowest 50.0% at 1x4096x4096"]
    console = Console(width=100, record=True)
    print_run(run, console)
    text = console.export_text()
    assert "v8#1: geometric mean of % of cuBLAS over 2 shapes: 50.0%" in text
    assert max(map(len, text.splitlines())) <= 100


def test_the_run_tables_end_with_the_geometric_means():
    console = Console(width=200, record=True)
    print_run(suite_run(), console)
    text = console.export_text()
    assert "v12p[CWG=2]: geometric mean of % of cuBLAS over 3 shapes: 100.0%" in text
    assert text.index("geometric mean") > text.rindex("(M x N x K)")     # after the last shape's table


def test_show_prints_them_from_a_results_file(tmp_path, capsys):
    path = suite_run().write_json(tmp_path / "suite.json")
    assert main(["show", str(path)]) == EXIT_FAILED     # the run holds a FAIL
    assert "v13: geometric mean of % of cuBLAS over 2 of its 3 shapes: 100.0%" in capsys.readouterr().out
