"""Public functions given an argument of the wrong kind or a value no caller means say which argument and what it
takes (`WrongArgumentType`, `ValueError`), rather than failing inside with an AttributeError or a KeyError."""

from __future__ import annotations

import numpy as np
import pytest

import driver_gemm as dg
from driver_gemm.errors import WrongArgumentType

from conftest import ROOT, SPECS

RESULTS = ROOT / "tests" / "data" / "results"
SWEEP_RESULTS = RESULTS / "tune-v8-small-h200.json.gz"       # a tune of specs/sweep-v8-small.yaml
SEED_RESULTS = RESULTS / "seed-h200.json"                    # a run of specs/seed.yaml


def _raises(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value)
    return info.value


@pytest.mark.parametrize("call, error, words", [
    (lambda: dg.cases_of(None), WrongArgumentType, "cases_of: spec is a Spec (from load_spec or spec_from_dict) or "
                                                   "the path of a spec file, got NoneType"),
    (lambda: dg.cases_of({"shapes": [[64, 64, 64]]}), WrongArgumentType, "cases_of: spec is a Spec"),
])
def test_cases_of(call, error, words):
    _raises(call, error, words)


def test_cases_of_takes_the_path_of_a_spec_as_plan_spec_does():
    assert dg.cases_of(SPECS / "seed.yaml") == dg.cases_of(str(SPECS / "seed.yaml")) \
        == dg.cases_of(dg.load_spec(SPECS / "seed.yaml"))


@pytest.mark.parametrize("call, error, words", [
    (lambda: dg.pick_winners(None), WrongArgumentType,
     "pick_winners: run is a RunResult (from tune_spec or load_results), a ResultsFile (from read_results) or the "
     "path of a results file, got NoneType"),
    (lambda: dg.pick_winners([]), WrongArgumentType, "pick_winners: run is a RunResult"),
])
def test_pick_winners(call, error, words):
    _raises(call, error, words)


def test_pick_winners_takes_what_read_results_and_a_path_give():
    run = dg.load_results(SWEEP_RESULTS)
    expected = dg.pick_winners(run)
    assert expected and any(pick.best for pick in expected)
    assert dg.pick_winners(dg.read_results(SWEEP_RESULTS)) == expected
    assert dg.pick_winners(SWEEP_RESULTS) == expected == dg.pick_winners(str(SWEEP_RESULTS))


@pytest.mark.parametrize("call, error, words", [
    (lambda out: dg.winners_spec(None, dg.pick_winners(SWEEP_RESULTS), out), WrongArgumentType,
     "winners_spec: spec is a Spec (from load_spec or spec_from_dict) or the path of a spec file, got NoneType"),
    (lambda out: dg.winners_spec(SPECS / "sweep-v8-small.yaml", dg.load_results(SWEEP_RESULTS), out),
     WrongArgumentType, "winners_spec: picks is the list pick_winners(run) returns, got RunResult"),
    (lambda out: dg.winners_spec(SPECS / "sweep-v8-small.yaml", ["v8"], out), WrongArgumentType,
     "winners_spec: picks is the list pick_winners(run) returns, got a str in it"),
    (lambda out: dg.winners_spec(SPECS / "sweep-v8-small.yaml", dg.pick_winners(SWEEP_RESULTS), None),
     WrongArgumentType, "winners_spec: path is a path (a str or a pathlib.Path), got NoneType"),
    (lambda out: dg.winners_spec(dg.load_spec(SPECS / "fast.yaml"), dg.pick_winners(SEED_RESULTS), out),
     ValueError, "winners_spec: spec fast has no kernel v0 (the winner of v0 at "),
])
def test_winners_spec(call, error, words, tmp_path):
    out = tmp_path / "w.yaml"
    _raises(lambda: call(out), error, words)
    assert not out.exists()


def test_winners_spec_takes_the_path_of_the_sweep(tmp_path):
    picks = dg.pick_winners(SWEEP_RESULTS)
    by_path = dg.winners_spec(SPECS / "sweep-v8-small.yaml", picks, tmp_path / "a" / "w.yaml")
    by_spec = dg.winners_spec(dg.load_spec(SPECS / "sweep-v8-small.yaml"), picks, tmp_path / "b" / "w.yaml")
    assert by_path.read_text() == by_spec.read_text()


@pytest.mark.parametrize("call, error, words", [
    (lambda spec: dg.run_spec(spec, {"time": False}), WrongArgumentType,
     "run_spec: options is a RunOptions (for instance RunOptions(time=False)), got dict"),
    (lambda spec: dg.run_spec(spec, None), WrongArgumentType, "run_spec: options is a RunOptions"),
    (lambda spec: dg.run_spec(spec, placement=0), WrongArgumentType,
     "run_spec: placement is a Placement (for instance Placement(device=0, isolate=True)), got int"),
    (lambda spec: dg.run_spec(spec, dg.RunOptions(), {"isolate": True}), WrongArgumentType,
     "run_spec: placement is a Placement"),
])
def test_run_spec(call, error, words, monkeypatch):
    # Refused before anything is planned or a GPU asked for: nothing runs here even on a GPU machine.
    monkeypatch.setattr("driver_gemm.runners.one_gpu._run", lambda *args, **kwargs: pytest.fail("ran"))
    _raises(lambda: call(dg.load_spec(SPECS / "seed.yaml")), error, words)


LIMITS = dg.arch_limits("sm_90")


