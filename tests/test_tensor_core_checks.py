"""What a kernel's PTX says of its tensor-core instructions, its warpgroup-wide instructions, the setmaxnreg ptxas
ignored and its atomic adds into C, checked against the spec before launch. No GPU: kernels are compiled by NVRTC
for sm_90a and planned."""

from __future__ import annotations

import re
import textwrap

import pytest

from driver_gemm.cuda.compile import ignored_setmaxnreg
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.cuda.ptx_facts import KernelPtxFacts, TmaCopy, attach_ignored_setmaxnreg, ptx_facts
from driver_gemm.planning.build import plan_cases
from driver_gemm.planning.image_checks import (ATOMIC_OUTPUT_NOTE, MMA_TYPE_NOTE, PARTIAL_WARPGROUP_NOTE,
                                               atomic_output_notes)
from driver_gemm.specfile import parse_spec

SM90 = arch_limits("sm_90")

# One wgmma of bf16 (or fp16) operands whose shared-memory descriptors come from the pointers: the instruction names
# the types, the pointers (void*) do not.
WGMMA_SOURCE = r"""
template <int F16>
__global__ void __launch_bounds__(384, 1) one_wgmma(const void* A, const void* B, float* C, int M, int N, int K) {
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    unsigned long long a = (unsigned long long)A, b = (unsigned long long)B;
    if (F16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(a), "l"(b), "r"(K));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(a), "l"(b), "r"(K));
    C[blockIdx.x * blockDim.x + threadIdx.x] = d0 + d1 + d2 + d3;
}
"""

# A warp-specialised body whose register split ptxas drops without a launch bound (C7508), and one with the bound.
REGISTER_SOURCE = r"""
__global__ void unbounded(const float* A, const float* B, float* C, int M, int N) {
    if (threadIdx.x < 128) { asm volatile("setmaxnreg.dec.sync.aligned.u32 40;"); return; }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    int i = blockIdx.x * 256 + threadIdx.x - 128;
    if (i < M * N) C[i] = 0.f;
}
"""

# Split-K by atomics: each z slice adds its share of K into C, which the host zeroes first.
ATOMIC_SOURCE = r"""
__global__ void split_k_atomic(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    int share = (K + gridDim.z - 1) / gridDim.z, begin = blockIdx.z * share, end = min(K, begin + share);
    float sum = 0.f;
    for (int k = begin; k < end; ++k) sum += A[row * K + k] * B[k * N + col];
    atomicAdd(&C[row * N + col], sum);
}
__global__ void split_k_first_slice_stores(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float sum = 0.f;
    for (int k = blockIdx.z; k < K; k += gridDim.z) sum += A[row * K + k] * B[k * N + col];
    if (blockIdx.z == 0) C[row * N + col] = sum; else atomicAdd(&C[row * N + col], sum);
}
"""


def _plans(tmp_path, source: str, kernels: str):
    """The kernel cases of a spec over `source`, planned for sm_90a with their compiled images."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'checks'\n")
    (tmp_path / "k.cu").write_text(textwrap.dedent(source))
    text = "shapes:\n  - [128, 128, 128]\nkernels:\n" + textwrap.indent(textwrap.dedent(kernels), "  ")
    spec = parse_spec(text, tmp_path / "spec.yaml")
    return {case.kernel.label: case.plan for case in plan_cases(spec, SM90, "sm_90a")[0] if case.kernel is not None}


def _problems(plan) -> list[str]:
    return [str(problem) for problem in plan.problems]


WGMMA_KERNEL = """\
- name: {name}
  source: k.cu
  function: one_wgmma
  arch: sm_90a
  params: {{F16: {f16}}}
  types: {{a: {a}, b: {b}, c: fp32, accumulate: fp32}}
  block: [{block}]
  grid: [ceil(M * N / {block})]
  tile: [1, {block}]
  signature: [A, B, C, M, N, K]
