"""Public functions given an argument of the wrong kind or a value no caller means say which argument and what it
takes (`WrongArgumentType`, `ValueError`), rather than failing inside with an AttributeError or a KeyError."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import driver_gemm as dg
from driver_gemm.errors import WrongArgumentType, WrongArgumentValue
from driver_gemm.specfile.model import Shape

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
    # a value of the wrong kind is a WrongArgumentType (a TypeError), as everywhere in the API
    (lambda: dg.Placement(isolate="yes"), WrongArgumentType, "Placement.isolate: True or False, not 'yes'"),
    (lambda: dg.Placement(isolate=1), WrongArgumentType, "Placement.isolate: True or False, not 1"),
    (lambda: dg.Placement(isolate=None), WrongArgumentType, "Placement.isolate: True or False, not None"),
    (lambda: dg.Placement(device="0"), WrongArgumentType, "Placement.device: a GPU ordinal (a whole number), not "
                                                          "'0' (str)"),
    (lambda: dg.Placement(device=-1), WrongArgumentValue, "Placement.device: a GPU ordinal (0 or more), not -1"),
    (lambda: dg.RunOptions(time="no"), WrongArgumentType, "RunOptions.time: True or False, not 'no'"),
    (lambda: dg.RunOptions(artifacts=b"maps"), WrongArgumentType, "RunOptions.artifacts: a folder's path"),
    (lambda: dg.RunOptions(timer=None), WrongArgumentType, "RunOptions.timer: one of events, cupti, not None"),
    (lambda: dg.RunOptions(timer="clock"), WrongArgumentValue, "RunOptions.timer: one of events, cupti, not 'clock'"),
    (lambda: dg.Placement(stream="abc"), dg.ArgumentError, "Placement: stream: str 'abc' is no stream"),
    (lambda: dg.Placement(stream=1.5), dg.ArgumentError, "Placement: stream: float 1.5 is no stream"),
    (lambda: dg.Placement(stream=-1), dg.ArgumentError, "Placement: stream: stream handle -1 is no address"),
    (lambda: dg.Placement(context="ctx"), WrongArgumentType, "Placement: context is a CUDA context's handle"),
    (lambda: dg.Placement(context=0), WrongArgumentValue, "Placement: context is a CUDA context's handle, got 0"),
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


# ------------------------------------------------------------- arguments checked before the driver is asked for

def _no_driver(monkeypatch):
    """Make any use of the driver a test failure: each check below must come first, so that a machine without a
    GPU still catches the mistake (and one with a GPU never opens the wrong one)."""
    def asked(*args, **kwargs):
        pytest.fail("the driver was asked for before the arguments were checked")

    monkeypatch.setattr("driver_gemm.cuda.device.driver_module", asked)
    monkeypatch.setattr("driver_gemm.tune.search.read_properties", asked)
    monkeypatch.setattr("driver_gemm.runners.one_gpu.driver_module", asked)
    monkeypatch.setattr("driver_gemm.runners.one_gpu._run", asked)


@pytest.mark.parametrize("call, error, words", [
    (lambda: dg.Device("0"), WrongArgumentType, "Device: ordinal is a GPU's ordinal (a whole number), got '0' (str)"),
    (lambda: dg.Device(-1), WrongArgumentValue, "Device: ordinal is a GPU's ordinal (0 or more), got -1"),
    (lambda: dg.Device(1.0), WrongArgumentType, "Device: ordinal is a GPU's ordinal (a whole number), got 1.0"),
    (lambda: dg.Device(True), WrongArgumentType, "got True (bool)"),
    (lambda: dg.Device(0, own_context="yes"), WrongArgumentType, "Device: own_context is True or False, got 'yes'"),
    (lambda: dg.Device(0, context=0x1234, own_context=True), WrongArgumentValue,
     "Device: context= adopts a caller's context, own_context=True makes a new one"),
    (lambda: dg.Device(0, context="ctx"), WrongArgumentType, "Device: context is a CUDA context's handle"),
    (lambda: dg.Device(0, context=1.5), WrongArgumentType, "Device: context is a CUDA context's handle"),
    (lambda: dg.read_properties(None), WrongArgumentType, "read_properties: ordinal is a GPU's ordinal"),
    (lambda: dg.tune_spec(5), WrongArgumentType, "tune_spec: spec is a Spec (from load_spec or spec_from_dict), the "
                                                 "path of a spec file or a shipped spec's name, got int"),
    (lambda: dg.tune_spec("seed", 5), WrongArgumentType, "tune_spec: strategy is a Strategy or its name"),
    (lambda: dg.tune_spec("seed", budget=None), WrongArgumentType, "tune_spec: budget is a Budget"),
    (lambda: dg.tune_spec("seed", device=-1), WrongArgumentValue, "tune_spec: device is a GPU's ordinal (0 or more)"),
    (lambda: dg.tune_spec("seed", fresh="no"), WrongArgumentType, "tune_spec: fresh is True or False, got 'no'"),
    (lambda: dg.tune_spec("seed", on_result=5), WrongArgumentType, "tune_spec: on_result is a function"),
    (lambda: dg.run_spec("seed", on_result=5), WrongArgumentType,
     "run_spec: on_result is a function called with each case, or None, got 5 (int)"),
    (lambda: dg.run_spec("seed", on_start="print"), WrongArgumentType, "run_spec: on_start is a function"),
    (lambda: dg.run_spec("seed", result={}), WrongArgumentType, "run_spec: result is a RunResult"),
    (lambda: dg.run_spec("seed", previous="v4"), WrongArgumentType, "run_spec: previous is the CaseResults"),
])
def test_arguments_are_checked_before_the_driver_is_asked_for(call, error, words, monkeypatch):
    _no_driver(monkeypatch)
    assert isinstance(_raises(call, error, words), dg.DriverGemmError)


@pytest.mark.parametrize("make, words", [
    (lambda: dg.Stream(0), "Stream: device is a Device (such as dg.Device(0)), got 0 (int)"),
    (lambda: dg.Event(None), "Event: device is a Device (such as dg.Device(0)), got None"),
    (lambda: dg.DeviceBuffer(None, 16), "DeviceBuffer: device is a Device"),
    (lambda: dg.Module(None, None), "Module: device is a Device"),
    (lambda: dg.PreparedLaunch(None, dg.LaunchConfig.of([1], [1]), dg.PackedArguments([], []), None),
     "PreparedLaunch: kernel is a Kernel"),
])
def test_a_handle_made_on_no_device_says_so_rather_than_failing_inside(make, words):
    # an AttributeError ('int' object has no attribute 'driver') named neither the class nor the argument
    _raises(make, WrongArgumentType, words)


@pytest.mark.parametrize("grid, block, shared, error, words", [
    ("12", [32], 0, WrongArgumentType, "LaunchConfig.of: grid is a list of 1 to 3 whole numbers, got '12' (str)"),
    ([31.9], [32], 0, WrongArgumentType, "LaunchConfig.of: grid x is a whole number, got 31.9 (float)"),
    ([1], [32, True], 0, WrongArgumentType, "LaunchConfig.of: block y is a whole number, got True (bool)"),
    ([0], [32], 0, WrongArgumentValue, "LaunchConfig.of: grid x is at least 1, got 0"),
    ([1], [-1], 0, WrongArgumentValue, "LaunchConfig.of: block x is at least 1, got -1"),
    ([1], [32], -5, WrongArgumentValue, "LaunchConfig.of: shared_bytes is 0 or more, got -5"),
    ([1], [32], 1.5, WrongArgumentType, "LaunchConfig.of: shared_bytes is a whole number of bytes, got 1.5"),
    ([1, 1, 1, 1], [32], 0, WrongArgumentValue, "LaunchConfig.of: grid has 1 to 3 dimensions, got 4"),
])
def test_a_launch_config_is_whole_numbers_of_at_least_one(grid, block, shared, error, words):
    _raises(lambda: dg.LaunchConfig.of(grid, block, shared), error, words)


def test_a_launch_config_built_directly_has_three_extents_and_takes_numpy_numbers():
    _raises(lambda: dg.LaunchConfig([1], [2]), WrongArgumentValue, "LaunchConfig: grid is a tuple of 3 extents")
    config = dg.LaunchConfig.of([np.int64(3)], (32, np.int32(2)), np.int64(16))
    assert config == dg.LaunchConfig((3, 1, 1), (32, 2, 1), 16) and config.threads_per_block == 64
    assert all(type(extent) is int for extent in config.grid + config.block)


def test_c_bool_takes_python_and_numpy_truth_values():
    packed = dg.PackedArguments(["bool", "bool", "bool"], [True, np.bool_(False), 1])
    assert [packed.value_bytes(index) for index in range(3)] == [b"\x01", b"\x00", b"\x01"]
    _raises(lambda: dg.PackedArguments(["int32"], [True]), dg.ArgumentError, "int32 needs a whole number, got True")


@pytest.mark.parametrize("call, words", [
    (lambda r: dg.compare_runs(r, r, across_gpus="no"), "compare_runs: across_gpus is True or False, got 'no'"),
    (lambda r: dg.pick_winners(SWEEP_RESULTS, across_gpus="no"), "pick_winners: across_gpus is True or False"),
    (lambda r: dg.compile_source(ROOT / "kernels" / "02_smem_tiles.cu", ["sgemm_smem_tiles<16>"], "sm_90",
                                 use_cache="no"), "compile_source: use_cache is True or False, got 'no'"),
    (lambda r: dg.compile_text("k", "k.cu", ["k"], "sm_90", use_cache="no"),
     "compile_text: use_cache is True or False, got 'no'"),
])
def test_yes_or_no_options_refuse_text_that_reads_as_yes(call, words):
    _raises(lambda: call(dg.load_results(SEED_RESULTS)), WrongArgumentType, words)


def test_numpy_numbers_are_taken_as_python_ones():
    run = dg.load_results(SEED_RESULTS)
    assert dg.compare_runs(run, run, threshold=np.float32(0.05)) == dg.compare_runs(run, run, threshold=0.05)
    assert dg.compare_runs(run, run, across_gpus=np.bool_(False)) == dg.compare_runs(run, run)
    placement = dg.Placement(device=np.int64(1), isolate=np.bool_(True))
    assert placement.device == 1 and type(placement.device) is int and placement.isolate is True
    assert dg.MeasureSettings(flush_l2=np.bool_(False)).flush_l2 is False
    assert dg.RunOptions(time=np.bool_(False)).time is False
    planned = dg.plan_spec("seed", arch="sm_90", sm_count=np.int64(132))
    assert planned.sm_count == 132 and type(planned.sm_count) is int


def test_run_options_take_the_path_of_a_folder_as_text():
    assert dg.RunOptions(artifacts="maps").artifacts == dg.RunOptions(artifacts=Path("maps")).artifacts == Path("maps")


class _RigPath:
    """A rig's own path class: os.PathLike, with a repr that is not its path."""

    def __init__(self, path):
        self.path = path

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return "<rig path>"


