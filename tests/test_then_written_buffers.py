"""A launch of then: that takes a buffer of the case through a pointer it may write through (``float* out``) is
noted in the plan: a run compares C alone with the reference, so what such a launch leaves in the buffer (a row sum
in ``out[M]``) is never checked. No GPU: NVRTC compiles, and the types come from the functions' mangled names."""

from __future__ import annotations

from pathlib import Path

from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.specfile import load_spec

# A GEMM into C, then launches after it: a row sum into a buffer of the case, one that reads the buffer through
# const, and one that writes C from a buffer of partial products.
SOURCE = """\
__global__ void gemm(const float* A, const float* B, float* C, int M, int N, int K)
{
    const int row = blockIdx.y * 16 + threadIdx.y, column = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || column >= N) return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum += A[row * K + k] * B[k * N + column];
    C[row * N + column] = sum;
}
__global__ void row_sum(const float* C, float* out, int M, int N)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    float sum = 0.0f;
    for (int n = 0; n < N; ++n) sum += C[row * N + n];
    out[row] = sum;
}
__global__ void row_scale(float* C, const float* out, int M, int N)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    for (int n = 0; n < N; ++n) C[row * N + n] *= out[row];
}
extern "C" __global__ void row_sum_plain(const float* C, float* out, int M, int N)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) out[row] = C[row * N];
}
"""

KERNEL = """\
  - name: {name}
    source: k.cu
    function: gemm
    block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16)]
    tile: [16, 16]
    epilogue: overwrite
    signature: [A, B, C, M, N, K, {{name: out, type: buffer, element: fp32, size: M, pass: none}}]
    then:
{launches}"""

LAUNCH = """\
      - function: {function}
        block: [128]
        grid: [ceil(M / 128)]
        signature: [C, out, M, N]
"""


def _notes(folder: Path, *functions: str) -> list[str]:
    (folder / "pyproject.toml").write_text("")
    (folder / "k.cu").write_text(SOURCE)
    path = folder / "spec.yaml"
    launches = "".join(LAUNCH.format(function=function) for function in functions)
    path.write_text("shapes: [[130, 72, 40]]\nkernels:\n" + KERNEL.format(name="k", launches=launches))
    result = plan_spec(load_spec(path), arch="sm_90")
    assert not result.compile_errors, result.compile_errors
    (plan,) = result.plans
    assert plan.valid, plan.problems
    return [note for note in plan.notes if "which the check does not read" in note]


def test_a_launch_of_then_that_may_write_a_buffer_is_noted_with_the_buffer_and_the_launch(tmp_path):
    (note,) = _notes(tmp_path, "row_sum")
    assert note.startswith("then[0]: row_sum: may write buffer out (float*)")
    assert "only C is compared with the reference" in note


def test_a_buffer_a_launch_reads_through_const_is_not_noted(tmp_path):
    # row_sum writes out (noted at then[0]); row_scale reads it through const float* and writes C: not noted.
    (note,) = _notes(tmp_path, "row_sum", "row_scale")
    assert note.startswith("then[0]: row_sum:")


def test_a_launch_whose_types_cannot_be_read_is_not_noted(tmp_path):
    # An extern "C" function's symbol carries no types: whether it writes the buffer is not known.
    assert _notes(tmp_path, "row_sum_plain") == []
