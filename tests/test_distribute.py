"""Scheduling over several workers, checked on a local CPU-only Dask cluster with the no-GPU parts of a run."""

import pytest

from driver_gemm.planning.build import compile_spec
from driver_gemm.planning.cases import cases_of
from driver_gemm.session.state import RunOptions
from driver_gemm.specfile import load_spec

from conftest import SPECS
from fake_gpus import check_baselines, paced_part, plan_part

distributed = pytest.importorskip("distributed")


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


def run_planned(spec, client, workers, *, on_result=None, previous=(), **kwargs):
    """`spec` verified on the Dask `workers` by `plan_part`; `kwargs` go to `DaskWorkers`."""
    from driver_gemm.runners.distribute import DaskWorkers
    runner = DaskWorkers(client, workers, **{"part": plan_part, "describe": describe_stand_in, "make_worker": None,
                                             **kwargs})
    return runner.run(spec, RunOptions(time=False), on_result=on_result, previous=previous)


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
    assert {case.device.ordinal for case in run.cases} == {0, 1}        # both GPUs got work
    local = compile_spec(spec, "sm_90")
    for case in run.cases:
        if not case.is_baseline:
            kernel = next(k for k in spec.kernels if k.label == case.kernel)
            assert case.resources.to_json() == local[kernel.label].resources_of(kernel.instance).as_dict()
    # the environment of both GPUs was known before the first case landed, and every task is recorded
    assert [gpu["device"]["name"] for gpu in run.environment["gpus"]] == ["GPU 0", "GPU 1"]
    tasks = run.settings.tasks
    assert tasks and all(t["device"] in (0, 1) and t["wall_s"] >= 0 for t in tasks)


def test_a_large_shape_is_shared_and_each_gpu_measures_its_own_baseline(two_workers):
    from driver_gemm.runners.schedule import CostModel, plan_tasks

    client, workers = two_workers
    spec = load_spec(SPECS / "seed.yaml").select(shapes=["8192x8192x8192", "64x64x64"])
    # Its kernels known to take 20 s each there: the shape is cut, and its tasks are the first two dealt; each
    # task takes a while, so the second goes to the worker the first did not.
    model = CostModel(task_overhead_s=0.0, case_s={(k.label, "8192x8192x8192"): 20.0 for k in spec.kernels})
    assert [task.shapes[0].label for task in plan_tasks(spec, 2, model)[:2]] == ["8192x8192x8192"] * 2
    run = run_planned(spec, client, workers, model=model, part=paced_part)
    big = [c for c in run.cases if c.shape.label == "8192x8192x8192" and not c.is_baseline]
    assert {c.device.ordinal for c in big} == {0, 1}
    check_baselines(run)


def test_a_resumed_run_keeps_what_ran_and_reruns_what_did_not(two_workers):
    from driver_gemm.planning.cases import not_run_record

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