def test_path_arguments_take_any_path_object_by_its_path_not_its_repr(tmp_path):
    spec = dg.load_spec(_RigPath(str(SPECS / "seed.yaml")))
    assert spec == dg.load_spec(SPECS / "seed.yaml")
    assert dg.load_spec(_RigPath("seed")) == spec            # a shipped spec's bare name, as text gives it
    run = dg.load_results(_RigPath(str(SEED_RESULTS)))
    written = run.write_json(_RigPath(str(tmp_path / "again.json")))
    assert written == tmp_path / "again.json" and dg.load_results(written) == run


@pytest.mark.parametrize("call", [
    lambda: dg.load_spec(_RigPath(b"specs/seed.yaml")),
    lambda: dg.load_results(_RigPath(b"seed.json")),
])
def test_a_bytes_path_is_refused_naming_it(call):
    _raises(call, WrongArgumentType, "path is a path as text (a str or a pathlib.Path), got a bytes path b'")


@pytest.mark.parametrize("arch", [None, 90, b"sm_90"])
def test_arch_limits_names_itself_for_an_arch_that_is_not_text(arch):
    _raises(lambda: dg.arch_limits(arch), WrongArgumentType,
            f"arch_limits: arch is an architecture's name as text ('sm_90'), got {arch!r}")


