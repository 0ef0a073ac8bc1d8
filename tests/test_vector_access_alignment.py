"""Vector accesses of global memory against the alignment of the matrices' rows: a kernel that reads A through
float4 (ld.global.nc.v4.f32) needs every row of A to start 16-byte aligned, so K % 4 == 0 for a row-major fp32 A; at
K = 777 the access of row 1 faults with CUDA_ERROR_MISALIGNED_ADDRESS. The PTX names each access's width and, followed
from the ld.param of a pointer, the matrix it is made from; the plan notes the case where a row is not aligned, and
is quiet where the kernel tests the size for the multiple at run time (a fall-back to scalar accesses), where its
require: keeps the shape out, and for a kernel of scalar accesses. No GPU: NVRTC, and a PTX image read as it is."""

from __future__ import annotations

import textwrap

from driver_gemm.cuda.ptx_facts import KernelPtxFacts, VectorAccess, ptx_facts
from driver_gemm.planning.image_checks import MISALIGNED_VECTOR_NOTE
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.specfile import load_spec

from conftest import ROOT

MODULE = """\
.func store_pair(.param .b64 store_pair_param_0)
{
ld.param.u64 %rd1, [store_pair_param_0];
st.global.v2.f32 [%rd1], {%f1, %f2};
ret;
}
.visible .entry k(
.param .u64 k_param_0,
.param .u64 k_param_1,
.param .u64 k_param_2,
.param .u32 k_param_3,
.param .u32 k_param_4
)
{
ld.param.u64 %rd1, [k_param_0];
ld.param.u64 %rd2, [k_param_1];
ld.param.u64 %rd3, [k_param_2];
ld.param.u32 %r1, [k_param_3];
ld.param.u32 %r2, [k_param_4];
cvta.to.global.u64 %rd4, %rd1;
mul.wide.s32 %rd5, %r9, 4;
add.s64 %rd6, %rd5, %rd4;
ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd6+16];
mad.wide.s32 %rd7, %r9, 4, %rd2;
cp.async.cg.shared.global [%r5], [%rd7], 16, %r6;
cp.async.ca.shared.global [%r5], [%rd7], 4;
cp.async.ca.shared.global [%r5], [%rd7], 8;
ld.v4.f32 {%f1, %f2, %f3, %f4}, [%rd9];
ld.shared.v4.f32 {%f1, %f2, %f3, %f4}, [%r7];
ld.global.f32 %f5, [%rd6];
and.b32 %r8, %r2, 3;
and.b32 %r10, %r1, 5;
call.uni store_pair, (%rd3);
ret;
}
"""


def test_ptx_facts_name_each_vector_access_of_global_memory_with_its_width_and_parameter():
    facts = ptx_facts(MODULE)["k"]
    assert set(facts.vector_accesses) == {
        VectorAccess(False, 16, "ld.global.nc.v4.f32", (0,)),          # through cvta and an add, either order
        VectorAccess(False, 16, "cp.async.cg.shared.global", (1,)),    # a multiply-add's addend
        VectorAccess(False, 8, "cp.async.ca.shared.global", (1,)),
        VectorAccess(True, 8, "st.global.v2.f32", ()),                 # in a function it calls: not traced
    }   # a 4-byte copy, a generic ld.v4 (its space unknown), a shared one and a scalar load are none
    assert facts.widest_access(store=False).width == 16 and facts.widest_access(store=True).width == 8
    assert facts.tested_multiples == ((4, 4),)       # K & 3; 5 is no mask of low bits
    # kept beside the CUBIN and read back as they were; facts kept before they were read are unknown
    again = KernelPtxFacts.from_dict(facts.as_dict())
    assert again.vector_accesses == facts.vector_accesses and again.tested_multiples == facts.tested_multiples
    assert KernelPtxFacts.from_dict({"copies": []}).vector_accesses is None


FLOAT4_KERNEL = """\
#define FLOAT4(p) (reinterpret_cast<float4*>(&(p))[0])
extern "C" __global__ void float4_gemm(float* __restrict__ a, float* __restrict__ b, float* __restrict__ c,
                                       const int M, const int N, const int K) {
    const int row = blockIdx.y * 16 + threadIdx.y, col = (blockIdx.x * 16 + threadIdx.x) * 4;
    if (row >= M || col >= N) return;
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int k = 0; k < K; k += 4) {
        const float4 x = FLOAT4(a[row * K + k]);
        const float xs[4] = {x.x, x.y, x.z, x.w};
        for (int i = 0; i < 4 && k + i < K; ++i) {
            const float4 y = FLOAT4(b[(k + i) * N + col]);
            sum.x += xs[i] * y.x; sum.y += xs[i] * y.y; sum.z += xs[i] * y.z; sum.w += xs[i] * y.w;
        }
    }
    FLOAT4(c[row * N + col]) = sum;
}
"""

SCALAR_KERNEL = """\
extern "C" __global__ void scalar_gemm(const float* a, const float* b, float* c, int M, int N, int K) {
    const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float sum = 0.f;
    for (int k = 0; k < K; ++k) sum += a[row * K + k] * b[k * N + col];
    c[row * N + col] = sum;
}
"""

