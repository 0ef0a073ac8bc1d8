"""A block whose warps, rounded up to the SM's 4 schedulers, ask for more registers than a block may have: the
refusal says why the warps count as more, how the launch fails, and the two ways out (fewer warps, or the registers
a thread may have for that block)."""

from __future__ import annotations

from driver_gemm.cuda.occupancy import arch_limits, occupancy

SM90 = arch_limits("sm_90")


def test_the_rounded_register_refusal_names_the_failure_and_the_ways_out():
    result = occupancy(SM90, 800, 80)       # 25 warps of 80 registers, checked as 28
    assert result.blocks_per_sm == 0
    reason = result.reason
    assert "71680 registers per block" in reason and "25 warps allocated as 28" in reason
    assert "4 schedulers" in reason
    assert "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" in reason
    hint = result.hint
    assert hint.startswith("at most 24 warps (768 threads) a block")
    assert "at most 72 registers a thread" in hint and "__launch_bounds__(800)" in hint


def test_the_ways_out_fit():
    # what the hint offers does launch: 24 warps of 80 registers, or 25 warps of 72
    assert occupancy(SM90, 768, 80).blocks_per_sm >= 1
    assert occupancy(SM90, 800, 72).blocks_per_sm >= 1
    assert occupancy(SM90, 800, 73).blocks_per_sm == 0
