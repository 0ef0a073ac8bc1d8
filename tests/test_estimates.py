"""What cases cost, remembered between runs, and the dealing of a run on several GPUs planned with it."""

import json

import pytest

from driver_gemm.cuda import cache
from driver_gemm.measure.stats import TimingSummary
from driver_gemm.runners import estimates
from driver_gemm.planning.cases import cases_of
from driver_gemm.runners.schedule import CostModel, case_cost, plan_tasks, remembered_model
from driver_gemm.results.records import CaseDevice, CaseResult, RunResult
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status

from conftest import SPECS
from test_local_gpus import describe_stand_in, run_planned


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path / "cache"))


def timed(kernel, shape, ms, gpu="NVIDIA H200", status=Status.PASS, seconds=None):
    """A case that ran on `gpu`: launches of `ms`, steps of `seconds` (by default, 12 launches' worth and 1 s)."""
    summary = TimingSummary(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, stdev_ms=0.0, q1_ms=ms, q3_ms=ms,
                            samples=10, total_ms=10 * ms)
    seconds = 12 * ms / 1e3 + 1.0 if seconds is None else seconds
    return CaseResult(kernel=kernel, name=kernel.split("[")[0], shape=shape, status=status, timing=summary,
                      device=CaseDevice(name=gpu, uuid="GPU-x", ordinal=0),
                      phases={"inputs": 0.5, "launch_verify": 0.5, "time": seconds - 1.0})


def launches(spec_name, gpu):
    return estimates.recall(spec_name, gpu).launch_ms


def run_of(spec_name, *cases):
    return RunResult(spec=spec_name, spec_path=None, cases=list(cases))


BIG, SMALL = Shape(8192, 8192, 8192), Shape(64, 64, 64)


def test_what_one_run_took_the_next_recalls_by_gpu_and_spec():
    verified_only = CaseResult(kernel="v2", name="v2", shape=BIG, status=Status.PASS, phases={"launch_verify": 2.5},
                               device=CaseDevice(name="NVIDIA H200", uuid="GPU-x", ordinal=0))
    stored = estimates.remember(run_of("ramp", timed("v0", BIG, 2193.3, seconds=30.0), timed("cublas", BIG, 21.4),
                                       timed("v4[BM=64]", SMALL, 0.01, gpu="NVIDIA B200"), verified_only,
                                       CaseResult(kernel="v1", name="v1", shape=BIG, status=Status.INVALID,
                                                  device=CaseDevice(name="NVIDIA H200"), phases={"plan": 0.0})))
    assert stored == 4                      # the INVALID row never ran: it took nothing worth knowing
    known = estimates.recall("ramp", "NVIDIA H200")
    assert known.launch_ms == {("v0", BIG.label): 2193.3, ("cublas", BIG.label): 21.4}
    assert known.case_s == {("v0", BIG.label): 30.0, ("cublas", BIG.label): pytest.approx(1.2568),
                            ("v2", BIG.label): 2.5}
    assert launches("ramp", "NVIDIA B200") == {("v4[BM=64]", SMALL.label): 0.01}
    assert estimates.recall("mixed", "NVIDIA H200") == estimates.Remembered() == estimates.recall("ramp", None)


def test_a_later_run_updates_what_it_timed_and_keeps_the_rest():
    estimates.remember(run_of("ramp", timed("v0", BIG, 2000.0), timed("v1", BIG, 190.0)))
    estimates.remember(run_of("ramp", timed("v0", BIG, 2200.0)))
    assert launches("ramp", "NVIDIA H200") == {("v0", BIG.label): 2200.0, ("v1", BIG.label): 190.0}


@pytest.mark.parametrize("damage", ["truncate", "flip", "not-json", "wrong-rows"])
def test_a_damaged_file_is_ignored_and_replaced(damage):
    estimates.remember(run_of("ramp", timed("v0", BIG, 2000.0)))
    path = estimates.path_for("NVIDIA H200", "ramp")
    blob = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(blob[:-5])
    elif damage == "flip":
        path.write_bytes(blob[:-3] + bytes([blob[-3] ^ 1]) + blob[-2:])
    else:
        body = b"{not json" if damage == "not-json" else json.dumps(
            {"cases": [["v0", BIG.label, "fast", None], ["v1", BIG.label, float("nan"), True],
                       ["v2", BIG.label, -1.0, 0], ["v3"], "row", [1, BIG.label, 5.0, 5.0],
                       ["v4", BIG.label, 5.0, None], ["v5", BIG.label, None, 7.5]]}).encode()
        cache.write_entry(path, estimates._MAGIC, body)
    known = estimates.recall("ramp", "NVIDIA H200")
    expected = {("v4", BIG.label): 5.0} if damage == "wrong-rows" else {}
    assert known.launch_ms == expected
    assert known.case_s == ({("v5", BIG.label): 7.5} if damage == "wrong-rows" else {})
    estimates.remember(run_of("ramp", timed("v1", BIG, 190.0)))
    assert launches("ramp", "NVIDIA H200") == {**expected, ("v1", BIG.label): 190.0}


