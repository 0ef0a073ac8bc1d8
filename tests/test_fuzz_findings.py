"""Bad inputs a mutation fuzzer found taking the wrong road: a param's true/false read whole as a number, a
dispatch entry's param of another kind than its kernel's, C's integer literals, a list in a shape's list, results
files whose own figures contradict each other, and the wording of a few command-line messages."""

from __future__ import annotations

import copy
import io
import json
import logging

import pytest
from rich.console import Console

from driver_gemm.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from driver_gemm.cli.log_output import logs_on
from driver_gemm.errors import UsageError
from driver_gemm.measure.stats import gflops, summarize
from driver_gemm.results import read
from driver_gemm.results.records import CaseResult
from driver_gemm.specfile import expr

from conftest import ROOT

SEED_RESULTS = ROOT / "tests" / "data" / "results" / "seed-h200.json"
TILES = f"""
  - name: v2
    source: {ROOT / "kernels" / "02_smem_tiles.cu"}
    function: sgemm_smem_tiles
"""
GROUPED = f"""
  - name: grouped-ends
    source: {ROOT / "kernels" / "outside" / "args_grouped.cu"}
    function: args_grouped_ends
    params: {{SAME_B: true}}
    types: {{a: bf16, b: bf16, c: bf16, accumulate: fp32}}
    groups: {{layout: contiguous, count: COUNT, rows: random}}
    epilogue: overwrite
    block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16)]
    tile: [16, 16]
    signature:
      - A
      - B
      - C
      - {{name: ends, type: buffer, element: int32, size: groups, groups: ends}}
      - {{name: group_count, type: int32, value: groups}}
      - M
      - N
      - K
"""


def plan(tmp_path, capsys, text: str, *options: str) -> tuple[int, str, str]:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    code = main(["plan", str(path), "--allow-outside-sources", *options])
    captured = capsys.readouterr()
    return code, captured.out, captured.out + captured.err


# ------------------------------------------------------------------------ a param's true/false read as a number

@pytest.mark.parametrize("launch, field", [
    ("block: [TILE, 16]\n    grid: [ceil(N / 16), ceil(M / 16)]", "9: kernels[v2].block[0]"),
    ("block: ['min(TILE, 16)', 16]\n    grid: [ceil(N / 16), ceil(M / 16)]", "9: kernels[v2].block[0]"),
    ("block: [16, 16]\n    grid: [ceil(N / 16), ceil(M / 16), TILE]", "10: kernels[v2].grid[2]"),
    ("block: [16, 16]\n    grid: [ceil(N / 16), ceil(M / 16)]\n    shared_bytes: TILE", "11: kernels[v2].shared_bytes"),
])
def test_a_bool_param_read_whole_is_a_located_problem_of_its_kernel_alone(tmp_path, capsys, launch, field):
    """Not LaunchConfig.of's words with no file, line or field, taking down the plan of every other kernel."""
    text = (f"name: b\nshapes: [[512, 512, 512]]\nkernels:\n{TILES}    params: {{TILE: true}}\n    {launch}\n"
            f"    tile: [16, 16]\n{TILES.replace('name: v2', 'name: fine')}    params: {{TILE: 16}}\n"
            "    block: [TILE, TILE]\n    grid: [ceil(N / TILE), ceil(M / TILE)]\n    tile: [TILE, TILE]\n")
    code, out, err = plan(tmp_path, capsys, text)
    assert code == EXIT_FAILED
    assert "LaunchConfig" not in err
    assert f"spec.yaml:{field}: " in err
    assert "TILE is true, a YAML boolean (true/false), where a whole number is needed" in err
    assert "INVALID" in out and "1 ok, 1 INVALID" in err       # the table, and the other kernel planned


@pytest.mark.parametrize("count", ["SAME_B", "'max(SAME_B, SAME_B)'", "'min(SAME_B, 8)'"])
def test_a_bool_param_as_a_group_count_is_a_located_problem_not_an_internal_error(tmp_path, capsys, count):
    text = f"name: g\nshapes: [[1001, 520, 776]]\nkernels:\n{GROUPED.replace('COUNT', count)}"
    code, out, err = plan(tmp_path, capsys, text)
    assert code == EXIT_FAILED and "internal error" not in err
    assert "spec.yaml:10: kernels[grouped-ends].groups.count: " in err
    assert "SAME_B is true, a YAML boolean" in err


def test_arithmetic_on_a_bool_param_is_read_as_one_or_zero():
    env = {"FLAG": True, "OFF": False, "N": 64}
    assert expr.evaluate_int("FLAG + 0", env) == 1 and expr.evaluate_int("max(FLAG, 8)", env) == 8
    assert expr.evaluate_int("ceil(N / 16) * FLAG", env) == 4
    with pytest.raises(expr.ExpressionError, match="gives false: OFF is false, a YAML boolean"):
        expr.evaluate_int("min(OFF, 8)", env)
    assert expr.evaluate("FLAG", env) is True      # a kernel's bool argument still takes it


# ------------------------------------------------------------------------ a dispatch entry's params

