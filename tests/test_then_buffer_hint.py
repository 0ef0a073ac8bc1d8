"""A buffer only a launch of then: takes is declared in the kernel's own signature with ``pass: none``: the refusal
of one declared in the launch's signature, or named there without a declaration, says so, and following it plans."""

from __future__ import annotations

import pytest

from driver_gemm.errors import SpecError
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
__global__ void scale_rows(float* C, const float* factors, int M, int N)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M * N) C[i] *= factors[i / N];
}
"""

SPEC = """
name: then-buffer
shapes: [[64, 64, 32]]
kernels:
  - name: gemm-then-scale
    source: kernels.cu
    function: gemm
    block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16)]
    tile: [16, 16]
    signature: [A, B, C, M, N, K{kernel_buffer}]
    then:
      - function: scale_rows
        block: [256]
        grid: [ceil(M * N / 256)]
        signature: [C, {launch_factors}, M, N]
"""
FACTORS = "{name: factors, type: buffer, element: fp32, size: M, fill: 1}"


def _load(tmp_path, kernel_buffer: str, launch_factors: str):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "kernels.cu").write_text(SOURCE)
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.replace("{kernel_buffer}", kernel_buffer).replace("{launch_factors}", launch_factors))
    return load_spec(path)


@pytest.mark.parametrize("kernel_buffer, launch_factors, field", [
    ("", FACTORS, "then[0].signature[1].type"),          # declared in the launch's signature
    ("", "factors", "then[0].signature[1]"),              # named there, declared nowhere
])
def test_the_refusal_of_a_buffer_of_a_launch_of_then_says_to_declare_it_with_pass_none(tmp_path, kernel_buffer,
                                                                                        launch_factors, field):
    with pytest.raises(SpecError) as refused:
        _load(tmp_path, kernel_buffer, launch_factors)
    assert refused.value.field == f"kernels[gemm-then-scale].{field}"
    assert "in the kernel's own signature with pass: none" in refused.value.hint
    assert "{name: factors, type: buffer" in refused.value.hint


def test_a_buffer_declared_with_pass_none_as_the_hint_says_plans(tmp_path):
    spec = _load(tmp_path, ", " + FACTORS.replace("}", ", pass: none}"), "factors")
    assert offline_problems(spec) == ([], {})
