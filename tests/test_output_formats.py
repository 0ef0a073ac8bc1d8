"""What the commands print: tables that fit 100 columns, the README's Markdown, CSV, and user text kept literal."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

from rich.console import Console

from driver_gemm.cli import EXIT_FAILED, EXIT_OK, main
from driver_gemm.measure.stats import summarize
from driver_gemm.report.comparison import compare_runs
from driver_gemm.report.formats import RUN_CSV_HEADER, markdown_table, run_csv, run_markdown
from driver_gemm.report.labels import legend_lines, short_labels
from driver_gemm.report.tables import print_comparison, print_run, print_tune
from driver_gemm.tune.winners import pick_winners
from driver_gemm.results.read import read_results
from driver_gemm.results.records import CaseDevice, CaseResult, RunResult
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status

from conftest import ROOT
from test_spec import MINIMAL, write

RESULTS = ROOT / "tests" / "data" / "results"


def test_long_labels_get_short_names_and_a_legend():
    labels = ["cublas", "v2[TILE=32]", "v8[BM=128,BN=256,BK=16,STAGES=3]", "v8[BM=128,BN=128,BK=16,STAGES=3]",
              "v8[BM=128,BN=256,BK=16,STAGES=3]", "a_very_long_kernel_name_without_params"]
    names = short_labels(labels)
    assert names == {"cublas": "cublas", "v2[TILE=32]": "v2[TILE=32]", "v8[BM=128,BN=256,BK=16,STAGES=3]": "v8#1",
                     "v8[BM=128,BN=128,BK=16,STAGES=3]": "v8#2",
                     "a_very_long_kernel_name_without_params": "a_very_long_kern#1"}
    assert legend_lines(names) == ["v8#1 = v8[BM=128,BN=256,BK=16,STAGES=3]", "v8#2 = v8[BM=128,BN=128,BK=16,STAGES=3]",
                                   "a_very_long_kern#1 = a_very_long_kernel_name_without_params"]
    # a short name never collides with a label that is itself in the table
    assert short_labels(["v8#1", "v8[" + "X=1," * 10 + "]"])["v8[" + "X=1," * 10 + "]"] == "v8#2"


def test_two_kernels_whose_names_cut_alike_keep_names_of_their_own():
    # Cut at the end, both would be warptile_small_#1 and #2: two configurations of one kernel, as a reader sees it.
    names = short_labels(["warptile_small_tiles_v1", "warptile_small_tiles_v2", "v8[BM=128,BN=256,BK=16,STAGES=3]",
                          "v8[BM=128,BN=128,BK=16,STAGES=3]"])
    assert (names["warptile_small_tiles_v1"], names["warptile_small_tiles_v2"]) == ("warptil~tiles_v1#1",
                                                                                  "warptil~tiles_v2#1")
    assert all(len(short) <= 20 for short in names.values())
    assert (names["v8[BM=128,BN=256,BK=16,STAGES=3]"], names["v8[BM=128,BN=128,BK=16,STAGES=3]"]) == ("v8#1", "v8#2")


def _lines(console: Console) -> list[str]:
    return console.export_text().splitlines()


def test_a_sweep_fits_100_columns_and_best_and_runner_up_differ():
    run = read_results(RESULTS / "tune-v8-small-h200.json.gz").run
    console = Console(width=100, record=True, file=io.StringIO())
    print_run(run, console)
    lines = _lines(console)
    table_lines = [line for line in lines if " = v8[" not in line]
    assert max(map(len, table_lines)) <= 100
    assert not any(line.rstrip().endswith("…") for line in lines)   # nothing cut short
    legend = [line for line in lines if line.startswith("v8#") and " = v8[" in line]
    assert len(legend) == len({case.kernel for case in run.cases if case.name == "v8"})
    console = Console(width=100, record=True, file=io.StringIO())
    print_tune(pick_winners(run), "sweep", console)
    text = console.export_text()
    row = next(line for line in text.splitlines() if line.startswith("v8 ") and "1024x512x1024" in line)
    best, runner_up = row.split()[4], row.split()[7]
    assert best.startswith("v8#") and runner_up.startswith("v8#") and best != runner_up
    assert f"{best} = v8[BM=32,BN=64,BK=64" in text and f"{runner_up} = v8[" in text
    assert "tie: the runner-up's time is within the noise" in text
    assert max(len(line) for line in text.splitlines() if " = v8[" not in line) <= 100


def test_show_markdown_prints_the_markdown_of_a_recorded_run(capsys):
    markdown = run_markdown(read_results(RESULTS / "seed-h200.json").run)
    assert markdown.count("\n| 1024x512x1024 | status |") + markdown.startswith("| 1024x512x1024 |") == 1
    assert main(["show", str(RESULTS / "seed-h200.json"), "--markdown"]) == EXIT_OK
    assert capsys.readouterr().out.strip() == markdown.strip()


def test_the_readme_table_is_the_markdown_of_the_regenerated_seed_run():
    markdown = run_markdown(read_results(ROOT / "bench" / "results" / "nvidia-h200" / "seed.json.gz").run)
    assert markdown.strip() in (ROOT / "README.md").read_text()


def test_markdown_escapes_pipes():
    assert markdown_table(("a", "b"), [("x|y", 1)]) == "| a | b |\n|---|---|\n| x\\|y | 1 |\n"


def test_run_csv_has_every_case_with_raw_numbers(capsys):
    run = read_results(RESULTS / "seed-h200.json").run
    rows = list(csv.DictReader(io.StringIO(run_csv(run))))
    assert tuple(rows[0]) == RUN_CSV_HEADER and len(rows) == len(run.cases)
    v4 = next(row for row in rows if row["kernel"].startswith("v4") and row["M"] == "1001")
    assert float(v4["median_ms"]) == next(c for c in run.cases if c.kernel == v4["kernel"]
                                          and c.shape.M == 1001).timing.median_ms
    assert v4["status"] == "PASS" and v4["gpu"] == "NVIDIA H200"
    assert main(["show", str(RESULTS / "seed-h200.json"), "--csv"]) == EXIT_OK
    assert capsys.readouterr().out == run_csv(run)


def test_compare_in_markdown_and_csv_keeps_stdout_for_the_data(capsys):
    path = str(RESULTS / "seed-h200.json")
    assert main(["compare", path, path, "--csv"]) == EXIT_OK
    out, err = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 12 and {row["verdict"] for row in rows} == {"SAME"} and float(rows[0]["change"]) == 0
    assert main(["compare", path, path, "--markdown"]) == EXIT_OK
    out, err = capsys.readouterr()
    assert out.startswith("| kernel | shape | GPU | old ms | new ms | change | verdict |\n|---|")
    assert "| v4[BM=64,BN=64,BK=16,TM=4,TN=4] | 1001x513x777 | NVIDIA H200 | 0.0884 | 0.0884 | +0.0% | SAME |" in out


def test_plan_in_csv_and_markdown(tmp_path, capsys):
    spec = write(tmp_path, MINIMAL.replace("[64, 32, 16]", "[64, 32, 16]\n  - [128, 64, 32]"))
    assert main(["plan", str(spec), "--arch", "sm_90", "--csv"]) == EXIT_OK
    out, err = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(row["M"], row["grid"], row["block"], row["valid"]) for row in rows] == [
        ("64", "1x1x1", "16x16x1", "True"), ("128", "1x2x1", "16x16x1", "True")]
    assert err == "spec: 2 ok, 0 INVALID\n"
    assert main(["plan", str(spec), "--arch", "sm_90", "--markdown"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("| kernel | shape | grid | block | threads | blocks | registers |")
    assert "| v4[BM=64,BN=64,BK=16,TM=4,TN=4] | 128x64x32 | 1x2x1 | 16x16x1 | 256 | 2 |" in out


def test_a_csv_or_markdown_plan_names_the_cases_whose_kernel_did_not_compile(tmp_path, capsys):
    # Such a kernel has no launch to plan, but a table that left its cases out would read as if they were not asked
    # for: each gets a row with its problem (the compiler's first error) and the exit code says it failed.
    spec = write(tmp_path, MINIMAL + """\
  - name: broken
    source: ../kernels/broken.cu
    function: broken
    block: [64]
    grid: [1]