DISPATCHED = f"""name: d
shapes: [[512, 512, 512], [1024, 1024, 1024]]
kernels:
{TILES}    params: {{TILE: 16}}
    block: [TILE, TILE]
    grid: [ceil(N / TILE), ceil(M / TILE)]
    tile: [TILE, TILE]
dispatch:
  v2:
    - shape: 512x512x512
      params: {{TILE: VALUE}}
"""


@pytest.mark.parametrize("value, message", [
    ("true", "TILE is true, a YAML boolean, where kernel v2 gives TILE a number (16)"),
    ("abc", "TILE is 'abc', text (a C++ name), but kernel v2's expressions compute with TILE"),
])
def test_a_dispatch_param_of_another_kind_than_its_kernels_is_named_at_the_entry(tmp_path, capsys, value, message):
    code, _, err = plan(tmp_path, capsys, DISPATCHED.replace("VALUE", value))
    assert code == EXIT_USAGE
    assert "spec.yaml:15: dispatch.v2[0].params.TILE: " in err and message in err
    assert "unknown name" not in err and "LaunchConfig" not in err


# ------------------------------------------------------------------------ literals and shapes

def test_expressions_take_c_integer_literals_not_pythons():
    with pytest.raises(expr.ExpressionError, match="0o20 is written in Python's octal, which C does not have: write "
                                                   "16"):
        expr.parse("0o20 + TILE")
    with pytest.raises(expr.ExpressionError) as raised:
        expr.parse("TILE * 020")
    assert "020 at column 8 is written with a leading zero, which C reads as octal, 16: write 16, or 20" in str(
        raised.value) and "0o" not in str(raised.value)
    with pytest.raises(expr.ExpressionError, match="089 .* no digits 8 and 9: write 89"):
        expr.parse("089")
    assert [expr.evaluate(text, {}) for text in ("0x10", "0b10000", "0.5 * 32", "1e1 + 6", "10")] == [16, 16, 16, 16,
                                                                                                      10]


def test_a_list_inside_a_shapes_list_is_refused(tmp_path, capsys):
    text = (f"name: n\nshapes: [[512, 512, [512, [1024]]]]\nkernels:\n{TILES}    params: {{TILE: 16}}\n"
            "    block: [TILE, TILE]\n    grid: [ceil(N / TILE), ceil(M / TILE)]\n    tile: [TILE, TILE]\n")
    code, _, err = plan(tmp_path, capsys, text)
    assert code == EXIT_USAGE
    assert "spec.yaml:2: shapes[0][2][1]: a dimension's list holds values or ranges, not another list" in err


# ------------------------------------------------------------------------ results whose figures disagree

def seed_with_samples() -> dict:
    document = json.loads(SEED_RESULTS.read_text())
    for index, case in enumerate(document["cases"]):
        samples = [0.1 * (index + 1) + 1e-4 * (position % 37) for position in range(200)]
        case["timing"] = {**case["timing"], **summarize(samples).as_dict()}
        if case.get("gflops") is not None:      # a run's rate is of its median, and its % of peak of that rate
            rate = gflops(CaseResult.from_dict(case).flops, case["timing"]["median_ms"])
            if case.get("pct_peak") is not None:
                case["pct_peak"] *= rate / case["gflops"]
            case["gflops"] = rate
    return document


def written(tmp_path, document: dict, name: str = "r.json"):
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize("name", ["median_ms", "mean_ms", "max_ms", "total_ms", "stdev_ms"])
def test_a_summary_that_is_not_of_its_own_samples_is_refused(tmp_path, capsys, name):
    document = seed_with_samples()
    read.read_results(written(tmp_path, document))           # a run's own summary passes, rounded samples and all
    timing = document["cases"][5]["timing"]
    timing.update({key: timing[key] * 3 for key in ("median_ms", "mean_ms", "min_ms", "max_ms", "q1_ms", "q3_ms",
                                                     "stdev_ms", "total_ms")} if name == "median_ms" else
                  {name: timing[name] * (3 if name == "stdev_ms" else 1.01)})
    with pytest.raises(UsageError, match=f"{name} = .*, but its own 200 samples_ms give") as raised:
        read.read_results(written(tmp_path, document, "slow.json"))
    assert raised.value.field.startswith("cases[5].timing.")
    if name == "median_ms":      # compare showed +200% and judged SAME by the samples, exit 0
        assert main(["compare", str(tmp_path / "r.json"), str(tmp_path / "slow.json")]) == EXIT_USAGE
        assert "not of the samples beside it" in capsys.readouterr().err


def test_a_sample_count_that_is_not_its_samples_is_refused(tmp_path):
    document = seed_with_samples()
    document["cases"][2]["timing"]["samples"] = 13762
    with pytest.raises(UsageError, match="samples = 13762, but samples_ms holds 200") as raised:
        read.read_results(written(tmp_path, document))
    assert raised.value.field == "cases[2].timing.samples"


