"""Performance gates that could hold without checking anything: stored results of another GPU model, and two
contradicting minimum percentages for one kernel."""

from __future__ import annotations

import pytest

from driver_gemm.cli import EXIT_USAGE, main
from driver_gemm.cli import run as run_command
from driver_gemm.errors import UsageError
from driver_gemm.report.gates import GateError, check_gates, parse_min_pct
from driver_gemm.results.read import load_results
from driver_gemm.specfile import load_spec

from conftest import ROOT, SPECS, plugin_args

SEED = str(SPECS / "seed.yaml")
SEED_RESULTS = ROOT / "tests" / "data" / "results" / "seed-h200.json"
STORED_GPU = "NVIDIA H200"
OTHER_GPU = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def other_gpu_results(tmp_path):
    """The seed results as if another GPU model had made them: every GPU name replaced."""
    path = tmp_path / "seed-h100.json"
    text = SEED_RESULTS.read_text(encoding="utf-8")
    assert f'"{STORED_GPU}"' in text
    path.write_text(text.replace(f'"{STORED_GPU}"', f'"{OTHER_GPU}"'), encoding="utf-8")
    return path


def test_a_regression_gate_against_another_gpu_models_results_fails_saying_it_compared_nothing(other_gpu_results):
    stored, run = load_results(SEED_RESULTS), load_results(other_gpu_results)
    failures = check_gates(run, stored=stored)
    kernel_cases = [case for case in run.cases if not case.is_baseline]
    assert len(failures) == len(kernel_cases)
    for failure in failures:
        text = str(failure)
        assert "regression gate" in text and "nothing" in text
        assert STORED_GPU in text and OTHER_GPU in text and "--across-gpus" in text
    # asked for, the cases are matched across GPU models, and the same figures hold
    assert check_gates(run, stored=stored, across_gpus=True) == []


def test_stored_results_of_another_gpu_model_are_refused_before_the_run(other_gpu_results):
    stored = load_results(other_gpu_results)
    with pytest.raises(UsageError) as refused:
        run_command.check_stored_gpus(stored, [load_spec(SEED)], [STORED_GPU], False, other_gpu_results)
    text = str(refused.value)
    assert refused.value.field == "--baseline-results" and str(other_gpu_results) in text
    assert STORED_GPU in text and OTHER_GPU in text and "--across-gpus" in text
    run_command.check_stored_gpus(stored, [load_spec(SEED)], [STORED_GPU], True, other_gpu_results)
    run_command.check_stored_gpus(stored, [load_spec(SEED)], [OTHER_GPU], False, other_gpu_results)


def test_across_gpus_without_stored_results_is_refused(capsys):
    assert main(["run", SEED, "--across-gpus"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--across-gpus" in err and "give --baseline-results" in err


def test_the_plugin_refuses_stored_results_of_another_gpu_model(pytester, other_gpu_results):
    refused = pytester.runpytest(*plugin_args(), "--driver-gemm-spec", SEED, "--driver-gemm-results",
                                 str(other_gpu_results), "--driver-gemm-baseline-results", str(SEED_RESULTS))
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"*--driver-gemm-baseline-results: *seed-h200.json: *{STORED_GPU}*{OTHER_GPU}*"
                                  "the regression gate would compare nothing*"])


@pytest.mark.parametrize("values, named", [(["v4=50", "v4=60"], "kernel 'v4'"), (["80", "50"], "every kernel")])
def test_two_minimum_percentages_for_one_kernel_are_refused_naming_both(values, named, capsys):
    with pytest.raises(GateError) as refused:
        parse_min_pct(values)
    assert all(value in str(refused.value) for value in values) and named in str(refused.value)
    argv = ["run", SEED]
    for value in values:
        argv += ["--min-pct", value]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"--min-pct {values[0]} and --min-pct {values[1]}" in err and named in err


def test_the_same_minimum_percentage_given_twice_is_one_gate():
    assert parse_min_pct(["v4=50", "v4=50.0", "80", "80"]) == (80.0, {"v4": 50.0})