@pytest.mark.parametrize("call, error, words", [
    (lambda: dg.load_spec("a\x00b"), WrongArgumentValue, "load_spec: path 'a\\x00b' holds a NUL character"),
    (lambda: Shape(0, 1, 1), WrongArgumentValue, "Shape: M must be at least 1, got 0"),
    (lambda: dg.plan_spec("seed", arch="sm_90", sm_count=0), WrongArgumentValue, "plan_spec: sm_count is 1 to"),
    (lambda: dg.compare_runs(SEED_RESULTS, SEED_RESULTS, threshold=float("nan")), WrongArgumentValue,
     "compare_runs: threshold is a fraction from 0"),
    (lambda: dg.RunOptions(timer="clock"), WrongArgumentValue, "RunOptions.timer: one of events, cupti"),
])
def test_values_no_caller_means_are_typed_value_errors(call, error, words):
    # a ValueError still, for code that catches those, and a DriverGemmError as every error raised on purpose
    assert isinstance(_raises(call, error, words), ValueError)


def test_a_kernels_launch_and_module_name_themselves_in_their_errors():
    from driver_gemm.cuda.device import Device

    _raises(lambda: dg.Kernel.prepare(object(), "12", [32], [], None), WrongArgumentType,
            "Kernel.prepare: grid is a list of 1 to 3 whole numbers, got '12' (str)")
    _raises(lambda: dg.Module(object.__new__(Device), b"\x7fELF"), WrongArgumentType,
            "Module: cubin is a compiled image (a Cubin from compile_source or compile_text), got b'\\x7fELF' (bytes)")
