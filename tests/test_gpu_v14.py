"""v14 (kernels/14_tma_ws_swap.cu, C^T = B^T A^T) on a GPU: BF16 with B row-major and column-major, TF32 and FP8
with B column-major, every tile height and width, unsplit and with K split across a cluster, each checked against
the float64 reference on shapes cut by M, N and K."""

from __future__ import annotations

import pytest

from gpu_specs import (K_TAIL_SHAPES, K_TAIL_SHAPES_FP8, not_passing, tma_ws_kernel, verify_k_tails, verify_only,
                       write_spec)

pytestmark = pytest.mark.gpu

# 1x520x784: one row of A (the decode case); 61x1032x208: M inside one tile of 64 but not of 8, 16 or 32, N no
# multiple of 64 or 128, K of 3 and a quarter bf16 K-tiles (so a split of 4 cuts K unevenly); 130x200x96: M past
# two tiles of 64, a short K that leaves a rank of a split of 4 without a K-tile in fp8.
SHAPES = ["1x520x784", "61x1032x208", "130x200x96"]

V14 = tma_ws_kernel("14_tma_ws_swap.cu", "gemm_tma_ws_swap",
                    grid="SPLITS * min(sm_count // SPLITS, max_active_clusters, ceil(N / (64 * CWG)) * ceil(M / MT))",
                    cluster="[SPLITS, 1, 1]", shared_bytes="STAGES * (64 * CWG + MT) * 128 + 16 * STAGES + 1024",
                    a_rows="MT")

# In the template's order: ELEM, BT, CWG, STAGES, OUT, SPLITS, MT.
FORMS = "CWG: [1, 2], STAGES: 4, OUT: {out}, SPLITS: [1, 4], MT: [8, 16, 32, 64]"
KERNELS = "".join([
    V14(name="bf16", types="{a: bf16, c: fp32}", layout="NN", scales="", bk=64, b_box="[64, 64]",
        params="{ELEM: 16, BT: 0, " + FORMS.format(out=32) + "}"),
    V14(name="bf16-out-nt", types="{a: bf16, c: bf16}", layout="NT", scales="", bk=64, b_box="[64 * CWG, 64]",
        params="{ELEM: 16, BT: 1, " + FORMS.format(out=16) + "}"),
    V14(name="tf32", types="{a: tf32, c: fp32}", layout="NT", scales="", bk=32, b_box="[64 * CWG, 32]",
        params="{ELEM: 32, BT: 1, " + FORMS.format(out=32) + "}"),
    V14(name="fp8", types="{a: e4m3, c: bf16}", layout="NT", scales="scales: {a: 0.5, b: 2.0}", bk=128,
        b_box="[64 * CWG, 128]", params="{ELEM: 8, BT: 1, " + FORMS.format(out=16) + "}"),
])


def test_every_v14_form_passes_split_or_not_on_shapes_cut_by_m_n_and_k(tmp_path):
    found = verify_only(write_spec(tmp_path, KERNELS, SHAPES))
    assert len(found) == 4 * 16 * len(SHAPES)      # 4 kernels x (2 widths x 2 splits x 4 heights)
    assert not not_passing(found), not_passing(found)


def test_a_tiles_last_k_tile_multiplies_only_its_k_steps_that_hold_k(tmp_path):
    kernels = "".join([
        V14(name="bf16", types="{a: bf16, c: fp32}", layout="NN", scales="", bk=64, b_box="[64, 64]",
            params="{ELEM: 16, BT: 0, CWG: 1, STAGES: 4, OUT: 32, SPLITS: [1, 2], MT: 16}"),
        V14(name="tf32", types="{a: tf32, c: fp32}", layout="NT", scales="", bk=32, b_box="[64 * CWG, 32]",
            params="{ELEM: 32, BT: 1, CWG: 2, STAGES: 4, OUT: 32, SPLITS: [1, 2], MT: 8}"),
    ])
    fp8 = V14(name="fp8", types="{a: e4m3, c: bf16}", layout="NT", scales="scales: {a: 0.5, b: 2.0}", bk=128,
              b_box="[64 * CWG, 128]", params="{ELEM: 8, BT: 1, CWG: 1, STAGES: 4, OUT: 16, SPLITS: [1, 2], MT: 64}")
    found = verify_k_tails(tmp_path, kernels, fp8)
    assert len(found) == 4 * len(K_TAIL_SHAPES) + 2 * len(K_TAIL_SHAPES_FP8)
    assert not not_passing(found), not_passing(found)


# The wide forms (tiles 128 to 256 columns wide by 96 to 256 rows): 300x1000x528 cuts every tile height (two tiles
# of 160, 192 or 256 rows, three of 112, 128 or 136, four of 96, the last part-full each time) and every width
# (1000 is no multiple of 128, 192 or 256); with the tiles taken down M first, a block's later tiles change both
# row and column. 129x2056x144 holds one row past a tile of 128 and a K of two and a quarter bf16 K-tiles (one
# and an eighth e4m3 ones).
WIDE_SHAPES = ["300x1000x528", "129x2056x144"]
# The heights a thread's registers hold its accumulators for, by width (the kernel's static_assert)
WIDE_HEIGHTS = {2: "[96, 112, 128, 136, 160, 192, 256]", 3: "[96, 112, 128, 136, 160, 192]", 4: "[96, 112, 128]"}


def test_every_wide_v14_form_passes_split_or_not_on_shapes_cut_by_m_n_and_k(tmp_path):
    kernels = []
    for cwg, heights in WIDE_HEIGHTS.items():
        forms = f"CWG: {cwg}, STAGES: 3, OUT: {{out}}, SPLITS: [1, 2], MT: {heights}"
        kernels += [
            V14(name=f"bf16-{cwg}", types="{a: bf16, c: bf16}", layout="NN", scales="", bk=64, b_box="[64, 64]",
                params="{ELEM: 16, BT: 0, " + forms.format(out=16) + "}"),
            V14(name=f"tf32-{cwg}", types="{a: tf32, c: fp32}", layout="NT", scales="", bk=32,
                b_box="[64 * CWG, 32]", params="{ELEM: 32, BT: 1, " + forms.format(out=32) + "}"),
            V14(name=f"fp8-{cwg}", types="{a: e4m3, c: bf16}", layout="NT", scales="scales: {a: 0.5, b: 2.0}",
                bk=128, b_box="[64 * CWG, 128]", params="{ELEM: 8, BT: 1, " + forms.format(out=16) + "}"),
        ]
    found = verify_only(write_spec(tmp_path, "".join(kernels), WIDE_SHAPES))
    assert len(found) == 3 * 2 * (7 + 6 + 3) * len(WIDE_SHAPES)   # 3 types x 2 splits x 16 (width, height) pairs
    assert not not_passing(found), not_passing(found)