"""


# ----------------------------------------------------------------------------------- the facts


def test_ptx_facts_name_each_tensor_core_instruction_with_its_input_types():
    facts = ptx_facts(".visible .entry k(\n.param .u64 k_param_0\n)\n{\n"
                      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%f1}, %rd1, %rd2, p, 1, 1, 0, 0;\n"
                      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1}, {%r1}, {%r2}, {%f2};\n"
                      "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%f1}, {%r1}, {%r2}, {%f2};\n"
                      "cvt.rn.f16x2.e4m3x2 %r1, %rs1;\n}\n")["k"]
    assert facts.mma_types == (
        ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "tf32", "tf32"),
        ("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", "bf16", "bf16"),
        ("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32", "f16", "f16"))
    assert facts.conversions == (("f16", "e4m3"),)
    assert facts.warpgroup_instructions() == ("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",)
    assert KernelPtxFacts.from_dict(facts.as_dict()).as_dict() == facts.as_dict()


def test_ptx_facts_trace_global_writes_and_atomic_adds_to_their_parameters():
    facts = ptx_facts(".visible .entry k(\n.param .u64 k_param_0,\n.param .u64 k_param_1\n)\n{\n"
                      "ld.param.u64 %rd1, [k_param_0];\nld.param.u64 %rd2, [k_param_1];\n"
                      "cvta.to.global.u64 %rd3, %rd2;\nadd.s64 %rd4, %rd3, 16;\n"
                      "atom.global.add.f32 %f2, [%rd4], %f1;\nst.shared.f32 [%r1], %f1;\n"
                      "st.global.u32 [%rd1], %r2;\n}\n")["k"]
    assert facts.global_writes == (("atom.global.add.f32", (1,)), ("st.global.u32", (0,)))


# ----------------------------------------------------------------------------------- types: against the instruction


def test_a_bf16_tensor_core_kernel_described_as_fp16_is_refused_at_types_naming_the_instruction(tmp_path):
    plans = _plans(tmp_path, WGMMA_SOURCE, WGMMA_KERNEL.format(name="wrong", f16=0, a="fp16", b="fp16", block=128)
                   + WGMMA_KERNEL.format(name="right", f16=0, a="bf16", b="bf16", block=128)
                   + WGMMA_KERNEL.format(name="half", f16=1, a="fp16", b="fp16", block=128))
    problems = _problems(plans["wrong[F16=0]"])
    assert len(problems) == 2 and all(".types" in problem and "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"
                                      in problem and "same width" in problem for problem in problems)
    assert "types: makes A fp16" in problems[0] and "a: bf16" in problems[0]
    for label in ("right[F16=0]", "half[F16=1]"):
        assert plans[label].valid, _problems(plans[label])
        assert not [note for note in plans[label].notes if note.startswith("tensor-core input type")]


def test_fp8_operands_multiplied_as_bf16_are_noted_not_refused(tmp_path):
    # fp8 loaded and converted to bf16 before the instruction is what a dequantising kernel does.
    plans = _plans(tmp_path, WGMMA_SOURCE, WGMMA_KERNEL.format(name="fp8", f16=0, a="e4m3", b="bf16", block=128))
    plan = plans["fp8[F16=0]"]
    assert plan.valid, _problems(plan)
    notes = [note for note in plan.notes if note.startswith("tensor-core input type")]
    assert len(notes) == 1 and "A e4m3" in notes[0] and "converts each element of A to bf16" in notes[0]


# ----------------------------------------------------------------------------------- whole warpgroups


# The same wgmma under __launch_bounds__(288, 1): two consumer warpgroups and a producer warp that never reaches it.
BOUNDED_WGMMA_SOURCE = WGMMA_SOURCE.replace("__launch_bounds__(384, 1) one_wgmma", "__launch_bounds__(288, 1) bounded")


def _warpgroup_notes(plan) -> list[str]:
    return [note for note in plan.notes if note.startswith(PARTIAL_WARPGROUP_NOTE)]


def test_a_block_without_a_whole_warpgroup_is_refused_for_a_wgmma_kernel(tmp_path):
    plans = _plans(tmp_path, WGMMA_SOURCE, WGMMA_KERNEL.format(name="partial", f16=0, a="bf16", b="bf16", block=96)
                   + WGMMA_KERNEL.format(name="whole", f16=0, a="bf16", b="bf16", block=256))
    problems = _problems(plans["partial[F16=0]"])
    assert len(problems) == 1 and ".block" in problems[0] and "96 threads" in problems[0]
    assert "wgmma.mma_async" in problems[0] and "128 or 256 threads" in problems[0]
    assert plans["whole[F16=0]"].valid, _problems(plans["whole[F16=0]"])
    assert not _warpgroup_notes(plans["whole[F16=0]"])


@pytest.mark.parametrize("source, function, block, advice", [
    (WGMMA_SOURCE, "one_wgmma", 160, "256 threads"),       # room for the extra warp within __launch_bounds__(384)
    (BOUNDED_WGMMA_SOURCE, "bounded", 288, None),         # 384 is over the kernel's bound: no size is advised
])
def test_a_partial_last_warpgroup_of_a_wgmma_kernel_is_noted_not_refused(tmp_path, source, function, block,
                                                                          advice):
    # its extra warps may be a producer that never executes wgmma, which the PTX cannot tell
    plans = _plans(tmp_path, source, WGMMA_KERNEL.replace("one_wgmma", function).format(
        name="k", f16=0, a="bf16", b="bf16", block=block))
    plan = plans["k[F16=0]"]
    assert plan.valid, _problems(plan)
    note, = _warpgroup_notes(plan)
    assert f"{block} threads" in note and "wgmma.mma_async" in note and "producer warp" in note
    if advice:
        assert advice in note
    else:
        assert not re.search(r"\d+ threads$", note) and "384" not in note and "256" not in note


# ----------------------------------------------------------------------------------- setmaxnreg ptxas ignored


def test_setmaxnreg_that_ptxas_ignored_is_said_instead_of_a_hang(tmp_path):
    plans = _plans(tmp_path, REGISTER_SOURCE, """\
        - {name: unbounded, source: k.cu, function: unbounded, arch: sm_90a, block: [384], grid: [ceil(M * N / 256)],
           tile: [1, 256], signature: [A, B, C, M, N], epilogue: overwrite}
        """)
    notes = [note for note in plans["unbounded"].notes if note.startswith("setmaxnreg")]
    assert len(notes) == 1, notes
    assert notes[0].startswith("setmaxnreg ignored by ptxas: (C7508)")
    assert "__launch_bounds__(384, 1)" in notes[0] and "wait for registers forever" not in notes[0]


def test_ptxas_lines_that_ignore_setmaxnreg_go_to_the_kernels_they_may_be_of():
    log = ("ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register "
           "count at entry.\nptxas info    : (C7507) Potential Performance Loss: 'setmaxnreg' ignored to maintain "
           "minimum register requirements.\nptxas info    : Used 10 registers\n")
    lines = ignored_setmaxnreg(log)
    assert [code for code, _ in lines] == ["C7508", "C7507"]
    moves = KernelPtxFacts(register_increases=(232,), register_decreases=(40,))
    bounded = KernelPtxFacts(register_increases=(232,), max_threads=(384, 1, 1))
    facts = attach_ignored_setmaxnreg({"free": moves, "bound": bounded, "plain": KernelPtxFacts()}, lines)
    assert [(code, kernels) for code, _, kernels in facts["free"].setmaxnreg_ignored] == [("C7508", 1)]
    assert [(code, kernels) for code, _, kernels in facts["bound"].setmaxnreg_ignored] == [("C7507", 1)]
    assert facts["plain"].setmaxnreg_ignored == ()
    kept = KernelPtxFacts.from_dict(facts["free"].as_dict())
    assert kept.setmaxnreg_ignored == facts["free"].setmaxnreg_ignored


# ----------------------------------------------------------------------------------- atomic adds into C

ATOMIC_KERNEL = """\
- name: {name}
  source: k.cu
  function: {function}
  block: [16, 16]
  grid: [ceil(N / 16), ceil(M / 16), 4]
  tile: [16, 16]
  signature: [A, B, C, M, N, K]
