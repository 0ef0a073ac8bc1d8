"""Scalar accesses of global memory wider than a matrix's element: two fp16 read as one ld.global.u32 (a __half2),
four as one ld.global.u64, two fp32 as one ld.global.u64, a half2 atomicAdd, a cp.async of 4 bytes of fp16. Each
needs its address aligned to its width as a vector access does, so the plan notes a shape whose rows are not, with
the instruction, the sizes and the require: that keeps such shapes out; an access of one element (ld.global.f32 of
fp32, ld.global.u16 of fp16) never is. A kernel that tests a size at run time excuses that size only: a test of K
leaves the note on N at N == K. No GPU: NVRTC, and PTX read as it is."""

from __future__ import annotations

import textwrap

from driver_gemm.cuda.ptx_facts import KernelPtxFacts, VectorAccess, ptx_facts
from driver_gemm.planning.image_checks import MISALIGNED_VECTOR_NOTE
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.specfile import load_spec

from conftest import TEST_KERNELS

MODULE = """\
.visible .entry k(
.param .u64 k_param_0,
.param .u64 k_param_1,
.param .u64 k_param_2,
.param .u32 k_param_3
)
{
ld.param.u64 %rd1, [k_param_0];
ld.param.u64 %rd2, [k_param_1];
ld.param.u64 %rd3, [k_param_2];
cvta.to.global.u64 %rd4, %rd1;
mul.wide.s32 %rd5, %r9, 2;
add.s64 %rd6, %rd4, %rd5;
ld.global.u32 %r1, [%rd6];
ld.global.nc.u32 %r2, [%rd6+4];
ld.global.u8 %rs1, [%rd6];
cp.async.ca.shared.global [%r5], [%rd6], 4;
cvta.to.global.u64 %rd7, %rd2;
st.global.b64 [%rd7], %rd8;
add.s64 %rd9, %rd3, %rd5;
\t{ atom.add.noftz.f16x2 %r3,[%rd9],%r4; }
ld.global.u32 %r6, [%rd10];
ld.u32 %r7, [%rd11];
ld.shared.u32 %r8, [%r5];
ret;
}
"""


def test_ptx_facts_keep_each_scalar_access_of_several_bytes_with_the_parameter_it_is_made_from():
    facts = ptx_facts(MODULE)["k"]
    assert set(facts.scalar_accesses) == {
        VectorAccess(False, 4, "ld.global.u32", (0,)),
        VectorAccess(False, 4, "ld.global.nc.u32", (0,)),
        VectorAccess(False, 4, "cp.async.ca.shared.global", (0,)),    # two fp16, or one fp32
        VectorAccess(True, 8, "st.global.b64", (1,)),
        VectorAccess(True, 4, "atom.add.noftz.f16x2", (2,)),          # a generic address made from a parameter
    }   # a byte's load, an address from no parameter (global or generic) and a shared one are none
    again = KernelPtxFacts.from_dict(facts.as_dict())      # kept beside the CUBIN and read back as they were
    assert again.scalar_accesses == facts.scalar_accesses
    assert KernelPtxFacts.from_dict({"copies": []}).scalar_accesses is None


def _plans(tmp_path, shapes: str, entry: str, **files) -> dict[str, object]:
    (tmp_path / "pyproject.toml").write_text("")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"shapes: {shapes}\nkernels:\n- name: k\n{textwrap.indent(entry, '  ')}")
    return {plan.shape.label: plan for plan in plan_spec(load_spec(spec), "sm_90").plans}


def _alignment_notes(plan) -> list[str]:
    return [note for note in plan.notes if note.startswith(MISALIGNED_VECTOR_NOTE)]


HALF2_ENTRY = "source: half2_columns.cu\nfunction: half2_columns\ntypes: {a: fp16}\nblock: [16, 16]\n" \
              "grid: [ceil(N / 32), ceil(M / 16)]\ntile: [16, 32]\n"


def test_half2_reads_and_writes_of_fp16_rows_at_an_odd_n_are_noted_even_where_k_equals_n(tmp_path):
    # the kernel tests K's low bit (A's half2 path), never N's: at N == K == 129 B's and C's rows stay misaligned
    plans = _plans(tmp_path, "[[128, 129, 129], [128, 130, 130], [128, 130, 129]]", HALF2_ENTRY,
                   **{"half2_columns.cu": (TEST_KERNELS / "half2_columns.cu").read_text()})
    note, = _alignment_notes(plans["128x129x129"])
    assert plans["128x129x129"].valid                  # a note, as for a vector access
    assert "B is read 4 bytes at a time (ld.global.u32) while its rows are N = 129 fp16 elements apart " \
           "(258 bytes)" in note
    assert "C is written 4 bytes at a time (st.global.u32) while its rows are N = 129 fp16" in note
    assert "A is" not in note and "require: N % 2 == 0 keeps such shapes out" in note
    assert not _alignment_notes(plans["128x130x130"])
    assert not _alignment_notes(plans["128x130x129"])  # an odd K: the kernel tests it and reads A one by one


