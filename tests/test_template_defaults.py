"""A function template whose parameters all have defaults: named ``f<>`` it builds the instance of the defaults, as
its launcher's ``f<<<grid, block>>>`` does; named bare, the build's error says how to name it."""

from __future__ import annotations

import textwrap

from driver_gemm.cuda.compile import CompileError
from driver_gemm.planning.build import compile_spec
from driver_gemm.specfile import parse_spec
from driver_gemm.specfile.kernels import is_kernel_function

DEFAULTS_SOURCE = r"""
template <typename T = float, int TILE = 16>
__global__ void gemm_def(const T* A, const T* B, T* C, int M, int N, int K) {
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= N) return;
    T acc = 0;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}
"""


def _compiled(tmp_path, function: str):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'defaults'\n")
    (tmp_path / "k.cu").write_text(DEFAULTS_SOURCE)
    spec = parse_spec(textwrap.dedent(f"""\
        shapes: [[64, 64, 64]]
        kernels:
          - {{name: k, source: k.cu, function: '{function}', block: [16, 16], grid: [ceil(N / 16), ceil(M / 16)],
             tile: [16, 16]}}
        """), tmp_path / "spec.yaml")
    kernel = spec.kernels[0]
    return kernel, compile_spec(spec, "sm_90")[kernel.label]


def test_an_empty_template_argument_list_is_a_kernel_function():
    assert is_kernel_function("gemm_def<>") and is_kernel_function("ns::gemm_def< >")
    assert not is_kernel_function("gemm_def<, 4>") and not is_kernel_function("gemm_def<4,>")


def test_a_template_of_all_defaults_named_with_empty_angles_builds_the_defaults(tmp_path):
    kernel, built = _compiled(tmp_path, "gemm_def<>")
    assert not isinstance(built, CompileError), built
    assert kernel.label == "k" and "gemm_def" in built.symbol(kernel.instance)


def test_a_template_of_all_defaults_named_bare_says_to_write_empty_angles(tmp_path):
    _, built = _compiled(tmp_path, "gemm_def")
    assert isinstance(built, CompileError)
    message = str(built)
    assert "every template parameter of gemm_def has a default" in message
    assert "function: 'gemm_def<>'" in message