"""


@pytest.mark.parametrize("function, extra, noted", [
    ("split_k_atomic", "", True),
    ("split_k_atomic", "  epilogue: accumulate\n", False),
    ("split_k_first_slice_stores", "", False),
])
def test_a_kernel_adding_into_c_with_atomics_is_noted_unless_the_spec_says_c_is_read(tmp_path, function, extra,
                                                                                      noted):
    plans = _plans(tmp_path, ATOMIC_SOURCE, ATOMIC_KERNEL.format(name="k", function=function) + extra)
    notes = [note for note in plans["k"].notes if note.startswith("C is added into with atomics")]
    assert plans["k"].valid, _problems(plans["k"])
    assert bool(notes) == noted, plans["k"].notes
    if noted:
        assert "atom.global.add.f32" in notes[0] and "epilogue: accumulate" in notes[0] and "then:" in notes[0]


PARTIAL_SOURCE = r"""
__global__ void __launch_bounds__(384, 1) asks(const float* A, const float* B, float* C, int M, int N) {
    if (threadIdx.x < 128) { asm volatile("setmaxnreg.dec.sync.aligned.u32 40;"); return; }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 256;");
    int i = blockIdx.x * 256 + threadIdx.x - 128;
    if (i < M * N) C[i] = 0.f;
}
"""


def test_the_register_note_counts_a_partial_warpgroup_among_those_asking(tmp_path):
    plans = _plans(tmp_path, PARTIAL_SOURCE, """\
        - {name: asks, source: k.cu, function: asks, arch: sm_90a, block: [320], grid: [ceil(M * N / 192)],
           tile: [1, 192], signature: [A, B, C, M, N], epilogue: overwrite}
        """)
    notes = [note for note in plans["asks"].notes if note.startswith("setmaxnreg: ")]
    assert len(notes) == 1 and notes[0].startswith("setmaxnreg: 2 warpgroups asking for 256"), plans["asks"].notes
    assert plans["asks"].valid, _problems(plans["asks"])   # the partial warpgroup may be warps that never ask
    note, = _warpgroup_notes(plans["asks"])
    assert "setmaxnreg.inc" in note and "320 threads" in note and "384 threads" in note


# ----------------------------------------------------------------------------------- swap-AB and bit-masked pieces

# C^T = B^T A^T, as small-M kernels compute it: B's rows go to the instruction's A operand and A's to its B, so an
# e5m2 A and e4m3 B are multiplied by an e4m3 x e5m2 instruction (and a uint8 A and int8 B by s8 x u8).
SWAP_AB_SOURCE = r"""
template <int INT8>
__global__ void swap_ab(const unsigned* A, const unsigned* B, void* C, int M, int N, int K) {
    const unsigned a0 = B[threadIdx.x], a1 = B[threadIdx.x + 32], a2 = B[threadIdx.x + 64], a3 = B[threadIdx.x + 96];
    const unsigned b0 = A[threadIdx.x], b1 = A[threadIdx.x + 32];
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    int e[4] = {0, 0, 0, 0};
    if (INT8)
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n" : "+r"(e[0]), "+r"(e[1]), "+r"(e[2]), "+r"(e[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n" : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    if (INT8) static_cast<int*>(C)[blockIdx.x * 32 + threadIdx.x] = e[0] + e[1] + e[2] + e[3];
    else static_cast<float*>(C)[blockIdx.x * 32 + threadIdx.x] = d[0] + d[1] + d[2] + d[3];
}
"""

SWAP_AB_KERNEL = """\
- name: {name}
  source: k.cu
  function: swap_ab
  params: {{INT8: {int8}}}
  types: {{a: {a}, b: {b}, c: {c}}}
  block: [32]
  grid: [ceil(M * N / 32)]
  tile: [1, 32]
  signature: [A, B, C, M, N, K]
