"""The grid of a SYRK or Gram kernel that launches one block per tile of one triangle of C (``ceil(M / 64) *
(ceil(M / 64) + 1) / 2`` blocks, each taking its tile from the flat block index) is held to that triangle's tiles,
the diagonal's included, with a declared tile; a grid over C's rows and columns, or a plain GEMM, to all of C."""

from __future__ import annotations

import pytest

from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.specfile import parse_spec

from conftest import ROOT, TEST_KERNELS

TRIANGLE_GRID = '["ceil(M / 64) * (ceil(M / 64) + 1) / 2"]'
SHORT_GRID = '["ceil(M / 64) * (ceil(M / 64) - 1) / 2"]'


def plans(grid: str, fields: str, *, signature: str = "[A, C, M, K]",
          shapes: str = "[[1024, 1024, 64], [1000, 1000, 64]]"):
    text = (f"shapes: {shapes}\nkernels:\n- name: k\n  source: {TEST_KERNELS / 'gram.cu'}\n  function: gram_naive\n"
            f"  signature: {signature}\n  block: [256]\n  grid: {grid}\n  tile: [64, 64]\n{fields}")
    planned = plan_spec(parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True), arch="sm_90")
    assert not planned.compile_errors, planned.compile_errors
    return planned.plans


@pytest.mark.parametrize("gram", ["{of: A, triangle: lower}", "{of: A, triangle: upper}", "A"])
def test_a_block_per_tile_of_one_triangle_covers_a_gram_product(gram):
    for plan in plans(TRIANGLE_GRID, f"  gram: {gram}\n"):
        assert plan.valid, plan.problems
        assert not any("lie past C" in note for note in plan.notes), plan.notes


def test_a_grid_short_of_the_triangle_is_refused_with_the_triangles_count():
    for plan in plans(SHORT_GRID, "  gram: {of: A, triangle: lower}\n"):
        (problem,) = plan.problems
        message = str(problem)
        assert "one triangle of C" in message and "grid[0]" in message, message
        assert "ceil(M / 64) * (ceil(M / 64) + 1) / 2" in message, message     # the hint: the grid that covers it
        assert "add a grid axis over its columns" not in message, message


def test_a_plain_gemm_is_still_held_to_all_of_c():
    for plan in plans(TRIANGLE_GRID, "  types: {a: fp32}\n  layout: NT\n", signature="[A, B, C, M, N, K]"):
        (problem,) = plan.problems
        assert "C's" in str(problem) and "tiles" in str(problem) and "triangle" not in str(problem), problem


def test_a_grid_over_cs_rows_and_columns_is_still_held_to_all_of_c():
    for plan in plans("[ceil(N / 64), ceil(M / 128)]", "  gram: {of: A, triangle: lower}\n"):
        assert not plan.valid and "grid[1]" in str(plan.problems[0]), plan.problems
