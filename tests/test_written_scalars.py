"""The spec's alpha and beta that a kernel taking none would not compute with are noted in its plan only where the
spec wrote them: an explicit ``beta: 0`` on a kernel that accumulates is noted (it computes with beta = 1), the
built-in beta = 0 of a spec without ``scalars:`` is not. Which scalars the spec wrote is `Spec.written_scalars`."""

from __future__ import annotations

import dataclasses

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import WrongArgumentType
from driver_gemm.planning.build import launch_plans
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import Shape, load_spec

from test_spec import MINIMAL, write

ACCUMULATE = MINIMAL + "    epilogue: accumulate\n"


def _scalar_notes_of_launch_plans(tmp_path, text: str) -> list[str]:
    spec = load_spec(write(tmp_path, text))
    plan, = launch_plans(spec, arch_limits("sm_90")).values()
    return [note for note in plan.notes if note.startswith("scalars:")]


def test_the_spec_records_the_scalars_it_wrote(tmp_path):
    assert load_spec(write(tmp_path, "scalars: {beta: 0}\n" + ACCUMULATE)).written_scalars == {"beta"}
    spec = load_spec(write(tmp_path, ACCUMULATE, "plain.yaml"))
    assert spec.written_scalars == frozenset() and spec.scalars["beta"] == 0.0   # the default is still there


def test_an_explicit_beta_of_zero_on_an_accumulating_kernel_is_noted(tmp_path):
    note, = _scalar_notes_of_launch_plans(tmp_path, "scalars: {beta: 0}\n" + ACCUMULATE)
    assert note.startswith("scalars: beta = 0 does not reach this kernel") and "C += A @ B (beta = 1)" in note


def test_the_default_beta_of_a_spec_without_scalars_is_not_noted(tmp_path):
    assert _scalar_notes_of_launch_plans(tmp_path, ACCUMULATE) == []


def test_a_written_alpha_of_one_is_not_noted_where_the_kernel_computes_with_it(tmp_path):
    assert _scalar_notes_of_launch_plans(tmp_path, "scalars: {alpha: 1, beta: 1}\n" + ACCUMULATE) == []


def test_plan_case_takes_the_written_scalars(tmp_path):
    spec = load_spec(write(tmp_path, "scalars: {beta: 0}\n" + ACCUMULATE))
    plan = plan_case(spec.kernels[0], Shape(64, 32, 16), arch_limits("sm_90"), scalars=dict(spec.scalars),
                     written_scalars=spec.written_scalars)
    assert any(note.startswith("scalars: beta = 0 does not reach") for note in plan.notes)
    assert plan.written_scalars == {"beta"}
    with pytest.raises(WrongArgumentType, match="written_scalars"):
        plan_case(spec.kernels[0], Shape(64, 32, 16), arch_limits("sm_90"), written_scalars="beta")


def test_a_spec_made_in_code_refuses_written_scalars_of_another_kind(tmp_path):
    spec = load_spec(write(tmp_path, ACCUMULATE))
    with pytest.raises(WrongArgumentType, match="Spec.written_scalars"):
        dataclasses.replace(spec, written_scalars=["beta"])
