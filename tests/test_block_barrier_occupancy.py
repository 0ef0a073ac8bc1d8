"""The block barriers an SM has, as an occupancy limit from 9.x on (cuda_occupancy.h's
cudaOccMaxBlocksPerSMBlockBarrierLimit): a kernel whose bar.sync takes its barrier id from a register uses all 16 of
a block's barriers, so few of its blocks fit an SM whatever their size. The plan counts them, names them as the
limiter, says why in a note, sizes a cooperative grid by them, shows them in the CSV, and a run says where its own
count and the driver's differ."""

from __future__ import annotations

import csv
import io

import pytest

from driver_gemm.cuda.occupancy import (ARCHES, arch_limits, barrier_note, block_barriers_per_sm, limits_from_device,
                                        occupancy)
from driver_gemm.errors import WrongArgumentValue
from driver_gemm.planning.build import plan_cases
from driver_gemm.report.formats import PLAN_CSV_HEADER, plan_csv
from driver_gemm.session.steps import occupancy_disagreement
from driver_gemm.specfile import load_spec

from driver_gemm.cuda.device import DeviceProperties

SM90 = arch_limits("sm_90")

# Two halves of the block meet at a barrier whose id (1 or 2) is known only at run time: ptxas counts all 16.
RUNTIME_BARRIER_SOURCE = """\
extern "C" __global__ void runtime_barrier(const float* A, const float* B, float* C, int M, int N, int K)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int id = 1 + (threadIdx.y >= blockDim.y / 2);
    const int half = blockDim.x * blockDim.y / 2;
    float sum = 0.0f;
    if (row < M && col < N)
        for (int k = 0; k < K; ++k) sum += A[row * K + k] * B[k * N + col];
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(half) : "memory");
    if (row < M && col < N) C[row * N + col] = sum;
}
"""


def runtime_barrier_spec(tmp_path, extra: str = "", shapes: str = "[[1024, 1024, 64]]", block_rows: str = "[2, 8]"):
    (tmp_path / "runtime_barrier.cu").write_text(RUNTIME_BARRIER_SOURCE)
    (tmp_path / "spec.yaml").write_text(f"""\
name: barriers
shapes: {shapes}
baseline: false
kernels:
  - name: rb
    source: runtime_barrier.cu
    function: runtime_barrier
    values: {{BY: {block_rows}}}
    block: [32, BY]
    grid: [ceil(N / 32), ceil(M / BY)]
    tile: [BY, 32]
{extra}""")
    return load_spec(tmp_path / "spec.yaml")


def planned(spec, arch: str = "sm_90"):
    limits = arch_limits(arch)
    cases, _ = plan_cases(spec, limits, arch, limits.typical_sm_count)
    return [case.plan for case in cases if case.kernel is not None]


@pytest.mark.parametrize("arch, per_block", [("sm_90", 2), ("sm_100", 2), ("sm_103", 2), ("sm_120", 1),
                                             ("sm_121", 1)])
def test_an_sm_has_barriers_for_its_blocks_from_hopper_on(arch, per_block):
    limits = arch_limits(arch)
    assert limits.barriers_per_sm == per_block * limits.max_blocks_per_sm


def test_before_hopper_the_barriers_are_not_counted():
    for name, limits in ARCHES.items():
        if limits.compute_capability[0] < 9:
            assert limits.barriers_per_sm == 0, name
            assert occupancy(limits, 64, 32, barriers=16).limited_by != ("barriers",), name
    assert block_barriers_per_sm((10, 1), 32) == 32 and block_barriers_per_sm((11, 0), 24) == 24
    assert block_barriers_per_sm((11, 1), 24) == 48


def gpu(compute_capability, blocks) -> DeviceProperties:
    return DeviceProperties(
        ordinal=0, name="GPU", uuid="GPU-0", compute_capability=compute_capability, sm_count=100,
        clock_khz=1_900_000, memory_clock_khz=2_000_000, memory_bus_bits=4096, total_memory_bytes=80 << 30,
        l2_bytes=50 << 20, warp_size=32, max_threads_per_block=1024, max_block_dims=(1024, 1024, 64),
        max_grid_dims=(2**31 - 1, 65535, 65535), max_shared_per_block=48 * 1024,
        max_shared_per_block_optin=227 * 1024, shared_per_sm=228 * 1024, reserved_shared_per_block=1024,
        registers_per_block=65536, registers_per_sm=65536, max_threads_per_sm=2048, max_blocks_per_sm=blocks,
        driver_version=13000)


