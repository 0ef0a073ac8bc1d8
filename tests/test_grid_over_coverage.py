"""A grid axis that launches whole tile rows (columns) of blocks past C: most often one that counts the other
dimension (``[ceil(N / 16), ceil(N / 16)]`` on a C of fewer rows than columns), which covers C and so passes its
check. Guarded kernels compute C right, so the plan notes it, naming the axis, its blocks, C's tiles and what the
axis reads; grids that launch more blocks than tiles on purpose (persistent, batch-folded, split over K or over
another axis) are not noted."""

from __future__ import annotations

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import Shape, load_spec

from test_spec import MINIMAL, write

WIDE = Shape(100, 3000, 64)


def _over_notes(tmp_path, grid: str, tile: str, shape: Shape, extra: str = "") -> list[str]:
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", f"grid: {grid}") + f"    tile: {tile}\n" + extra
    plan = plan_case(load_spec(write(tmp_path, text)).kernels[0], shape, arch_limits("sm_90"))
    assert plan.valid, [str(problem) for problem in plan.problems]
    return [note for note in plan.notes if "more rows of blocks" in note or "more columns of blocks" in note
            or "more row of blocks" in note or "more column of blocks" in note]


def test_an_axis_over_the_other_dimension_is_noted_where_it_over_covers(tmp_path):
    note, = _over_notes(tmp_path, "[ceil(N / 16), ceil(N / 16)]", "[16, 16]", WIDE)
    assert note.startswith("grid y launches 188 blocks ('ceil(N / 16)', which reads N: is it C's rows?) where C "
                           "has 7 tile rows of 16 (ceil(M / 16))")
    assert "181 more rows of blocks" in note


def test_a_grid_of_one_block_a_column_over_rows_is_noted(tmp_path):
    note, = _over_notes(tmp_path, "[N]", "[1, N]", WIDE)
    assert note.startswith("grid x launches 3,000 blocks ('N', which reads N: is it C's rows?) where C has 100 tile "
                           "rows of 1 (M)")


def test_an_axis_dividing_by_less_than_the_tile_is_noted(tmp_path):
    note, = _over_notes(tmp_path, "[ceil(N / 64), ceil(M / 32)]", "[64, 64]", Shape(1024, 1024, 64))
    assert note.startswith("grid y launches 32 blocks ('ceil(M / 32)', which reads M) where C has 16 tile rows")
    assert "is it" not in note


@pytest.mark.parametrize("grid, tile, extra", [
    ("[ceil(N / 16), ceil(M / 16)]", "[16, 16]", ""),                              # C's own tiles
    ("[ceil(M / 16), ceil(N / 16)]", "[16, 16]", "    rows_on: x\n"),              # rows on x
    ("['min(sm_count, ceil(N / 16) * ceil(M / 16))']", "[16, 16]", ""),           # persistent
    ("[ceil(N / 16), ceil(M / 16), ceil(K / 16)]", "[16, 16]", ""),              # a split of K on z
    ("[ceil(N / (16 * 2)), ceil(M / 16), 2]", "[16, 16]", ""),                    # columns split over z
    ("[ceil(N / 16), 9]", "[16, 16]", ""),                                         # a fixed number over the rows
])
def test_grids_that_cover_c_by_their_own_reading_are_not_noted(tmp_path, grid, tile, extra):
    assert _over_notes(tmp_path, grid, tile, WIDE, extra) == []


def test_a_batch_folded_grid_is_not_noted(tmp_path):
    batch = "    batch: {count: 3}\n"
    assert _over_notes(tmp_path, "[ceil(N / 16), ceil(M / 16) * batch]", "[16, 16]", WIDE, batch) == []
    assert _over_notes(tmp_path, "[ceil(N / 16), ceil(M / 16), batch]", "[16, 16]", WIDE, batch) == []


def test_a_short_grid_is_refused_not_noted(tmp_path):
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", "grid: [ceil(N / 16), ceil(N / 16)]") \
        + "    tile: [16, 16]\n"
    plan = plan_case(load_spec(write(tmp_path, text)).kernels[0], Shape(3000, 100, 64), arch_limits("sm_90"))
    assert not plan.valid
    assert not [note for note in plan.notes if "of blocks lie past C" in note]