"""


def test_a_swap_ab_kernel_of_mixed_types_is_judged_with_its_operands_in_either_order(tmp_path):
    plans = _plans(tmp_path, SWAP_AB_SOURCE, SWAP_AB_KERNEL.format(name="fp8", int8=0, a="e5m2", b="e4m3", c="fp32")
                   + SWAP_AB_KERNEL.format(name="straight", int8=0, a="e4m3", b="e5m2", c="fp32")
                   + SWAP_AB_KERNEL.format(name="int8", int8=1, a="uint8", b="int8", c="int32")
                   + SWAP_AB_KERNEL.format(name="neither", int8=0, a="e5m2", b="e5m2", c="fp32"))
    for label in ("fp8[INT8=0]", "straight[INT8=0]", "int8[INT8=1]"):
        assert plans[label].valid, _problems(plans[label])
        assert not [note for note in plans[label].notes if note.startswith(MMA_TYPE_NOTE)], plans[label].notes
    # e5m2 for both reads e4m3 bytes in one operand whichever way the kernel puts A and B
    problems = _problems(plans["neither[INT8=0]"])
    assert len(problems) == 1 and ".types" in problems[0] and "same width" in problems[0], problems


# An fp32 GEMM on bf16 tensor cores: each fp32 masked to its high 16 bits (an exact bf16) and packed with prmt, no cvt.
BF16_PIECES_SOURCE = r"""
__global__ void bf16_pieces(const float* A, const float* B, float* C, int M, int N, int K) {
    unsigned a[4], b[2];
    for (int i = 0; i < 4; ++i) {
        const unsigned lo = __float_as_uint(A[i * 64 + threadIdx.x]) & 0xFFFF0000u;
        const unsigned hi = __float_as_uint(A[i * 64 + 32 + threadIdx.x]) & 0xFFFF0000u;
        asm("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(a[i]) : "r"(lo), "r"(hi));
    }
    for (int i = 0; i < 2; ++i) {
        const unsigned lo = __float_as_uint(B[i * 64 + threadIdx.x]) & 0xFFFF0000u;
        const unsigned hi = __float_as_uint(B[i * 64 + 32 + threadIdx.x]) & 0xFFFF0000u;
        asm("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(b[i]) : "r"(lo), "r"(hi));
    }
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n" : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    C[blockIdx.x * 32 + threadIdx.x] = d[0] + d[1] + d[2] + d[3];
}
"""


@pytest.mark.parametrize("types", ["", ", types: {a: fp32, b: fp32, c: fp32}"])
def test_fp32_multiplied_as_bf16_pieces_without_a_cvt_is_noted_not_refused(tmp_path, types):
    plans = _plans(tmp_path, BF16_PIECES_SOURCE, "- {name: k, source: k.cu, function: bf16_pieces, block: [32], "
                   f"grid: [ceil(M * N / 32)], tile: [1, 32], signature: [A, B, C, M, N, K]{types}}}\n")
    plan = plans["k"]
    assert plan.valid, _problems(plan)
    notes = [note for note in plan.notes if note.startswith(MMA_TYPE_NOTE)]
    assert len(notes) == 2 and all("bf16" in note and "masking bits" in note for note in notes), plan.notes


# ----------------------------------------------------------------------------------- stores of C through TMA

# Serial split-K: slice 0 stores its tile of C through C's map, the others add theirs to it (MODE 0); or every slice
# adds (MODE 1), which needs C zeroed first. Planned, never run.
TMA_SPLIT_K_SOURCE = r"""
struct alignas(64) CUtensorMap { unsigned long long opaque[16]; };
template <int MODE>
__global__ void tma_split_k(const float* A, const float* B, const __grid_constant__ CUtensorMap map_c, int M, int N,
                            int K) {
    __shared__ __align__(128) float tile[32 * 32];
    for (int e = threadIdx.x; e < 32 * 32; e += blockDim.x) tile[e] = A[e + blockIdx.z] * B[e];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x != 0) return;
    const unsigned smem = static_cast<unsigned>(__cvta_generic_to_shared(tile));
    const int n0 = blockIdx.x * 32, m0 = blockIdx.y * 32;
    if (MODE == 0 && blockIdx.z == 0)
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                     :: "l"(&map_c), "r"(smem), "r"(n0), "r"(m0) : "memory");
    else
        asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3}], [%1];"
                     :: "l"(&map_c), "r"(smem), "r"(n0), "r"(m0) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
