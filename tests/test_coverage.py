"""Coverage of C without a `tile:`: checked against the tile the grid's own expressions divide M and N by, or
noted as unchecked with how to declare `tile:`."""

from __future__ import annotations

import pytest

from driver_gemm.cli import EXIT_OK, main
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.planning.coverage import PERSISTENT_NOTE, UNCHECKED_NOTE, inferred_tile
from driver_gemm.specfile import expr, load_spec
from driver_gemm.specfile.model import Shape

from conftest import ROOT
from test_spec import MINIMAL, write


@pytest.mark.parametrize("grid, size, tile", [
    ("ceil(N / BN)", "N", "BN"), ("N / BN", "N", "BN"), ("N // (BN * 2)", "N", "BN * 2"),
    ("floor(M / BM)", "M", "BM"), ("(M + BM - 1) // BM", "M", "BM"),
    ("ceil(M * N / 256)", "N", None), ("sm_count", "N", None), ("ceil(N / BN)", "M", None),
])
def test_the_tile_a_grid_expression_divides_by(grid, size, tile):
    found = inferred_tile(expr.parse(grid), size)
    assert (found.source if found else None) == tile


def test_a_floor_grid_that_misses_rows_is_invalid_without_a_tile(tmp_path):
    kernel = load_spec(write(tmp_path, MINIMAL.replace("ceil(M / BM)", "M // BM"))).kernels[0]
    assert kernel.tile is None
    plan = plan_case(kernel, Shape(1001, 513, 777), arch_limits("sm_90"))
    assert [str(p).split(": ", 2)[1:] for p in plan.problems] == [[
        "kernels[v4].grid[1]",
        "the grid covers 960 of M = 1001 rows (15 blocks x 64, as 'M // BM' divides M by BM): rows 960-1000 would "
        "never be written (hint: grid y should be ceil(M / BM); if a block computes more than that, declare tile: "
        "[rows, cols])"]]
    assert plan_case(kernel, Shape(1024, 512, 1024), arch_limits("sm_90")).valid


def test_a_shape_the_kernels_require_excludes_gets_no_coverage_hint(tmp_path):
    # cuda-samples' matrixMul has no bounds checks and says so in require: a hint to cover the rest of M would
    # point at a launch the kernel was not written for.
    text = MINIMAL.replace("ceil(M / BM)", "M // BM") + "    require: [M % BM == 0]\n"
    kernel = load_spec(write(tmp_path, text)).kernels[0]
    plan = plan_case(kernel, Shape(1001, 513, 777), arch_limits("sm_90"))
    assert [str(p).split(": ", 2)[1] for p in plan.problems] == ["kernels[v4].require[0]"]
    assert "never be written" not in str(plan.problems[0])


