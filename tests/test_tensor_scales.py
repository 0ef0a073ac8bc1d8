"""fp8's per-tensor scales (``scales: {a, b}``): the product a kernel is checked against is alpha x scale a x
scale b x A @ B whatever its signature, as the cuBLASLt row computes it; each scale reaches the kernel by pointer
(``{name: scale_a, type: ptr}``), folded into alpha, or in no way, and the plan says which. No GPU."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.planning.cases import lt_baselines
from driver_gemm.session.typed_steps import typed_case
from driver_gemm.specfile import Shape, parse_spec

from conftest import ROOT

SM90 = arch_limits("sm_90")
SHAPE = Shape(1000, 512, 768)
SOURCE = ROOT / "kernels" / "outside" / "fp8_block_scaled.cu"


def spec_text(*arguments: str, scales: str = "scales: {a: 0.5, b: 4.0}", extra: str = "",
              scalars: str = "") -> str:
    listed = "".join(f"    - {item}\n" for item in ("A", "B", "C", "M", "N", "K", *arguments))
    return (f"shapes: [[1000, 512, 768]]\n{scalars}kernels:\n- name: k\n  source: {SOURCE}\n  function: f\n"
            f"  types: {{a: e4m3, b: e4m3, c: bf16, accumulate: fp32}}\n  layout: NT\n  {scales}\n{extra}"
            f"  block: [16, 16]\n  grid: [ceil(N / 16), ceil(M / 16)]\n  signature:\n{listed}")


def parsed(text: str):
    return parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True)


def checked_alpha(spec, plan) -> float:
    """The alpha the kernel's check computes with, as the typed steps take it from the case's plan."""
    run = SimpleNamespace(case=SimpleNamespace(lt=None, plan=plan, kernel=plan.kernel))
    return typed_case(run).alpha


def vendor_alpha(spec) -> float:
    """The alpha the kernel's cuBLASLt row computes with, its scales in."""
    rows, row_of = lt_baselines(spec, SHAPE)
    row = {row.label: row for row in rows}[row_of[spec.kernels[0].label]]
    return row.alpha * row.scales[0] * row.scales[1]


def scales_notes(plan) -> list[str]:
    return [note for note in plan.notes if note.startswith("fp8 scales")]


# ------------------------------------------------------------------------------------- one product, said


@pytest.mark.parametrize("epilogue", ["", "  epilogue: overwrite\n"], ids=["no epilogue", "epilogue overwrite"])
def test_a_kernel_without_alpha_is_checked_against_the_scaled_product_with_or_without_its_epilogue(epilogue):
    spec = parsed(spec_text(extra=epilogue))
    plan = plan_case(spec.kernels[0], SHAPE, SM90)
    assert plan.valid, plan.problems
    assert checked_alpha(spec, plan) == 0.5 * 4.0 == vendor_alpha(spec)
    (note,) = scales_notes(plan)
    assert "in no way" in note and "must apply them itself" in note and "= 2" in note, note
    assert "{name: scale_a, type: ptr}" in note, note


def test_a_kernel_taking_alpha_receives_the_scales_folded_into_it_and_is_told_so():
    spec = parsed(spec_text("alpha", scalars="scalars: {alpha: 1.5}\n"))
    plan = plan_case(spec.kernels[0], SHAPE, SM90)
    assert plan.argument_values["alpha"] == 1.5 * 0.5 * 4.0
    assert checked_alpha(spec, plan) == 1.5 * 0.5 * 4.0 == vendor_alpha(spec)
    (note,) = scales_notes(plan)
    assert "scale a = 0.5 folded into alpha" in note and "the kernel receives alpha = 3" in note, note


def test_scale_pointers_hold_the_scales_and_leave_the_kernels_alpha_as_it_is():
    spec = parsed(spec_text("alpha", "{name: scale_a, type: ptr}", "{name: scale_b, type: ptr, element: float64}",
                            scalars="scalars: {alpha: 1.5}\n"))
    plan = plan_case(spec.kernels[0], SHAPE, SM90)
    assert plan.valid, plan.problems
    assert plan.buffers["scale_a"].values == (0.5,) and plan.buffers["scale_a"].element == "float32"
    assert plan.buffers["scale_b"].values == (4.0,) and plan.buffers["scale_b"].element == "float64"
    assert plan.buffers["scale_a"].read_only and plan.buffers["scale_a"].count == 1
    assert plan.argument_values["alpha"] == 1.5
    assert checked_alpha(spec, plan) == 1.5 * 0.5 * 4.0 == vendor_alpha(spec)
    (note,) = scales_notes(plan)
    assert "scale a = 0.5 by pointer (scale_a)" in note and "scale b = 4 by pointer (scale_b)" in note, note


