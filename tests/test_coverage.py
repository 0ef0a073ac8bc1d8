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
