"""Grids over a batch's matrices or a grouped GEMM's groups, held to what their blocks really cover: an axis that folds
the batch in by matrices (each matrix's rows in whole tiles of their own), one whose slices are contiguous groups
(each must reach the largest group), one block per matrix (no persistent grid), a batch axis counted by its value,
a grid with a number where C's rows belong; and the int32 index warning and require:'s refusal on such shapes."""

from __future__ import annotations

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.planning.coverage import PERSISTENT_NOTE, UNCHECKED_NOTE
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import Shape

from test_spec import MINIMAL, write

BATCH = "    types: {a: bf16, b: bf16, c: bf16, accumulate: fp32}\n    batch: {count: 3}\n"
CONTIGUOUS = ("    types: {a: bf16, b: bf16, c: fp32, accumulate: fp32}\n"
              "    groups: {layout: contiguous, count: 6, rows: RULE}\n")
SHAPE = Shape(1001, 513, 777)


def _plan(tmp_path, grid: str, tile: str | None, extra: str = "", shape: Shape = SHAPE):
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", f"grid: {grid}") + extra
    if tile is not None:
        text += f"    tile: {tile}\n"
    return plan_case(load_spec(write(tmp_path, text)).kernels[0], shape, arch_limits("sm_90"))


def _messages(plan) -> list[tuple[str, str]]:
    return [(problem.field, str(problem)) for problem in plan.problems]


@pytest.mark.parametrize("tile", ["[BM, BN]", None])
def test_a_grid_folding_the_batch_by_matrices_one_block_short_is_invalid_where_m_is_no_multiple_of_the_tile(
        tmp_path, tile):
    # ceil(M / BM) * batch - 1: 47 blocks of 64 rows reach 3,008 >= 3 x 1001 rows laid end to end, but each matrix
    # takes 16 blocks of its own (its last tile rounded up by itself): the last tile of matrix 2 has none.
    plan = _plan(tmp_path, "[ceil(N / BN), 'ceil(M / BM) * batch - 1']", tile, BATCH)
    (field, message), = _messages(plan)
    assert field == "kernels[v4].grid[1]"
    assert "47 blocks on y" in message and "48 blocks" in message
    assert "rows 960-1000 of matrix 2 would never be written" in message
    assert "grid y should be ceil(M / BM) * batch" in message
    # (batch - 1) leaves the whole last matrix, said as such
    short = _plan(tmp_path, "[ceil(N / BN), 'ceil(M / BM) * (batch - 1)']", tile, BATCH)
    assert "matrix 2 would never be written" in _messages(short)[0][1]
    # the grid that gives every matrix its tiles is whole
    whole = _plan(tmp_path, "[ceil(N / BN), 'ceil(M / BM) * batch']", tile, BATCH)
    assert whole.valid, _messages(whole)
    assert UNCHECKED_NOTE not in whole.notes


def test_a_grid_folding_the_batch_end_to_end_is_judged_by_the_rows_it_covers(tmp_path):
    # ceil(M * batch / BM): a kernel that numbers the batch's rows end to end, a tile straddling two matrices.
    assert _plan(tmp_path, "[ceil(N / BN), 'ceil(M * batch / BM)']", "[BM, BN]", BATCH).valid
    short = _plan(tmp_path, "[ceil(N / BN), 'ceil(M * batch / BM) - 1']", "[BM, BN]", BATCH)
    (field, message), = _messages(short)
    assert field == "kernels[v4].grid[1]" and "of the batch's 3 x M = 3003 rows" in message


def _groups(rule: str) -> str:
    return CONTIGUOUS.replace("RULE", rule)


@pytest.mark.parametrize("tile", ["[16, 16]", None])
def test_contiguous_groups_on_z_hold_each_slice_of_rows_to_the_largest_group(tmp_path, tile):
    # z numbers the groups; y = ceil(M / (16 * groups)) covers the average group, not the largest of random ones.
    grid = "[ceil(N / 16), 'ceil(M / (16 * groups))', groups]"
    plan = _plan(tmp_path, grid, tile, _groups("random"))
    groups = plan.operands.groups
    largest = max(groups.rows)
    assert largest > 11 * 16, groups.rows    # the drawn rows have a group past one slice's 176 rows
    (field, message), = _messages(plan)
    assert field == "kernels[v4].grid[1]"
    assert "grid z numbers the 6 contiguous groups, so each of its slices covers 176 rows of its group" in message
    assert f"but group {groups.rows.index(largest)} holds {largest}: its rows 176-{largest - 1} would never be " \
           "written" in message
    assert "grid y should be ceil(M / 16)" in message
    # even groups fit the average; a slice of ceil(M / 16) fits any group
    assert _plan(tmp_path, grid, tile, _groups("even")).valid
    whole = _plan(tmp_path, "[ceil(N / 16), ceil(M / 16), groups]", tile, _groups("random"))
    assert whole.valid, _messages(whole)


