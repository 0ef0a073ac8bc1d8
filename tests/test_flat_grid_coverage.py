"""Coverage of C by a flat element-index grid (``idx = blockIdx.x * blockDim.x + threadIdx.x``, grid
``ceil(M * N / THREADS)``): checked against C's elements, row-major across its rows and the batch's matrices, not
against 2-D tiles."""

from __future__ import annotations

import pytest

from driver_gemm.cli import main
from driver_gemm.cli.exit_codes import EXIT_FAILED
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.planning.coverage import UNCHECKED_NOTE, flat_elements, grid_axes
from driver_gemm.specfile import expr, load_spec
from driver_gemm.specfile.model import Shape

from test_spec import write

FLAT_SOURCE = """\
// one thread per element of C, a flat index over the batch's NB x M x L elements
__global__ void flat_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                            int NB, int M, int K, int L) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < (long)NB * M * L) {
        int l = idx % L;
        long nm = idx / L;
        float s = 0.f;
        for (int k = 0; k < K; ++k) s += A[nm * K + k] * B[(long)k * L + l];
        C[idx] = s;
    }
}
"""

SHAPE = Shape(1001, 513, 77)   # M x N = 513,513 elements: no multiple of 256, N none either


def _kernel(tmp_path, grid: str, tile: str | None = None, batch: int | None = None):
    lines = ["shapes: [[1001, 513, 77]]", "kernels:", "  - name: flat", "    source: ../kernels/flat.cu",
             "    function: flat_kernel"]
    if batch is not None:
        lines.append(f"    batch: {{count: {batch}, stride: {{b: 0}}}}")
    lines += [f"    signature: [A, B, C, {{name: NB, type: int32, value: {'batch' if batch else 1}}}, M, K, "
              "{name: L, type: int32, value: N}]",
              "    block: [256]", f"    grid: ['{grid}']"]
    if tile is not None:
        lines.append(f"    tile: {tile}")
    path = write(tmp_path, "\n".join(lines) + "\n")
    (tmp_path / "kernels" / "flat.cu").write_text(FLAT_SOURCE)
    return path, load_spec(path).kernels[0]


def _problems(plan):
    return [str(problem) for problem in plan.problems]


@pytest.mark.parametrize("grid, count, divisor", [
    ("ceil(M * N / 256)", "M * N", "256"), ("M * N // 256", "M * N", "256"),
    ("(M * N + 255) // 256", "M * N", "256"), ("floor(batch * M * N / THREADS)", "batch * M * N", "THREADS"),
    ("ceil(N * M * batch / (64 * 4))", "N * M * batch", "64 * 4"),
])
def test_a_flat_grid_is_read_as_elements_over_a_count(grid, count, divisor):
    axis, found_count, found_divisor = flat_elements([expr.parse(grid)])
    assert (axis, found_count.source, found_divisor.source) == (0, count, divisor)


@pytest.mark.parametrize("grid", [
    ["ceil(M / 16) * ceil(N / 16)"], ["ceil(M * N * 2 / 256)"], ["ceil(M * N / K)"], ["ceil(M * M / 256)"],
    ["ceil(N / 16)", "ceil(M * N / 256)"], ["sm_count"], ["min(264, ceil(M * N / 256))"],
])
def test_other_grids_are_not_flat(grid):
    assert flat_elements([expr.parse(extent) for extent in grid]) is None


def test_a_flat_grid_is_no_two_dimensional_tile_grid():
    # One axis reads both M and N: neither a column nor a row axis of 2-D tiles.
    assert grid_axes([expr.parse("ceil(M * N / 256)")]) is None


def test_a_flat_grid_of_the_blocks_threads_is_checked_without_a_tile(tmp_path):
    _, kernel = _kernel(tmp_path, "ceil(M * N / 256)")
    plan = plan_case(kernel, SHAPE, arch_limits("sm_90"))
    assert plan.valid
    assert UNCHECKED_NOTE not in plan.notes


def test_a_flat_grid_that_rounds_down_is_invalid_naming_the_elements_left(tmp_path):
    _, kernel = _kernel(tmp_path, "M * N // 256")
    plan = plan_case(kernel, SHAPE, arch_limits("sm_90"))
    [message] = _problems(plan)
    left = 1001 * 513 - (1001 * 513 // 256) * 256
    first = 1001 * 513 - left
    assert "kernels[flat].grid[0]" in message
    assert f"elements {first:,}-{1001 * 513 - 1:,}" in message
    assert f"row {first // 513}, column {first % 513}" in message
    assert "grid x should be ceil(M * N / 256)" in message
    assert plan_case(kernel, Shape(1024, 512, 64), arch_limits("sm_90")).valid   # M x N a multiple of 256


def test_a_flat_tile_of_one_row_is_checked_against_elements_not_row_tiles(tmp_path):
    # tile: [1, 256] on a flat grid is 256 consecutive elements of C to a block: ceil(M * N / 256) blocks cover C
    # though N is no multiple of 256 (row tiles of 1 x 256 would need M * ceil(N / 256)).
    _, kernel = _kernel(tmp_path, "ceil(M * N / 256)", tile="[1, 256]")
    plan = plan_case(kernel, SHAPE, arch_limits("sm_90"))
    assert plan.valid, _problems(plan)


def test_a_short_batched_flat_grid_with_a_tile_is_invalid_naming_the_matrix(tmp_path):
    path, kernel = _kernel(tmp_path, "ceil(batch * M * N / 512)", tile="[1, 256]", batch=16)
    plan = plan_case(kernel, SHAPE, arch_limits("sm_90"))
    [message] = _problems(plan)
    elements = 16 * 1001 * 513
    covered = -(-elements // 512) * 256
    assert "kernels[flat].grid[0]" in message and "tile: [1, 256]" in message
    assert f"elements {covered:,}-{elements - 1:,}" in message
    assert f"of matrix {covered // (1001 * 513)}" in message
    assert "grid x should be ceil(batch * M * N / 256)" in message
    assert main(["plan", "--arch", "sm_90", str(path)]) == EXIT_FAILED


def test_a_short_flat_grid_without_a_tile_is_noted_with_what_one_element_per_thread_leaves(tmp_path):
    # 512 elements to a block of 256 threads: right for a kernel of two elements a thread, so no refusal, but the
    # note says what a kernel of one element per thread leaves and how tile: [1, 256] has it checked.
    _, kernel = _kernel(tmp_path, "ceil(batch * M * N / 512)", batch=16)
    plan = plan_case(kernel, SHAPE, arch_limits("sm_90"))
    assert plan.valid
    [note] = [note for note in plan.notes if "one element per thread" in note]
    elements = 16 * 1001 * 513
    covered = -(-elements // 512) * 256
    assert f"elements {covered:,}-{elements - 1:,}" in note and "tile: [1, 256]" in note


def test_a_flat_grid_of_a_two_dimensional_block_stays_unchecked(tmp_path):
    # 16 x 16 threads over ceil(M * N / 256) blocks may as well be 2-D tiles numbered on one axis, which need
    # ceil(M / 16) * ceil(N / 16) blocks: the grid does not say which, so coverage is noted unchecked.
    path, _ = _kernel(tmp_path, "ceil(M * N / 256)")
    path.write_text(path.read_text().replace("block: [256]", "block: [16, 16]"))
    plan = plan_case(load_spec(path).kernels[0], SHAPE, arch_limits("sm_90"))
    assert plan.valid and UNCHECKED_NOTE in plan.notes

