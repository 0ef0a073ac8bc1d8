"""Warp-wide tensor-core instructions (wmma, mma.sync: ``.sync.aligned``, every lane of the warp takes part) need
whole warps: a block of fewer than 32 threads is refused at ``block`` naming the instruction, one that ends in a
partial warp is noted."""

from __future__ import annotations

import textwrap

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.cuda.ptx_facts import ptx_facts
from driver_gemm.planning.build import plan_cases
from driver_gemm.planning.image_checks import PARTIAL_WARP_NOTE, PARTIAL_WARPGROUP_NOTE
from driver_gemm.specfile import parse_spec

SM90 = arch_limits("sm_90")

# One mma.sync of fp16 operands per warp, its fragments read straight from A and B (what they hold is no matter here).
MMA_SOURCE = r"""
#include <cuda_fp16.h>
__global__ void one_mma(const half* A, const half* B, float* C, int M, int N, int K) {
    const unsigned* a = reinterpret_cast<const unsigned*>(A) + threadIdx.x % 32;
    const unsigned* b = reinterpret_cast<const unsigned*>(B) + threadIdx.x % 32;
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a[0]), "r"(a[32]), "r"(b[0]));
    C[blockIdx.x * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x] = d0 + d1 + d2 + d3;
}
"""

MMA_KERNEL = """\
- name: {name}
  source: k.cu
  function: one_mma
  types: {{a: fp16, b: fp16, c: fp32, accumulate: fp32}}
  block: {block}
  grid: [ceil(M * N / {threads})]
  tile: [1, {threads}]
  signature: [A, B, C, M, N, K]
"""


def _plans(tmp_path, kernels: str):
    """The kernel cases of a spec over `MMA_SOURCE`, planned for sm_90 with their compiled images."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'warps'\n")
    (tmp_path / "k.cu").write_text(textwrap.dedent(MMA_SOURCE))
    text = "shapes:\n  - [128, 128, 128]\nkernels:\n" + textwrap.indent(textwrap.dedent(kernels), "  ")
    spec = parse_spec(text, tmp_path / "spec.yaml")
    return {case.kernel.label: case.plan for case in plan_cases(spec, SM90, "sm_90")[0] if case.kernel is not None}


def _problems(plan) -> list[str]:
    return [str(problem) for problem in plan.problems]


def _warp_notes(plan) -> list[str]:
    return [note for note in plan.notes if note.startswith((PARTIAL_WARP_NOTE, PARTIAL_WARPGROUP_NOTE))]


def test_ptx_facts_name_the_warp_wide_tensor_core_instructions_apart_from_the_warpgroup_ones():
    facts = ptx_facts(".visible .entry k(\n.param .u64 k_param_0\n)\n{\n"
                      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%f1}, %rd1, %rd2, p, 1, 1, 0, 0;\n"
                      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r1}, {%r1}, {%r2}, {%r3};\n"
                      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1}, {%r1}, {%r2}, {%f2};\n"
                      "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%f1}, {%r1}, {%r2}, {%f2};\n}\n")["k"]
    warp_wide = facts.warp_instructions()
    assert len(warp_wide) == 2
    assert {instruction.split(".")[0] for instruction in warp_wide} == {"mma", "wmma"}


def test_a_block_of_less_than_a_warp_is_refused_at_block_for_an_mma_sync_kernel(tmp_path):
    plans = _plans(tmp_path, MMA_KERNEL.format(name="sixteen", block="[16]", threads=16)
                   + MMA_KERNEL.format(name="eight-by-two", block="[8, 2]", threads=16)
                   + MMA_KERNEL.format(name="whole", block="[64]", threads=64))
    for label in ("sixteen", "eight-by-two"):
        problems = _problems(plans[label])
        assert len(problems) == 1, problems
        assert f"kernels[{label}].block" in problems[0] and "16 threads" in problems[0]
        assert "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32" in problems[0] and "whole warp" in problems[0]
        assert "hint: launch whole warps" in problems[0]
    assert plans["whole"].valid, _problems(plans["whole"])
    assert not _warp_notes(plans["whole"])


def test_a_block_ending_in_a_partial_warp_is_noted_for_an_mma_sync_kernel(tmp_path):
    # the last, partial warp may be one that never reaches the instruction, which the PTX cannot tell
    plan = _plans(tmp_path, MMA_KERNEL.format(name="k", block="[240]", threads=240))["k"]
    assert plan.valid, _problems(plan)
    note, = _warp_notes(plan)
    assert note.startswith(PARTIAL_WARP_NOTE)
    assert "240 threads" in note and "partial warp of 16 threads" in note and "mma.sync.aligned" in note
    assert note.endswith("256 threads")