def test_a_case_repeated_with_other_figures_is_refused_and_a_tunes_repeat_is_read(tmp_path):
    document = json.loads(SEED_RESULTS.read_text())
    repeat = copy.deepcopy(document["cases"][5])
    repeat["message"] = "from the tuning cache"       # a search's configuration met again: the same figures
    read.read_results(written(tmp_path, {**document, "cases": [*document["cases"], repeat]}))
    repeat["pct_cublas"] /= 3
    with pytest.raises(UsageError, match=r"v4\[.*\] at 1024x512x1024 on NVIDIA H200 is also cases\[5\], with other "
                                         "figures") as raised:
        read.read_results(written(tmp_path, {**document, "cases": [*document["cases"], repeat]}))
    assert raised.value.field == "cases[12]"
    repeat["device"] = {**repeat["device"], "uuid": "GPU-other", "ordinal": 1}     # another GPU's case
    read.read_results(written(tmp_path, {**document, "cases": [*document["cases"], repeat]}))


@pytest.mark.parametrize("change, field, message", [
    ({"rel_fro_error": 0.5}, "rel_fro_error", "PASS with rel_fro_error = 0.5 over its tolerance"),
    ({"abs_tolerance": 1e-3, "max_abs_error": 0.25}, "max_abs_error", "PASS with max_abs_error = 0.25 over"),
    ({"wrong": 1, "right": lambda elements: elements - 1}, "wrong", "PASS with wrong = 1"),
    ({"unwritten": 4, "right": lambda elements: elements - 4}, "unwritten", "PASS with unwritten = 4"),
    ({"right": lambda elements: elements + 1}, "right", "right = .* elements, more than the .* of C"),
    ({"right": lambda elements: elements - 1}, "right", "count .* elements, not the .* of C"),
])
def test_a_check_whose_own_figures_contradict_it_is_refused(tmp_path, change, field, message):
    document = json.loads(SEED_RESULTS.read_text())
    verification = document["cases"][5]["verification"]
    assert verification["status"] == "PASS" and verification["rel_fro_error"] <= verification["tolerance"]
    elements = verification["elements"]
    for name, value in change.items():
        verification[name] = value(elements) if callable(value) else value
    with pytest.raises(UsageError, match=message) as raised:
        read.read_results(written(tmp_path, document))
    assert raised.value.field == f"cases[5].verification.{field}"


def test_a_failed_checks_figures_are_read_as_they_are(tmp_path):
    document = json.loads(SEED_RESULTS.read_text())
    case = document["cases"][5]
    case["status"] = case["verification"]["status"] = "FAIL"
    case["verification"].update(rel_fro_error=0.5, wrong=10, right=case["verification"]["elements"] - 10)
    read.read_results(written(tmp_path, document))


def test_a_clock_past_any_gpus_is_refused(tmp_path):
    document = json.loads(SEED_RESULTS.read_text())
    document["environment"]["device"]["clock_khz"] = 1e308
    with pytest.raises(UsageError, match="must be at most 100000000") as raised:
        read.read_results(written(tmp_path, document))
    assert raised.value.field == "environment.device.clock_khz"


# ------------------------------------------------------------------------ the command line's words

def test_plot_and_show_name_the_file_without_samples(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    bare = written(tmp_path, json.loads(SEED_RESULTS.read_text()), "bare.json")
    sampled = written(tmp_path, seed_with_samples(), "sampled.json")
    assert main(["plot", str(bare), "--samples", "-o", str(tmp_path / "p.png")]) == EXIT_USAGE
    assert f"{bare}: --samples: no case with raw samples to draw: none in this file has timing.samples_ms" in \
        capsys.readouterr().err
    main(["show", str(bare), "--plot", str(tmp_path / "p.png")])
    assert f"{bare}: --plot: no case with raw samples" in capsys.readouterr().err
    assert main(["plot", str(bare), str(sampled), "--samples", "-o", str(tmp_path / "p.png")]) == EXIT_OK
    assert f"note: {bare}: no case with raw samples (timing.samples_ms): --samples draws the other file" in \
        capsys.readouterr().out
    assert (tmp_path / "p.png").is_file()


@pytest.mark.parametrize("words", [["--shape", "-1x5x5"], ["-s", "-1x5x5"], ["--shape=-1x5x5"], ["-s", "5x0x5"]])
def test_a_shape_below_one_is_said_as_such(tmp_path, capsys, words):
    assert main(["plan", "seed", *words]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "has a dimension below 1: M, N and K are at least 1" in err and "expected one argument" not in err


def test_only_an_options_value_is_joined_to_it():
    from driver_gemm.cli.common import join_negative_values

    assert join_negative_values(["plan", "s.yaml", "-s", "-1x5x5", "--", "--shape", "-2x2x2"]) == [
        "plan", "s.yaml", "-s-1x5x5", "--", "--shape", "-2x2x2"]
    assert join_negative_values(["plan", "--shape", "64x64x64", "-v"]) == ["plan", "--shape", "64x64x64", "-v"]


def test_a_logged_warning_is_marked_as_one():
    console = Console(file=io.StringIO(), width=200)
    with logs_on(console, logging.INFO):
        logging.getLogger("driver_gemm.tune.winners").warning("w.yaml names files outside its project")
        logging.getLogger("driver_gemm.cuda.compile").info("compiled")
    assert console.file.getvalue().splitlines() == ["driver-gemm: warning: w.yaml names files outside its project",
                                                    "driver-gemm: compiled"]
