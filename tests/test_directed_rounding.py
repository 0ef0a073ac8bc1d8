"""The check of a 16-bit C's rounding direction: C rounded down (toward -inf) or up (toward +inf) where it should
round to nearest fails as C rounded toward zero does, under the same conditions (`dtypes.rounding_direction_visible`),
each saying which way; and the message for C smaller in magnitude than the nearest number names the likely causes,
a truncating conversion or a scale such as alpha rounded toward zero before it is applied."""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.gemm import dtypes
from driver_gemm.gemm.operands import KernelOutput, gemm_operands, make_typed_inputs, reference
from driver_gemm.measure.verify import compare_typed
from driver_gemm.status import Status


def rounded_down(values: np.ndarray, element: dtypes.ElementType) -> np.ndarray:
    """`values` rounded toward -inf in `element` (as __float2bfloat16_rd or __float2half_rd do)."""
    nearest = dtypes.round_to(values, element)
    codes = dtypes.encode(nearest, element).astype(np.int64)
    above = nearest > values
    # Codes count up with the magnitude within a sign: one down in value is one code less for a positive number,
    # one more for a negative one, and the negative smallest subnormal (sign bit and code 1) below a zero.
    sign_bit = 1 << (8 * element.storage_bytes - 1)
    codes = np.where(above & (nearest > 0), codes - 1, codes)
    codes = np.where(above & (nearest < 0), codes + 1, codes)
    codes = np.where(above & (nearest == 0), sign_bit | 1, codes)
    return dtypes.decode(codes.astype(element.storage_dtype), element)


def directed(values: np.ndarray, element: dtypes.ElementType, upward: bool) -> np.ndarray:
    """`values` rounded toward +inf (`upward`, as __float2bfloat16_ru does) or -inf in `element`."""
    return -rounded_down(-values, element) if upward else rounded_down(values, element)


def check(types, K: int, values_of, alpha: float = 1.0):
    operands = gemm_operands(96, 80, K)
    inputs = make_typed_inputs(operands, types, 3)
    expected = reference(inputs.a, inputs.b, alpha)
    codes = dtypes.encode(values_of(inputs, expected), types.c)
    return compare_typed(KernelOutput(dtypes.decode(codes, types.c), codes, 0), expected, types.c,
                         rel_tolerance=dtypes.error_bound(types, K),
                         check_rounding=dtypes.rounding_direction_visible(types, K))


def fp32_sum(inputs) -> np.ndarray:
    return np.matmul(inputs.a.astype(np.float32), inputs.b.astype(np.float32)).astype(np.float64)


@pytest.mark.parametrize("type_name, c", [("bf16", None), ("fp16", None), ("fp32", "bf16")])
@pytest.mark.parametrize("upward, said", [(False, "rounded down (toward -inf)"), (True, "rounded up (toward +inf)")])
def test_c_rounded_down_or_up_fails_saying_which_way(type_name, c, upward, said):
    types = dtypes.parse_types({"a": type_name, **({"c": c} if c else {})})
    verdict = check(types, 64, lambda inputs, expected: directed(fp32_sum(inputs), types.c, upward))
    assert verdict.wrong == 0 and verdict.rel_fro_error <= verdict.tolerance, "within the tolerance: the test is apart"
    assert verdict.status == Status.FAIL
    assert said in verdict.note and types.c.name in verdict.note
    assert ("_ru" if upward else "_rd") in verdict.note


@pytest.mark.parametrize("upward", [False, True])
def test_directed_rounding_is_not_checked_where_the_direction_cannot_be_told(upward):
    types = dtypes.parse_types({"a": "bf16", "c": "fp32"})
    verdict = check(types, 64, lambda inputs, expected: directed(fp32_sum(inputs), dtypes.ELEMENT_TYPES["bf16"],
                                                                 upward))
    assert verdict.note is None or "rounded" not in verdict.note


def test_c_smaller_than_nearest_names_a_scale_rounded_toward_zero_as_well_as_truncation():
    # A kernel that converts alpha to bf16 (rounding to nearest, which lands below 1e-6) and applies it there:
    # every conversion rounds to nearest, yet C leans toward zero.
    types = dtypes.parse_types({"a": "bf16"})
    alpha = float(np.float32(1e-6))
    alpha_bf16 = float(dtypes.round_to(np.array([alpha]), "bf16")[0])
    assert abs(alpha_bf16) < abs(alpha)
    verdict = check(types, 64, lambda inputs, expected: dtypes.round_to(
        alpha_bf16 * dtypes.round_to(fp32_sum(inputs), "bf16"), "bf16"), alpha=alpha)
    assert verdict.status == Status.FAIL
    note = verdict.note
    assert "smaller in magnitude" in note
    assert "__float2bfloat16_rz" in note and "alpha" in note and "__float2bfloat16_rn" in note