""")
    (tmp_path / "kernels" / "broken.cu").write_text(
        'extern "C" __global__ void broken(const float* A, const float* B, float* C, int M, int N, int K)\n'
        "{\n    not_declared_anywhere();\n}\n")
    assert main(["plan", str(spec), "--arch", "sm_90", "--csv"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(row["kernel"], row["M"], row["valid"]) for row in rows] == [
        ("v4[BM=64,BN=64,BK=16,TM=4,TN=4]", "64", "True"), ("broken", "64", "False")]
    assert rows[1]["grid"] == rows[1]["registers"] == ""
    assert rows[1]["problems"].startswith("did not compile: ") and "broken.cu:3: error:" in rows[1]["problems"]
    assert "not_declared_anywhere" in rows[1]["problems"]
    assert "1 compile(s) failed" in err
    assert main(["plan", str(spec), "--arch", "sm_90", "--markdown"]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "| broken | 64x32x16 |" + " - |" * 11 + " COMPILE FAILED |"


def _run_with_markup_in_names() -> RunResult:
    shape = Shape(64, 64, 64)
    cases = [CaseResult(kernel="[bold]x[/bold]", name="[bold]x[/bold]", shape=shape, status=Status.FAIL,
                        message="[red]not red[/red] message", timing=summarize([1.0, 1.1, 0.9]),
                        device=CaseDevice(name="[link=x]GPU")),
             CaseResult(kernel="ok[", name="ok[", shape=shape, status=Status.PASS, timing=summarize([1.0, 1.0]))]
    return RunResult(spec="[italic]spec", spec_path=None, cases=cases,
                     environment={"device": {"name": "[blink]H200"}})


def test_user_text_prints_literally():
    run = _run_with_markup_in_names()
    console = Console(width=100, record=True, file=io.StringIO())
    print_run(run, console)
    print_comparison(compare_runs(run, run), "[b]old -> new", console)
    text = console.export_text()
    for literal in ("[bold]x[/bold]", "[italic]spec", "[blink]H200", "[red]not red[/red] message", "[b]old -> new",
                    "[link=x]GPU", "ok["):
        assert literal in text, literal


def test_piped_output_does_not_wrap_long_lines(tmp_path):
    spec = write(tmp_path, MINIMAL.replace("block: [BN / TN, BM / TM]", "block: [BN, BM]"))
    done = subprocess.run([sys.executable, "-m", "driver_gemm", "plan", str(spec), "--arch", "sm_90"],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**{k: v for k, v in os.environ.items() if k != "COLUMNS"}, "PYTHONPATH": str(ROOT)})
    assert done.returncode == EXIT_FAILED
    problem = next(line for line in done.stdout.splitlines() if "4096 threads per block" in line)
    assert len(problem) > 100 and problem.startswith(f"{spec}:")     # led by the spec's file:line
    assert problem.endswith("[v4[BM=64,BN=64,BK=16,TM=4,TN=4] at 64x32x16]")
    assert "(hint:" in problem   # the hint is on the same line, not wrapped onto the next
    table = [line for line in done.stdout.splitlines() if line.startswith(("kernel", "v4#1", "━"))]
    assert table and max(map(len, table)) <= 100
