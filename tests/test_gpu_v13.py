"""v13 (kernels/13_tma_ws_split.cu) on a GPU: FP8, TF32 in layout NT and BF16, unsplit and with K split across a
cluster, each checked against the float64 reference on shapes cut by M, N and K."""

from __future__ import annotations

import dataclasses

import pytest

from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.state import RunOptions
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.dispatch import select_kernel
from driver_gemm.status import Status

from conftest import SPECS
from gpu_specs import (K_TAIL_SHAPES, K_TAIL_SHAPES_FP8, not_passing, statuses, tma_ws_kernel, verify_k_tails,
                        verify_only, write_spec)

pytestmark = pytest.mark.gpu

# 1001x520x784: M odd, N and K no multiple of a tile (K % 16 == 0: fp8 rows of whole 16 bytes). 4104x1032x208:
# 165 tiles of 128 x 256, so a cluster takes several tiles; K of 2 (fp8), 4 (bf16) and 7 (tf32) K-tiles, so
# that a split of 8 leaves some ranks no K-tile at all and a split of 2 or 4 cuts K unevenly. 16x2048x1024: decode.
SHAPES = ["1001x520x784", "4104x1032x208", "16x2048x1024"]

V13 = tma_ws_kernel("13_tma_ws_split.cu", "gemm_tma_ws_split",
                    grid="SPLITS * min(sm_count // SPLITS, max_active_clusters, "
                         "ceil(N / BN) * ceil(M / (64 * CWG)))",
                    cluster="[SPLITS, 1, 1]",
                    shared_bytes="STAGES * (64 * CWG + 64 * ceil(BN / 64)) * 128 + 16 * STAGES + 1024")

KERNELS = "".join([
    V13(name="bf16", types="{a: bf16, c: fp32}", layout="NN", scales="", bk=64, b_box="[64, 64]",
        params="{ELEM: 16, BT: 0, CWG: [1, 2], STAGES: 4, GROUP: 8, OUT: 32, SPLITS: [1, 8], "
                      "BN: [64, 128, 256]}"),
    V13(name="bf16-out", types="{a: bf16, c: bf16}", layout="NN", scales="", bk=64, b_box="[64, 64]",
        params="{ELEM: 16, BT: 0, CWG: [1, 2], STAGES: 4, GROUP: 8, OUT: 16, SPLITS: [1, 8], "
                      "BN: [64, 128, 256]}"),
    V13(name="tf32", types="{a: tf32, c: fp32}", layout="NT", scales="", bk=32, b_box="[BN, 32]",
        params="{ELEM: 32, BT: 1, CWG: [1, 2], STAGES: 4, GROUP: 8, OUT: 32, SPLITS: [1, 2], "
                      "BN: [64, 128, 256]}"),
    V13(name="fp8", types="{a: e4m3, c: bf16}", layout="NT", scales="scales: {a: 0.5, b: 2.0}", bk=128,
        b_box="[BN, 128]",
        params="{ELEM: 8, BT: 1, CWG: 2, STAGES: 4, GROUP: 8, OUT: 16, SPLITS: [1, 4], BN: [64, 128, 256]}"),
    # 96 columns: two B boxes a stage of which the wgmma reads 96 columns (bf16), or 96 K-major rows (tf32); a split
    # of 4 shares the tile's 12 column groups 3 a rank.
    V13(name="bf16-out-96", types="{a: bf16, c: bf16}", layout="NN", scales="", bk=64, b_box="[64, 64]",
        params="{ELEM: 16, BT: 0, CWG: [1, 2], STAGES: 4, GROUP: 8, OUT: 16, SPLITS: [1, 4], BN: 96}"),
    V13(name="tf32-96", types="{a: tf32, c: fp32}", layout="NT", scales="", bk=32, b_box="[BN, 32]",
        params="{ELEM: 32, BT: 1, CWG: 1, STAGES: 4, GROUP: 8, OUT: 32, SPLITS: [1, 2], BN: 96}"),
    # OUT is the C the kernel writes: fp32 out needs a C of fp32
    V13(name="fp8-fp32-out", types="{a: e4m3, c: fp32}", layout="NT", scales="scales: {a: 0.5, b: 2.0}",
        bk=128, b_box="[BN, 128]",
        params="{ELEM: 8, BT: 1, CWG: 2, STAGES: 4, GROUP: 8, OUT: 32, SPLITS: [1, 4], BN: [64, 128, 256]}"),
])


