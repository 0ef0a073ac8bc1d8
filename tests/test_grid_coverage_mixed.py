"""Grids that mix numbers with expressions, as generated kernels are launched (TileLang's symbolic M beside a static
N, a split of K on z): a number on x or y counts that axis's blocks along the dimension the other does not read; a
grid of numbers on x and y with a split of K (or the batch) on z is held to C where the kernel's PTX shows it is no
persistent one; and an axis taken to share out tiles as a multiple of them is held to that by the PTX's reading of
the grid's size."""

from __future__ import annotations

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.planning.coverage import PERSISTENT_NOTE, fixed_block_count_note
from driver_gemm.specfile import Shape, expr, load_spec

from test_spec import MINIMAL, write

SQUARE = Shape(1024, 1024, 1024)


def _plan(tmp_path, grid: str, tile: str, shape: Shape):
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", f"grid: {grid}") + f"    tile: {tile}\n"
    return plan_case(load_spec(write(tmp_path, text)).kernels[0], shape, arch_limits("sm_90"))


# ------------------------------------------------------------------------- a number beside an expression

def test_a_number_beside_an_axis_over_m_counts_c_s_columns(tmp_path):
    plan = _plan(tmp_path, "[16, ceil(M / 64)]", "[64, 64]", SQUARE)
    assert plan.valid, [str(problem) for problem in plan.problems]


def test_a_number_short_of_c_s_columns_is_refused_naming_the_columns_left(tmp_path):
    problem, = _plan(tmp_path, "[8, ceil(M / 64)]", "[64, 64]", SQUARE).problems
    assert problem.field == "kernels[v4].grid[0]"
    assert "the grid covers 512 of N = 1024 columns (8 blocks x 64, grid x '8'" in str(problem)
    assert "columns 512-1023 would never be written" in str(problem)
    assert problem.hint.startswith("grid x should be ceil(N / 64) (16 on this shape)")
    assert "add a grid axis" not in problem.hint


def test_a_number_beside_an_axis_over_n_counts_c_s_rows(tmp_path):
    assert _plan(tmp_path, "[ceil(N / 16), 4]", "[16, 16]", Shape(64, 512, 16)).valid
    problem, = _plan(tmp_path, "[ceil(N / 16), 4]", "[16, 16]", Shape(100, 512, 16)).problems
    assert problem.field == "kernels[v4].grid[1]" and "rows 64-99 would never be written" in str(problem)


# ------------------------------------------------------------------------- numbers on x and y, a split on z

_KERNELS = """\
// C (1024 x 1024) in tiles of 16 rows x 64 columns: block (x, y) adds the part of K that z picks (a quarter) into
// columns 64 x, rows 16 y, as a split-K kernel is generated
extern "C" __global__ void split_k(float* c, const float* a, const float* b) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 64 + threadIdx.x;
    float s = 0;
    for (int k = blockIdx.z * 256; k < blockIdx.z * 256 + 256; ++k) s += a[row * 1024 + k] * b[k * 1024 + col];
    atomicAdd(&c[row * 1024 + col], s);
}
// each block of y spans two tiles of rows, shared out over z's blocks by the grid's size, the extra returning early
extern "C" __global__ void shared_rows(float* c, const float* a, const float* b) {
    unsigned part = blockIdx.z % (gridDim.z / 2);
    if (blockIdx.z >= 2) return;
    int row = (blockIdx.y * 2 + part) * 16 + threadIdx.y, col = blockIdx.x * 64 + threadIdx.x;
    float s = 0;
    for (int k = 0; k < 1024; ++k) s += a[row * 1024 + k] * b[k * 1024 + col];
    c[row * 1024 + col] = s;
}
"""

_FIXED = ("signature: [C, A, B], block: [64, 16], tile: [16, 64], epilogue: accumulate, "
          "require: [M == 1024, N == 1024, K == 1024]")


def _compiled_plans(tmp_path, entries: str):
    from driver_gemm.planning.spec_plan import plan_spec

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "k.cu").write_text(_KERNELS)
    spec = tmp_path / "spec.yaml"
    spec.write_text("shapes: [[1024, 1024, 1024]]\nkernels:\n" + entries)
    return {plan.kernel.name: plan for plan in plan_spec(load_spec(spec), "sm_90").plans}


