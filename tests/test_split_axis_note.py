"""A grid axis of C's tiles times a factor that reads neither M nor N (``ceil(N / BN) * SPLITK``: a split of K folded
into x, the kernel taking its split as ``blockIdx.x / tiles``) is noted as what it may be, a split of K or blocks past
C, never as blocks past C alone; an axis that over-covers C by an amount of C's own keeps the plain note."""

from __future__ import annotations

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import Shape, load_spec

from test_spec import MINIMAL, write

WIDE = Shape(100, 3000, 64)


def _axis_notes(tmp_path, grid: str) -> list[str]:
    text = (MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", f"grid: {grid}")
            + "    tile: [16, 16]\n    values: {SPLITK: 4}\n")
    plan = plan_case(load_spec(write(tmp_path, text)).kernels[0], WIDE, arch_limits("sm_90"))
    assert plan.valid, [str(problem) for problem in plan.problems]
    return [note for note in plan.notes if " launches " in note and "blocks" in note]


@pytest.mark.parametrize("grid, axis, factor", [
    ("['ceil(N / 16) * SPLITK', ceil(M / 16)]", "x", "SPLITK = 4"),
    ("['2 * ceil(N / 16)', ceil(M / 16)]", "x", "2"),
    ("[ceil(N / 16), 'ceil(M / 16) * SPLITK']", "y", "SPLITK = 4"),
])
def test_tiles_times_a_factor_of_the_kernels_own_read_as_a_split_of_k_or_blocks_past_c(tmp_path, grid, axis, factor):
    note, = _axis_notes(tmp_path, grid)
    assert note.startswith(f"grid {axis} launches "), note
    assert f"times {factor}: read as a split of K folded into grid {axis}" in note, note
    assert "in a kernel that does not split K" in note and "lie past C" not in note, note


@pytest.mark.parametrize("grid", [
    "['ceil(N / 16) + 4', ceil(M / 16)]",                 # four columns of blocks too many
    "[ceil(N / (16 / 2)), ceil(M / 16)]",                 # divides by half the tile
    "['ceil(N / 16) * ceil(N / 1024)', ceil(M / 16)]",    # a factor the shape gives, no split
])
def test_an_axis_past_c_by_an_amount_of_cs_own_keeps_the_plain_note(tmp_path, grid):
    note, = _axis_notes(tmp_path, grid)
    assert "of blocks lie past C's columns" in note and "split of K" not in note, note
