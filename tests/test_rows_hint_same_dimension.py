"""A grid two of whose axes read the same dimension (``[ceil(M / 16), ceil(M / 16)]``) on a C it does not cover: the
hint names the axis that should read the other dimension (C's columns on x and its rows on y, swapped by
``rows_on: x``), not an axis over C's columns to add. A grid that reads M alone keeps its own hint."""

from __future__ import annotations

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import Shape, load_spec

from test_spec import write

ENTRY = """\
shapes:
  - [64, 32, 16]
kernels:
  - name: v2
    source: ../kernels/02_smem_tiles.cu
    function: sgemm_smem_tiles
    params: {{TILE: 16}}
    block: [TILE, TILE]
    grid: {grid}
    tile: [TILE, TILE]
{more}"""


def _hint(tmp_path, grid: str, shape: Shape, more: str = "") -> str:
    spec = load_spec(write(tmp_path, ENTRY.format(grid=grid, more=more)))
    (problem,) = plan_case(spec.kernels[0], shape, arch_limits("sm_90")).problems
    assert problem.field.startswith("kernels[v2].grid") and "would never be written" in str(problem)
    return problem.hint


@pytest.mark.parametrize("rows_on, expected", [
    ("", "grid x reads M as grid y does: it should be ceil(N / TILE), C's column tiles, which the usual grid puts "
         "on x"),
    ("    rows_on: x\n", "grid y reads M as grid x does: it should be ceil(N / TILE), C's column tiles, which "
                         "rows_on: x puts on y"),
])
def test_two_axes_reading_m_on_a_wide_c_name_the_axis_that_should_read_n(tmp_path, rows_on, expected):
    hint = _hint(tmp_path, "[ceil(M / 16), ceil(M / 16)]", Shape(256, 512, 128), rows_on)
    assert hint == expected
    assert "add a grid axis" not in hint


@pytest.mark.parametrize("rows_on, expected", [
    ("", "grid y reads N as grid x does: it should be ceil(M / TILE), C's row tiles, which the usual grid puts on y"),
    ("    rows_on: x\n", "grid x reads N as grid y does: it should be ceil(M / TILE), C's row tiles, which "
                         "rows_on: x puts on x"),
])
def test_two_axes_reading_n_on_a_tall_c_name_the_axis_that_should_read_m(tmp_path, rows_on, expected):
    assert _hint(tmp_path, "[ceil(N / 16), ceil(N / 16)]", Shape(512, 256, 128), rows_on) == expected


def test_a_grid_of_one_axis_over_m_keeps_the_hint_of_an_axis_over_the_columns(tmp_path):
    hint = _hint(tmp_path, "[1, ceil(M / 16)]", Shape(256, 512, 128))
    assert hint.startswith("the grid numbers C's rows (grid y reads M alone): add a grid axis over its columns")