def test_a_gpus_limits_carry_its_barriers():
    assert limits_from_device(gpu((9, 0), 32)).barriers_per_sm == 64
    assert limits_from_device(gpu((12, 0), 24)).barriers_per_sm == 24
    assert limits_from_device(gpu((10, 7), 32)).barriers_per_sm == 64     # no table: the calculator's rule
    assert limits_from_device(gpu((8, 0), 32)).barriers_per_sm == 0


@pytest.mark.parametrize("arch, blocks", [("sm_90", 4), ("sm_100", 4), ("sm_120", 1)])
def test_sixteen_barriers_hold_a_few_blocks_whatever_their_size(arch, blocks):
    limits = arch_limits(arch)
    for threads in (64, 128, 256):
        result = occupancy(limits, threads, 32, barriers=16)
        assert result.blocks_per_sm == blocks and result.limited_by == ("barriers",)
        assert result.occupancy == pytest.approx(blocks * threads / 32 / limits.max_warps_per_sm)


def test_few_barriers_leave_the_other_limits_as_they_were():
    unknown = occupancy(SM90, 64, 32)
    one = occupancy(SM90, 64, 32, barriers=1)
    assert one.blocks_per_sm == unknown.blocks_per_sm == 32 and "barriers" not in one.limited_by
    assert occupancy(SM90, 64, 32, barriers=4).blocks_per_sm == 16


def test_a_negative_barrier_count_is_refused():
    with pytest.raises(WrongArgumentValue, match="barriers"):
        occupancy(SM90, 64, 32, barriers=-1)


def test_the_note_says_why_only_where_barriers_limit():
    limited = occupancy(SM90, 64, 32, barriers=16)
    note = barrier_note(limited, 16, SM90)
    assert note and "limited by barriers" in note and "64 block barriers on sm_90" in note
    assert "register" in note and "4 blocks" in note
    assert barrier_note(occupancy(SM90, 64, 32, barriers=2), 2, SM90) is None
    assert barrier_note(occupancy(SM90, 1024, 64, barriers=16), 16, SM90) is None   # warps hold it to 2 first


def test_a_planned_kernel_with_a_runtime_barrier_id_is_limited_by_barriers(tmp_path):
    plans = planned(runtime_barrier_spec(tmp_path))
    assert plans and all(plan.valid for plan in plans)
    for plan in plans:
        assert plan.resources.barriers == 16
        assert plan.occupancy.blocks_per_sm == 4 and plan.occupancy.limited_by == ("barriers",)
        assert any("limited by barriers" in note for note in plan.notes), plan.notes
    on_consumer_blackwell, = planned(runtime_barrier_spec(tmp_path, block_rows="[8]"), "sm_120")
    assert on_consumer_blackwell.occupancy.blocks_per_sm == 1


def test_a_cooperative_grid_is_sized_by_the_blocks_the_barriers_allow(tmp_path):
    # 8 x 132 blocks would fit by warps and registers alone; the barriers allow 4 an SM
    spec = runtime_barrier_spec(tmp_path, extra="    cooperative: true\n", shapes="[[8448, 32, 64]]",
                                block_rows="[8]")
    plan, = planned(spec)
    assert not plan.valid
    message = " ".join(str(problem) for problem in plan.problems)
    assert "kernels[rb].cooperative" in message and "528 fit (4 an SM x 132 SMs)" in message


def test_the_plan_csv_has_the_barriers(tmp_path):
    plans = planned(runtime_barrier_spec(tmp_path))
    assert "barriers" in PLAN_CSV_HEADER
    rows = list(csv.DictReader(io.StringIO(plan_csv(plans))))
    assert rows and all(row["barriers"] == "16" for row in rows)
    assert all(row["limited_by"] == "barriers" for row in rows)


def test_a_run_says_where_its_count_and_the_drivers_differ():
    ours = occupancy(SM90, 256, 32)
    assert occupancy_disagreement(ours, ours.blocks_per_sm) is None
    said = occupancy_disagreement(ours, 4)
    assert said and f"{ours.blocks_per_sm} blocks an SM" in said and "the driver 4" in said
    assert "cuOccupancyMaxActiveBlocksPerMultiprocessor" in said
