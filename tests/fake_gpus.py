"""Stand-ins for the GPU side of a run on several GPUs, shared by the tests of both drivers (threads, Dask)."""

import time

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.build import compile_spec
from driver_gemm.planning.cases import cases_of
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.results.records import CaseDevice, CaseResult, LaunchRecord, ResourceRecord
from driver_gemm.status import Status


def plan_part(spec, options, placement, previous, on_result):
    """A stand-in for a GPU worker's part: compile on the worker and plan every case, tag it with the GPU."""
    device = placement.device
    compiled = compile_spec(spec, "sm_90")
    skip = {(c.kernel, c.shape.label) for c in previous}
    cases = [c.as_dict() for c in previous]
    for case in cases_of(spec):
        if case.key in skip:
            continue
        result = CaseResult(kernel=case.label, name=case.label.split("[")[0], shape=case.shape, status=Status.PASS,
                            device=CaseDevice(f"GPU {device}", f"GPU-{device}", device))
        if case.kernel is not None:
            resources = compiled[case.kernel.label].resources_of(case.kernel.instance)
            plan = plan_case(case.kernel, case.shape, arch_limits("sm_90"), resources)
            result.status = Status.PASS if plan.valid else Status.INVALID
            result.resources = ResourceRecord.from_json(resources.as_dict())
            result.launch = LaunchRecord.from_json(plan.config.as_dict())
        on_result(result)
        cases.append(result.as_dict())
    return {"environment": {"worker_device": device}, "cases": cases}


def paced_part(subspec, *args, seconds=0.1, **kwargs):
    """`plan_part` taking a while, as a task on a GPU does: a GPU that is free takes the next task meanwhile."""
    time.sleep(seconds)
    return plan_part(subspec, *args, **kwargs)


def check_baselines(run):
    """One baseline row per shape per GPU, and every kernel row measured against the one of its own GPU."""
    baselines = {}
    for case in run.cases:
        if case.is_baseline:
            key = (case.shape.label, case.device.ordinal)
            assert key not in baselines, f"two baseline rows for {key}"
            baselines[key] = case
    for case in run.cases:
        if not case.is_baseline:
            against = case.measured_against
            assert against is not None and against.device.ordinal == case.device.ordinal, case.kernel
            assert against.shape == case.shape.label and (case.shape.label, case.device.ordinal) in baselines
    used = {(c.shape.label, c.device.ordinal) for c in run.cases if not c.is_baseline}
    assert set(baselines) == used        # no GPU ran a baseline it did not need
