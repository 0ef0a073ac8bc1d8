"""`plan` foresees a product that overflows C's type: where alpha and K take C's expected elements beyond the largest
finite number of a 16-bit C, each such shape gets a note saying so and what would make the product fit, before any
launch; shapes, alphas and types where the product fits get none."""

from __future__ import annotations

import pytest

from driver_gemm.planning.spec_plan import plan_spec

from gpu_specs import write_spec


def naive_typed(name: str, c: str, *, elementwise: str = "") -> str:
    """A typed kernel of kernels/types/ with fp16 inputs and a C of type `c` (fp16 or fp32)."""
    c_type = "dg::half_t" if c == "fp16" else "float"
    return f"""
    - name: {name}
      source: "@KERNELS@/types/naive_typed.cu"
      function: gemm_naive_typed
      types: {{a: fp16, b: fp16, c: {c}, accumulate: fp32}}
      layout: NN
      params: {{TA: dg::half_t, TB: dg::half_t, TC: {c_type}, ACC: float, LA: dg::Row, LB: dg::Row}}
      signature: [A, B, C, M, N, K, lda, ldb, ldc, strideA, strideB, strideC, alpha, beta]
      block: [16, 16]
      grid: [ceil(N / 16), ceil(M / 16), batch]
    """ + (f"  elementwise: {elementwise}\n" if elementwise else "")


def overflow_notes(tmp_path, kernels: str, alpha: float, shapes: list[str]) -> dict[tuple[str, str], list[str]]:
    spec = write_spec(tmp_path, kernels, shapes, extra=f"scalars: {{alpha: {alpha}, beta: 0.0}}\n")
    planned = plan_spec(spec, arch="sm_90")
    assert all(plan.valid for plan in planned.plans), [[str(p) for p in plan.problems] for plan in planned.plans]
    return {(plan.kernel.name, plan.shape.label): [note for note in plan.notes if "overflows" in note]
            for plan in planned.plans}


def test_a_16_bit_c_that_alpha_and_k_take_past_its_range_is_noted_with_what_would_make_it_fit(tmp_path):
    notes = overflow_notes(tmp_path, naive_typed("half_c", "fp16") + naive_typed("float_c", "fp32"), 1e4,
                           ["256x256x4096", "64x64x16"])
    note, = notes[("half_c", "256x256x4096")]
    assert "65504" in note and "alpha = 10000" in note and "K = 4,096" in note
    assert "lower alpha" in note and "wider type (fp32)" in note
    # K = 16: about 3.3e3 in size, the largest about 1.4e4, within fp16's range.
    assert notes[("half_c", "64x64x16")] == []
    # fp32 holds the same product.
    assert notes[("float_c", "256x256x4096")] == [] and notes[("float_c", "64x64x16")] == []


@pytest.mark.parametrize("alpha", [1.0, 100.0])
def test_a_product_that_fits_a_16_bit_c_gets_no_overflow_note(tmp_path, alpha):
    # At alpha 100 and K = 4096 C's elements are about 5.3e2 in size, the largest a few thousand.
    notes = overflow_notes(tmp_path, naive_typed("half_c", "fp16"), alpha, ["256x256x4096"])
    assert notes[("half_c", "256x256x4096")] == []


def test_a_fused_epilogue_that_changes_cs_range_is_left_to_the_runs_check(tmp_path):
    # A clamp keeps C within fp16 whatever the product: no note can say the reference overflows.
    notes = overflow_notes(tmp_path, naive_typed("clamped", "fp16", elementwise="[{clamp: [-1.0, 1.0]}]"), 1e4,
                           ["256x256x4096"])
    assert notes[("clamped", "256x256x4096")] == []
