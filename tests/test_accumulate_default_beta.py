"""A kernel that accumulates (C += A @ B) computes with beta = 1: the spec's beta is noted in its plan only where the
spec wrote one that differs, never for the beta = 0 every spec has without ``scalars:``."""

from __future__ import annotations

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import Shape, load_spec

from test_spec import MINIMAL, write


def _scalar_notes(tmp_path, text: str) -> list[str]:
    spec = load_spec(write(tmp_path, text))
    plan = plan_case(spec.kernels[0], Shape(64, 32, 16), arch_limits("sm_90"), scalars=dict(spec.scalars))
    return [note for note in plan.notes if note.startswith("scalars:")]


def test_an_accumulating_kernel_in_a_spec_without_scalars_gets_no_note(tmp_path):
    assert _scalar_notes(tmp_path, MINIMAL + "    epilogue: accumulate\n") == []


def test_an_accumulating_kernel_is_noted_for_the_beta_the_spec_wrote(tmp_path):
    note, = _scalar_notes(tmp_path, "scalars: {beta: 0.5}\n" + MINIMAL + "    epilogue: accumulate\n")
    assert note.startswith("scalars: beta = 0.5 does not reach this kernel") and "C += A @ B (beta = 1)" in note
