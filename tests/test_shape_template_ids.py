"""A template-id that reads the shape (``gemm_static<M, N, K, 16>``, a kernel templated on its sizes) is refused at
``function:``, with the way to describe such a kernel: params of its own, ``require:`` and a dispatch table."""

from __future__ import annotations

import textwrap

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import DriverGemmError
from driver_gemm.planning.build import plan_cases
from driver_gemm.specfile import parse_spec

STATIC_SOURCE = r"""
template <int SIZE_M, int SIZE_N, int SIZE_K, int TILE = 16>
__global__ void gemm_static(const float* A, const float* B, float* C) {
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    if (row >= SIZE_M || col >= SIZE_N) return;
    float acc = 0.f;
    for (int k = 0; k < SIZE_K; ++k) acc += A[row * SIZE_K + k] * B[k * SIZE_N + col];
    C[row * SIZE_N + col] = acc;
}
"""

KERNEL = """\
shapes: [[64, 32, 16], [48, 16, 32]]
kernels:
  - name: static
    source: k.cu
    function: '{function}'
    signature: [A, B, C]
    block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16)]
    tile: [16, 16]
"""


def _spec(tmp_path, text: str):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'static'\n")
    (tmp_path / "k.cu").write_text(STATIC_SOURCE)
    return parse_spec(textwrap.dedent(text), tmp_path / "spec.yaml")


@pytest.mark.parametrize("function, read", [
    ("gemm_static<M, N, K, 16>", "M, N, K"),
    ("gemm_static<64, 32, K>", "K"),
    ("gemm_static<lda, 32, 16>", "lda"),
])
def test_a_template_id_reading_the_shape_is_refused_at_function_with_the_dispatch_way(tmp_path, function, read):
    with pytest.raises(DriverGemmError) as raised:
        _spec(tmp_path, KERNEL.format(function=function))
    message = str(raised.value)
    assert "spec.yaml:5:" in message and "kernels[static].function" in message   # the function's own line
    assert f"reads {read}," in message and "fixed when the kernel compiles" in message
    assert "require:" in message and "dispatch:" in message and "params of its own" in message


def test_the_hinted_form_of_a_kernel_templated_on_its_shape_plans(tmp_path):
    spec = _spec(tmp_path, KERNEL.format(function="gemm_static<M_, N_, K_, 16>")
                 + "    params: {M_: 64, N_: 32, K_: 16}\n"
                 + "    require: [M_ == M, N_ == N, K_ == K]\n"
                 + "dispatch:\n"
                 + "  static:\n"
                 + "    - {shape: [64, 32, 16], params: {M_: 64, N_: 32, K_: 16}}\n"
                 + "    - {shape: [48, 16, 32], params: {M_: 48, N_: 16, K_: 32}}\n")
    cases = [case for case in plan_cases(spec, arch_limits("sm_90"), "sm_90")[0] if case.kernel is not None]
    assert len(cases) == 2 and all(case.plan.valid for case in cases), [case.plan.problems for case in cases]


def test_a_then_launch_template_id_reading_the_shape_is_refused_at_its_function(tmp_path):
    with pytest.raises(DriverGemmError) as raised:
        _spec(tmp_path, KERNEL.format(function="gemm_static<64, 32, 16>")
              + "    then:\n"
              + "      - {function: 'gemm_static<M, 32, 16>', block: [16, 16], grid: [2, 4], signature: [A, B, C]}\n")
    message = str(raised.value)
    assert "kernels[static].then[0].function" in message and "reads M," in message
