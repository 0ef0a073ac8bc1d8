"""Refusals at a block's own limits say the way out: the block extents each axis may have, and for shared memory
over a block's limit, the most `shared_bytes` may be beside the kernel's static part."""

from __future__ import annotations

from driver_gemm.cuda.launch import LaunchConfig
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.cuda.resources import KernelResources
from driver_gemm.planning.case_plan import check_resources
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.specfile import load_spec

from test_spec import MINIMAL, write


def test_a_block_extent_past_its_axis_limit_is_refused_with_each_axis_limit_in_the_hint(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL.replace("block: [BN / TN, BM / TM]", "block: [16, 1, 65]")))
    problems = [problem for plan in plan_spec(spec, "sm_90").plans for problem in plan.problems]
    assert problems and all(problem.field.endswith("block[2]") for problem in problems), problems
    assert "must be 1 to 64" in problems[0].message
    assert "z 1 to 64" in problems[0].hint and "1024 threads" in problems[0].hint


def test_static_and_dynamic_shared_memory_over_the_block_limit_name_the_room_left_for_shared_bytes():
    limits = arch_limits("sm_90")
    found = []
    check_resources(LaunchConfig.of([1], [128], 191489), KernelResources(registers=32, static_shared_bytes=40960),
                    limits, lambda message, field, hint=None: found.append((message, field, hint)))
    [(message, field, hint)] = found
    assert field == "shared_bytes" and f"at most {limits.max_shared_per_block - 40960}" in message
    assert hint and "smaller tiles" in hint
    found.clear()
    check_resources(LaunchConfig.of([1], [128], 191488), KernelResources(registers=32, static_shared_bytes=40960),
                    limits, lambda message, field, hint=None: found.append((message, field, hint)))
    assert found == []