def test_every_v13_form_passes_split_or_not_on_shapes_cut_by_m_n_and_k(tmp_path):
    found = verify_only(write_spec(tmp_path, KERNELS, SHAPES))
    assert len(found) == 54 * len(SHAPES)          # bf16, bf16-out and tf32 12 configurations each, fp8 forms 6, 96: 6
    assert not not_passing(found), not_passing(found)


def test_a_tiles_last_k_tile_multiplies_only_its_k_steps_that_hold_k(tmp_path):
    # The last K-tile of K runs only its k steps that hold any of K (1 to 4); with a split, only the last rank's slice
    # ends there.
    kernels = "".join([
        V13(name="bf16-out", types="{a: bf16, c: bf16}", layout="NN", scales="", bk=64, b_box="[64, 64]",
            params="{ELEM: 16, BT: 0, CWG: 1, STAGES: 4, GROUP: 8, OUT: 16, SPLITS: [1, 2], BN: 64}"),
        V13(name="tf32", types="{a: tf32, c: fp32}", layout="NT", scales="", bk=32, b_box="[BN, 32]",
            params="{ELEM: 32, BT: 1, CWG: 2, STAGES: 4, GROUP: 8, OUT: 32, SPLITS: [1, 2], BN: 128}"),
    ])
    fp8 = V13(name="fp8", types="{a: e4m3, c: bf16}", layout="NT", scales="scales: {a: 0.5, b: 2.0}", bk=128,
              b_box="[BN, 128]", params="{ELEM: 8, BT: 1, CWG: 2, STAGES: 4, GROUP: 8, OUT: 16, SPLITS: [1, 2], "
                                       "BN: 128}")
    found = verify_k_tails(tmp_path, kernels, fp8)
    assert len(found) == 4 * len(K_TAIL_SHAPES) + 2 * len(K_TAIL_SHAPES_FP8)
    assert not not_passing(found), not_passing(found)


def test_the_fp8_spec_passes_against_cublaslt_fp8_at_its_small_shape():
    spec = load_spec(SPECS / "fp8.yaml").select(shapes=["1024x512x1024"])
    run = run_spec(spec, options=RunOptions(time=False))
    found = statuses(run)
    assert found["v13-fp8[ELEM=8,BT=1,CWG=2,STAGES=4,GROUP=8,OUT=16,SPLITS=1,BN=256]",
                 "1024x512x1024"][0] == Status.PASS
    assert found["v13-fp8-fp32-out[ELEM=8,BT=1,CWG=2,STAGES=4,GROUP=8,OUT=32,SPLITS=1,BN=256]",
                 "1024x512x1024"][0] == Status.PASS
    baselines = [case for case in run.cases if case.is_baseline]
    assert baselines and all(case.ok for case in baselines), [(c.kernel, c.status, c.message) for c in baselines]


def _run_the_suites_tables(names: list[str], shapes: list[str]) -> list:
    """specs/suite.yaml's `names` on `shapes`, checked against the float64 reference and not timed: every case
    runs the params its table picks for its shape, and every one passes. The run's cases."""
    spec = load_spec(SPECS / "suite.yaml").select(kernels=names, shapes=shapes)
    run = run_spec(dataclasses.replace(spec, baseline=False), options=RunOptions(time=False))
    kernels = {kernel.name: kernel for kernel in spec.kernels}
    assert sorted((case.name, case.shape.label) for case in run.cases) == sorted(
        (name, shape.label) for name in names for shape in spec.shapes)
    for case in run.cases:
        chosen = select_kernel(kernels[case.name], spec.dispatch[case.name], case.shape, kernels)
        assert dict(case.params) == dict(chosen.params), (case.name, case.shape.label)
    found = statuses(run)
    assert len(found) == len(names) * len(shapes)
    assert not not_passing(found), found
    return run.cases


def test_the_suites_dispatched_kernels_pass_where_their_table_splits_k():
    # A decode shape, the seed's stand-in and an awkward one matched by `when` ranges: each runs the params its
    # table gives it, and at least one of them splits K across a cluster.
    cases = _run_the_suites_tables(["v13-bf16", "v13-bf16-out", "v13-tf32"],
                                   ["1x4096x4096", "1001x520x776", "127x4104x1032"])
    assert any(case.params.get("SPLITS", 1) > 1 for case in cases)    # v14 and v15 members have no SPLITS