def test_a_number_where_c_s_rows_belong_is_said_at_that_axis(tmp_path):
    plan = _plan(tmp_path, "[ceil(N / 16), 4, batch]", "[16, 16]", BATCH)
    (field, message), = _messages(plan)
    assert field == "kernels[v4].grid[1]"
    assert "the grid covers 64 of M = 1001 rows (4 blocks x 16" in message
    assert "rows 64-1000 would never be written" in message and "grid y should be ceil(M / 16)" in message


@pytest.mark.parametrize("grid, extra, one", [("[batch]", BATCH, "matrix"), ("[1, 1, batch]", BATCH, "matrix"),
                                              ("[groups]", _groups("random"), "group")])
def test_one_block_per_matrix_or_group_is_no_persistent_grid(tmp_path, grid, extra, one):
    plan = _plan(tmp_path, grid, None, extra, Shape(32, 32, 32))
    assert plan.valid, _messages(plan)
    assert PERSISTENT_NOTE not in plan.notes and UNCHECKED_NOTE not in plan.notes
    assert not [note for note in plan.notes if "fixed count" in note or "sm_count" in note]
    assert [note for note in plan.notes if f"one block for each {one}" in note]
    # A block that computes its whole matrix says so with tile: [M, N], and is checked.
    whole = _plan(tmp_path, grid, "[M, N]", extra, Shape(32, 32, 32))
    assert whole.valid and not [note for note in whole.notes if "persistent" in note or "unchecked" in note]
    part = _plan(tmp_path, grid, "[16, 16]", extra, Shape(32, 32, 32))
    (field, message), = _messages(part)
    assert field == f"kernels[v4].grid[{2 if grid.startswith('[1, 1') else 0}]"
    assert f"gives each {one} one block, whose tile: [16, 16] covers 16 x 16" in message
    assert "tile: [M, N]" in message


def test_a_batch_axis_equal_to_the_batch_count_by_value_counts_the_matrices(tmp_path):
    extra = BATCH.replace("{count: 3}", "{count: NB * NI}").replace("    types", "    values: {NB: 2, NI: 3}\n"
                                                                     "    types")
    plan = _plan(tmp_path, "[ceil(N / BN), ceil(M / BM), NB * NI]", "[BM, BN]", extra)
    assert plan.valid, _messages(plan)
    assert not [note for note in plan.notes if "no grid axis reads batch" in note]
    # one fewer than the count is still noted as not counting them
    short = _plan(tmp_path, "[ceil(N / BN), ceil(M / BM), NB * NI - 1]", "[BM, BN]", extra)
    assert [note for note in short.notes if "no grid axis reads batch" in note]


def test_the_int32_index_warning_reads_argument_values_and_the_whole_batch(tmp_path):
    own_names = ("    signature: [A, B, C, {name: rows, type: int32, value: M}, {name: cols, type: int32, value: N},"
                 " {name: depth, type: int32, value: K}]\n")
    plan = _plan(tmp_path, "[ceil(N / BN), ceil(M / BM)]", None, own_names, Shape(2048, 1, 1 << 20))
    warning, = [note for note in plan.notes if "2**31" in note]
    assert "A (M*K) = 2147483648" in warning and "rows, cols, depth are int32" in warning
    # A batch of 4,096 matrices of 1024 x 1024: each matrix is small, the batch's buffers are not.
    batched = _plan(tmp_path, "[ceil(N / BN), ceil(M / BM), batch]", None,
                    BATCH.replace("{count: 3}", "{count: 4096}"), Shape(1024, 1024, 1024))
    warning, = [note for note in batched.notes if "2**31" in note]
    assert "A (4,096 matrices of M*K) = 4294967296" in warning and "M, N, K are int32" in warning
    assert "b * stride + row * ld + col" in warning


def test_a_shape_the_require_excludes_is_refused_by_the_require_alone(tmp_path):
    extra = ("    signature: [A, B, C, M, N, K, {name: quarter, type: int32, value: M / 4}]\n"
             "    require: [M % 4 == 0]\n")
    plan = _plan(tmp_path, "[ceil(N / BN), ceil(M / BM)]", None, extra)
    assert [field for field, _ in _messages(plan)] == ["kernels[v4].require[0]"]
    assert _plan(tmp_path, "[ceil(N / BN), ceil(M / BM)]", None, extra, Shape(1000, 513, 777)).valid
