"""What a Gram kernel's spec is told in gram's terms: a signature missing its one input or taking it twice, a
``precision: tf32`` on a kernel gram makes typed, an empty ``triangle:``, and the fp8 per-tensor scale note of a
kernel that reads one scale pointer for both sides."""

from __future__ import annotations

import pytest

from driver_gemm.errors import SpecError
from driver_gemm.planning.spec_plan import plan_spec

from test_gram import line_of, parsed, spec_text


def refusal(text: str) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parsed(text)
    return caught.value


def test_a_signature_without_the_gram_input_names_it_and_the_other_form():
    error = refusal(spec_text("  gram: B\n"))       # the signature takes A, C, M, K
    assert error.field.endswith("signature") and "gram of B" in error.message, error
    assert "B is the one input" in error.message and "gram: A" in error.hint, error


def test_a_signature_giving_the_input_twice_is_told_to_name_the_second_b():
    error = refusal(spec_text("  gram: A\n", signature="[A, A, C, M, N, K]", function="gemm_a_bt"))
    assert error.field.endswith("signature") and "gram: A" in error.message, error
    assert "second pointer B" in error.hint, error


def test_pointers_to_the_tied_operand_alone_are_told_the_input_is_a():
    error = refusal(spec_text("  gram: A\n  batch: 3\n",
                              signature="[{name: Xs, type: pointers, to: B}, {name: Cs, type: pointers, to: C}, M, K]"))
    assert "gram of A" in error.message and "A is the one input" in error.message, error


def test_tf32_precision_says_gram_makes_the_kernel_typed_and_how_to_write_it():
    text = spec_text("  gram: A\n  precision: tf32\n")
    error = refusal(text)
    assert error.field.endswith("precision") and error.where.endswith(f":{line_of(text, 'precision')}"), error
    assert "gram: makes this kernel typed" in error.message and "types: {a: tf32}" in error.hint, error
    kernel = parsed(spec_text("  gram: A\n  types: {a: tf32}\n")).kernels[0]   # what the hint says is taken
    assert kernel.operands.types.a.name == "tf32"


def test_an_empty_triangle_is_refused_at_its_field():
    text = spec_text("  gram: {of: A, triangle: null}\n")
    error = refusal(text)
    assert error.field.endswith("gram.triangle") and "null" in error.message, error
    assert error.where.endswith(f":{line_of(text, 'triangle')}"), error


def test_one_scale_pointer_gives_a_gram_kernel_both_scales():
    spec = parsed(spec_text("  gram: A\n  types: {a: e4m3, c: fp32}\n  scales: {a: 0.5}\n",
                            signature="[A, {name: scale_a, type: ptr}, C, M, K]", shapes="[[32, 32, 32]]"))
    (plan,) = plan_spec(spec, arch="sm_90").plans
    (note,) = [note for note in plan.notes if "fp8 scales" in note]
    assert "in no way" not in note and "scale_b" not in note, note
    assert "scale b = 0.5 by pointer (scale_a" in note and "= 0.25" in note, note


def test_a_c_that_is_not_square_is_pointed_to_a_set_of_square_shapes():
    from driver_gemm.specfile import Shape
    from driver_gemm.specfile.typed import evaluate_operands
    kernel = parsed(spec_text("  gram: A\n")).kernels[0]
    with pytest.raises(SpecError) as caught:
        evaluate_operands(kernel, Shape(48, 40, 40))
    assert caught.value.field == "gram" and "{MN: [...], K: [...]}" in caught.value.hint, caught.value
    swept = parsed(spec_text("  gram: A\n", shapes="[{MN: [32, 64], K: [16, 24]}]")).shapes
    assert len(swept) == 4 and all(shape.M == shape.N for shape in swept)


@pytest.mark.parametrize("beta, noted", [(-1.0, True), (0.0, False)])
def test_a_gram_kernel_adding_beta_c0_is_told_c0_is_not_the_input(beta, noted):
    text = f"scalars: {{alpha: 2.0, beta: {beta}}}\n" + spec_text("  gram: A\n", signature="[A, C, M, K, alpha, beta]")
    (plan,) = plan_spec(parsed(text), arch="sm_90").plans
    found = [note for note in plan.notes if "C0" in note and "gram of A" in note]
    assert bool(found) == noted, plan.notes
    if noted:
        assert "drawn apart from A" in found[0] and "beta = -1" in found[0], found
