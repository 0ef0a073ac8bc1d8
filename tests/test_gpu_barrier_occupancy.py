"""On a GPU: a kernel whose bar.sync takes its barrier id from a register (ptxas counts all 16 of a block's
barriers) is planned with the blocks an SM the driver gives it, and its run records no disagreement between the two.

Run on a machine with a CUDA driver; elsewhere each test is skipped with the reason.
"""

from __future__ import annotations

import pytest

from driver_gemm.planning.build import plan_cases
from driver_gemm.planning.spec_plan import plan_target
from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.options import RunOptions
from driver_gemm.session.steps import OCCUPANCY_DISAGREEMENT_KEY
from driver_gemm.status import Status

from test_block_barrier_occupancy import runtime_barrier_spec

pytestmark = pytest.mark.gpu


def test_the_plans_blocks_an_sm_are_the_drivers_for_a_runtime_barrier_id(tmp_path):
    spec = runtime_barrier_spec(tmp_path, shapes="[[256, 256, 64]]", block_rows="[2, 4, 8]")
    target = plan_target()
    cases, _ = plan_cases(spec, target.limits, target.arch)
    planned = {case.kernel.label: case.plan for case in cases if case.kernel is not None}
    assert all(plan.resources.barriers == 16 for plan in planned.values())
    run = run_spec(spec, options=RunOptions(time=False))
    assert run.cases
    for case in run.cases:
        assert case.status == Status.PASS, (case.kernel, case.message)
        occupancy = case.occupancy
        assert planned[case.kernel].occupancy.blocks_per_sm == occupancy.driver_blocks_per_sm, (case.kernel, occupancy)
        assert occupancy.blocks_per_sm == occupancy.driver_blocks_per_sm
        assert OCCUPANCY_DISAGREEMENT_KEY not in occupancy.other