U64_KERNELS = """\
// B's pairs of fp32 columns read as one 64-bit integer, C's written as a float2: rows of B and C N apart
__device__ float2 pair_of(const float* B, int at) {
    const unsigned long long bits = *reinterpret_cast<const unsigned long long*>(&B[at]);
    return make_float2(__uint_as_float(unsigned(bits)), __uint_as_float(unsigned(bits >> 32)));
}

// K four terms a step where K % 4 == 0 (the kernel tests K), one otherwise; N never tested
extern "C" __global__ void u64_columns(const float* A, const float* B, float* C, int M, int N, int K) {
    const int col = (blockIdx.x * blockDim.x + threadIdx.x) * 2, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float2 sum = make_float2(0.f, 0.f);
    const int step = (K & 3) == 0 ? 4 : 1;
    for (int k = 0; k < K; k += step)
        for (int i = 0; i < step; ++i) {
            const float a = A[row * K + k + i];
            const float2 b = pair_of(B, (k + i) * N + col);
            sum.x += a * b.x; sum.y += a * b.y;
        }
    *reinterpret_cast<float2*>(&C[row * N + col]) = sum;
}

// the same, in pairs only where N is even (the kernel tests its parameter cols, which passes N)
extern "C" __global__ void u64_columns_if_even(const float* A, const float* B, float* C, int M, int cols, int K) {
    const int col = (blockIdx.x * blockDim.x + threadIdx.x) * 2, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= cols) return;
    float2 sum = make_float2(0.f, 0.f);
    for (int k = 0; k < K; ++k) {
        const float a = A[row * K + k];
        if ((cols & 1) == 0) {
            const float2 b = pair_of(B, k * cols + col);
            sum.x += a * b.x; sum.y += a * b.y;
        } else {
            sum.x += a * B[k * cols + col];
            if (col + 1 < cols) sum.y += a * B[k * cols + col + 1];
        }
    }
    if ((cols & 1) == 0) {
        *reinterpret_cast<float2*>(&C[row * cols + col]) = sum;
    } else {
        C[row * cols + col] = sum.x;
        if (col + 1 < cols) C[row * cols + col + 1] = sum.y;
    }
}
"""

U64_SHAPES = "[[64, 513, 513], [64, 513, 515], [64, 512, 512]]"


def _u64_entry(function: str, signature: str = "") -> str:
    return f"source: u64.cu\nfunction: {function}\nblock: [16, 16]\ngrid: [ceil(N / 32), ceil(M / 16)]\n" \
           f"tile: [16, 32]\n{signature}"


def test_a_64_bit_scalar_read_of_two_fp32_is_noted_at_an_odd_n_whatever_other_size_equals_it(tmp_path):
    plans = _plans(tmp_path, U64_SHAPES, _u64_entry("u64_columns"), **{"u64.cu": U64_KERNELS})
    for label in ("64x513x513", "64x513x515"):       # K == N, and K != N: the test of K excuses neither
        note, = _alignment_notes(plans[label])
        assert "B is read 8 bytes at a time (ld.global.u64) while its rows are N = 513 fp32 elements apart " \
               "(2,052 bytes)" in note, label
        assert "C is written 8 bytes at a time (st.global.v2.f32)" in note and "A is" not in note
        assert "require: N % 2 == 0 keeps such shapes out" in note
    assert not _alignment_notes(plans["64x512x512"])


def test_a_kernel_that_tests_the_parameter_passing_the_misaligned_size_gets_no_note(tmp_path):
    signature = "signature: [A, B, C, M, {name: cols, type: int32, value: N}, K]\n"
    plans = _plans(tmp_path, U64_SHAPES, _u64_entry("u64_columns_if_even", signature), **{"u64.cu": U64_KERNELS})
    assert all(plan.valid and not _alignment_notes(plan) for plan in plans.values())


