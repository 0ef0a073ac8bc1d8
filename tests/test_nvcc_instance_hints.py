"""Under ``compiler: nvcc``, the advice about the spec's function and params is given only for an error on
driver-gemm's line that instantiates the kernel, not for every error of the kernel's own file. No GPU."""

from __future__ import annotations

import pytest

from driver_gemm.cuda.nvcc import compile_with_nvcc, find_nvcc
from driver_gemm.errors import CompileError

pytestmark = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")

INSTANCE_ADVICE = "check the spec's function and params against the template's parameters"
PLAIN = """\
__global__ void k(const float* A, float* C, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float s = A[i] C[i] = s; }
}
"""
TEMPLATE = """\
template <int BM, int BN>
__global__ void tile(const float* A, float* C) { C[0] = A[BM] + BN; }
"""


def _nvcc_failure(tmp_path, text: str, instance: str) -> str:
    (tmp_path / "pyproject.toml").touch()
    (tmp_path / "k.cu").write_text(text)
    with pytest.raises(CompileError) as failure:
        compile_with_nvcc(tmp_path / "k.cu", [instance], use_cache=False, project=tmp_path)
    return str(failure.value)


def test_a_syntax_error_in_the_kernels_file_gets_no_advice_about_the_instance(tmp_path):
    message = _nvcc_failure(tmp_path, PLAIN, "k")
    assert 'k.cu(3): error: expected a ";"' in message, message
    assert INSTANCE_ADVICE not in message


def test_a_missing_header_of_a_template_file_gets_the_header_hint_only(tmp_path):
    message = _nvcc_failure(tmp_path, '#include "not_here.h"\n' + TEMPLATE, "tile<64, 64>")
    assert "not_here.h was not found" in message, message
    assert INSTANCE_ADVICE not in message


def test_an_instance_the_template_cannot_take_still_gets_the_advice(tmp_path):
    message = _nvcc_failure(tmp_path, TEMPLATE, "tile<64>")
    assert "driver-gemm's instantiation of tile<64>: error" in message, message
    assert INSTANCE_ADVICE in message and "tile is declared template <int BM, int BN>" in message
