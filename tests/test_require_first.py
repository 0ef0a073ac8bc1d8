"""On a shape the kernel's own ``require:`` excludes, its refusal is said alone: no check that fails because of the
shape (a Gram kernel's square C, a batch stride that fits only small matrices, a then: launch's grid, a buffer's size,
a grid of numbers held to C) speaks before it or beside it."""

from __future__ import annotations

import textwrap

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.build import plan_cases
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import Shape, parse_spec

SM90 = arch_limits("sm_90")

SOURCE = r"""
extern "C" __global__ void gram(const float* X, float* C, int n, int k) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= n || col >= n) return;
    float s = 0; for (int i = 0; i < k; ++i) s += X[row * k + i] * X[col * k + i];
    C[row * n + col] = s;
}
extern "C" __global__ void tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
    if (r >= M || c >= N) return;
    float s = 0; for (int k = 0; k < K; ++k) s += A[r * K + k] * B[k * N + c];
    C[r * N + c] = s;
}
extern "C" __global__ void scale(float* C, int M, int N) {
    int i = blockIdx.x * 256 + threadIdx.x; if (i < M * N) C[i] *= 2.0f;
}
"""


def _spec(tmp_path, kernel: str, shapes: str = "[[128, 128, 64], [128, 100, 64]]"):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'checks'\n")
    (tmp_path / "k.cu").write_text(SOURCE)
    text = f"shapes: {shapes}\nkernels:\n" + textwrap.indent(textwrap.dedent(kernel), "  ")
    return parse_spec(text, tmp_path / "spec.yaml")


def _problems(tmp_path, kernel: str, shape: Shape) -> list[str]:
    plan = plan_case(_spec(tmp_path, kernel).kernels[0], shape, SM90)
    return [f"{problem.field}: {problem.message}" for problem in plan.problems]


@pytest.mark.parametrize("kernel", [
    # a Gram kernel's C is square: N == M
    """\
    - {name: k, source: k.cu, function: gram, signature: [A, C, M, K], require: [M == N], gram: A,
       block: [16, 16], grid: [ceil(N / 16), ceil(M / 16)], tile: [16, 16]}
    """,
    # a batch whose stride keeps the matrices apart only where N is 128 or less
    """\
    - {name: k, source: k.cu, function: tiled, require: [N <= 128 and N % 16 == 0],
       batch: {count: 2, stride: {c: 128 * 128}},
       block: [16, 16], grid: [ceil(N / 16), ceil(M / 16), batch], tile: [16, 16]}
    """,
    # a then: launch whose grid is whole only where N is a multiple of 16
    """\
    - {name: k, source: k.cu, function: tiled, require: [N % 16 == 0], epilogue: overwrite,
       block: [16, 16], grid: [ceil(N / 16), ceil(M / 16)], tile: [16, 16],
       then: [{function: scale, block: [256], grid: ["N / 16"], signature: [C, M, N]}]}
    """,
    # a buffer of the kernel's own sized for N a multiple of 16
    """\
    - {name: k, source: k.cu, function: tiled, require: [N % 16 == 0], epilogue: overwrite,
       signature: [A, B, C, M, N, K, {name: flags, type: buffer, element: int32, size: "N / 16"}],
       block: [16, 16], grid: [ceil(N / 16), ceil(M / 16)], tile: [16, 16]}
    """,
])
def test_the_require_is_said_alone_on_a_shape_it_excludes(tmp_path, kernel):
    assert _problems(tmp_path, kernel, Shape(128, 128, 64)) == []
    problems = _problems(tmp_path, kernel, Shape(128, 136 if "N <= 128" in kernel else 100, 64))
    assert problems and all(".require[0]: " in problem and "does not hold" in problem for problem in problems), \
        problems


def test_a_grid_of_numbers_is_not_held_to_c_on_a_shape_the_require_excludes(tmp_path):
    spec = _spec(tmp_path, """\
        - {name: k, source: k.cu, function: tiled, require: [M == 256 and N == 256], epilogue: overwrite,
           block: [16, 16], grid: [16, 16], tile: [16, 16]}
        """, shapes="[[256, 256, 64], [512, 512, 64]]")
    plans = {case.shape.label: case.plan for case in plan_cases(spec, SM90, "sm_90")[0] if case.kernel is not None}
    assert plans["256x256x64"].valid, plans["256x256x64"].problems
    problems = [f"{problem.field}: {problem.message}" for problem in plans["512x512x64"].problems]
    assert problems and all(".require[0]: " in problem for problem in problems), problems