def test_with_caching_off_nothing_is_written_or_read(monkeypatch, tmp_path):
    estimates.remember(run_of("ramp", timed("v0", BIG, 2000.0)))
    monkeypatch.setenv("DRIVER_GEMM_NO_CACHE", "1")
    assert estimates.remember(run_of("ramp", timed("v1", BIG, 190.0))) == 0
    assert launches("ramp", "NVIDIA H200") == {}
    monkeypatch.delenv("DRIVER_GEMM_NO_CACHE")
    assert launches("ramp", "NVIDIA H200") == {("v0", BIG.label): 2000.0}


def test_the_model_prices_a_case_by_what_it_took_then_by_its_launch_then_by_the_guesses():
    spec = load_spec(SPECS / "ramp.yaml").select(["v0", "v1", "v4"], ["8192x8192x8192"])
    v0, v1, v4 = [case for case in cases_of(spec) if case.kernel is not None]
    estimates.remember(run_of("ramp", timed(v0.label, v0.shape, 2193.3, seconds=27.5)))
    launch_only = timed(v1.label, v1.shape, 188.8)
    launch_only.phases = None
    estimates.remember(run_of("ramp", launch_only))
    model, counts = remembered_model(spec, ["NVIDIA H200", "NVIDIA H200"])
    assert counts == {"remembered_cases": 1, "remembered_launches": 2, "cases": len(cases_of(spec))}
    assert case_cost(v0, spec, model) == 27.5
    by_launch = case_cost(v1, spec, CostModel(launch_ms={(v1.label, v1.shape.label): 188.8}))
    assert case_cost(v1, spec, model) == by_launch > case_cost(v1, spec, CostModel()) + 1    # 5.8, not 10 TFLOP/s
    assert case_cost(v4, spec, model) == case_cost(v4, spec, CostModel())


def test_with_gpus_of_two_models_the_first_gpus_figures_win():
    spec = load_spec(SPECS / "ramp.yaml").select(["v0"], ["8192x8192x8192"])
    estimates.remember(run_of("ramp", timed("v0", BIG, 2000.0, seconds=25.0)))
    estimates.remember(run_of("ramp", timed("v0", BIG, 900.0, gpu="NVIDIA B200", seconds=11.0),
                              timed("cublas", BIG, 10.0, gpu="NVIDIA B200", seconds=1.5)))
    model, counts = remembered_model(spec, ["NVIDIA H200", "NVIDIA B200"])
    assert model.case_s == {("v0", BIG.label): 25.0, ("cublas", BIG.label): 1.5}
    assert counts["remembered_cases"] == 2


def h200(device):
    return {"device": {"name": "NVIDIA H200", "uuid": f"GPU-{device}"}}


def test_a_run_on_several_gpus_plans_with_what_earlier_runs_timed_and_says_how_many():
    spec = load_spec(SPECS / "ramp.yaml").select(["v0", "v1", "v4", "v8"], ["8192x8192x8192", "256x256x256"])
    fresh = run_planned(spec, **{"describe": h200})
    assert fresh.settings.estimates == {"remembered_cases": 0, "remembered_launches": 0,
                                           "cases": len(cases_of(spec))}
    estimates.remember(run_of(spec.name, timed("v0", BIG, 2193.3, seconds=27.5)))
    run = run_planned(spec, **{"describe": h200})
    assert run.settings.estimates["remembered_cases"] == 1
    # Known to take 2.2 s a launch, v0 at 8192^3 is the largest task: a task of its own, dealt out first.
    assert plan_tasks(spec, 2, remembered_model(spec, ["NVIDIA H200"])[0])[0].label == "8192x8192x8192 [v0]"
    assert plan_tasks(spec, 2, CostModel())[0].label != "8192x8192x8192 [v0]"
    assert "8192x8192x8192 [v0]" in {task["task"] for task in run.settings.tasks}
    others = run_planned(spec, **{"describe": describe_stand_in})          # other GPUs: nothing remembered
    assert others.settings.estimates["remembered_cases"] == 0
