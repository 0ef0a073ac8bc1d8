"""Scheduling over several workers, checked on a local CPU-only Dask cluster with the no-GPU parts of a run."""

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.pipeline.plan import plan_case
from driver_gemm.results.records import CaseResult
from driver_gemm.status import Status
from driver_gemm.pipeline.build import compile_spec
from driver_gemm.pipeline.cases import cases_of
from driver_gemm.pipeline.session import RunOptions
from driver_gemm.spec import load_spec

from conftest import SPECS

distributed = pytest.importorskip("distributed")


def plan_part(spec, device, isolate, options, previous, on_result, gpu_worker=None):
    """A stand-in for a GPU worker's part: compile on the worker and plan every case, tag it with the GPU."""
    compiled = compile_spec(spec, "sm_90")
    skip = {(c.kernel, c.shape.label) for c in previous}
    cases = [c.as_dict() for c in previous]
    for case in cases_of(spec):
        if case.key in skip:
            continue
        result = CaseResult(kernel=case.label, name=case.label.split("[")[0], shape=case.shape, status=Status.PASS,
                            device={"name": f"GPU {device}", "uuid": f"GPU-{device}", "ordinal": device})
        if case.kernel is not None:
            resources = compiled[case.kernel.label].resources_of(case.kernel.instance)
            plan = plan_case(case.kernel, case.shape, arch_limits("sm_90"), resources)
            result.status = Status.PASS if plan.valid else Status.INVALID
            result.resources = resources.as_dict()
            result.launch = plan.config.as_dict()
        on_result(result)
        cases.append(result.as_dict())
    return {"environment": {"worker_device": device}, "cases": cases}


def describe_stand_in(ordinals):
    from distributed import get_worker
    return {"device": {"name": f"GPU {ordinals[get_worker().address]}"}}


@pytest.fixture
def two_workers():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        workers = sorted(client.scheduler_info()["workers"])
        yield client, list(zip(workers, [0, 1]))


def run_planned(spec, client, workers, **kwargs):
    from driver_gemm.pipeline.distribute import run_on_workers
    return run_on_workers(spec, client, workers, options=RunOptions(time=False), part=plan_part,
                          describe=describe_stand_in, make_worker=None, **kwargs)


def check_baselines(run):
    """One baseline row per shape per GPU, and every kernel row measured against the one of its own GPU."""
    baselines = {}
    for case in run.cases:
        if case.is_baseline:
            key = (case.shape.label, case.device["ordinal"])
            assert key not in baselines, f"two baseline rows for {key}"
            baselines[key] = case
    for case in run.cases:
        if not case.is_baseline:
            against = case.measured_against
            assert against is not None and against["device"]["ordinal"] == case.device["ordinal"], case.kernel
            assert against["shape"] == case.shape.label and (case.shape.label, case.device["ordinal"]) in baselines
    used = {(c.shape.label, c.device["ordinal"]) for c in run.cases if not c.is_baseline}
    assert set(baselines) == used        # no GPU ran a baseline it did not need


def test_a_sweep_on_a_local_cluster_matches_the_single_worker_plan(two_workers):
    client, workers = two_workers
    spec = load_spec(SPECS / "seed.yaml").select(shapes=["1024x512x1024", "1001x513x777", "64x64x64", "7x5x3"])
    seen = []
    run = run_planned(spec, client, workers, on_result=seen.append)
    kernels = [(c.kernel, c.shape.label) for c in run.cases if not c.is_baseline]
    expected = [(c.label, c.shape.label) for c in cases_of(spec) if not c.is_baseline]
    assert sorted(kernels) == sorted(expected) and len(set(kernels)) == len(kernels) == 20
    assert len(seen) == len(run.cases)
    check_baselines(run)
    assert {case.device["ordinal"] for case in run.cases} == {0, 1}        # both GPUs got work
    local = compile_spec(spec, "sm_90")
    for case in run.cases:
        if not case.is_baseline:
            kernel = next(k for k in spec.kernels if k.label == case.kernel)
            assert case.resources == local[kernel.label].resources_of(kernel.instance).as_dict()
    # the environment of both GPUs was known before the first case landed, and every task is recorded
    assert [gpu["device"]["name"] for gpu in run.environment["gpus"]] == ["GPU 0", "GPU 1"]
    tasks = run.settings["tasks"]
    assert tasks and all(t["device"] in (0, 1) and t["wall_s"] >= 0 for t in tasks)


def test_a_large_shape_is_shared_and_each_gpu_measures_its_own_baseline(two_workers):
    from driver_gemm.pipeline.schedule import CostModel

    client, workers = two_workers
    spec = load_spec(SPECS / "seed.yaml").select(shapes=["8192x8192x8192", "64x64x64"])
    run = run_planned(spec, client, workers, model=CostModel(task_overhead_s=0.0))
    big = [c for c in run.cases if c.shape.label == "8192x8192x8192" and not c.is_baseline]
    assert {c.device["ordinal"] for c in big} == {0, 1}
    check_baselines(run)


def test_a_resumed_run_keeps_what_ran_and_reruns_what_did_not(two_workers):
    from driver_gemm.pipeline.cases import not_run_record

    client, workers = two_workers
    spec = load_spec(SPECS / "seed.yaml").select(shapes=["1024x512x1024", "64x64x64"])
    first = run_planned(spec, client, workers)
    kept = [c for c in first.cases if c.shape.label == "1024x512x1024"]
    gave_up = [not_run_record(case, "the worker process did not start") for case in cases_of(spec)
               if case.shape.label == "64x64x64" and not case.is_baseline]
    seen = []
    resumed = run_planned(spec, client, workers, previous=kept + gave_up, on_result=seen.append)
    assert all(c.shape.label == "64x64x64" for c in seen)              # nothing that ran is run again
    kernels = sorted((c.kernel, c.shape.label) for c in resumed.cases if not c.is_baseline)
    assert kernels == sorted((c.label, c.shape.label) for c in cases_of(spec) if not c.is_baseline)
    assert not any(c.not_run for c in resumed.cases)
    check_baselines(resumed)
