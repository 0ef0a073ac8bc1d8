"""Scheduling over several workers, checked on a local CPU-only Dask cluster with the no-GPU parts of a run."""

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.pipeline.plan import plan_case
from driver_gemm.results.records import CaseResult
from driver_gemm.status import Status
from driver_gemm.pipeline.build import compile_spec
from driver_gemm.pipeline.cases import cases_of
from driver_gemm.pipeline.session import RunOptions
from driver_gemm.spec.model import Shape
from driver_gemm.spec import load_spec

from conftest import SPECS

distributed = pytest.importorskip("distributed")


def plan_part(spec, shapes, device, isolate, options):
    """A stand-in for a GPU worker's part: compile on the worker and plan every case, tag it with the GPU."""
    spec = spec.select(shapes=shapes)
    compiled = compile_spec(spec, "sm_90")
    cases = []
    for case in cases_of(spec):
        result = CaseResult(kernel=case.label, name=case.label.split("[")[0], shape=case.shape, status=Status.PASS,
                            device={"name": f"GPU {device}", "ordinal": device})
        if case.kernel is not None:
            resources = compiled[case.kernel.label].resources_of(case.kernel.instance)
            plan = plan_case(case.kernel, case.shape, arch_limits("sm_90"), resources)
            result.status = Status.PASS if plan.valid else Status.INVALID
            result.resources = resources.as_dict()
            result.launch = plan.config.as_dict()
        cases.append(result.as_dict())
    return {"environment": {"worker_device": device}, "cases": cases}


def test_shapes_are_handed_out_largest_first():
    from driver_gemm.pipeline.distribute import largest_first

    spec = load_spec(SPECS / "seed.yaml").select(shapes=["64x64x64", "1001x513x777", "7x5x3", "1024x512x1024"])
    assert [s.label for s in largest_first(spec)] == ["1024x512x1024", "1001x513x777", "64x64x64", "7x5x3"]


def test_a_sweep_on_a_local_cluster_matches_the_single_worker_plan():
    from distributed import Client, LocalCluster

    from driver_gemm.pipeline.distribute import run_on_workers

    spec = load_spec(SPECS / "seed.yaml").select(shapes=["1024x512x1024", "1001x513x777", "64x64x64", "7x5x3"])
    seen = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        workers = sorted(client.scheduler_info()["workers"])
        run = run_on_workers(spec, client, list(zip(workers, [0, 1])), options=RunOptions(time=False),
                             on_result=seen.append, part=plan_part)
    keys = [(c.kernel, c.shape.label) for c in run.cases]
    expected = [(c.label, c.shape.label) for c in cases_of(spec)]
    assert sorted(keys) == sorted(expected) and len(set(keys)) == len(keys) == 24
    assert len(seen) == 24
    by_shape = {}
    for case in run.cases:
        by_shape.setdefault(case.shape.label, set()).add(case.device["ordinal"])
    assert all(len(devices) == 1 for devices in by_shape.values())       # a shape stays on one GPU
    assert set().union(*by_shape.values()) == {0, 1}                       # and both GPUs got work
    local = compile_spec(spec, "sm_90")
    for case in run.cases:
        if case.kernel != "cublas":
            kernel = next(k for k in spec.kernels if k.label == case.kernel)
            assert case.resources == local[kernel.label].resources_of(kernel.instance).as_dict()
    # the record of who ran what agrees with the cases' tags and covers every shape once
    ran = {s: d["device"] for d in run.settings["devices"] for s in d["shapes"]}
    assert sorted(ran) == sorted(s.label for s in spec.shapes)
    assert all(ran[case.shape.label] == case.device["ordinal"] for case in run.cases)
