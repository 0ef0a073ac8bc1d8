"""specs/suite.yaml, specs/fp8.yaml and the sweeps of v14, v15 and v16 without a GPU: the suite's shapes,
what its dispatch tables pick for each, the blocks that makes on an H200's 132 SMs, and that every form compiles and
plans."""

import dataclasses

import pytest

from driver_gemm.cli import EXIT_OK, main
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_launch
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.dispatch import select_kernel
from driver_gemm.specfile.expr import wave_efficiency
from driver_gemm.specfile.model import Shape, parse_shape_text

from conftest import SPECS

SM_COUNT = 132
H200 = dataclasses.replace(arch_limits("sm_90"), typical_sm_count=SM_COUNT)
SUITE = load_spec(SPECS / "suite.yaml")
DECODE = [(m, n, k) for m in (1, 16, 64, 128) for n, k in ((4096, 4096), (8192, 8192), (14336, 4096))]


def _labels(spec):
    return {shape.label for shape in spec.shapes}


def test_the_suite_holds_the_seed_squares_decode_prefill_and_awkward_shapes():
    labels = _labels(SUITE)
    wanted = ["1024x512x1024", "4096x4096x4096", "8192x8192x8192", "4096x14336x4096", "4096x4096x14336",
              "8192x1024x8192", *(f"{m}x{n}x{k}" for m, n, k in DECODE)]
    assert set(wanted) <= labels
    awkward = [s for s in SUITE.shapes if s.M % 64 and s.N % 256 and s.K % 64]   # no dimension a whole tile
    assert len(awkward) >= 2 and any(s.M % 2 for s in awkward)


def _blocks(kernel, shape):
    """The blocks of `kernel`'s grid at `shape`, planned offline for an H200's 132 SMs."""
    return plan_launch(kernel, shape, H200).config.total_blocks, kernel.params


