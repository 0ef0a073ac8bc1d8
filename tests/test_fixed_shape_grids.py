"""A grid of numbers alone, as TVM and tinygrad print the launch of a kernel generated for one shape. Where the
kernel's PTX reads blockIdx.x and blockIdx.y and never the grid's size, it is no persistent kernel: with a tile:,
the grid is checked against C (a transposed or halved grid is refused at its axis). A kernel that steps over tiles by
gridDim is still taken as persistent, and the note on a literal two-axis grid says how to have it checked rather
than advising sm_count."""

from __future__ import annotations

from driver_gemm.planning.coverage import PERSISTENT_NOTE, fixed_block_count_note
from driver_gemm.specfile import expr, load_spec

_KERNELS = """\
// C (1024 x 1024) in tiles of 16 rows x 64 columns: block (x, y) computes columns 64 x, rows 16 y, as generated
extern "C" __global__ void generated(float* c, const float* a, const float* b) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 64 + threadIdx.x;
    float s = 0;
    for (int k = 0; k < 1024; ++k) s += a[row * 1024 + k] * b[k * 1024 + col];
    c[row * 1024 + col] = s;
}
// the same tiles, each block stepping over them by the grid's size
extern "C" __global__ void striding(float* c, const float* a, const float* b) {
    for (int ty = blockIdx.y; ty < 64; ty += gridDim.y)
        for (int tx = blockIdx.x; tx < 16; tx += gridDim.x) {
            int row = ty * 16 + threadIdx.y, col = tx * 64 + threadIdx.x;
            float s = 0;
            for (int k = 0; k < 1024; ++k) s += a[row * 1024 + k] * b[k * 1024 + col];
            c[row * 1024 + col] = s;
        }
}
"""


def _plans(tmp_path, entries: str):
    from driver_gemm.planning.spec_plan import plan_spec

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "k.cu").write_text(_KERNELS)
    spec = tmp_path / "spec.yaml"
    spec.write_text("shapes: [[1024, 1024, 1024]]\nkernels:\n" + entries)
    return {plan.kernel.name: plan for plan in plan_spec(load_spec(spec), "sm_90").plans}


_FIXED = "signature: [C, A, B], block: [64, 16], tile: [16, 64], require: [M == 1024, N == 1024, K == 1024]"


def test_a_generated_kernels_literal_grid_is_checked_against_c(tmp_path):
    plans = _plans(tmp_path, f"  - {{name: right, source: k.cu, function: generated, {_FIXED}, grid: [16, 64]}}\n"
                             f"  - {{name: swapped, source: k.cu, function: generated, {_FIXED}, grid: [64, 16]}}\n"
                             f"  - {{name: halved, source: k.cu, function: generated, {_FIXED}, grid: [8, 64]}}\n")
    right = plans["right"]
    assert right.valid, [str(problem) for problem in right.problems]
    assert PERSISTENT_NOTE not in right.notes
    assert any("the grid of numbers alone is checked against C's tiles of 16 x 64" in note for note in right.notes)
    problem, = plans["swapped"].problems
    assert problem.field == "kernels[swapped].grid[1]"
    assert "the grid covers 256 of M = 1024 rows (16 blocks x 16): rows 256-1023 would never be written" in str(problem)
    assert "reads blockIdx.x and blockIdx.y and never the grid's size (%nctaid)" in str(problem)
    assert problem.hint.startswith("on this shape the grid is [16, 64] ([ceil(N / 64), ceil(M / 16)]")
    problem, = plans["halved"].problems
    assert problem.field == "kernels[halved].grid[0]"
    assert "the grid covers 512 of N = 1024 columns (8 blocks x 64)" in str(problem)
    assert not [note for note in plans["halved"].notes if "a fixed count" in note]


def test_a_kernel_that_steps_by_the_grids_size_stays_persistent(tmp_path):
    plan = _plans(tmp_path, f"  - {{name: k, source: k.cu, function: striding, {_FIXED}, grid: [8, 16]}}\n")["k"]
    assert plan.valid, [str(problem) for problem in plan.problems]
    assert PERSISTENT_NOTE in plan.notes


def test_the_note_on_a_literal_two_axis_grid_says_how_it_is_checked_not_to_follow_the_gpu():
    grid = [expr.parse(16), expr.parse(64)]
    note = fixed_block_count_note(grid, 1024, (16, 64))
    assert "numbers alone over two axes, as a kernel generated for one shape is launched" in note
    assert "[ceil(N / cols), ceil(M / rows)] with tile: [rows, cols]" in note and "sm_count" not in note
    # one axis of them: a persistent grid with its SMs written out
    assert "sm_count (its SMs)" in fixed_block_count_note([expr.parse(132)], 132, (132,))
