"""Block scales of a Gram kernel's one input: the tied operand is the input's buffer read transposed, so it carries
the input's factors too and the reference is the Gram product of the scaled input, (S o X)(S o X)^T (or its
X^T X form), checked on host arrays."""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.session.typed_steps import held_inputs, reference_step
from driver_gemm.status import Status

from test_gram import checked, fake_run, parsed, spec_text


def scaled_gram_run(of: str, triangle: str | None = None):
    """A run of an fp8 Gram kernel of `of` whose input has a factor per block of 1 x 16 (of A) or 16 x 1 (of B)."""
    block, size, operand = ("[1, 16]", "ceil(K / 16) * M", "A") if of == "a" else ("[16, 1]", "ceil(K / 16) * N", "B")
    scales = (f"{{name: sfx, type: buffer, element: float32, size: {size}, "
              f"scales: {{of: {operand}, block: {block}, order: col}}}}")
    dims = "M" if of == "a" else "N"
    gram = f"{{of: {operand}" + (f", triangle: {triangle}" if triangle else "") + "}"
    spec = parsed(spec_text(f"  gram: {gram}\n  types: {{a: e4m3, c: fp32}}\n", shapes="[[32, 32, 48]]",
                            signature=f"[{operand}, {scales}, C, {dims}, K]"))
    run = fake_run(spec.kernels[0], spec.shapes[0], spec)
    assert run.case.plan.valid, run.case.plan.problems
    held_inputs(run)
    reference_step(run)
    (grid,) = [plan.grid for plan in run.case.plan.buffers.values() if plan.grid is not None]
    drawn = getattr(run.typed.inputs, of)
    scaled = grid.applied(drawn)[0]
    assert not np.allclose(scaled, drawn[0]), "the factors are not all one"
    return run, scaled


@pytest.mark.parametrize("of", ["a", "b"])
def test_the_reference_scales_the_tied_operand_by_the_inputs_factors(of):
    run, scaled = scaled_gram_run(of)
    both_sides = scaled @ scaled.T if of == "a" else scaled.T @ scaled
    expected = np.asarray(run.expected).reshape(both_sides.shape)
    assert np.allclose(expected, both_sides, rtol=1e-12, atol=0)
    assert np.allclose(expected, expected.T, rtol=1e-12, atol=0)


def test_a_kernel_scaling_both_sides_passes_and_one_scaling_one_side_fails():
    run, scaled = scaled_gram_run("a")
    assert checked(run, scaled @ scaled.T).status == Status.PASS
    run, scaled = scaled_gram_run("a")
    one_side = scaled @ run.typed.inputs.a[0].T
    assert checked(run, one_side).status == Status.FAIL


def test_a_scaled_lower_triangle_is_checked_against_the_symmetric_product():
    run, scaled = scaled_gram_run("a", "lower")
    product = scaled @ scaled.T
    verdict = checked(run, np.where(np.tri(32, dtype=bool), product, np.nan))
    assert verdict.status == Status.PASS, verdict