@pytest.mark.parametrize("name", ["v13-bf16", "v13-bf16-out", "v13-tf32"])
def test_the_dispatch_table_gives_work_to_the_sms_that_wide_tiles_alone_would_leave_idle(name):
    kernel = next(k for k in SUITE.kernels if k.name == name)
    table = SUITE.dispatch[name]
    kernels = {k.name: k for k in SUITE.kernels}
    for shape in SUITE.shapes:
        chosen = select_kernel(kernel, table, shape, kernels)
        blocks, params = _blocks(chosen, shape)
        cluster = params.get("SPLITS", params.get("CM"))
        assert blocks % cluster == 0 and blocks <= SM_COUNT, (shape.label, params)
        wide_tiles = -(-shape.N // 256) * -(-shape.M // 128)               # v12p's 128 x 256 tiles
        if chosen.function == "gemm_tma_ws_multicast":
            # a member: v15 (B shared by a cluster of CM tiles one above the other): on v12p's tile only where those
            # tiles fill the GPU, on a narrower one only where they would not, its tiles then giving a quarter of the
            # SMs or more their work; every cluster has a tile row of its own
            tile_rows = -(-shape.M // (64 * params["CWG"]))
            if params["BN"] == 256:
                assert params["CWG"] == 2 and shape.M > 128 and wide_tiles >= 3 * SM_COUNT // 2, (shape.label, params)
            else:
                assert wide_tiles < 3 * SM_COUNT // 2, (shape.label, params)
                assert -(-shape.N // params["BN"]) * tile_rows >= SM_COUNT // 4, (shape.label, params)
            assert tile_rows >= params["CM"], (shape.label, params)
            continue
        if chosen.name != name:
            # a member: v14, for decode shapes of M up to 64 only, its MT rows holding all of M (B read once), and
            # its 64 CWG-column tiles, split or not, giving a quarter of the SMs or more their work
            assert chosen.function == "gemm_tma_ws_swap" and shape.M <= 64 <= shape.N, (shape.label, params)
            assert shape.M <= params["MT"], (shape.label, params)
            tiles = -(-shape.N // (64 * params["CWG"]))
            assert params["SPLITS"] <= 4 and tiles * params["SPLITS"] >= SM_COUNT // 4, (shape.label, params)
            continue
        tiles = -(-shape.N // params["BN"]) * -(-shape.M // (64 * params["CWG"]))
        if shape.M <= 128 or wide_tiles < 3 * SM_COUNT // 2:
            # skinny, or under one and a half waves of wide tiles (one full wave and a tail): a narrower tile or
            # a split of K, no deeper than 4 (the partial sums' exchange costs more than idle SMs: v13's header),
            # gives a quarter of the SMs or more their work
            assert params["SPLITS"] > 1 or params["BN"] < 256, (shape.label, params)
            assert params["SPLITS"] <= 4 and tiles * params["SPLITS"] >= SM_COUNT // 4, (shape.label, params)
        else:                            # the tiles fill the GPU: v12p's persistent form, where no v15 member runs
            assert params == {**params, "SPLITS": 1, "CWG": 2, "BN": 256}, (shape.label, params)
            assert not any(kernels[member].function == "gemm_tma_ws_multicast" for member in table.members)


def test_the_large_shapes_of_the_bf16_out_and_tf32_tables_run_v15_with_b_multicast_beyond_m_4096_or_n_8192():
    # bf16 out: C through the copy engine, B multicast to a cluster of two once M passes 4096 or N 8192, where each
    # warp stores its own rows; TF32: a cluster of two throughout (specs/sweep-v15.yaml's and
    # sweep-v15-epilogue.yaml's runs, docs/performance.md)
    kernels = {k.name: k for k in SUITE.kernels}
    large = [s for s in SUITE.shapes if s.M > 128 and -(-s.N // 256) * -(-s.M // 128) >= 3 * SM_COUNT // 2]
    assert {s.label for s in large} == {"8192x1024x8192", "4096x14336x4096", "4096x4096x14336", "4096x4096x4096",
                                        "8192x8192x8192"}
    for shape in large:
        bf16 = select_kernel(kernels["v13-bf16-out"], SUITE.dispatch["v13-bf16-out"], shape, kernels)
        shared = shape.M > 4096 or shape.N > 8192
        assert bf16.name == "v15-bf16-out" and bf16.params["STORE"] == (2 if shared else 1), shape.label
        assert bf16.params["CM"] == (2 if shared else 1), shape.label
        tf32 = select_kernel(kernels["v13-tf32"], SUITE.dispatch["v13-tf32"], shape, kernels)
        assert tf32.name == "v15-tf32" and tf32.params["CM"] == 2, shape.label
        fp32_out = select_kernel(kernels["v13-bf16"], SUITE.dispatch["v13-bf16"], shape, kernels)
        assert fp32_out.name == "v13-bf16", shape.label


# Shapes between the decode and the large ones, none of them in the suite: M of 129 to 8192 against N of 256 to
# 14336, K short and long.
BETWEEN = [Shape(m, n, k) for m in (129, 200, 256, 384, 512, 640, 768, 1000, 1200, 1536, 2048, 3000, 4096, 5000, 8192)
           for n in (256, 768, 1000, 2048, 3072, 4096, 8192, 11008, 14336) for k in (512, 4096)]


def _tile(chosen):
    """The rows and columns of C a block of the chosen form computes: MT by 64 CWG for v14 (the operands
    swapped), 64 CWG by BN for v13 and v15."""
    if chosen.name.startswith("v14"):
        return chosen.params["MT"], 64 * chosen.params["CWG"]
    return 64 * chosen.params["CWG"], chosen.params["BN"]


def _efficiency(chosen, shape):
    """The share of what the chosen form's waves compute that lies in C: a cluster of CM tile rows (v15) or of a
    tile's SPLITS parts of K (v13, v14) takes one of 132 // cluster slots."""
    rows, columns = _tile(chosen)
    if chosen.name.startswith("v15"):
        cluster = chosen.params["CM"]
        return wave_efficiency(shape.M, shape.N, rows * cluster, columns, SM_COUNT // cluster)
    return wave_efficiency(shape.M, shape.N, rows, columns, SM_COUNT // chosen.params["SPLITS"])


def _wide_efficiency(name, shape):
    """The same for the family's own 128 x 256 form on `shape`: alone, or in clusters of two tile rows (TF32
    throughout, bf16 out past M = 4096 or N = 8192), whichever the table has there."""
    alone = wave_efficiency(shape.M, shape.N, 128, 256, SM_COUNT)
    pairs = wave_efficiency(shape.M, shape.N, 256, 256, SM_COUNT // 2)
    if name == "v13-bf16":
        return alone
    if name == "v13-tf32":
        return pairs
    return max(alone if shape.M <= 4096 else 0.0, pairs if shape.M > 4096 or shape.N > 8192 else 0.0)


@pytest.mark.parametrize("name", ["v13-bf16", "v13-bf16-out", "v13-tf32"])
def test_between_decode_and_large_the_tables_leave_the_wide_tile_only_for_one_that_wastes_less(name):
    # Past M = 128 a table weighs each of its tilings' wave efficiency (wave_efficiency in its `if:` conditions):
    # the 128 x 256 tile wherever its waves are nearly all work, a narrower one only where its waves waste less
    # (v14's 64-row tiles too, for bf16 out at M up to 192).
    kernels = {k.name: k for k in SUITE.kernels}
    kernel, table = kernels[name], SUITE.dispatch[name]
    narrower = 0
    for shape in BETWEEN:
        chosen = select_kernel(kernel, table, shape, kernels)
        wide = _wide_efficiency(name, shape)
        if wide >= 0.9:
            assert _tile(chosen) == (128, 256), (shape.label, chosen.label)
        elif _tile(chosen)[1] < 256:
            assert _efficiency(chosen, shape) > wide, (shape.label, chosen.label)
            narrower += 1
    assert narrower >= len(BETWEEN) // 3       # the grid holds many shapes that the wide tile alone leaves idle


@pytest.mark.parametrize("shape, name, form", [
    # the forms specs/sweep-fill.yaml measured fastest on its shapes (checks/fill-narrow.json.gz, fill-wide.json.gz,
    # v14-band.json.gz): the kernel, the tile's rows and columns, and the cluster (CM or SPLITS)
    ("512x512x512", "v13-bf16-out", ("v13-bf16-out", 64, 64, 1)),      # 64 x 96 in 2 x 2 within a point
    ("1000x1000x1000", "v13-bf16-out", ("v15-bf16-out", 64, 128, 2)),
    ("1000x1000x1000", "v13-tf32", ("v15-tf32", 64, 128, 2)),
    ("256x4096x4096", "v13-tf32", ("v13-tf32", 128, 128, 2)),
    ("512x4096x4096", "v13-bf16-out", ("v15-bf16-out", 128, 128, 2)),
    ("384x3072x768", "v13-bf16-out", ("v15-bf16-out", 128, 128, 2)),
    ("2048x3072x2048", "v13-bf16-out", ("v15-bf16-out", 128, 128, 2)),
    ("2048x3072x2048", "v13-tf32", ("v15-tf32", 128, 128, 2)),
    ("2048x2048x2048", "v13-tf32", ("v15-tf32", 128, 256, 2)),
    ("1024x4096x4096", "v13-bf16-out", ("v15-bf16-out", 128, 256, 1)),
    ("2048x4096x4096", "v13-bf16-out", ("v15-bf16-out", 128, 256, 1)),
    ("160x5120x5120", "v13-bf16-out", ("v14-bf16-out", 64, 128, 1)),
    ("256x8192x4096", "v13-bf16-out", ("v15-bf16-out", 128, 128, 2)),
    # 3 x 43 tiles of 128 x 256: 129 blocks alone fill a wave, 86 clusters of two tile rows take two; 98.6% against
    # 57.4% (checks/off-suite-1.json.gz and its before)
    ("384x11008x4096", "v13-bf16-out", ("v15-bf16-out", 128, 256, 1)),
    # specs/sweep-band.yaml's shapes (checks/band-swap.json.gz beside band-swap-tables.json.gz): v14's swapped
    # tiles (MT rows by 64 CWG columns) but for bf16 out at 256x11008x4096, where the 128 x 256 tile stays ahead
    ("224x4096x4096", "v13-bf16-out", ("v14-bf16-out", 128, 128, 2)),
    ("224x4096x4096", "v13-tf32", ("v14-tf32", 128, 128, 2)),
    ("256x11008x4096", "v13-bf16-out", ("v15-bf16-out", 128, 256, 1)),
    ("256x11008x4096", "v13-tf32", ("v14-tf32", 128, 192, 1)),
    ("288x8192x8192", "v13-bf16-out", ("v14-bf16-out", 160, 128, 1)),
    ("288x8192x8192", "v13-tf32", ("v14-tf32", 160, 128, 1)),
    ("320x5120x5120", "v13-bf16-out", ("v14-bf16-out", 160, 128, 1)),
    ("320x5120x5120", "v13-tf32", ("v14-tf32", 160, 128, 1)),
    # M of 129 to 192 (checks/band-tall.json.gz beside band-tall-tables.json.gz): one swapped row tile of 160 or
    # 192 where it is nearly full, or two of 96, K split two ways where the tiles are too few for one wave
    ("160x14336x4096", "v13-bf16-out", ("v14-bf16-out", 160, 128, 1)),
    ("160x14336x4096", "v13-tf32", ("v14-tf32", 160, 128, 1)),
    ("144x8192x8192", "v13-bf16-out", ("v14-bf16-out", 160, 128, 2)),
    ("144x8192x8192", "v13-tf32", ("v14-tf32", 160, 128, 2)),
    ("192x4096x4096", "v13-bf16-out", ("v14-bf16-out", 96, 128, 2)),
    ("192x4096x4096", "v13-tf32", ("v14-tf32", 96, 128, 2)),
    ("176x11008x4096", "v13-bf16-out", ("v14-bf16-out", 192, 128, 1)),
    ("176x11008x4096", "v13-tf32", ("v14-tf32", 192, 128, 1)),
    # M of 257 to 272 (checks/band-fine.json.gz beside band-fine-tables.json.gz): two row tiles of 136, where
    # 128-row tiles take three and 160-row ones stand 15% empty
    ("264x6144x4096", "v13-bf16-out", ("v14-bf16-out", 136, 128, 1)),
    ("264x6144x4096", "v13-tf32", ("v14-tf32", 136, 128, 1)),
    # the 128 x 192 tile where its waves waste less than 128 x 256's (checks/mid-192.json.gz beside mid-tables and
    # mid-wide); where it takes a second wave, the 128 x 256 tile still wins
    ("1536x1536x1536", "v13-bf16-out", ("v15-bf16-out", 128, 192, 1)),
    ("1536x1536x1536", "v13-tf32", ("v15-tf32", 128, 192, 1)),
    ("1280x2048x2048", "v13-bf16-out", ("v15-bf16-out", 128, 192, 1)),
    ("1280x2048x2048", "v13-tf32", ("v15-tf32", 128, 192, 1)),
    ("2048x1536x1536", "v13-bf16-out", ("v15-bf16-out", 128, 192, 1)),
    ("2048x1536x1536", "v13-tf32", ("v15-tf32", 128, 192, 1)),
    ("1792x1792x1792", "v13-bf16-out", ("v15-bf16-out", 128, 256, 1)),
    ("1792x1792x1792", "v13-tf32", ("v15-tf32", 128, 256, 2)),
    # K under 1024, shorter than any K it was measured on: the 128 x 256 tile
    ("1536x1536x1000", "v13-bf16-out", ("v15-bf16-out", 128, 256, 1)),
])
def test_the_tables_pick_the_measured_winners_between_decode_and_large(shape, name, form):
    kernels = {k.name: k for k in SUITE.kernels}
    chosen = select_kernel(kernels[name], SUITE.dispatch[name], parse_shape_text(shape), kernels)
    params = chosen.params
    assert (chosen.name, *_tile(chosen), params.get("CM", params.get("SPLITS"))) == form


# M of 129 to 320 against N and K of 4096 or more: the band whose entries weigh four tilings by how fast each ran
# there (specs/sweep-band.yaml).
BAND = [Shape(m, n, k) for m in (129, 136, 160, 176, 192, 193, 200, 224, 256, 257, 288, 300, 320)
        for n in (4096, 5120, 6144, 8192, 11008, 14336) for k in (4096, 8192, 13824)]
BAND_WEIGHTS = {(128, 256, 1): 1.0, (128, 256, 2): 0.74, (128, 128, "pairs"): 0.76, (128, 128, 2): 0.535}


def _band_efficiency(form, shape):
    rows, columns, cluster = form
    if cluster == "pairs":
        return wave_efficiency(shape.M, shape.N, 2 * rows, columns, SM_COUNT // 2)
    return wave_efficiency(shape.M, shape.N, rows, columns, SM_COUNT // cluster)


def _band_swap(name, shape):
    """The swapped tile (MT rows, 64 CWG columns, SPLITS) the bf16-out and TF32 tables take ahead of the four forms,
    or None: 160 x 128 where its waves are 60% full or more; at M up to 192, 192 x 128 where they are 55% full,
    then 160 x 128 and 96 x 128 split two ways where their tiles fit one wave of clusters of two that is 80% full,
    then 160 or 192 rows by 192 columns split four ways where their tiles fill 70% of a wave of clusters of four
    (bf16 out: else v14's 64-row tiles); at M of 257 to 272, 136 x 128 where its waves are 65% full; then (TF32)
    128 x 192 where its waves are 80% full, then 128 x 128 split two ways as the 160 and 96-row tiles are; each
    only where its row tiles are 85% full or more and its waves no emptier than the 128 x 256 tile's."""
    if name == "v13-bf16":
        return None
    wide = wave_efficiency(shape.M, shape.N, 128, 256, SM_COUNT)

    def rows_full(height):
        return shape.M >= 0.85 * height * -(-shape.M // height)

    def one_split_wave(height):
        tiles = -(-shape.M // height) * -(-shape.N // 128)
        return (rows_full(height) and tiles <= SM_COUNT // 2
                and wave_efficiency(shape.M, shape.N, height, 128, SM_COUNT // 2) >= max(0.8, wide))

    if rows_full(160) and wave_efficiency(shape.M, shape.N, 160, 128, SM_COUNT) >= max(0.6, wide):
        return 160, 128, 1
    if shape.M <= 192:
        if rows_full(192) and wave_efficiency(shape.M, shape.N, 192, 128, SM_COUNT) >= max(0.55, wide):
            return 192, 128, 1
        for height in (160, 96):
            if one_split_wave(height):
                return height, 128, 2
        # One row tile of 160 or 192 by 192 columns, K split four ways, where those tiles fill most of the 30
        # clusters of four the H200 holds at once.
        for height in (160, 192):
            if rows_full(height) and wave_efficiency(shape.M, shape.N, height, 192, 30) >= max(0.7, wide):
                return height, 192, 4
        if name == "v13-bf16-out":
            return 64, 128, 1
    if 257 <= shape.M <= 272 and rows_full(136) and (
            wave_efficiency(shape.M, shape.N, 136, 128, SM_COUNT) >= max(0.65, wide)):
        return 136, 128, 1
    if not rows_full(128):
        return None
    if name == "v13-tf32" and wave_efficiency(shape.M, shape.N, 128, 192, SM_COUNT) >= max(0.8, wide):
        return 128, 192, 1
    if one_split_wave(128):
        return 128, 128, 2
    return None


@pytest.mark.parametrize("name", ["v13-bf16", "v13-bf16-out", "v13-tf32"])
def test_in_the_band_the_tables_pick_the_tiling_of_the_highest_weighed_wave_efficiency(name):
    # Worked out here apart from the tables' `if:` text: v14's swapped tile where its waves are full enough (bf16
    # out and TF32), else the first of the four forms (in the tables' order) whose wave efficiency times its weight
    # is highest; fp32 out (v13 alone) has no clusters of tile rows. Up to M = 192, bf16 out takes v14's 64-row
    # tiles where no swapped tile holds.
    kernels = {k.name: k for k in SUITE.kernels}
    kernel, table = kernels[name], SUITE.dispatch[name]
    weights = {form: weight for form, weight in BAND_WEIGHTS.items() if name != "v13-bf16" or form[2] != "pairs"}
    seen, swapped = set(), set()
    for shape in BAND:
        chosen = select_kernel(kernel, table, shape, kernels)
        if any(entry.shape == shape for entry in table.entries):
            continue                 # an entry's own shape keeps the form measured there: the test above
        swap = _band_swap(name, shape)
        if swap is not None:
            assert chosen.name.startswith("v14"), (shape.label, chosen.label)
            assert (*_tile(chosen), chosen.params["SPLITS"]) == swap, (shape.label, chosen.label)
            swapped.add(swap)
            continue
        best = max(weights, key=lambda form: weights[form] * _band_efficiency(form, shape))
        params = chosen.params
        cluster = "pairs" if params.get("CM") == 2 else params.get("CM", params.get("SPLITS"))
        assert (64 * params["CWG"], params["BN"], cluster) == best, (shape.label, chosen.label)
        seen.add(best)
    assert seen == set(weights)      # the grid reaches every form
    swapped_tiles = {(160, 128, 1), (192, 128, 1), (160, 128, 2), (96, 128, 2), (136, 128, 1), (128, 128, 2),
                     (160, 192, 4), (192, 192, 4)}
    assert swapped == {"v13-bf16": set(), "v13-bf16-out": swapped_tiles | {(64, 128, 1)},
                       "v13-tf32": swapped_tiles | {(128, 192, 1)}}[name]     # the grid reaches each of them


def test_the_decode_shapes_of_the_bf16_out_and_tf32_tables_run_v14_up_to_m_64_and_v13_or_v15_above():
    # Above M = 64, bf16 out at N = 8192 runs v15's 64 x 128 tile in clusters of two tile rows.
    kernels = {k.name: k for k in SUITE.kernels}
    for name, member in (("v13-bf16-out", "v14-bf16-out"), ("v13-tf32", "v14-tf32")):
        for m, n, k in DECODE:
            shape = next(s for s in SUITE.shapes if (s.M, s.N, s.K) == (m, n, k))
            chosen = select_kernel(kernels[name], SUITE.dispatch[name], shape, kernels)
            above = "v15-bf16-out" if name == "v13-bf16-out" and n == 8192 else name
            assert chosen.name == (member if m <= 64 else above), (name, shape.label)
            if chosen.name == "v15-bf16-out":
                assert (chosen.params["CWG"], chosen.params["BN"], chosen.params["CM"]) == (1, 128, 2)
    fp32_out = SUITE.dispatch["v13-bf16"]          # no v14 form computes bf16 -> fp32 here: v13 throughout
    assert fp32_out.members == ()


def test_fp8_compiles_and_plans_offline(capsys):
    # NVRTC builds both forms for sm_90a and plan checks their tensor maps, cluster, shared memory and registers.
    assert main(["plan", str(SPECS / "fp8.yaml"), "--arch", "sm_90a", "-s", "4096x4096x4096"]) == EXIT_OK
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == "2 ok, 0 INVALID"


def test_the_v15_sweep_compiles_and_plans_offline(capsys):
    # NVRTC builds every form of kernels/15_tma_ws_multicast.cu the sweep names (clusters of 1 and 2, C from
    # registers or through the copy engine, in each type), and plan checks their maps, clusters and shared memory.
    assert main(["plan", str(SPECS / "sweep-v15.yaml"), "--arch", "sm_90a", "-s", "4096x4096x4096"]) == EXIT_OK
    forms = 8 + 4 + 8 + 8                 # bf16 out, fp32 out (GROUP 8 only), tf32, fp8: GROUP x CM x STORE
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == f"{forms + 3} ok, 0 INVALID"   # and v13 in 3 types


def test_the_v15_epilogue_sweep_plans_each_warps_stores_through_a_box_of_its_16_rows(capsys):
    # STORE 1 hands a warpgroup's 64 rows of a chunk to the copy engine, STORE 2 each warp's 16: C's map must follow,
    # on the 96-column tile (32-column chunks, 64-byte swizzle) and the 256-column one (64-column chunks).
    spec = SPECS / "sweep-v15-epilogue.yaml"
    assert main(["plan", str(spec), "--arch", "sm_90a", "-s", "1001x520x776"]) == EXIT_OK
    lines = capsys.readouterr().out.rstrip().splitlines()
    assert lines[-1] == "20 ok, 0 INVALID"      # 7 kernels x STORE 1, 2 (one of them x CM 1, 2), one of STORE 2, one of
                                                # STORE 0, 1, 2 (C's map unused at 0)
    boxes = {}
    for line in lines:
        if ": tensor map map_c:" in line:
            form, _, text = line.partition(" at 1001x520x776: tensor map map_c: ")
            boxes[form] = text.split(", box ")[1].split(" (")[0]
    store = {form: form.split("STORE=")[1][0] for form in boxes}
    assert sorted(store.values()) == ["0"] + ["1"] * 9 + ["2"] * 10
    for form, box in boxes.items():
        columns = "32" if "BN=96" in form or "OUT=32" in form else "64"    # 64-byte rows at BN 96; fp32 C: 32 columns
        assert box == f"{{{columns}, {16 if store[form] == '2' else 64}}}", (form, box)


@pytest.mark.parametrize("module, forms", [
    ("test_gpu_v15", 97),     # clusters of four, wholly empty ranks, narrow tiles, 192-row and -column ones, 96-column
                              # ones (B and C in 64-byte-swizzled boxes), clusters of tile rows by tile columns, and
                              # both copy-engine epilogues
    ("test_gpu_v16", 16),     # full grids (blocks with empty ranges) among them
])
def test_the_forms_of_a_gpu_test_plan_offline(module, forms, tmp_path, capsys):
    # A GPU test's forms on its shapes: what the GPU checks must first pass plan here.
    import importlib

    from gpu_specs import write_spec

    test = importlib.import_module(module)
    assert main(["plan", str(write_spec(tmp_path, test.KERNELS, test.SHAPES)), "--arch", "sm_90a"]) == EXIT_OK
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == f"{forms * len(test.SHAPES)} ok, 0 INVALID"


def test_the_v16_sweep_compiles_and_plans_offline_refusing_only_rings_over_shared_memory(capsys):
    # NVRTC builds every stream-K form of kernels/16_tma_ws_streamk.cu the sweep names; plan checks its maps, its
    # workspace and flags, and refuses exactly the rings that exceed a block's shared memory.
    import itertools

    assert main(["plan", str(SPECS / "sweep-v16.yaml"), "--arch", "sm_90a", "-s", "1001x520x776"]) != EXIT_OK
    lines = capsys.readouterr().out.rstrip().splitlines()
    forms = list(itertools.product((1, 2), (4, 8), (64, 128, 256)))                      # CWG, STAGES, BN
    fit = sum(stages * (64 * cwg + bn) * 128 + 16 * stages + 1024 <= 232448 for cwg, stages, bn in forms)
    assert fit == 9
    assert lines[-1] == f"{2 * fit} ok, {2 * (len(forms) - fit)} INVALID"                 # BF16 and TF32


def test_the_narrow_v15_sweep_compiles_and_plans_offline_refusing_only_forms_that_cannot_exist(capsys):
    # v15's copy-engine epilogue and B multicast on 64- and 128-column tiles of 64 or 128 rows, and on 192-column tiles
    # of 128 or 192 rows (and 192 x 192 with C from registers and a fourth stage), in BF16 and TF32; in BF16 also
    # 96-column tiles (B and C in 64-byte-swizzled boxes), clusters of tile rows by tile columns and deep rings: every
    # form fits a block's shared memory with its staging buffers. The decode entries (BF16 and TF32) cross their
    # lists: plan refuses exactly their rings over shared memory and their 128-row tiles in clusters of two rows.
    import itertools

    assert main(["plan", str(SPECS / "sweep-v15-small.yaml"), "--arch", "sm_90a", "-s", "127x4104x1032"]) != EXIT_OK
    forms = 8 + 4 + 2                                    # narrow: CM x CWG x BN; 192: CM x CWG; 192 from registers: CM
    # 96: STAGES x CM x CN, and STAGES x CM at CN 4; 2-D: CM x BN x CN, and CN at 192; deep: STAGES x CM x STORE, and
    # CM x STORE at 128
    bf16_only = 2 * 3 * 2 + 2 * 2 + 2 * 2 * 3 + 2 + 2 * 2 * 2 + 2 * 2
    decode = list(itertools.product((6, 8), (1, 2), (1, 2), (64, 128), (2, 4)))          # STAGES, CM, CWG, BN, CN
    fit = sum((cwg == 1 or cm == 1) and stages * (64 * cwg + bn) * 128 + cwg * 16384 + 16 * stages + 1024 <= 232448
              for stages, cm, cwg, bn, _ in decode)
    assert fit == 22
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last == f"{2 * forms + bf16_only + 2 * fit} ok, {2 * (len(decode) - fit)} INVALID"


def test_the_v14_sweep_compiles_and_plans_offline_refusing_only_rings_over_shared_memory(capsys):
    # NVRTC builds every form of kernels/14_tma_ws_swap.cu the sweep names; plan refuses exactly the rings that
    # exceed a block's shared memory.
    import itertools

    assert main(["plan", str(SPECS / "sweep-v14.yaml"), "--arch", "sm_90a", "-s", "16x4096x4096"]) != EXIT_OK
    lines = capsys.readouterr().out.rstrip().splitlines()
    forms = list(itertools.product((1, 2), (8, 12, 16), (1, 2, 4), (8, 16, 32, 64)))     # CWG, STAGES, SPLITS, MT
    fit = sum(stages * (64 * cwg + mt) * 128 + 16 * stages + 1024 <= 232448 for cwg, stages, _, mt in forms)
    m128 = 2 * 2                                 # the -m128 entries' forms (CWG 1 and 2, split or not), all fit
    assert lines[-1] == f"{2 * (fit + m128)} ok, {2 * (len(forms) - fit)} INVALID"       # BF16 and TF32
