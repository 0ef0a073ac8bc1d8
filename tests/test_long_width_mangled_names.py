"""A mangled name copied from another compiler's build, whose 64-bit integers that compiler spells otherwise
(int64_t is long under nvcc on Linux, long long under NVRTC): the refusal says so and what to name. No GPU."""

from __future__ import annotations

import pytest

from driver_gemm.cuda.compile import compile_source
from driver_gemm.cuda.nvcc import compile_with_nvcc, find_nvcc
from driver_gemm.errors import CompileError

SOURCE = """\
#include <cstdint>
template <int TILE>
__global__ void tiled(const float* A, float* C, int64_t M, uint64_t N) { if (TILE > 0) C[0] = A[M + N]; }
template __global__ void tiled<16>(const float*, float*, int64_t, uint64_t);
"""
NVCC_NAME = "_Z5tiledILi16EEvPKfPflm"      # int64_t as long (l), uint64_t as unsigned long (m)
NVRTC_NAME = "_Z5tiledILi16EEvPKfPfxy"     # long long (x), unsigned long long (y)


def _refusal(tmp_path, instance: str, compiler: str) -> str:
    (tmp_path / "pyproject.toml").touch()
    (tmp_path / "k.cu").write_text(SOURCE)
    build = compile_with_nvcc if compiler == "nvcc" else compile_source
    with pytest.raises(CompileError) as failure:
        build(tmp_path / "k.cu", [instance], "sm_90", use_cache=False, project=tmp_path)
    return str(failure.value)


def test_nvccs_mangled_name_under_nvrtc_says_why_and_what_to_name(tmp_path):
    message = _refusal(tmp_path, NVCC_NAME, "nvrtc")
    assert f"NVRTC's build has no kernel {NVCC_NAME}" in message, message
    assert "long long under NVRTC and long under nvcc" in message
    assert NVRTC_NAME in message and "tiled<16>" in message and "compiler: nvcc" in message


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_nvrtcs_mangled_name_under_nvcc_says_why_and_what_to_name(tmp_path):
    message = _refusal(tmp_path, NVRTC_NAME, "nvcc")
    assert f"nvcc's build has no kernel {NVRTC_NAME}" in message, message
    assert "long long under NVRTC and long under nvcc" in message
    assert NVCC_NAME in message and "tiled<16>" in message and "compiler: nvrtc" in message


def test_a_name_that_differs_otherwise_gets_no_such_reason(tmp_path):
    message = _refusal(tmp_path, "_Z5tiledILi32EEvPKfPflm", "nvrtc")
    assert "NVRTC's build has no kernel" in message and "64-bit integers" not in message, message


def test_the_twin_is_found_by_type_not_by_letter():
    from driver_gemm.cuda.compile import long_width_twin
    assert long_width_twin(NVCC_NAME, [NVRTC_NAME, "_Z5otherv"]) == NVRTC_NAME
    assert long_width_twin("_Z1kILl5EEvPf", ["_Z1kILx5EEvPf"]) == "_Z1kILx5EEvPf"     # a template literal 5l, 5ll
    assert long_width_twin(NVCC_NAME, ["_Z5tiledILi16EEvPKfPfxx"]) is None            # uint64_t is not int64_t
    assert long_width_twin("tiled<16>", [NVRTC_NAME]) is None                          # a C++ name, not mangled