def test_a_grid_that_says_nothing_of_the_tile_is_noted_unchecked(tmp_path, capsys):
    spec = write(tmp_path, MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", "grid: [ceil(M * N / 4096)]"))
    plan = plan_case(load_spec(spec).kernels[0], Shape(64, 32, 16), arch_limits("sm_90"))
    assert plan.valid and UNCHECKED_NOTE in plan.notes
    assert "declare tile: [rows, cols]" in UNCHECKED_NOTE
    assert main(["plan", "--arch", "sm_90", str(spec)]) == EXIT_OK
    assert "coverage of C unchecked" in capsys.readouterr().out


def test_a_declared_or_inferred_tile_leaves_no_note(tmp_path):
    kernel = load_spec(write(tmp_path, MINIMAL)).kernels[0]
    assert UNCHECKED_NOTE not in plan_case(kernel, Shape(64, 32, 16), arch_limits("sm_90")).notes


def test_the_readme_example_declares_its_tile():
    readme = (ROOT / "README.md").read_text()
    example = readme[readme.index("grid: [ceil(N / TILE), ceil(M / TILE)]"):]
    assert example.splitlines()[1].strip() == "tile: [TILE, TILE]"


def _plan(tmp_path, grid: str, tile: str | None, shape=Shape(1001, 513, 777)):
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", f"grid: {grid}")
    if tile is not None:
        text += f"    tile: {tile}\n"
    return plan_case(load_spec(write(tmp_path, text)).kernels[0], shape, arch_limits("sm_90"))


def _messages(plan):
    return [str(problem).split(": ", 2)[1:] for problem in plan.problems]


@pytest.mark.parametrize("grid, tile", [
    ("[ceil(N / BN), ceil(M / BM)]", "[BM, BN]"),                 # columns on x, rows on y
    ("[ceil(M / BM), ceil(N / BN)]", "[BM, BN]"),                 # rows on x, as many naive kernels launch
    ("['ceil(M / BM) * ceil(N / BN)']", "[BM, BN]"),              # every tile numbered on one axis
    ("[4, ceil(M / BM), 'ceil(N / (BN * 4))']", "[BM, BN]"),      # columns split over x and z (a swizzled grid)
    ("[ceil(M / BM), ceil(N / BN)]", None),                       # no tile: read from the grid, either way round
    ("['2 * ceil(N / BN)', 'ceil(M / (2 * BM))']", "[BM, BN]"),  # CUTLASS's swizzle: twice the columns, half the rows
    ("[ceil(N / BN), ceil(M / BM), 'ceil(K / 256)']", "[BM, BN]"),   # K split over z
])
def test_a_grid_that_covers_c_is_valid_whichever_axes_carry_rows_and_columns(tmp_path, grid, tile):
    plan = _plan(tmp_path, grid, tile)
    assert plan.valid, _messages(plan)
    assert UNCHECKED_NOTE not in plan.notes and PERSISTENT_NOTE not in plan.notes


def test_rows_on_grid_x_are_checked_on_x(tmp_path):
    plan = _plan(tmp_path, "[M // BM, ceil(N / BN)]", "[BM, BN]")
    assert _messages(plan) == [["kernels[v4].grid[0]", "the grid covers 960 of M = 1001 rows (15 blocks x 64): "
                                "rows 960-1000 would never be written (hint: grid x should be ceil(M / BM))"]]
    inferred = _plan(tmp_path, "[ceil(M / BM), N // BN]", None)
    assert _messages(inferred)[0][0] == "kernels[v4].grid[1]"
    assert "the grid covers 512 of N = 513 columns (8 blocks x 64, as 'N // BN' divides N by BN)" \
        in _messages(inferred)[0][1]


def test_a_split_of_k_on_z_is_not_counted_as_tiles(tmp_path):
    plan = _plan(tmp_path, "['ceil(N / (2 * BN))', ceil(M / BM), 'ceil(K / 64)']", "[BM, BN]")
    assert [message[0] for message in _messages(plan)] == ["kernels[v4].grid[0]"]
    assert "the grid covers 320 of N = 513 columns" in _messages(plan)[0][1]


def test_a_grid_numbering_fewer_blocks_than_tiles_is_invalid(tmp_path):
    # A grid that spreads C's tiles over several axes its own way (columns split four ways over x and z, half the
    # row tiles on y) is refused at grid.
    spread = _plan(tmp_path, "['ceil(N / BN / 4)', 'ceil(M / (2 * BM))', 4]", "[BM, BN]")
    assert _messages(spread) == [["kernels[v4].grid", "the grid has 96 blocks over grid x, y and z for C's 144 tiles "
                                  "of 64 x 64 (ceil(M / BM) x ceil(N / BN)): 48 tiles would never be written (hint: a "
                                  "grid that numbers the tiles is ceil(M / BM) * ceil(N / BN))"]]
    plan = _plan(tmp_path, "['ceil(M / BM) * (N // BN)']", "[BM, BN]")
    # 16 row tiles x 9 column tiles = 144 tiles; 16 x 8 = 128 blocks
    assert _messages(plan) == [["kernels[v4].grid[0]", "the grid has 128 blocks for C's 144 tiles of 64 x 64 "
                                "(ceil(M / BM) x ceil(N / BN)): 16 tiles would never be written (hint: a grid that "
                                "numbers the tiles is ceil(M / BM) * ceil(N / BN))"]]


@pytest.mark.parametrize("grid", ["[sm_count]", "['min(sm_count, ceil(M / BM) * ceil(N / BN))']", "[132]",
                                  "['2 * min(sm_count // 2, max_active_clusters)']",
                                  "['min(100, ceil(M / BM) * ceil(N / BN))']", "['min(ceil(M / BM), 4)', 4]"])
@pytest.mark.parametrize("tile", [None, "[BM, BN]"])
def test_a_persistent_grid_is_noted_as_such_and_never_held_to_a_tile(tmp_path, grid, tile):
    plan = _plan(tmp_path, grid, tile)
    assert plan.valid, _messages(plan)
    assert PERSISTENT_NOTE in plan.notes and UNCHECKED_NOTE not in plan.notes
    assert "declare tile" not in PERSISTENT_NOTE


@pytest.mark.parametrize("grid, fixed", [("[132]", 132), ("['min(100, ceil(M / BM) * ceil(N / BN))']", 100),
                                         ("[sm_count]", None), ("['min(sm_count, ceil(M / BM) * ceil(N / BN))']", None),
                                         ("[1]", None)])
def test_a_persistent_grid_of_a_fixed_count_is_told_how_to_follow_the_gpu(tmp_path, grid, fixed):
    # An outside kernel's grid is often its author's SM count written out: it runs, but leaves a larger GPU's SMs
    # idle and a smaller one's blocks in a second wave.
    notes = [note for note in _plan(tmp_path, grid, "[BM, BN]").notes if "fixed count, not the GPU's" in note]
    if fixed is None:
        assert notes == []
    else:
        assert notes == [f"the persistent grid's {fixed} blocks are a fixed count, not the GPU's: sm_count (its SMs) "
                         "or max_active_clusters in the grid makes it follow the GPU it runs on"]


def test_a_fixed_grid_over_two_axes_with_fewer_blocks_than_its_tiles_is_told_so_with_the_counts(tmp_path):
    # A kernel built for one shape (its grid written as numbers) whose y covers half of the rows: taken as
    # persistent, so it plans, but the note says what it leaves unwritten if each block computes one tile.
    plan = _plan(tmp_path, "[9, 8]", "[BM, BN]")
    assert plan.valid and PERSISTENT_NOTE in plan.notes
    assert [note for note in plan.notes if "blocks, a fixed count" in note] == [
        "the grid's 72 blocks, a fixed count, are fewer than C's 144 tiles of 64 x 64 (tile:): taken as a persistent "
        "kernel's, each block looping over tiles; if each block computes one tile, this grid leaves 72 of them "
        "unwritten: written as [ceil(N / 64), ceil(M / 64)], it is checked against C"]
    assert not [note for note in _plan(tmp_path, "[9, 16]", "[BM, BN]").notes if "blocks, a fixed count" in note]


def test_a_min_cap_the_shape_does_not_reach_leaves_the_grid_held_to_covering_c(tmp_path):
    # min(tiles, 100000) numbers tiles on every shape it is given (the cap is never below the tiles): it is held to
    # covering C as the same grid without the min, so a grid that misses half of the columns is refused.
    plan = _plan(tmp_path, "['min(ceil(N / (2 * BN)), 100000)', ceil(M / BM)]", "[BM, BN]")
    assert [message[0] for message in _messages(plan)] == ["kernels[v4].grid[0]"], _messages(plan)
    assert "would never be written" in _messages(plan)[0][1]
    assert _plan(tmp_path, "['min(ceil(N / BN), 100000)', ceil(M / BM)]", "[BM, BN]").valid


@pytest.mark.parametrize("z", ["SPLITS", "4", "'ceil(K / 256)'", "batch", "'min(batch, 65535)'", "'min(batch, 1)'"])
def test_an_axis_that_reads_neither_m_nor_n_covers_no_tiles(tmp_path, z):
    # A split of K (by a param, a number or K itself) or the batch on z launches copies of the same tiles: x that
    # covers a third of N is refused at x whatever z multiplies the blocks by, and a min() that caps z (gridDim.z's
    # limit) neither makes the grid persistent nor gives its notes.
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", f"grid: ['ceil(N / (3 * BN))', ceil(M / BM), {z}]")
    text = text.replace("TN: 4}", "TN: 4}\n    values: {SPLITS: 4}") + "    tile: [BM, BN]\n    batch: 3\n"
    kernel = load_spec(write(tmp_path, text)).kernels[0]
    plan = plan_case(kernel, Shape(1001, 513, 4096), arch_limits("sm_90"))
    assert _messages(plan) == [["kernels[v4].grid[0]", "the grid covers 192 of N = 513 columns (3 blocks x 64): "
                                "columns 192-512 would never be written (hint: grid x should be ceil(N / BN))"]]
    assert PERSISTENT_NOTE not in plan.notes
    assert not [note for note in plan.notes if "fixed count" in note]
    # Without a tile, the grid's own ceil(N / (3 * BN)) is the tile it is checked by: three times as wide, it covers.
    untiled = plan_case(load_spec(write(tmp_path, text.replace("    tile: [BM, BN]\n", ""))).kernels[0],
                        Shape(1001, 513, 4096), arch_limits("sm_90"))
    assert untiled.valid and PERSISTENT_NOTE not in untiled.notes and UNCHECKED_NOTE not in untiled.notes


@pytest.mark.parametrize("grid", ["[4, ceil(M / BM), 'ceil(N / (BN * 4))']", "['ceil(N / BN / 4)', ceil(M / BM), 4]",
                                  "[S, ceil(M / BM), 'ceil(N / (BN * S))']",
                                  # the same split, z written otherwise than x's divisor: equal by value on the case
                                  "['ceil(N / (BN * S * 2))', ceil(M / BM), '2 * S']",
                                  "['ceil(N / (BN * 2 * S))', ceil(M / BM), 'S * 2']",
                                  "['ceil(N / (BN * S))', ceil(M / BM), 'S * 1']",
                                  "['ceil(N / (BN * S))', ceil(M / BM), 4]",
                                  "['ceil(N / (BN * S))', ceil(M / BM), 'min(S, 65535)']"])
def test_an_axis_another_divides_m_or_n_by_counts_as_tiles(tmp_path, grid):
    # Columns split over x and z: the axis of a number or a param counts where the columns' axis divides N by it.
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", f"grid: {grid}")
    text = text.replace("TN: 4}", "TN: 4}\n    values: {S: 4}") + "    tile: [BM, BN]\n"
    plan = plan_case(load_spec(write(tmp_path, text)).kernels[0], Shape(1001, 513, 777), arch_limits("sm_90"))
    assert plan.valid, _messages(plan)
    assert PERSISTENT_NOTE not in plan.notes


def test_a_batch_folded_into_a_grid_of_tiles_numbers_them(tmp_path):
    # One axis of ceil(M / BM) * ceil(N / BN) * batch blocks: a block for every tile of every matrix.
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", "grid: ['ceil(M / BM) * ceil(N / BN) * batch', 1, 1]")
    text += "    tile: [BM, BN]\n    batch: 3\n"
    plan = plan_case(load_spec(write(tmp_path, text)).kernels[0], Shape(1001, 513, 777), arch_limits("sm_90"))
    assert plan.valid, _messages(plan)


TYPED_BATCH = "    types: {a: bf16, b: bf16, c: bf16, accumulate: fp32}\n    batch: {count: 3}\n"
MASKED_GROUPS = ("    types: {a: bf16, b: bf16, c: fp32, accumulate: fp32}\n"
                 "    groups: {layout: masked, count: 4, rows: even}\n")


def _plan_with(tmp_path, grid: str, tile: str | None, extra: str, shape=Shape(1001, 513, 777)):
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", f"grid: {grid}") + extra
    if tile is not None:
        text += f"    tile: {tile}\n"
    return plan_case(load_spec(write(tmp_path, text)).kernels[0], shape, arch_limits("sm_90"))


@pytest.mark.parametrize("tile", ["[BM, BN]", None])
def test_an_axis_that_reads_the_batch_has_a_block_for_every_matrix(tmp_path, tile):
    # blockIdx.z picks the matrix: with batch - 1 blocks on z, the last matrix is never written, whatever the tiles.
    plan = _plan_with(tmp_path, "[ceil(M / BM), ceil(N / BN), 'batch - 1']", tile, TYPED_BATCH)
    assert _messages(plan) == [[
        "kernels[v4].grid[2]",
        "grid z extent 2 ('batch - 1' with batch=3) is less than the batch count, 3 matrices: blockIdx.z numbers them, "
        "so matrix 2 would never be written (hint: grid z should be batch, a block for every matrix, or "
        "min(batch, 65535) where the kernel loops over the matrices past the cap)"]]
    # A block for every matrix, or a cap the kernel loops past (gridDim.z's limit), is whole.
    for z in ("batch", "'min(batch, 2)'", "'2 * batch'"):
        assert _plan_with(tmp_path, f"[ceil(M / BM), ceil(N / BN), {z}]", tile, TYPED_BATCH).valid


def test_an_axis_that_reads_the_groups_has_a_block_for_every_group(tmp_path):
    plan = _plan_with(tmp_path, "[ceil(N / 16), ceil(M / 16), 'groups - 2']", "[16, 16]", MASKED_GROUPS,
                      Shape(1001, 520, 776))
    assert _messages(plan) == [[
        "kernels[v4].grid[2]",
        "grid z extent 2 ('groups - 2' with groups=4) is less than the groups count, 4 groups: blockIdx.z numbers "
        "them, so groups 2-3 would never be written (hint: grid z should be groups, a block for every group, or "
        "min(groups, 65535) where the kernel loops over the groups past the cap)"]]
    assert _plan_with(tmp_path, "[ceil(N / 16), ceil(M / 16), groups]", "[16, 16]", MASKED_GROUPS,
                      Shape(1001, 520, 776)).valid


def test_an_axis_that_folds_the_batch_into_its_tiles_covers_every_matrix(tmp_path):
    # ceil(M / BM) * (batch - 1) covers two matrices' rows of three, each matrix's rows in whole tiles of its own;
    # the tiles of every matrix are counted on one axis.
    rows = _plan_with(tmp_path, "[ceil(N / BN), 'ceil(M / BM) * (batch - 1)']", "[BM, BN]", TYPED_BATCH)
    assert _messages(rows) == [[
        "kernels[v4].grid[1]",
        "the grid has 32 blocks on y for the batch's 3 matrices of ceil(M / BM) = 16 tiles of 64 rows each, 48 "
        "blocks ('ceil(M / BM) * (batch - 1)' rounds each matrix's rows up to whole tiles of its own): matrix 2 "
        "would never be written (hint: grid y should be ceil(M / BM) * batch)"]]
    assert _plan_with(tmp_path, "[ceil(N / BN), 'ceil(M / BM) * batch']", "[BM, BN]", TYPED_BATCH).valid
    one_axis = _plan_with(tmp_path, "['ceil(M / BM) * ceil(N / BN) * (batch - 1)', 1, 1]", "[BM, BN]", TYPED_BATCH)
    assert _messages(one_axis) == [[
        "kernels[v4].grid[0]",
        "the grid has 288 blocks for C's 432 tiles of 64 x 64 (ceil(M / BM) x ceil(N / BN) x batch = 3): 144 tiles "
        "would never be written (hint: a grid that numbers the tiles is ceil(M / BM) * ceil(N / BN) * batch)"]]


SPLIT_SHAPE = Shape(4096, 4096, 4096)


@pytest.mark.parametrize("grid, tile", [
    # block_tile_j = (blockIdx.z * gridDim.x + blockIdx.x): 32 x 2 column blocks of 128 for N's 32 (the rest return)
    ("[32, ceil(M / 256), 'ceil(N / (128 * 16))']", "[256, 128]"),
    ("[16, ceil(M / 256), 'ceil(N / (128 * 16))']", "[256, 128]"),
    ("[ceil(N / 128), 32, 'ceil(M / (64 * 16))']", "[64, 128]"),      # rows split over y and z the same way
    # mb = blockIdx.z * 256 + (blockIdx.x / 2) * 128, nb = blockIdx.y * 256 + (blockIdx.x % 2) * 128
    ("[4, ceil(N / 256), ceil(M / 256)]", "[128, 128]"),
    ("[8, ceil(N / 256), ceil(M / 256)]", "[128, 128]"),
])
def test_columns_or_rows_split_over_two_axes_cover_c_with_enough_blocks_between_them(tmp_path, grid, tile):
    plan = _plan(tmp_path, grid, tile, SPLIT_SHAPE)
    assert plan.valid, _messages(plan)


def test_a_short_split_over_two_axes_says_its_real_coverage_and_what_either_axis_should_be(tmp_path):
    # x = 8 where z divides N by 16 tiles: 2 blocks of z x 8 of x x 128 = 2048 columns, not 2 x 128.
    plan = _plan(tmp_path, "[8, ceil(M / 256), 'ceil(N / (128 * 16))']", "[256, 128]", SPLIT_SHAPE)
    assert _messages(plan) == [[
        "kernels[v4].grid[2]",
        "the grid covers 2048 of N = 4096 columns (2 blocks of grid z x 8 of grid x, 128 columns each): columns "
        "2048-4095 would never be written (hint: grid z should be ceil(N / (128 * 8)), each of its blocks split over "
        "grid x's 8; or grid x should be 16, as 'ceil(N / (128 * 16))' gives each block of grid z 16 tiles of 128)"]]
    # The split as written (x = 16, its factor) with z rounding down: z is what to fix, ceil(N / (128 * 16)).
    floor = _plan(tmp_path, "[16, ceil(M / 256), 'N // (128 * 16)']", "[256, 128]", Shape(4096, 5000, 4096))
    assert _messages(floor) == [[
        "kernels[v4].grid[2]",
        "the grid covers 4096 of N = 5000 columns (2 blocks of grid z x 16 of grid x, 128 columns each): columns "
        "4096-4999 would never be written (hint: grid z should be ceil(N / (128 * 16)), each of its blocks split over "
        "grid x's 16)"]]


def test_an_axis_shared_by_the_rows_and_columns_is_held_to_its_count_of_blocks(tmp_path):
    # x = 2 where each block of y and z spans 2 x 2 tiles: how x's blocks share them out is the kernel's, so only
    # the count is checked, and the hint names the blocks x needs.
    plan = _plan(tmp_path, "[2, ceil(N / 256), ceil(M / 256)]", "[128, 128]", SPLIT_SHAPE)
    assert _messages(plan) == [[
        "kernels[v4].grid",
        "the grid has 512 blocks over grid x, y and z for C's 1,024 tiles of 128 x 128 (ceil(M / 128) x "
        "ceil(N / 128)): 512 tiles would never be written (hint: grid x should be 4: a block of grid z and y spans "
        "256 x 256 of C, 2 x 2 tiles of 128 x 128)"]]


@pytest.mark.parametrize("grid, tile, shape, field, gap", [
    ("[ceil(N / BN), M // BM]", "[BM, BN]", Shape(1025, 513, 777), "grid[1]", "row 1024 would never be written"),
    ("[N // BN, ceil(M / BM)]", None, Shape(1001, 513, 777), "grid[0]", "column 512 would never be written"),
    ("['ceil(M / BM) * (N // BN)']", "[BM, BN]", Shape(64, 513, 777), "grid[0]", "1 tile would never be written"),
])
def test_a_gap_of_one_row_column_or_tile_is_named_as_one(tmp_path, grid, tile, shape, field, gap):
    plan = _plan(tmp_path, grid, tile, shape)
    assert [(where, gap in message) for where, message in _messages(plan)] == [(f"kernels[v4].{field}", True)]


def test_a_grid_that_fails_on_a_shape_the_require_excludes_says_the_require_alone(tmp_path):
    # 'N / 16' is no whole number on N = 513 because the kernel takes only multiples of 16: that is the reason.
    text = "    require: [M % 16 == 0, N % 16 == 0, K % 16 == 0]\n"
    plan = _plan_with(tmp_path, "[N / 16, M / 16]", None, text)
    assert [message[0] for message in _messages(plan)] == [
        "kernels[v4].require[0]", "kernels[v4].require[1]", "kernels[v4].require[2]"]
    assert "'N % 16 == 0' does not hold with N=513" in _messages(plan)[1][1]
    # A block beyond its limit is its own reason: the require is not added to it.
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", "grid: [N / 16, M / 16]") + text
    text = text.replace("block: [BN / TN, BM / TM]", "block: [64, 64]").replace("0]", "0, threads <= 2048]")
    big = plan_case(load_spec(write(tmp_path, text)).kernels[0], Shape(1024, 512, 1000), arch_limits("sm_90"))
    assert [message[0] for message in _messages(big)] == ["kernels[v4].block"]
