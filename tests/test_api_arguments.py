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
    # Values a run compares with one choice only would quietly mean the other: refused as the reader refuses them.
    (lambda: dg.MeasureSettings(mode="bogus"), ValueError, "MeasureSettings.mode: one of events, graph, got 'bogus'"),
    (lambda: dg.MeasureSettings(samples="bogus"), ValueError, "MeasureSettings.samples: give flush"),
    (lambda: dg.MeasureSettings(samples=3), WrongArgumentType, "MeasureSettings.samples: text, got int"),
    (lambda: dg.MeasureSettings(mode="graph", samples="do-bench"), ValueError, "it takes samples='flush' only"),
    (lambda: dg.MeasureSettings(flush_l2="yes"), WrongArgumentType,
     "MeasureSettings: flush_l2 is True or False, got 'yes' (str)"),
    (lambda: dg.MeasureSettings(warmup=2.5), WrongArgumentType, "MeasureSettings.warmup: a whole number, got float"),
    (lambda: dg.MeasureSettings(graph_launches=2.5), WrongArgumentType, "MeasureSettings.graph_launches: a whole"),
    (lambda: dg.MeasureSettings(rounds=float("inf")), WrongArgumentType, "MeasureSettings.rounds: a whole number"),
    (lambda: dg.MeasureSettings(rounds=101), ValueError, "MeasureSettings.rounds: at least 1 and at most 100, got 101"),
    (lambda: dg.MeasureSettings(max_samples="3"), WrongArgumentType, "MeasureSettings.max_samples: a whole number"),
    (lambda: dg.MeasureSettings(min_time_s=float("inf")), ValueError, "MeasureSettings.min_time_s: a finite number"),
    (lambda: dg.MeasureSettings(case_timeout_s=None), WrongArgumentType, "MeasureSettings.case_timeout_s: a number"),
    (lambda: dg.VerifySettings(reference="bogus"), ValueError,
     "VerifySettings.reference: one of auto, cpu, cublas, got 'bogus'"),
    (lambda: dg.VerifySettings(seed="3"), WrongArgumentType, "VerifySettings.seed: a whole number, got str"),
    (lambda: dg.VerifySettings(seed=-1), ValueError, "VerifySettings.seed: at least 0, got -1"),
    (lambda: dg.VerifySettings(seed=None), WrongArgumentType, "VerifySettings.seed: a whole number, got NoneType"),
    (lambda: dg.VerifySettings(tf32_rel_tolerance=float("inf")), ValueError, "tf32_rel_tolerance: a finite number"),
])
def test_settings_a_rig_builds_are_held_to_what_the_spec_reader_accepts(call, error, words):
    assert isinstance(_raises(call, error, words), dg.DriverGemmError)


def test_settings_take_numpy_numbers_as_plain_ones():
    measure = dg.MeasureSettings(warmup=np.int64(2), min_time_s=np.float32(0.25))
    verify = dg.VerifySettings(seed=np.int32(7))
    assert (measure.warmup, measure.min_time_s, verify.seed) == (2, 0.25, 7)
    assert type(measure.warmup) is int and type(measure.min_time_s) is float and type(verify.seed) is int


class _Operand:
    """A GPU matrix as the CUDA array interface describes it (no GPU needed to read it)."""

    def __init__(self, shape, address):
        self.__cuda_array_interface__ = {"version": 3, "shape": shape, "typestr": "<f4", "data": (address, False),
                                         "strides": None}


def _check(**changes):
    arguments = dict(source=ROOT / "kernels" / "02_smem_tiles.cu", function="sgemm_smem_tiles<16>",
                     a=_Operand((64, 32), 0x7F0000000000), b=_Operand((32, 48), 0x7F0001000000),
                     c=_Operand((64, 48), 0x7F0002000000), grid=["ceil(N / 16)", "ceil(M / 16)"], block=[16, 16])
    arguments.update(changes)
    return dg.check_kernel(**arguments)


@pytest.mark.parametrize("changes, error, words", [
    # a string is no list of extents: "16" read character by character launched a block of (1, 6)
    ({"block": "16"}, WrongArgumentType, "check_kernel: block is a list of 1 to 3 extents"),
    ({"grid": "ceil(N / 16)"}, WrongArgumentType, "check_kernel: grid is a list of 1 to 3 extents"),
    ({"grid": 4}, WrongArgumentType, "check_kernel: grid is a list of 1 to 3 extents (numbers, or expressions such "
                                     "as 'ceil(N / 16)'), got 4 (int)"),
    ({"function": None}, WrongArgumentType, "check_kernel: function is the kernel's name"),
    ({"source": None}, WrongArgumentType, "check_kernel: source is the path of a kernel source or its text"),
    ({"source": b"k.cu"}, WrongArgumentType, "check_kernel: source is the path of a kernel source"),
    ({"params": [1, 2]}, WrongArgumentType, "check_kernel: params is a mapping of a spec's params fields"),
    ({"measure": dg.MeasureSettings()}, WrongArgumentType, "check_kernel: measure is a mapping of a spec's measure"),
    ({"verify": "strict"}, WrongArgumentType, "check_kernel: verify is a mapping of a spec's verify fields"),
    ({"name": 5}, WrongArgumentType, "check_kernel: name is the case's kernel name"),
    ({"alpha": "x"}, WrongArgumentType, "check_kernel: alpha is a number, got 'x' (str)"),
    ({"beta": 1j}, WrongArgumentType, "check_kernel: beta is a number, got 1j (complex)"),
    ({"alpha": float("nan")}, ValueError, "check_kernel: alpha is a finite number, got nan"),
    ({"time": "no"}, WrongArgumentType, "check_kernel: time is True or False, got 'no' (str)"),
    ({"device": "0"}, WrongArgumentType, "check_kernel: device is a GPU's ordinal (a whole number), got '0'"),
    ({"device": -1}, ValueError, "check_kernel: device is a GPU's ordinal (0 or more), got -1"),
    ({"stream": 1.5}, dg.ArgumentError, "check_kernel: stream: float 1.5 is no stream"),
    ({"stream": "7"}, dg.ArgumentError, "check_kernel: stream: str '7' is no stream"),
    # memory that cannot be right: refused before C is poisoned (which would overwrite the rig's A)
    ({"c": _Operand((64, 48), 0x7F0000000000)}, dg.ArgumentError, "C (bytes 0x7f0000000000 to 0x7f0000002fff) "
                                                                   "overlaps A"),
    ({"a": _Operand((64, 32), 0)}, dg.ArgumentError, "A: test_api_arguments._Operand.__cuda_array_interface__['data']"
                                                     "[0] is 0 (NULL) for 2,048 elements"),
])
def test_check_kernel_names_each_argument_of_the_wrong_kind_or_value(changes, error, words, monkeypatch):
    # Refused before any GPU is asked for, so before anything is written to one.
    monkeypatch.setattr("driver_gemm.runners.on_tensors.read_properties", lambda ordinal: pytest.fail("GPU asked"))
    assert isinstance(_raises(lambda: _check(**changes), error, words), dg.DriverGemmError)
