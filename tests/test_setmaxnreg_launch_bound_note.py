"""Where ptxas ignores a kernel's setmaxnreg for want of a register count at entry (C7508), the plan says why: a
kernel without a launch bound has none; one whose __launch_bounds__ gives the threads alone (.maxntid) gives no
minimum of blocks per SM (.minnctapersm), and the fix adds one. No GPU: the kernels are compiled by NVRTC for sm_90a
and planned."""

from __future__ import annotations

import textwrap

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.build import plan_cases
from driver_gemm.specfile import parse_spec

# One warpgroup gives registers back, the others ask for more: ptxas needs the count they start from.
SOURCE = r"""
__global__ void BOUND split_registers(const float* A, const float* B, float* C, int M, int N) {
    if (threadIdx.x < 128) { asm volatile("setmaxnreg.dec.sync.aligned.u32 40;"); return; }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    int i = blockIdx.x * 256 + threadIdx.x - 128;
    if (i < M * N) C[i] = 0.f;
}
"""

KERNEL = """\
- {name: k, source: k.cu, function: split_registers, arch: sm_90a, block: [384], grid: [ceil(M * N / 256)],
   tile: [1, 256], signature: [A, B, C, M, N], epilogue: overwrite}
"""


def _ignored_note(tmp_path, bound: str) -> str:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'checks'\n")
    (tmp_path / "k.cu").write_text(SOURCE.replace("BOUND", bound))
    text = "shapes:\n  - [128, 128, 128]\nkernels:\n" + textwrap.indent(KERNEL, "  ")
    spec = parse_spec(text, tmp_path / "spec.yaml")
    plan, = [case.plan for case in plan_cases(spec, arch_limits("sm_90"), "sm_90a")[0] if case.kernel is not None]
    notes = [note for note in plan.notes if note.startswith("setmaxnreg ignored by ptxas: (C7508)")]
    assert len(notes) == 1, plan.notes
    return notes[0]


def test_a_bound_of_threads_alone_is_said_to_give_no_minimum_of_blocks_per_sm(tmp_path):
    note = _ignored_note(tmp_path, "__launch_bounds__(384)")
    assert "no __launch_bounds__" not in note, note
    assert "its __launch_bounds__(384) (.maxntid 384, 1, 1) gives no minimum of blocks per SM (.minnctapersm)" \
        in note, note
    assert "add one, __launch_bounds__(384, 1)" in note, note


def test_a_kernel_without_a_bound_is_said_to_have_none(tmp_path):
    note = _ignored_note(tmp_path, "")
    assert "(no __launch_bounds__ or maxnreg)" in note and "give it __launch_bounds__(384, 1)" in note, note
    assert ".minnctapersm" not in note, note
