"""A launch refusal's way out is its hint, apart from what the launch would do: a cluster the GPU cannot place and
a block whose registers no SM holds say the failure in their message and the fix in `hint`, which a plan's problem
carries as its own."""

from __future__ import annotations

import pytest

from driver_gemm.cuda.launch_attributes import LaunchAttributes
from driver_gemm.cuda.occupancy import occupancy
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import Shape

from test_tma_spec import CLUSTER, SM80, SM90, parse


@pytest.mark.parametrize("attributes, grid, arch, failure, way_out", [
    (LaunchAttributes(cluster=(4, 4, 1)), (16, 16, 1), 90, "over the portable limit of 8", "at most 8 blocks"),
    (LaunchAttributes(cluster=(2, 1, 1)), (16, 16, 1), 80, "need sm_90 or newer", "plan for sm_90"),
    (LaunchAttributes(cluster=(2, 1, 1)), (5, 16, 1), 90, "not a multiple of the cluster's 2", "multiples"),
    (LaunchAttributes(cluster=(2, 1, 1), cluster_scheduling="round_robin"), (16, 16, 1), 90,
     "unknown cluster scheduling policy 'round_robin'", "load_balancing"),
    (LaunchAttributes(non_portable=True), (16, 16, 1), 90, "cluster options without a cluster", "cluster: [x, y, z]"),
])
def test_a_launch_refusal_keeps_its_way_out_in_its_hint(attributes, grid, arch, failure, way_out):
    problem, = attributes.problems(grid, 0, arch)
    assert failure in problem.message and "hint" not in problem.message, problem
    assert problem.hint and way_out in problem.hint, problem


@pytest.mark.parametrize("text, shape, limits, way_out", [
    (CLUSTER.replace("cluster: [2, 1, 1]", "cluster: [16, 1, 1]"), Shape(64, 512, 64), SM90, "at most 8 blocks"),
    (CLUSTER, Shape(64, 64, 64), SM80, "plan for sm_90"),
])
def test_a_planned_cluster_refusal_carries_the_hint(text, shape, limits, way_out):
    problem, = [p for p in plan_case(parse(text).kernels[0], shape, limits).problems if p.field.endswith(".cluster")]
    assert problem.hint and way_out in problem.hint, str(problem)
    assert "hint" not in problem.message and str(problem).count("(hint: ") == 1, str(problem)


def test_a_block_of_too_many_registers_gives_its_way_out_as_a_hint():
    refused = occupancy(SM90, 800, 80)        # 25 warps of 80 registers, checked as 28
    assert refused.blocks_per_sm == 0 and "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" in refused.reason
    assert "hint" not in refused.reason and "at most 24 warps" in refused.hint, refused
    assert "hint" not in refused.as_dict()     # a plan's and a record's figures: the hint goes with the refusal
    assert occupancy(SM90, 768, 80).hint == ""
