"""A grid that numbers C's columns alone (a kernel computing one row of C: a warp a column of a vector-matrix
product) planned on a shape of several rows: the hint is an axis over the rows or a require: that keeps M to the
rows one block computes, the mirror of the hint for a grid that numbers rows alone; never a flat grid of
M * ceil(N / cols) tiles, which gives such a kernel blocks past its columns."""

from __future__ import annotations

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import Shape

from test_spec import MINIMAL, write


def _plan(tmp_path, grid: str, extra: str, shape: Shape):
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", f"grid: {grid}") + extra
    return plan_case(load_spec(write(tmp_path, text)).kernels[0], shape, arch_limits("sm_90"))


def test_a_grid_over_columns_alone_is_told_to_add_an_axis_over_m_or_require_one_row(tmp_path):
    # cuda_hgemv's launch: one warp a column, four columns a block, no M parameter
    plan = _plan(tmp_path, "[ceil(N / 4)]", "    tile: [1, 4]\n", Shape(2, 4096, 4096))
    problem, = plan.problems
    assert problem.field == "kernels[v4].grid[0]"
    assert "tiles of 1 x 4 (M x ceil(N / 4))" in str(problem)
    assert problem.hint == ("the grid numbers C's columns (grid x reads N alone): add a grid axis over its rows, M, "
                            "that the kernel reads its row from, or require: M == 1, for a kernel that computes one "
                            "row of C")
    assert "M * ceil(N / 4)" not in problem.hint


def test_a_grid_of_one_block_says_block_once(tmp_path):
    problem, = _plan(tmp_path, "[ceil(N / 4)]", "    tile: [1, 4]\n", Shape(4096, 1, 4096)).problems
    assert "the grid has 1 block for C's 4,096 tiles" in str(problem)


def test_a_grid_over_columns_alone_with_a_taller_tile_is_told_its_bound_on_m(tmp_path):
    problem, = _plan(tmp_path, "[ceil(N / BN)]", "    tile: [BM, BN]\n", Shape(1001, 513, 777)).problems
    assert problem.hint.endswith("add a grid axis over its rows, ceil(M / BM), that the kernel reads its row from, "
                                 "or require: M <= BM")
