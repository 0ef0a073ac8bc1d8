"""A PyTorch extension source (``<torch/extension.h>`` and a ``torch::Tensor`` wrapper beside the kernel, as
KernelBench's load_inline solutions hold them): what NVRTC and nvcc builds say, and the guard that lets NVRTC build
the kernel. Torch need not be installed. No GPU."""

from __future__ import annotations

import pytest

from driver_gemm.cuda.compile import compile_source
from driver_gemm.cuda.compile_diagnostics import compile_hints
from driver_gemm.cuda.nvcc import compile_with_nvcc, find_nvcc
from driver_gemm.errors import CompileError

KERNEL = """\
__global__ void matmul_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum += A[row * K + k] * B[k * N + col];
    if (row < M && col < N) C[row * N + col] = sum;
}
"""
WRAPPER = """\
torch::Tensor matmul_cuda(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda(), "A must be a CUDA tensor");
    auto C = torch::zeros({A.size(0), B.size(1)}, A.options());
    return C;
}
"""
EXTENSION = "#include <torch/extension.h>\n" + KERNEL + WRAPPER


def _failure(tmp_path, text: str, options=(), compiler: str = "nvrtc") -> str:
    (tmp_path / "pyproject.toml").touch()
    (tmp_path / "k.cu").write_text(text)
    build = compile_with_nvcc if compiler == "nvcc" else compile_source
    with pytest.raises(CompileError) as failure:
        build(tmp_path / "k.cu", ["matmul_kernel"], "sm_90", options, use_cache=False, project=tmp_path)
    return str(failure.value)


def test_nvrtc_says_torchs_missing_header_is_host_code_and_gives_both_ways_out(tmp_path):
    message = _failure(tmp_path, EXTENSION)
    assert "k.cu:1: error: cannot open source file \"torch/extension.h\"" in message, message
    hint = next(line for line in message.splitlines() if "hint:" in line and "torch/extension.h" in line)
    assert "PyTorch" in hint and "NVRTC cannot compile" in hint
    assert "#ifndef __CUDACC_RTC__" in hint and "compiler: nvcc" in hint and "include" in hint


def test_nvrtc_names_torch_host_code_where_the_header_is_found(tmp_path):
    # A header of that name found through -I (an empty stand-in): the wrapper is what fails, with errors that say
    # nothing of host code.
    (tmp_path / "inc" / "torch").mkdir(parents=True)
    (tmp_path / "inc" / "torch" / "extension.h").write_text("#pragma once\n")
    message = _failure(tmp_path, EXTENSION, [f"-I{tmp_path / 'inc'}"])
    hint = next(line for line in message.splitlines() if "hint:" in line and "PyTorch" in line)
    wrapper_line = EXTENSION.splitlines().index(WRAPPER.splitlines()[0]) + 1
    assert f"k.cu:{wrapper_line}" in hint and "#ifndef __CUDACC_RTC__" in hint and "compiler: nvcc" in hint, hint


@pytest.mark.parametrize("marker", ["TORCH_CHECK(x.is_cuda());", "at::Tensor y = x;", "PYBIND11_MODULE(ext, m) {",
                                    "c10::cuda::CUDAGuard guard(x.device());"])
def test_each_torch_marker_in_a_quoted_line_gets_the_torch_hint(marker):
    log = f'k.cu(12): error: identifier "whatever" is undefined\n  {marker}\n  ^\n'
    hints = compile_hints(log)
    assert any("PyTorch extension code" in hint and "k.cu:12" in hint for hint in hints), hints


def test_a_device_only_error_gets_no_torch_hint():
    log = 'k.cu(3): error: identifier "acc" is undefined\n  float at = acc;\n  ^\n'
    assert not any("PyTorch" in hint for hint in compile_hints(log))


def test_the_guarded_source_builds_under_nvrtc(tmp_path):
    (tmp_path / "pyproject.toml").touch()
    guarded = ("#ifndef __CUDACC_RTC__\n#include <torch/extension.h>\n#endif\n" + KERNEL
               + "#ifndef __CUDACC_RTC__\n" + WRAPPER + "#endif\n")
    (tmp_path / "k.cu").write_text(guarded)
    built = compile_source(tmp_path / "k.cu", ["matmul_kernel"], "sm_90", use_cache=False, project=tmp_path)
    assert "matmul_kernel" in built.lowered_names


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_nvcc_says_where_torchs_include_folders_come_from(tmp_path):
    message = _failure(tmp_path, EXTENSION, compiler="nvcc")
    hint = next(line for line in message.splitlines() if "hint:" in line and "torch/extension.h" in line)
    assert "PyTorch" in hint and "include_paths()" in hint and "--allow-outside-sources" in hint, hint
    assert "#ifndef __CUDACC_RTC__" in hint