def _entry(name: str, function: str, grid: str) -> str:
    return f"  - {{name: {name}, source: k.cu, function: {function}, {_FIXED}, grid: {grid}}}\n"


def test_numbers_on_x_and_y_with_a_split_of_k_on_z_are_checked_against_c(tmp_path):
    plans = _compiled_plans(tmp_path, _entry("whole", "split_k", "[16, 64, 4]")
                            + _entry("short", "split_k", "[16, 32, 4]")
                            + _entry("short-k", "split_k", "[16, 32, ceil(K / 256)]"))
    whole = plans["whole"]
    assert whole.valid, [str(problem) for problem in whole.problems]
    assert PERSISTENT_NOTE not in whole.notes
    checked, = [note for note in whole.notes if "checked against C's tiles of 16 x 64" in note]
    assert "grid z's 4 blocks are taken as a split of K" in checked
    for name in ("short", "short-k"):
        problem, = plans[name].problems
        assert problem.field == f"kernels[{name}].grid[1]"
        assert "the grid covers 512 of M = 1024 rows (32 blocks x 16): rows 512-1023 would never be written" \
            in str(problem)
        assert "grid z's 4 blocks are taken as a split of K" in str(problem)
        assert problem.hint.startswith("on this shape the grid is [16, 64, 4]")
        assert PERSISTENT_NOTE not in plans[name].notes


def test_the_note_on_numbers_over_three_axes_counts_them_and_knows_the_tile_is_given():
    grid = [expr.parse(16), expr.parse(8), expr.parse(4)]
    note = fixed_block_count_note(grid, 512, (16, 8, 4), tiled=True)
    assert "numbers alone over three axes" in note and "two axes" not in note
    assert "with tile: alone" not in note and "sm_count" not in note
    assert "reads blockIdx.x and .y and never the grid's size (%nctaid)" in note
    split = [expr.parse(16), expr.parse(8), expr.parse("ceil(K / 256)")]
    note = fixed_block_count_note(split, 512, (16, 8, 4), tiled=True)
    assert "numbers alone on x and y" in note and "sm_count" not in note


# ------------------------------------------------------------------------- a multiple of the tiles on z

_MULTIPLE = "[ceil(N / 64), ceil(M / 32), 4]"


def test_a_multiple_of_the_tiles_without_the_grid_s_size_is_a_split_of_k(tmp_path):
    plans = _compiled_plans(tmp_path, _entry("splitting", "split_k", _MULTIPLE)
                            + _entry("sharing", "shared_rows", _MULTIPLE))
    problem, = plans["splitting"].problems
    assert problem.field == "kernels[splitting].grid[1]"
    assert "the grid covers 512 of M = 1024 rows" in str(problem) and "rows 512-1023 would never be written" \
        in str(problem)
    assert "never reads the grid's size (%nctaid)" in str(problem) and "grid z is a split of K" in str(problem)
    assert "grid z should be 2" in problem.hint and "grid y should be ceil(M / 16)" in problem.hint
    sharing = plans["sharing"]
    assert sharing.valid, [str(problem) for problem in sharing.problems]
    assert not [note for note in sharing.notes if "multiple of the 2 tiles" in note]


def test_a_multiple_of_the_tiles_is_noted_where_the_ptx_is_not_read(tmp_path):
    plan = _plan(tmp_path, _MULTIPLE, "[16, 64]", SQUARE)
    assert plan.valid
    note, = [note for note in plan.notes if "multiple of the 2 tiles of 16 rows" in note]
    assert "grid z's 4 blocks" in note and "rows 512-1023 of M = 1024" in note and "%nctaid" in note
    # a count equal to the tiles it shares out needs no grid's size, and is not noted
    assert not [note for note in _plan(tmp_path, "[ceil(N / 64), ceil(M / 32), 2]", "[16, 64]", SQUARE).notes
                if "multiple of" in note]
