"""v15 (kernels/15_tma_ws_multicast.cu) on a GPU: BF16 (bf16 and fp32 out), TF32 and FP8, on the large shapes' tile,
on narrow ones and on tiles of 192 rows or columns, with and without a cluster sharing B by multicast, C stored from
registers or by the copy engine (a warpgroup's chunk or a warp's rows a copy), each checked against the float64
reference on shapes cut by M, N and K, among them shapes whose last unit of a cluster lies partly or wholly past M."""

from __future__ import annotations

import pytest

from gpu_specs import (K_TAIL_SHAPES, K_TAIL_SHAPES_FP8, not_passing, tma_ws_kernel, verify_k_tails, verify_only,
                       write_spec)

pytestmark = pytest.mark.gpu

# 1001x520x784: M odd, N and K no multiple of a tile. 4104x1032x208: 33 tile rows (a cluster of 2 or 4 has a last unit
# partly past M) and 85 units of 2 tiles, so some clusters take two units in turn; K of 2 (fp8) to 7 (tf32) K-tiles.
# 1x264x64: one row of C, so every rank but the first computes a tile wholly past M.
SHAPES = ["1001x520x784", "4104x1032x208", "1x264x64"]

SHARED_BYTES = "STAGES * (64 * CWG + BN) * 128 + min(STORE, 1) * CWG * 16384 + 16 * STAGES + 1024"
# C's box: a warpgroup's 64 rows (STORE 1) or a warp's 16 (STORE 2) by a chunk's columns.
MAP_C = "{name: map_c, type: tensormap, tensor: C, box: [64 // (1 + 3 * (STORE // 2)), 1024 / OUT], swizzle: 128B}"
# A 96-column bf16 slab is staged in chunks of 64-byte rows (32 columns) with the 64-byte swizzle.
MAP_C_64 = "{name: map_c, type: tensormap, tensor: C, box: [64 // (1 + 3 * (STORE // 2)), 512 / OUT], swizzle: 64B}"


def v15(*, two_d: bool = False, map_c: str = MAP_C):
    """The maker of v15's entries: clusters of CM tile rows (or, `two_d`, CM tile rows by CN tile columns, each rank
    loading 1 / CN of its A tile's rows into every rank of its row), with C's map `map_c`."""
    if two_d:
        return tma_ws_kernel("15_tma_ws_multicast.cu", "gemm_tma_ws_multicast",
                             grid="CM * CN * min(sm_count // (CM * CN), max_active_clusters, "
                                  "ceil(ceil(N / BN) / CN) * ceil(ceil(M / (64 * CWG)) / CM))",
                             cluster="[CM * CN, 1, 1]", a_rows="64 * CWG / CN", shared_bytes=SHARED_BYTES,
                             maps=(map_c,))
    return tma_ws_kernel("15_tma_ws_multicast.cu", "gemm_tma_ws_multicast",
                         grid="CM * min(sm_count // CM, max_active_clusters, "
                              "ceil(N / BN) * ceil(ceil(M / (64 * CWG)) / CM))",
                         cluster="[CM, 1, 1]", shared_bytes=SHARED_BYTES, maps=(map_c,))


V15 = v15()

# Each input type's operands: its types, layout and scales, the K elements of a 128-byte row, and B's box (and its
# swizzle where not 128 bytes).
TYPES = {
    "bf16-out": dict(types="{a: bf16, c: bf16}", layout="NN", scales="", bk=64, b_box="[64, 64]"),
    "bf16": dict(types="{a: bf16, c: fp32}", layout="NN", scales="", bk=64, b_box="[64, 64]"),
    # BN 96 with B row-major: three boxes of 32 columns a stage, in 64-byte rows with the 64-byte swizzle.
    "bf16-out-96": dict(types="{a: bf16, c: bf16}", layout="NN", scales="", bk=64, b_box="[64, 32]", b_swizzle="64B"),
    "bf16-96": dict(types="{a: bf16, c: fp32}", layout="NN", scales="", bk=64, b_box="[64, 32]", b_swizzle="64B"),
    "tf32": dict(types="{a: tf32, c: fp32}", layout="NT", scales="", bk=32, b_box="[BN / CM, 32]"),
    "fp8": dict(types="{a: e4m3, c: bf16}", layout="NT", scales="scales: {a: 0.5, b: 2.0}", bk=128,
                b_box="[BN / CM, 128]"),
}

