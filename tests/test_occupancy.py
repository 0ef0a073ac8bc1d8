import json
import math

import pytest
from rich.console import Console

from driver_gemm.cuda.occupancy import arch_limits, cluster_waves, occupancy, waves
from driver_gemm.errors import ConfigError
from driver_gemm.report.tables import print_run
from driver_gemm.report.notes import markdown_notes, residency_notes
from driver_gemm.results.records import CaseResult, LaunchRecord, OccupancyRecord, RunResult
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status


@pytest.mark.parametrize("arch, threads, regs, static, dynamic, blocks, limited_by, carveout", [
    # 48 regs -> 1536 per warp; 16384 per quarter-SM / 1536 = 10 warps x 4 = 40 warps = 5 blocks of 8 warps
    ("sm_90", 256, 48, 8192, 0, 5, ("registers",), 64),
    # 1024 threads: 2 blocks fill the 64 warps, and 32 regs allow exactly that
    ("sm_90", 1024, 32, 8192, 0, 2, ("warps", "registers"), 32),
    # 48 KB + 1 KB reserve = 50176 B per block; 233472 / 50176 = 4 blocks; 4 x 49 KB needs the 196 KB carve-out
    ("sm_90", 128, 64, 0, 49152, 4, ("shared memory",), 196),
    # 128 regs -> 4096 per warp; 4 warps per quarter = 16 warps = 2 blocks of 8
    ("sm_80", 256, 128, 0, 0, 2, ("registers",), 8),
    # sm_86 has 48 warps / 1536 threads per SM: 3 blocks of 512
    ("sm_86", 512, 32, 0, 0, 3, ("warps",), 8),
    # sm_89: 24 blocks per SM at most, and 48 warps: 24 blocks of 2 warps hits both; 24 x 1 KB -> 32 KB carve-out
    ("sm_89", 64, 16, 0, 0, 24, ("warps", "blocks"), 32),
    # sm_89: 96 KB + 1 KB of a 100 KB SM: one block
    ("sm_89", 256, 32, 0, 96 * 1024, 1, ("shared memory",), 100),
    # sm_90: tiny blocks stop at 32 per SM
    ("sm_90", 32, 16, 0, 0, 32, ("blocks",), 32),
])
def test_hand_computed_occupancy(arch, threads, regs, static, dynamic, blocks, limited_by, carveout):
    result = occupancy(arch_limits(arch), threads, regs, static, dynamic)
    assert result.blocks_per_sm == blocks
    assert result.limited_by == limited_by
    assert result.shared_carveout_kb == carveout
    assert result.active_warps == blocks * -(-threads // 32)
    assert result.occupancy == pytest.approx(result.active_warps / arch_limits(arch).max_warps_per_sm)


def test_register_rounding_to_units_of_256_per_warp():
    # 33 regs x 32 = 1056 -> 1280 per warp: 12 warps per quarter -> 48 warps -> 6 blocks of 8
    result = occupancy(arch_limits("sm_90"), 256, 33)
    assert result.registers_per_warp == 1280 and result.blocks_per_sm == 6


@pytest.mark.parametrize("threads, regs, dynamic, reason", [
    (2048, 32, 0, "2048 threads per block (1 to 1024 allowed)"),
    (0, 32, 0, "0 threads per block"),
    (256, 256, 0, "256 registers per thread (at most 255)"),
    (1024, 128, 0, "131072 registers per block"),
    (128, 32, 228 * 1024, "exceed the 232448 allowed"),
])
def test_impossible_blocks_have_a_reason(threads, regs, dynamic, reason):
    result = occupancy(arch_limits("sm_90"), threads, regs, 0, dynamic)
    assert result.blocks_per_sm == 0 and reason in result.reason and result.limited_by == ()


def test_arch_table_has_the_common_architectures():
    for arch in ("sm_80", "sm_86", "sm_89", "sm_90"):
        limits = arch_limits(arch)
        assert limits.registers_per_sm == 65536 and limits.max_threads_per_block == 1024
    assert arch_limits("sm_90a").arch == "sm_90"
    assert arch_limits("sm_90").shared_carveouts_kb[-1] == 228
    with pytest.raises(ConfigError, match="no architecture table for sm_50") as caught:
        arch_limits("sm_50")
    assert caught.value.field == "--arch"


def test_waves():
    assert waves(144, 4, 132) == pytest.approx(144 / 528)
    assert waves(1056, 4, 132) == 2.0
    assert math.isinf(waves(10, 0, 132))


def test_cluster_waves_count_the_clusters_that_fit_at_once():
    # 132 blocks in clusters of 4 where only 30 clusters fit at once (120 SMs): 33 clusters, 1.1 waves
    assert cluster_waves(132, 4, 30) == pytest.approx(1.1)
    assert cluster_waves(132, 2, 66) == 1.0
    assert math.isinf(cluster_waves(132, 4, 0))


def _cluster_case(shape, cluster, max_active, blocks=132, sm_count=132):
    size = math.prod(cluster)
    return CaseResult(kernel=f"k{size}", name=f"k{size}", shape=shape, status=Status.PASS,
                      launch=LaunchRecord(grid=(blocks, 1, 1), block=(384, 1, 1), total_blocks=blocks),
                      occupancy=OccupancyRecord(cluster=cluster, driver_blocks_per_sm=1,
                                                driver_max_active_clusters=max_active,
                                                driver_waves=waves(blocks, 1, sm_count),
                                                driver_cluster_waves=cluster_waves(blocks, size, max_active)))


def test_a_cluster_launch_that_spills_into_another_wave_is_noted_under_its_table():
    shape = Shape(4096, 4096, 4096)
    spills = _cluster_case(shape, (4, 1, 1), 30)
    fits = _cluster_case(shape, (2, 1, 1), 66)
    many = _cluster_case(shape, (2, 1, 1), 66, blocks=1056)     # 8 waves either way: nothing to say
    run = RunResult(spec="t", spec_path=None, cases=[spills, fits, many])
    note = ("k4: its 33 clusters of 4 blocks take 2 waves (1.10): 30 fit at once (cuOccupancyMaxActiveClusters), "
            "where its 132 blocks alone would take 1 (1.00); a persistent grid that reads max_active_clusters asks for "
            "no more than fit")
    assert residency_notes(run.cases) == [note]
    console = Console(width=240, record=True)
    print_run(run, console)
    assert note in console.export_text()
    assert f"- 4096x4096x4096: {note}" in markdown_notes(run)
    # the figures travel through the results file
    again = OccupancyRecord.from_json(json.loads(json.dumps(spills.occupancy.to_json())))
    assert again.driver_cluster_waves == pytest.approx(1.1) and again.driver_waves == 1.0
    assert "driver_cluster_waves" not in OccupancyRecord().to_json()