def test_a_scale_by_pointer_beside_alpha_leaves_only_the_other_folded_into_alpha():
    spec = parsed(spec_text("{name: scale_a, type: ptr}", "alpha"))
    plan = plan_case(spec.kernels[0], SHAPE, SM90)
    assert plan.argument_values["alpha"] == 4.0
    assert checked_alpha(spec, plan) == 2.0
    (note,) = scales_notes(plan)
    assert "scale a = 0.5 by pointer" in note and "scale b = 4 folded into alpha" in note, note


def test_a_kernel_without_alpha_that_takes_one_scale_by_pointer_is_told_to_apply_the_other():
    spec = parsed(spec_text("{name: scale_a, type: ptr}"))
    plan = plan_case(spec.kernels[0], SHAPE, SM90)
    assert checked_alpha(spec, plan) == 2.0
    (note,) = scales_notes(plan)
    assert "no scale_b by pointer" in note and "must apply it itself" in note, note


def test_a_kernel_without_scales_gets_no_note_and_its_alpha_alone():
    spec = parsed(spec_text("alpha", scales="layouts: {a: row, b: col, c: row}", scalars="scalars: {alpha: 1.5}\n")
                  .replace("  layout: NT\n", ""))
    plan = plan_case(spec.kernels[0], SHAPE, SM90)
    assert not scales_notes(plan)
    assert checked_alpha(spec, plan) == 1.5


def test_a_scale_beyond_its_pointers_type_makes_the_case_invalid_at_the_buffer():
    spec = parsed(spec_text("{name: scale_a, type: ptr}", scales="scales: {a: 1.0e+39, b: 1.0}"))
    plan = plan_case(spec.kernels[0], SHAPE, SM90)
    assert not plan.valid
    assert any("scale_a" in str(problem) and "float32" in str(problem) for problem in plan.problems), plan.problems


# ------------------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("text, needle, field", [
    (spec_text("{name: scale_a, type: ptr}", scales="layouts: {a: row, b: col, c: row}").replace("  layout: NT\n",
                                                                                                 ""),
     "scale_a by pointer holds the kernel's fp8 per-tensor scale a, but its scales: gives none", "signature[6].name"),
    (spec_text("{name: scale_b, type: ptr}", scales="scales: {a: 0.5}"),
     "scale_b by pointer holds the kernel's fp8 per-tensor scale b, but its scales: gives none", "signature[6].name"),
    (spec_text("{name: scale_a, type: ptr, element: int32}"), "scale_a by pointer is a float32 or float64 factor",
     "signature[6].element"),
    (spec_text("{name: scale_a, type: ptr, value: 0.5}"), "scale_a by pointer is the kernel's scales.a in a device "
     "buffer; it takes no value", "signature[6].value"),
    (spec_text("{name: scale_a, type: ptr}", "{name: scale_a, type: ptr}"), "signature names scale_a more than once",
     "signature"),
])
def test_a_misused_scale_pointer_is_refused_at_its_field(text, needle, field):
    with pytest.raises(SpecError) as caught:
        parsed(text)
    assert needle in str(caught.value), str(caught.value)
    assert caught.value.field == f"kernels[k].{field}", caught.value.field


def test_a_scale_pointer_of_a_kernel_whose_types_are_not_fp8_is_refused_with_its_scales():
    text = spec_text("{name: scale_a, type: ptr}").replace("a: e4m3, b: e4m3", "a: bf16, b: bf16")
    with pytest.raises(SpecError, match="per-tensor scales are for fp8 inputs"):
        parsed(text)


def test_a_launch_of_then_names_the_kernels_scale_pointer_and_declares_none_of_its_own():
    then = ("  then:\n  - function: g\n    block: [1]\n    grid: [1]\n    signature: [{name: scale_a, type: ptr}]\n")
    with pytest.raises(SpecError) as caught:
        parsed(spec_text(extra=then))
    assert "scale_a by pointer goes in the kernel's own signature" in str(caught.value)
    assert caught.value.field == "kernels[k].then[0].signature[0].name"
    with pytest.raises(SpecError, match="is a buffer of the case already") as caught:
        parsed(spec_text("{name: scale_a, type: ptr}", extra=then))
    assert caught.value.hint == "write scale_a"


@pytest.mark.parametrize("scales, needle", [
    ("scales: 0.5", "scales is a mapping like {a: 0.5, b: 2.0}"),
    ("scales: {a: -1.0}", "a scale is a positive number"),
])
def test_a_malformed_scales_beside_a_scale_pointer_is_refused_for_itself(scales, needle):
    with pytest.raises(SpecError, match=needle):
        parsed(spec_text("{name: scale_a, type: ptr}", scales=scales))