"""


@pytest.mark.parametrize("mode, noted", [(0, False), (1, True)])
def test_a_tma_store_of_c_before_its_tma_adds_is_a_store_of_c(tmp_path, mode, noted):
    plans = _plans(tmp_path, TMA_SPLIT_K_SOURCE, f"""\
        - name: k
          source: k.cu
          function: tma_split_k
          arch: sm_90a
          params: {{MODE: {mode}}}
          block: [128]
          grid: [ceil(N / 32), ceil(M / 32), 3]
          tile: [32, 32]
          signature: [A, B, {{name: map_c, type: tensormap, tensor: C, box: [32, 32]}}, M, N, K]
        """)
    plan = plans[f"k[MODE={mode}]"]
    assert plan.valid, _problems(plan)
    notes = [note for note in plan.notes if note.startswith(ATOMIC_OUTPUT_NOTE)]
    assert bool(notes) == noted, plan.notes


def test_ptx_facts_count_bulk_copies_into_global_memory_as_writes_of_their_parameter():
    facts = ptx_facts(".visible .entry k(\n.param .u64 k_param_0,\n.param .u64 k_param_1\n)\n{\n"
                      "ld.param.u64 %rd1, [k_param_0];\nld.param.u64 %rd2, [k_param_1];\n"
                      "add.s64 %rd3, %rd1, 4096;\n"
                      "cp.async.bulk.global.shared::cta.bulk_group [%rd3], [%r1], 4096;\n"
                      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%rd2], [%r1], 4096;\n"
                      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r2], [%rd2], 4096, "
                      "[%r3];\n}\n")["k"]
    assert facts.global_writes == (("cp.async.bulk.global.shared::cta.bulk_group", (0,)),
                                   ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32", (1,)))


def test_a_store_whose_address_or_map_is_not_traced_may_be_of_c_and_keeps_the_atomic_note_out(tmp_path):
    plan = _plans(tmp_path, ATOMIC_SOURCE, ATOMIC_KERNEL.format(name="k", function="split_k_atomic"))["k"]
    adds = (("atom.global.add.f32", (2,)),)              # C is the third parameter
    untraced_store = ("st.global.f32", ())
    untraced_map = TmaCopy(2, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group", None)
    assert atomic_output_notes(plan, KernelPtxFacts(global_writes=adds))
    assert not atomic_output_notes(plan, KernelPtxFacts(global_writes=adds + (untraced_store,)))
    assert not atomic_output_notes(plan, KernelPtxFacts(copies=(untraced_map,), global_writes=adds))
    assert atomic_output_notes(plan, KernelPtxFacts(global_writes=adds + (("atom.global.add.f32", ()),)))
