"""v16 (kernels/16_tma_ws_streamk.cu) on a GPU: BF16 (bf16 and fp32 out), TF32 and FP8 on tiles of every width and
height, the work split stream-K, each checked against the float64 reference on shapes where tiles are split between
blocks, where one tile is split among every block of the grid, and where a grid larger than the K-tiles leaves
blocks with nothing to do."""

from __future__ import annotations

import pytest

from gpu_specs import (K_TAIL_SHAPES, K_TAIL_SHAPES_FP8, not_passing, tma_ws_kernel, verify_k_tails, verify_only,
                       write_spec)

pytestmark = pytest.mark.gpu

# 1001x520x784: M odd, N and K no multiple of a tile, 72 to 288 tiles of 7 to 25 K-tiles, most of them split between
# two blocks. 4104x1032x208: hundreds of tiles of 2 to 7 K-tiles, so ranges hold several whole tiles between their
# ends. 64x64x8192: one tile of 64 to 256 K-tiles, its owner adding the partial sums of every other block of the grid
# (at grid = sm_count and fp8's 64 K-tiles, some blocks have none). 1x264x64: every tile one K-tile, no partial tile.
SHAPES = ["1001x520x784", "4104x1032x208", "64x64x8192", "1x264x64"]

STREAM_K_GRID = "min(sm_count, ceil(N / BN) * ceil(M / (64 * CWG)) * ceil(K * ELEM / 1024))"

V16 = tma_ws_kernel("16_tma_ws_streamk.cu", "gemm_tma_ws_streamk", grid=STREAM_K_GRID,
                    shared_bytes="STAGES * (64 * CWG + BN) * 128 + 16 * STAGES + 1024",
                    args=("{name: workspace, type: buffer, element: float32, size: sm_count * 64 * CWG * BN}",
                          "{name: flags, type: buffer, element: int32, size: sm_count}"))

KERNELS = "".join([
    V16(name="bf16-out", types="{a: bf16, c: bf16}", layout="NN", scales="", bk=64, b_box="[64, 64]",
        params="{ELEM: 16, BT: 0, CWG: [1, 2], STAGES: 4, GROUP: 8, OUT: 16, BN: [64, 128, 256]}"),
    V16(name="bf16", types="{a: bf16, c: fp32}", layout="NN", scales="", bk=64, b_box="[64, 64]",
        params="{ELEM: 16, BT: 0, CWG: 2, STAGES: 4, GROUP: 8, OUT: 32, BN: [64, 256]}"),
    V16(name="tf32", types="{a: tf32, c: fp32}", layout="NT", scales="", bk=32, b_box="[BN, 32]",
        params="{ELEM: 32, BT: 1, CWG: [1, 2], STAGES: 6, GROUP: 8, OUT: 32, BN: [64, 128]}"),
    V16(name="fp8", types="{a: e4m3, c: bf16}", layout="NT", scales="scales: {a: 0.5, b: 2.0}", bk=128,
        b_box="[BN, 128]",
        params="{ELEM: 8, BT: 1, CWG: 2, STAGES: 3, GROUP: 16, OUT: 16, BN: [128, 256]}"),
    # One block an SM whatever the work: where the K-tiles are fewer than the blocks, some ranges are empty.
    V16(name="bf16-out-full-grid", types="{a: bf16, c: bf16}", layout="NN", scales="", bk=64,
        b_box="[64, 64]", grid="sm_count",
        params="{ELEM: 16, BT: 0, CWG: 1, STAGES: 8, GROUP: 1, OUT: 16, BN: 64}"),
    V16(name="fp8-full-grid", types="{a: e4m3, c: fp32}", layout="NT", scales="", bk=128, b_box="[BN, 128]",
        grid="sm_count", params="{ELEM: 8, BT: 1, CWG: 2, STAGES: 4, GROUP: 8, OUT: 32, BN: 128}"),
])


def test_every_v16_form_passes_on_shapes_split_between_blocks(tmp_path):
    found = verify_only(write_spec(tmp_path, KERNELS, SHAPES))
    assert len(found) == 16 * len(SHAPES)        # bf16-out 6 forms, bf16 2, tf32 4, fp8 2, full grids 2
    assert not not_passing(found), not_passing(found)


def test_a_tiles_last_k_tile_multiplies_only_its_k_steps_that_hold_k(tmp_path):
    # Only the segment that ends a tile's K holds its last K-tile; the full grid splits these short tiles' K-tiles
    # between blocks.
    kernels = "".join([
        V16(name="bf16-out", types="{a: bf16, c: bf16}", layout="NN", scales="", bk=64, b_box="[64, 64]",
            grid="sm_count", params="{ELEM: 16, BT: 0, CWG: 1, STAGES: 4, GROUP: 8, OUT: 16, BN: 64}"),
        V16(name="tf32", types="{a: tf32, c: fp32}", layout="NT", scales="", bk=32, b_box="[BN, 32]",
            params="{ELEM: 32, BT: 1, CWG: 2, STAGES: 6, GROUP: 8, OUT: 32, BN: 128}"),
    ])
    fp8 = V16(name="fp8", types="{a: e4m3, c: bf16}", layout="NT", scales="scales: {a: 0.5, b: 2.0}", bk=128,
              b_box="[BN, 128]", grid="sm_count",
              params="{ELEM: 8, BT: 1, CWG: 2, STAGES: 3, GROUP: 16, OUT: 16, BN: 128}")
    found = verify_k_tails(tmp_path, kernels, fp8)
    assert len(found) == 2 * len(K_TAIL_SHAPES) + len(K_TAIL_SHAPES_FP8)
    assert not not_passing(found), not_passing(found)