def test_the_suites_tables_pass_on_shapes_between_decode_and_large_with_each_form_their_conditions_pick():
    # M past 128 on shapes none of the suite's: each form the tables' `if:` conditions pick where the 128 x 256 tile
    # would leave SMs idle, checked against the float64 reference. Each shape's (tile rows, columns) for fp32 out,
    # bf16 out and TF32.
    picks = {"1024x4096x256": [(128, 256)] * 3,                 # 128 wide tiles: 0.97 of a wave
             "512x4096x256": [(128, 128)] * 3,                  # alone (fp32 out) or in clusters of two tile rows
             "256x4096x2048": [(128, 128)] * 3,                 # K split two ways
             "1000x1000x264": [(64, 64), (64, 128), (64, 128)],  # 64 x 128 in pairs (bf16 out, TF32)
             "520x512x264": [(64, 64)] * 3}                     # too few tiles for any wider form
    names = ["v13-bf16", "v13-bf16-out", "v13-tf32"]
    for case in _run_the_suites_tables(names, list(picks)):
        tile = (64 * case.params["CWG"], case.params["BN"])
        assert tile == picks[case.shape.label][names.index(case.name)], (case.name, case.shape.label)


def test_the_suites_tables_pass_where_they_pick_the_128_x_192_tile():
    # v15's 128 x 192 tile, which the bf16-out and TF32 tables take where its waves waste less than 128 x 256's, on
    # shapes of odd M whose N is no multiple of 192 nor K of the K-tile, checked against the float64 reference.
    for case in _run_the_suites_tables(["v13-bf16-out", "v13-tf32"], ["1001x2312x1032", "1535x1544x2056"]):
        assert (64 * case.params["CWG"], case.params["BN"], case.params["CM"]) == (128, 192, 1), \
            (case.name, case.shape.label)


def test_the_suites_tables_pass_at_m_129_to_320_with_each_form_their_band_entries_pick():
    # The band entries of the bf16-out and TF32 tables (M of 129 to 320, N and K of 4096 or more), each form on a
    # shape of odd M whose N or K is no multiple of its tile, checked against the float64 reference. Each shape's
    # (operands swapped, tile rows, columns, blocks a cluster) in both tables, or per table where they differ.
    picks = {"263x11008x4104": (False, 128, 256, 1),   # the 128 x 256 tile alone
             "303x5128x4104": (False, 128, 256, 2),    # 128 x 256 with K split two ways
             "239x5128x13832": (False, 128, 128, 2),   # 128 x 128 in clusters of two tile rows
             "207x4104x4096": (False, 128, 128, 2),    # 128 x 128 with K split two ways
             "281x8200x4096": (True, 160, 128, 1),     # v14: 160 rows of C by 128 columns
             "231x4104x4096": (True, 128, 128, 2),     # v14: 128 x 128 with K split two ways
             # v14: 128 rows by 192 columns in TF32; 128 x 256 alone in bf16 out
             "255x11000x4104": {"v13-tf32": (True, 128, 192, 1), "v13-bf16-out": (False, 128, 256, 1)},
             # M of 129 to 192: v14's tall row tiles, and (bf16 out) its 64-row tiles where none of those holds
             "181x11000x4104": (True, 192, 128, 1),    # v14: one 192-row tile of 128 columns
             "147x8200x4104": (True, 160, 128, 2),     # v14: 160 x 128 with K split two ways
             "185x4104x4104": (True, 96, 128, 2),      # v14: two 96-row tiles, K split two ways
             "141x5128x4104": (True, 160, 192, 4),     # v14: 160 x 192 with K split four ways
             "171x5384x4104": (True, 192, 192, 4),     # v14: 192 x 192 with K split four ways
             "171x6152x4104": {"v13-bf16-out": (True, 64, 128, 1), "v13-tf32": (False, 128, 128, 2)},
             # M of 257 to 272: two row tiles of 136 where they fill most of a wave (128-row tiles take three)
             "265x6152x4104": (True, 136, 128, 1)}
    for case in _run_the_suites_tables(["v13-bf16-out", "v13-tf32"], list(picks)):
        if "MT" in case.params:
            tile = (True, case.params["MT"], 64 * case.params["CWG"], case.params["SPLITS"])
        else:
            cluster = case.params.get("CM", case.params.get("SPLITS"))
            tile = (False, 64 * case.params["CWG"], case.params["BN"], cluster)
        expected = picks[case.shape.label]
        expected = expected[case.name] if isinstance(expected, dict) else expected
        assert tile == expected, (case.name, case.shape.label)