SHAPES = "[[1001, 513, 777], [1024, 1024, 1024]]"


def _plans(tmp_path, kernel: str, extra: str = "", **files) -> dict[str, object]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"shapes: {SHAPES}\nkernels:\n- name: k\n{textwrap.indent(kernel, '  ')}{extra}")
    return {plan.shape.label: plan for plan in plan_spec(load_spec(spec, allow_outside_sources=True), "sm_90").plans}


def _alignment_notes(plan) -> list[str]:
    return [note for note in plan.notes if note.startswith(MISALIGNED_VECTOR_NOTE)]


FLOAT4_ENTRY = "source: float4.cu\nfunction: float4_gemm\nblock: [16, 16]\ngrid: [ceil(N / 64), ceil(M / 16)]\n" \
               "tile: [16, 64]\n"


def test_float4_rows_of_an_unaligned_shape_are_noted_with_the_instruction_the_sizes_and_a_require(tmp_path):
    plans = _plans(tmp_path, FLOAT4_ENTRY, **{"float4.cu": FLOAT4_KERNEL})
    unaligned, aligned = plans["1001x513x777"], plans["1024x1024x1024"]
    note, = _alignment_notes(unaligned)
    assert unaligned.valid and aligned.valid          # a note: a kernel may fall back to narrower accesses there
    assert "A is read 16 bytes at a time (ld.global.nc.v4.f32) while its rows are K = 777 fp32 elements apart " \
           "(3,108 bytes)" in note
    assert "B is read 16 bytes at a time (ld.global.nc.v4.f32) while its rows are N = 513" in note
    assert "C is written 16 bytes at a time (st.global.v4.f32) while its rows are N = 513 fp32 elements apart " \
           "(2,052 bytes)" in note
    assert "CUDA_ERROR_MISALIGNED_ADDRESS" in note and "require: K % 4 == 0 and N % 4 == 0" in note
    assert not _alignment_notes(aligned)


def test_a_require_that_keeps_the_unaligned_shape_out_leaves_no_note(tmp_path):
    plans = _plans(tmp_path, FLOAT4_ENTRY, "  require: [K % 4 == 0 and N % 4 == 0]\n",
                   **{"float4.cu": FLOAT4_KERNEL})
    assert not plans["1001x513x777"].valid and not _alignment_notes(plans["1001x513x777"])


def test_a_kernel_of_scalar_accesses_gets_no_note(tmp_path):
    plans = _plans(tmp_path, "source: scalar.cu\nfunction: scalar_gemm\nblock: [16, 16]\n"
                             "grid: [ceil(N / 16), ceil(M / 16)]\ntile: [16, 16]\n", **{"scalar.cu": SCALAR_KERNEL})
    assert plans["1001x513x777"].valid and not _alignment_notes(plans["1001x513x777"])


def test_a_kernel_that_tests_the_sizes_for_its_vector_path_gets_no_note(tmp_path):
    # v5 loads A and B and stores C through float4 only where K % 4 == 0 and N % 4 == 0, element by element otherwise
    plans = _plans(tmp_path, f"source: {ROOT / 'kernels/05_vectorized.cu'}\nfunction: sgemm_vec4\n"
                             "params: {BM: 128, BN: 128, BK: 8, TM: 8, TN: 8}\nblock: [256]\n"
                             "grid: [ceil(N / BN), ceil(M / BM)]\ntile: [BM, BN]\n")
    assert plans["1001x513x777"].valid and not _alignment_notes(plans["1001x513x777"])


PTX_IMAGE = """\
.version 8.0
.target sm_90
.address_size 64

.visible .entry float4_copy(
    .param .u64 float4_copy_param_0,
    .param .u64 float4_copy_param_1,
    .param .u64 float4_copy_param_2,
    .param .u32 float4_copy_param_3,
    .param .u32 float4_copy_param_4,
    .param .u32 float4_copy_param_5
)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<5>;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ctaid.y;
    add.s32 %r3, %r1, %r2;
    ld.param.u64 %rd1, [float4_copy_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r3, 16;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd4];
    ld.param.u64 %rd5, [float4_copy_param_2];
    cvta.to.global.u64 %rd6, %rd5;
    add.s64 %rd7, %rd6, %rd3;
    st.global.v4.f32 [%rd7], {%f1, %f2, %f3, %f4};
    ret;
}
"""


def test_a_prebuilt_ptx_image_is_read_for_its_vector_accesses(tmp_path):
    plans = _plans(tmp_path, "binary: float4_copy.ptx\nfunction: float4_copy\nblock: [16, 16]\n"
                             "grid: [ceil(N / 64), ceil(M / 16)]\ntile: [16, 64]\n",
                   **{"float4_copy.ptx": PTX_IMAGE})
    note, = _alignment_notes(plans["1001x513x777"])
    assert "A is read 16 bytes at a time (ld.global.nc.v4.f32) while its rows are K = 777" in note
    assert "C is written 16 bytes at a time (st.global.v4.f32)" in note and "B is" not in note
    assert not _alignment_notes(plans["1024x1024x1024"])