COPY4_KERNEL = """\
#include <cuda_fp16.h>
// A's rows copied to shared memory two fp16 at a time (a 4-byte cp.async, rows K apart); C summed into with half2
// atomics (rows N apart). Planned, never run.
extern "C" __global__ void copy4_atomic(const __half* A, const __half* B, __half* C, int M, int N, int K) {
    __shared__ __half a_row[64];
    const int col = (blockIdx.x * blockDim.x + threadIdx.x) * 2, row = blockIdx.y;
    float sum0 = 0.f, sum1 = 0.f;
    for (int k0 = 0; k0 < K; k0 += 64) {
        if (threadIdx.x < 32 && k0 + 2 * threadIdx.x < K) {
            const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(&a_row[2 * threadIdx.x]));
            const __half* from = &A[row * K + k0 + 2 * threadIdx.x];
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\\n" :: "r"(to), "l"(from));
        }
        asm volatile("cp.async.wait_all;\\n" ::);
        __syncthreads();
        for (int k = k0; k < K && k < k0 + 64 && col < N; ++k) {
            sum0 += __half2float(a_row[k - k0]) * __half2float(B[k * N + col]);
            sum1 += __half2float(a_row[k - k0]) * __half2float(B[k * N + col + 1]);
        }
        __syncthreads();
    }
    if (row < M && col < N) atomicAdd(reinterpret_cast<__half2*>(&C[row * N + col]), __floats2half2_rn(sum0, sum1));
}
"""


def test_a_4_byte_copy_and_a_half2_atomic_of_fp16_rows_are_noted_at_odd_sizes(tmp_path):
    plans = _plans(tmp_path, "[[64, 257, 255], [64, 256, 256]]",
                   "source: copy4.cu\nfunction: copy4_atomic\ntypes: {a: fp16}\nblock: [128]\n"
                   "grid: [ceil(N / 256), M]\ntile: [1, 256]\n", **{"copy4.cu": COPY4_KERNEL})
    note, = _alignment_notes(plans["64x257x255"])
    assert "A is read 4 bytes at a time (cp.async.ca.shared.global) while its rows are K = 255 fp16" in note
    assert "C is written 4 bytes at a time (atom.add.noftz.f16x2) while its rows are N = 257 fp16" in note
    assert "require: K % 2 == 0 and N % 2 == 0" in note
    assert not _alignment_notes(plans["64x256x256"])


ADDRESS_TEST_KERNELS = """\
#include <cuda_fp16.h>
#include <cstdint>
// A's row read two fp16 at a time where the row's own address is 4-byte aligned, one at a time elsewhere (ROW = 1);
// or where A itself is (ROW = 0), which says nothing of the rows after the first
template <int ROW>
__global__ void half2_rows(const __half* A, const __half* B, float* C, int M, int N, int K) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    const __half* a_row = A + (long long)row * K;
    float sum = 0.f;
    int k = 0;
    if ((reinterpret_cast<uintptr_t>(ROW ? a_row : A) & 3) == 0)
        for (; k + 1 < K; k += 2) {
            const float2 a = __half22float2(*reinterpret_cast<const __half2*>(a_row + k));
            sum += a.x * __half2float(B[(long long)k * N + col]) + a.y * __half2float(B[(long long)(k + 1) * N + col]);
        }
    for (; k < K; ++k) sum += __half2float(a_row[k]) * __half2float(B[(long long)k * N + col]);
    C[(long long)row * N + col] = sum;
}
"""


def test_a_kernel_that_tests_the_address_of_the_row_it_reads_gets_no_note_and_one_of_the_base_alone_does(tmp_path):
    entry = "source: rows.cu\nfunction: half2_rows\nparams: {ROW: [0, 1]}\ntypes: {a: fp16, b: fp16, c: fp32}\n" \
            "block: [16, 16]\ngrid: [ceil(N / 16), ceil(M / 16)]\ntile: [16, 16]\n"
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "rows.cu").write_text(ADDRESS_TEST_KERNELS)
    (tmp_path / "spec.yaml").write_text(f"shapes: [[64, 64, 77]]\nkernels:\n- name: k\n{textwrap.indent(entry, '  ')}")
    plans = {plan.kernel.label: plan for plan in plan_spec(load_spec(tmp_path / "spec.yaml"), "sm_90").plans}
    assert plans["k[ROW=1]"].valid and not _alignment_notes(plans["k[ROW=1]"])
    note, = _alignment_notes(plans["k[ROW=0]"])
    assert "A is read 4 bytes at a time (ld.global.u32) while its rows are K = 77 fp16" in note
    assert "vector access" not in note          # a scalar access of two elements is no vector one


def test_ptx_facts_keep_the_low_bits_tested_of_an_address_made_from_a_pointer_past_the_parameter():
    facts = ptx_facts(MODULE.replace("ret;", "add.s64 %rd20, %rd1, %rd5;\nand.b64 %rd21, %rd20, 3;\n"
                                             "cvt.u32.u64 %r20, %rd9;\nand.b32 %r21, %r20, 15;\n"
                                             "and.b64 %rd22, %rd2, 7;\nret;"))["k"]
    # a row of A (4 bytes) and an address of C past it (16 bytes); B's bare pointer tells nothing of its rows
    assert facts.tested_addresses == ((0, 4), (2, 16))
    assert KernelPtxFacts.from_dict(facts.as_dict()).tested_addresses == facts.tested_addresses
    assert KernelPtxFacts.from_dict({"copies": []}).tested_addresses is None
