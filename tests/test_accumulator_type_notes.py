"""The type a kernel's tensor-core instructions accumulate in, against the spec's ``types: {accumulate: ...}``: an
fp16 sum held to an fp32 sum's tolerance FAILs a correct kernel at long K, and an fp32 sum given an fp16 sum's
tolerance lets a wrong one pass. No GPU: kernels are compiled by NVRTC and planned."""

from __future__ import annotations

import textwrap

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.build import plan_cases
from driver_gemm.planning.image_checks import ACCUMULATOR_NOTE, accumulated_type
from driver_gemm.specfile import parse_spec

SM80 = arch_limits("sm_80")

# One warp a 16 x 16 tile of C, its accumulator fragments of type ACC (half or float).
WMMA_SOURCE = r"""
#include <cuda_fp16.h>
#include <mma.h>
template <typename ACC>
__global__ void wmma_tiles(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    using namespace nvcuda;
    const int row = blockIdx.y * 16, col = blockIdx.x * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, ACC> sum;
    wmma::fill_fragment(sum, ACC(0));
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + row * K + k, K);
        wmma::load_matrix_sync(b, B + k * N + col, N);
        wmma::mma_sync(sum, a, b, sum);
    }
    wmma::fragment<wmma::accumulator, 16, 16, 16, __half> out;
    for (int i = 0; i < sum.num_elements; ++i) out.x[i] = __float2half(float(sum.x[i]));
    wmma::store_matrix_sync(C + row * N + col, out, N, wmma::mem_row_major);
}
"""

KERNEL = """\
- name: {name}
  source: k.cu
  function: wmma_tiles
  params: {{ACC: {acc}}}
  types: {{a: fp16, b: fp16, c: fp16{accumulate}}}
  block: [32]
  grid: [ceil(N / 16), ceil(M / 16)]
  tile: [16, 16]
  require: [M % 16 == 0, N % 16 == 0, K % 16 == 0]
  signature: [A, B, C, M, N, K]
"""


def _notes(tmp_path, acc: str, accumulate: str | None) -> list[str]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'checks'\n")
    (tmp_path / "k.cu").write_text(WMMA_SOURCE)
    said = f", accumulate: {accumulate}" if accumulate else ""
    text = "shapes:\n  - [64, 64, 4096]\nkernels:\n" + textwrap.indent(
        KERNEL.format(name="k", acc=acc, accumulate=said), "  ")
    [case] = [case for case in plan_cases(parse_spec(text, tmp_path / "spec.yaml"), SM80, "sm_80")[0]
              if case.kernel is not None]
    assert case.plan.valid, [str(problem) for problem in case.plan.problems]
    return [note for note in case.plan.notes if note.startswith(ACCUMULATOR_NOTE)]


@pytest.mark.parametrize("instruction, accumulated", [
    ("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", "f32"),
    ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", "f16"),
    ("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32", "s32"),
    ("wmma.mma.sync.aligned.row.col.m16n16k16.f16.f16", "f16"),
    ("wmma.mma.sync.aligned.row.col.m16n16k16.f32.bf16.bf16.f32", "f32"),
])
def test_the_accumulated_type_is_read_after_the_instructions_shape(instruction, accumulated):
    assert accumulated_type(instruction) == accumulated


def test_half_accumulators_described_with_the_default_fp32_sum_are_noted_with_the_field_to_give(tmp_path):
    [note] = _notes(tmp_path, "__half", None)
    assert "accumulates in f16 (wmma.mma.sync" in note and "accumulate: fp16" in note


def test_float_accumulators_described_as_an_fp16_sum_are_noted_as_too_loose(tmp_path):
    [note] = _notes(tmp_path, "float", "fp16")
    assert "accumulates in f32" in note and "a wrong kernel may pass" in note and "accumulate: fp32" in note


@pytest.mark.parametrize("acc, accumulate", [("__half", "fp16"), ("float", None), ("float", "fp32")])
def test_accumulators_the_spec_describes_get_no_note(tmp_path, acc, accumulate):
    assert _notes(tmp_path, acc, accumulate) == []