FORMS = [   # name, input type, params
    ("bf16-out", "bf16-out",
     "{ELEM: 16, BT: 0, STAGES: 4, GROUP: 8, OUT: 16, CM: [1, 2, 4], STORE: [0, 1, 2], CWG: 2, BN: 256}"),
    ("bf16", "bf16",
     "{ELEM: 16, BT: 0, STAGES: 4, GROUP: 8, OUT: 32, CM: [1, 2], STORE: [0, 1, 2], CWG: 2, BN: 256}"),
    ("tf32", "tf32",
     "{ELEM: 32, BT: 1, STAGES: 4, GROUP: 8, OUT: 32, CM: [1, 2], STORE: [0, 1, 2], CWG: 2, BN: 256}"),
    ("fp8", "fp8", "{ELEM: 8, BT: 1, STAGES: 3, GROUP: 16, OUT: 16, CM: [1, 2], STORE: [0, 1, 2], CWG: 2, BN: 256}"),
    # Narrow tiles (the small shapes'): 64 or 128 rows by 64 or 128 columns; at BN 64 and CM 2 one rank loads the
    # tile's one B box for both (bf16), or each rank 32 of its 64 K-major rows (tf32, fp8).
    ("bf16-out-narrow", "bf16-out",
     "{ELEM: 16, BT: 0, STAGES: 6, GROUP: 8, OUT: 16, CM: [1, 2], STORE: [0, 1, 2], CWG: 1, BN: 64}"),
    ("bf16-narrow", "bf16", "{ELEM: 16, BT: 0, STAGES: 6, GROUP: 8, OUT: 32, CM: 2, STORE: 1, CWG: 2, BN: 128}"),
    ("tf32-narrow", "tf32",
     "{ELEM: 32, BT: 1, STAGES: 6, GROUP: 8, OUT: 32, CM: [1, 2], STORE: 1, CWG: [1, 2], BN: 64}"),
    ("fp8-narrow", "fp8", "{ELEM: 8, BT: 1, STAGES: 4, GROUP: 8, OUT: 16, CM: 2, STORE: 1, CWG: 1, BN: 128}"),
    # Tiles of 192 rows (three consumer warpgroups) or 192 columns: three B boxes, which a cluster of four shares with
    # one rank loading none; at CM 2, 96 K-major rows of B a rank (tf32).
    ("bf16-out-192", "bf16-out",
     "{ELEM: 16, BT: 0, STAGES: 3, GROUP: 8, OUT: 16, CM: [1, 2, 4], STORE: [0, 1, 2], CWG: 3, BN: 192}"),
    ("bf16-192", "bf16", "{ELEM: 16, BT: 0, STAGES: 3, GROUP: 8, OUT: 32, CM: 2, STORE: 1, CWG: 2, BN: 192}"),
    ("tf32-192", "tf32",
     "{ELEM: 32, BT: 1, STAGES: 3, GROUP: 8, OUT: 32, CM: [1, 2], STORE: [1, 2], CWG: [2, 3], BN: 192}"),
    ("fp8-tall", "fp8", "{ELEM: 8, BT: 1, STAGES: 3, GROUP: 8, OUT: 16, CM: 2, STORE: 1, CWG: 3, BN: 128}"),
    ("bf16-out-tall", "bf16-out", "{ELEM: 16, BT: 0, STAGES: 4, GROUP: 8, OUT: 16, CM: 2, STORE: 1, CWG: 3, BN: 64}"),
    # Tiles 96 columns wide: B row-major in three 32-column boxes a stage, shared by ranks that load one or two boxes
    # (CM 2) or one or none (CM 4); K-major B (tf32, fp8) 48 or 24 rows a rank. bf16 out in three chunks of 32 columns
    # (64-byte rows), fp32 out in three of 32 columns (128-byte rows).
    ("bf16-out-96", "bf16-out-96",
     "{ELEM: 16, BT: 0, STAGES: 4, GROUP: 8, OUT: 16, CM: [1, 2, 4], STORE: [0, 1, 2], CWG: [1, 3], BN: 96}"),
    ("bf16-96", "bf16-96", "{ELEM: 16, BT: 0, STAGES: 4, GROUP: 8, OUT: 32, CM: 2, STORE: 1, CWG: 2, BN: 96}"),
    ("tf32-96", "tf32", "{ELEM: 32, BT: 1, STAGES: 4, GROUP: 8, OUT: 32, CM: [1, 2, 4], STORE: 1, CWG: 1, BN: 96}"),
    ("fp8-96", "fp8", "{ELEM: 8, BT: 1, STAGES: 4, GROUP: 8, OUT: 16, CM: 2, STORE: 0, CWG: 1, BN: 96}"),
]

