"""A case's launches judged as one sequence: C read through const by a launch of then: is fine where another launch
of the case writes it, and refused, with the order to check, where none does."""

from __future__ import annotations

from driver_gemm.planning.build import offline_problems
from driver_gemm.specfile import load_spec

SOURCE = r"""
__global__ void gemm(const float* A, const float* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}
__global__ void gemm_into(const float* A, const float* B, float* out, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    out[row * N + col] = acc;
}
__global__ void row_max(const float* C, float* stats, int M, int N)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    float most = C[row * N];
    for (int n = 1; n < N; ++n) most = fmaxf(most, C[row * N + n]);
    stats[row] = most;
}
__global__ void copy_out(float* C, const float* partial, int M, int N)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M * N) C[i] = partial[i];
}
"""

SPEC = """
name: then-reads-c
shapes: [[64, 64, 32]]
kernels:
  - name: gemm-then-row-max
    source: kernels.cu
    function: gemm
    block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16)]
    tile: [16, 16]
    signature: [A, B, C, M, N, K, {name: stats, type: buffer, element: fp32, size: M, pass: none}]
    then:
      - function: row_max
        block: [64]
        grid: [ceil(M / 64)]
        signature: [C, stats, M, N]
  - name: partial-then-copy-swapped
    source: kernels.cu
    function: gemm_into
    block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16)]
    tile: [16, 16]
    signature: [A, B, {name: partial, type: buffer, element: fp32, size: M * N}, M, N, K]
    then:
      - function: copy_out
        block: [256]
        grid: [ceil(M * N / 256)]
        signature: [partial, C, M, N]
"""


def _spec(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "kernels.cu").write_text(SOURCE)
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return load_spec(path)


def test_a_launch_of_then_reading_c_after_the_gemm_wrote_it_plans_ok_and_one_that_leaves_c_unwritten_does_not(
        tmp_path):
    invalid, failed = offline_problems(_spec(tmp_path))
    assert not failed
    # The row maximum reads C through const after the GEMM wrote it: not refused. The copy given its arguments in
    # the wrong order passes C to const float* partial, and no launch of its case writes C: refused at then[0].
    assert [plan.kernel.label for plan in invalid] == ["partial-then-copy-swapped"]
    (problem,) = invalid[0].problems
    assert problem.field == "kernels[partial-then-copy-swapped].then[0].signature"
    assert "C, the output, is passed only to parameters that point to const" in str(problem)
    assert "check the signature's order" in str(problem)
