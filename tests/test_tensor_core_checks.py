"""What a kernel's PTX says of its tensor-core instructions, its warpgroup-wide instructions, the setmaxnreg ptxas
ignored and its atomic adds into C, checked against the spec before launch. No GPU: kernels are compiled by NVRTC
for sm_90a and planned."""

from __future__ import annotations

import textwrap

import pytest

from driver_gemm.cuda.compile import ignored_setmaxnreg
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.cuda.ptx_facts import KernelPtxFacts, attach_ignored_setmaxnreg, ptx_facts
from driver_gemm.planning.build import plan_cases
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


def test_a_block_of_a_partial_warpgroup_is_refused_for_a_wgmma_kernel(tmp_path):
    plans = _plans(tmp_path, WGMMA_SOURCE, WGMMA_KERNEL.format(name="partial", f16=0, a="bf16", b="bf16", block=160)
                   + WGMMA_KERNEL.format(name="whole", f16=0, a="bf16", b="bf16", block=256))
    problems = _problems(plans["partial[F16=0]"])
    assert len(problems) == 1 and ".block" in problems[0] and "160 threads" in problems[0]
    assert "wgmma.mma_async" in problems[0] and "multiple of 128" in problems[0]
    assert plans["whole[F16=0]"].valid, _problems(plans["whole[F16=0]"])


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
    assert any(".block" in problem and "setmaxnreg.inc" in problem for problem in _problems(plans["asks"]))