# Two-dimensional clusters, on shapes whose tile columns are no multiple of CN (9 of 64 columns at N = 520), so that
# some ranks' tiles lie past N.
FORMS_2D = [
    ("bf16-out-2d", "bf16-out",
     "{ELEM: 16, BT: 0, STAGES: 4, GROUP: 8, OUT: 16, CM: [1, 2], STORE: [0, 1], CWG: 1, BN: 64, CN: [2, 4]}"),
    ("bf16-out-2d-192", "bf16-out",
     "{ELEM: 16, BT: 0, STAGES: 3, GROUP: 8, OUT: 16, CM: 1, STORE: 1, CWG: 3, BN: 192, CN: 2}"),
    ("bf16-out-96-2d", "bf16-out-96",
     "{ELEM: 16, BT: 0, STAGES: 8, GROUP: 8, OUT: 16, CM: [1, 2], STORE: [1, 2], CWG: 1, BN: 96, CN: 2}"),
    ("tf32-2d", "tf32", "{ELEM: 32, BT: 1, STAGES: 4, GROUP: 8, OUT: 32, CM: 2, STORE: 1, CWG: 2, BN: 128, CN: 2}"),
    ("fp8-2d", "fp8", "{ELEM: 8, BT: 1, STAGES: 4, GROUP: 8, OUT: 16, CM: 2, STORE: 1, CWG: 1, BN: 128, CN: 2}"),
]


def entries(forms, *, two_d: bool) -> list[str]:
    """The spec entries of `forms` (name, input type, params); 96-column bf16 out takes C's 64-byte-swizzled map."""
    return [v15(two_d=two_d, map_c=MAP_C_64 if kind == "bf16-out-96" else MAP_C)(name=name, params=params,
                                                                                **TYPES[kind])
            for name, kind, params in forms]


KERNELS = "".join([*entries(FORMS, two_d=False), *entries(FORMS_2D, two_d=True)])


def test_every_v15_form_passes_on_shapes_cut_by_m_n_and_k(tmp_path):
    found = verify_only(write_spec(tmp_path, KERNELS, SHAPES))
    assert len(found) == 97 * len(SHAPES)        # bf16-out 9, bf16, tf32, fp8 6 each; narrow 12; 192 20; 96 23; 2-D 15
    assert not not_passing(found), not_passing(found)


def test_the_copy_engine_epilogue_alternates_its_buffers_across_a_blocks_tiles(tmp_path):
    # An odd number of staged chunks a tile (one at 64 bf16 columns, three at 96 and 192), a block of many tiles, each
    # of 4 K-tiles, and a ring deep enough that the next tile's chunk is staged while the copy engine still reads the
    # last one: a tile's chunks must not land in the buffer of the chunk just handed over (by the warpgroup's leader at
    # STORE 1, by each warp at STORE 2).
    kernels = "".join([
        V15(name="bf16-out-one-chunk", **TYPES["bf16-out"],
            params="{ELEM: 16, BT: 0, STAGES: [10, 13], GROUP: 8, OUT: 16, CM: 1, STORE: [1, 2], CWG: 1, BN: 64}"),
        V15(name="bf16-out-three-chunks", **TYPES["bf16-out"],
            params="{ELEM: 16, BT: 0, STAGES: 3, GROUP: 8, OUT: 16, CM: [1, 2], STORE: [1, 2], CWG: 3, BN: 192}"),
        v15(map_c=MAP_C_64)(
            name="bf16-out-96-three-chunks", **TYPES["bf16-out-96"],
            params="{ELEM: 16, BT: 0, STAGES: 10, GROUP: 8, OUT: 16, CM: 1, STORE: [1, 2], CWG: 1, BN: 96}"),
    ])
    # 65 x 33 tiles of 64 x 64, 22 x 11 of 192 x 192, 65 x 22 of 64 x 96
    found = verify_only(write_spec(tmp_path, kernels, ["4104x2064x208"]))
    assert len(found) == 10
    assert not not_passing(found), not_passing(found)


def test_a_tiles_last_k_tile_multiplies_only_its_k_steps_that_hold_k(tmp_path):
    # The suite's awkward forms (64 x 96 in clusters of 2 x 2, 192 x 192) and a cluster of two in tf32 and fp8.
    kernels = "".join([
        *entries([("bf16-out-96-2d", "bf16-out-96",
                   "{ELEM: 16, BT: 0, STAGES: 8, GROUP: 8, OUT: 16, CM: 2, STORE: 2, CWG: 1, BN: 96, CN: 2}")],
                 two_d=True),
        *entries([("bf16-out-192", "bf16-out",
                   "{ELEM: 16, BT: 0, STAGES: 3, GROUP: 8, OUT: 16, CM: 2, STORE: 1, CWG: 3, BN: 192}"),
                  ("tf32", "tf32",
                   "{ELEM: 32, BT: 1, STAGES: 4, GROUP: 8, OUT: 32, CM: 2, STORE: 1, CWG: 2, BN: 128}")],
                 two_d=False),
    ])
    fp8 = "".join(entries([("fp8", "fp8", "{ELEM: 8, BT: 1, STAGES: 4, GROUP: 8, OUT: 16, CM: 2, STORE: 2, CWG: 1, "
                                          "BN: 128}")], two_d=False))
    found = verify_k_tails(tmp_path, kernels, fp8)
    assert len(found) == 3 * len(K_TAIL_SHAPES) + len(K_TAIL_SHAPES_FP8)
    assert not not_passing(found), not_passing(found)
