"""A batch's (or masked groups') matrices that no grid axis counts: a kernel that picks its matrix from blockIdx.z
launched with no z writes the first matrix alone. Where the kernel's PTX shows that (it reads %ctaid.z, never the
grid's size, and z is 1), the case is INVALID at the grid; otherwise the plan notes that the kernel must loop over
the matrices itself. No GPU: the kernels are compiled by NVRTC for sm_90."""

from __future__ import annotations

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case, uncounted_matrices_check
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.specfile import Shape, load_spec, parse_spec

from conftest import ROOT

GROUPED = ROOT / "kernels/outside/args_grouped.cu"
POINTER_ARRAYS = ROOT / "kernels/outside/args_pointer_arrays.cu"
ROWS = "{name: rows, type: buffer, element: int32, size: groups, groups: rows}"


def _masked(grid: str) -> str:
    return (f"shapes: [[300, 40, 64]]\nkernels:\n- name: masked\n  source: {GROUPED}\n"
            "  function: args_grouped_masked\n  types: {a: bf16, b: bf16, c: fp32, accumulate: fp32}\n"
            "  layouts: {b: col}\n  groups: {layout: masked, count: 4, rows: random}\n  epilogue: overwrite\n"
            f"  block: [16, 16]\n  grid: {grid}\n  tile: [16, 16]\n  signature: [A, B, C, {ROWS}, M, N, K]\n")


def _pointer_arrays(grid: str) -> str:
    return (f"shapes: [[130, 72, 40]]\nkernels:\n- name: arrays\n  source: {POINTER_ARRAYS}\n"
            "  function: args_pointer_arrays\n  types: {a: fp32}\n  batch: {count: 3}\n  block: [16, 16]\n"
            f"  grid: {grid}\n  tile: [16, 16]\n  scalars: {{alpha: 1.5, beta: 0.5}}\n"
            "  signature: [{name: Aarray, type: pointers, to: A}, {name: Barray, type: pointers, to: B},\n"
            "              {name: Carray, type: pointers, to: C}, M, N, K, alpha, beta]\n")


def _planned(tmp_path, text: str):
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    plan, = plan_spec(load_spec(spec, allow_outside_sources=True), "sm_90").plans
    return plan


def test_masked_groups_launched_without_a_z_axis_are_refused_at_the_grid(tmp_path):
    plan = _planned(tmp_path, _masked("[ceil(N / 16), ceil(M / 16)]"))
    problem, = plan.problems
    assert problem.field == "kernels[masked].grid" and problem.where.endswith("spec.yaml:11")
    assert ("the grid has no z, yet the kernel reads blockIdx.z (its PTX names %ctaid.z) and never the grid's size "
            "(%nctaid), and no grid axis reads groups: C is the 4 masked groups' matrices, and every block is given "
            "group 0, so groups 1-3 would never be written") in problem.message
    assert problem.hint == "grid z should be groups, a block for every group: [ceil(N / 16), ceil(M / 16), groups]"


def test_a_z_of_1_is_refused_at_its_axis_and_a_z_of_groups_plans_ok(tmp_path):
    one = _planned(tmp_path, _masked("[ceil(N / 16), ceil(M / 16), 1]"))
    assert [problem.field for problem in one.problems] == ["kernels[masked].grid[2]"]
    assert "grid z is 1, yet the kernel reads blockIdx.z" in one.problems[0].message
    counted = _planned(tmp_path, _masked("[ceil(N / 16), ceil(M / 16), groups]"))
    assert counted.valid, [str(problem) for problem in counted.problems]
    assert not [note for note in counted.notes if "no grid axis reads" in note]


def test_a_batch_through_pointer_arrays_launched_without_a_z_axis_is_refused(tmp_path):
    plan = _planned(tmp_path, _pointer_arrays("[ceil(N / 16), ceil(M / 16)]"))
    problem, = plan.problems
    assert "C is the batch's 3 matrices, and every block is given matrix 0, so matrices 1-2 would never be " \
           "written" in problem.message
    assert _planned(tmp_path, _pointer_arrays("[ceil(N / 16), ceil(M / 16), batch]")).valid


_LOOPING = """\
// Each block computes its tile of every matrix of the batch, stepping over them by the grid's z.
__global__ void looping(const float* const* A, const float* const* B, float* const* C, int M, int N, int K,
                        int batch) {
    const int row = blockIdx.y * 16 + threadIdx.y, column = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || column >= N) return;
    for (int b = blockIdx.z; b < batch; b += gridDim.z) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) sum += A[b][row * K + k] * B[b][k * N + column];
        C[b][row * N + column] = sum;
    }
}
"""


def test_a_kernel_that_loops_over_the_matrices_by_the_grid_size_is_noted_not_refused(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "looping.cu").write_text(_LOOPING)
    plan = _planned(tmp_path, _pointer_arrays("[ceil(N / 16), ceil(M / 16)]")
                    .replace(str(POINTER_ARRAYS), "looping.cu").replace("args_pointer_arrays", "looping")
                    .replace("scalars: {alpha: 1.5, beta: 0.5}", "epilogue: overwrite")
                    .replace("M, N, K, alpha, beta]", "M, N, K, batch]"))
    assert plan.valid, [str(problem) for problem in plan.problems]
    note, = [note for note in plan.notes if "no grid axis reads batch" in note]
    assert "C is the batch's 3 matrices: the kernel must loop over them itself" in note


def test_without_the_kernels_ptx_the_plan_notes_what_it_cannot_tell():
    spec = parse_spec(_masked("[ceil(N / 16), ceil(M / 16)]"), ROOT / "spec.yaml", allow_outside_sources=True)
    plan = plan_case(spec.kernels[0], Shape(300, 40, 64), arch_limits("sm_90"))
    assert plan.valid
    note, = [note for note in plan.notes if "no grid axis reads groups" in note]
    assert "one that picks its group from blockIdx.z needs grid z = groups" in note
    # reads unknown (a call the module does not resolve), or the grid's size read: left as it is
    reads = ("ctaid.x", "ctaid.y", "ctaid.z")
    assert uncounted_matrices_check(plan, None, False) is plan
    assert uncounted_matrices_check(plan, reads, True) is plan
    refused = uncounted_matrices_check(plan, reads, False)
    assert not refused.valid and note not in refused.notes
    # a grid that reads the count, under a min() cap (a kernel looping past it), is not held to it
    capped = parse_spec(_masked("[ceil(N / 16), ceil(M / 16), 'min(groups, 2)']"), ROOT / "spec.yaml",
                        allow_outside_sources=True)
    capped_plan = plan_case(capped.kernels[0], Shape(300, 40, 64), arch_limits("sm_90"))
    assert uncounted_matrices_check(capped_plan, reads, False).valid