@pytest.mark.parametrize("call, error, words", [
    (lambda: dg.occupancy("sm_90", 128, 32), WrongArgumentType,
     "occupancy: limits is an ArchLimits (from arch_limits('sm_90') or limits_from_device), got str"),
    (lambda: dg.occupancy(LIMITS, "128", 32), WrongArgumentType,
     "occupancy: threads_per_block is a whole number, got '128' (str)"),
    (lambda: dg.occupancy(LIMITS, 128.0, 32), WrongArgumentType, "threads_per_block is a whole number, got 128.0"),
    (lambda: dg.occupancy(LIMITS, 128, None), WrongArgumentType, "registers_per_thread is a whole number, got None"),
    (lambda: dg.occupancy(LIMITS, 128, 32, True), WrongArgumentType, "static_shared_bytes is a whole number"),
    (lambda: dg.occupancy(LIMITS, -1, 32), ValueError, "occupancy: threads_per_block is at least 0, got -1"),
    (lambda: dg.occupancy(LIMITS, 128, -4), ValueError, "occupancy: registers_per_thread is at least 0, got -4"),
    (lambda: dg.occupancy(LIMITS, 128, 32, 0, -1), ValueError, "dynamic_shared_bytes is at least 0, got -1"),
])
def test_occupancy(call, error, words):
    _raises(call, error, words)


@pytest.mark.parametrize("threads, registers, reason", [
    (0, 32, "0 threads per block (1 to 1024 allowed)"),
    (5000, 32, "5000 threads per block (1 to 1024 allowed)"),
    (128, 1000, "1000 registers per thread (at most 255)"),
])
def test_occupancy_of_a_block_no_sm_holds_is_zero_blocks_with_the_reason(threads, registers, reason):
    # What the plan asks of a launch it is judging, so an answer rather than an error (tests/test_occupancy.py).
    result = dg.occupancy(LIMITS, threads, registers)
    assert result.blocks_per_sm == 0 and reason in result.reason


def test_occupancy_takes_numpy_integers():
    assert dg.occupancy(LIMITS, np.int64(128), np.int32(32)) == dg.occupancy(LIMITS, 128, 32)


@pytest.mark.parametrize("call, error, words", [
    (lambda: dg.Budget(seconds="5m"), WrongArgumentType,
     "Budget: seconds is a number of seconds (parse_budget reads text such as '5m'), got '5m' (str)"),
    (lambda: dg.Budget(seconds=True), WrongArgumentType, "Budget: seconds is a number of seconds"),
    (lambda: dg.Budget(configurations=1.5), WrongArgumentType,
     "Budget: configurations is a whole number of configurations, got 1.5 (float)"),
    (lambda: dg.Budget(configurations="40"), WrongArgumentType, "Budget: configurations is a whole number"),
    (lambda: dg.Budget(clock=5), WrongArgumentType, "Budget: clock is a function returning seconds"),
    (lambda: dg.Budget(configurations=0), dg.DriverGemmError, "leaves nothing to measure"),
])
def test_budget(call, error, words):
    _raises(call, error, words)


def test_budget_takes_numpy_numbers_as_plain_ones():
    budget = dg.Budget(seconds=np.float32(2.5), configurations=np.int64(40))
    assert (budget.seconds, budget.configurations) == (2.5, 40)
    assert type(budget.seconds) is float and type(budget.configurations) is int


@pytest.mark.parametrize("call, error, words", [
    (lambda: dg.Placement(isolate="yes"), ValueError, "Placement.isolate: True or False, not 'yes'"),
    (lambda: dg.Placement(isolate=1), ValueError, "Placement.isolate: True or False, not 1"),
    (lambda: dg.Placement(isolate=None), ValueError, "Placement.isolate: True or False, not None"),
    (lambda: dg.Placement(device="0"), ValueError, "Placement.device: a GPU ordinal"),
    (lambda: dg.RunOptions(time="no"), ValueError, "RunOptions.time: True or False, not 'no'"),
])
def test_placement_checks_its_flags_as_run_options_does(call, error, words):
    _raises(call, error, words)


@pytest.mark.parametrize("call, error, words", [
    (lambda: dg.MeasureSettings(warmup=-1), ValueError, "MeasureSettings.warmup: at least 0, got -1"),
    (lambda: dg.MeasureSettings(rounds=0), ValueError, "MeasureSettings.rounds: at least 1, got 0"),
    (lambda: dg.MeasureSettings(max_noise=float("nan")), ValueError, "MeasureSettings.max_noise: at least 0, got nan"),
    (lambda: dg.MeasureSettings(min_samples=20, max_samples=10), ValueError, "max_samples: 10 is below min_samples"),
    (lambda: dg.MeasureSettings(case_timeout_s=0), ValueError, "case_timeout_s: above 0 seconds"),
    (lambda: dg.MeasureSettings(timeout_s="3"), WrongArgumentType, "MeasureSettings.timeout_s: a number, got str"),
    (lambda: dg.VerifySettings(rel_tolerance=float("nan")), ValueError, "VerifySettings.rel_tolerance: at least 0"),
    (lambda: dg.VerifySettings(abs_tolerance=-1.0), ValueError, "VerifySettings.abs_tolerance: at least 0"),
])
def test_settings_a_rig_builds_are_held_to_what_the_spec_reader_accepts(call, error, words):
    _raises(call, error, words)
