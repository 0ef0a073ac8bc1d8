"""Hints that name the real shortfall: a matrix-vector grid whose floor division drops C's last rows is told to round
up (not to add an axis over N), and an argument beyond its C type is told that the shape is beyond the kernel (with
the require: that keeps to those it takes), not to widen the type the kernel declares."""

from __future__ import annotations

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import Shape, load_spec

from test_spec import MINIMAL, write


def _plan(tmp_path, grid: str, extra: str, shape: Shape):
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", f"grid: {grid}") + extra
    return plan_case(load_spec(write(tmp_path, text)).kernels[0], shape, arch_limits("sm_90"))


def test_a_gemv_grid_that_floors_m_is_told_the_rows_it_drops_and_to_round_up(tmp_path):
    plan = _plan(tmp_path, "[M // 4]", "    tile: [4, 1]\n    require: [N == 1]\n", Shape(1001, 1, 1024))
    problem, = plan.problems
    assert problem.field == "kernels[v4].grid[0]"
    assert str(problem).split(": ", 2)[2].startswith(
        "the grid covers 1000 of M = 1001 rows (250 blocks x 4, 'M // 4'): row 1000 would never be written")
    assert problem.hint == "grid x should be ceil(M / 4)"


def test_a_gemv_grid_short_of_columns_keeps_the_hint_over_n(tmp_path):
    problem, = _plan(tmp_path, "[ceil(M / 4)]", "    tile: [4, 1]\n", Shape(1000, 2, 1024)).problems
    assert "add a grid axis over its columns, N" in problem.hint


def test_an_argument_beyond_its_type_is_told_the_shape_is_beyond_the_kernel(tmp_path):
    extra = "    signature: [A, B, C, M, N, K, {name: step, type: int16, value: N * 1024}]\n"
    problem, = _plan(tmp_path, "[ceil(N / BN), ceil(M / BM)]", extra, Shape(64, 32, 16)).problems
    assert problem.field == "kernels[v4].signature[6]"
    assert "argument step = 32768 does not fit int16 [-32768, 32767], the type the signature gives it" in str(problem)
    assert "require: [N * 1024 <= 32767] keeps the cases to those it can run" in problem.hint
    assert "int64" not in problem.hint
