"""C in its type's subnormal range from a kernel that rounds there more than once (a split-K that applies alpha to
each partial sum and adds them in C's type, or in fp32 below its smallest normal number) passes, as the whole-C
tolerance allows C's roundings; a C flushed to zero there still fails, saying so, even where its reference is too
small for the error alone to tell."""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.gemm import dtypes
from driver_gemm.gemm.operands import KernelOutput, gemm_operands, make_typed_inputs, reference
from driver_gemm.measure.verify import compare, compare_typed
from driver_gemm.status import Status


def rounded(values: np.ndarray, element: dtypes.ElementType) -> np.ndarray:
    if element.name == "fp32":
        return np.asarray(values, np.float64).astype(np.float32).astype(np.float64)
    return dtypes.round_to(values, element)


def split_k_alpha_on_partials(a, b, alpha: float, element: dtypes.ElementType, splits: int) -> np.ndarray:
    """Each split's fp32 partial sum times alpha rounded to C's type, the products summed in C's type."""
    bounds = np.linspace(0, a.shape[-1], splits + 1).astype(int)
    total = np.zeros(a.shape[:-1] + b.shape[-1:])
    for low, high in zip(bounds[:-1], bounds[1:]):
        partial = np.matmul(a[..., low:high].astype(np.float32), b[..., low:high, :].astype(np.float32))
        total = rounded(total + rounded(np.float32(alpha) * partial.astype(np.float64), element), element)
    return total


def check(type_name: str, shape, alpha: float, values_of):
    types = dtypes.parse_types({"a": type_name})
    M, N, K = shape
    inputs = make_typed_inputs(gemm_operands(M, N, K), types, 3)
    expected = reference(inputs.a, inputs.b, alpha)
    codes = dtypes.encode(values_of(inputs, types.c), types.c)
    return compare_typed(KernelOutput(dtypes.decode(codes, types.c), codes, 0), expected, types.c,
                         rel_tolerance=dtypes.error_bound(types, K)), expected, types


@pytest.mark.parametrize("type_name, shape, alpha, splits", [
    ("fp16", (64, 64, 64), 1e-6, 16), ("fp16", (1, 1, 64), 1e-6, 16),
    ("fp32", (64, 64, 256), 1e-40, 64), ("fp32", (64, 64, 256), 1e-42, 16),
])
def test_a_split_k_rounding_each_partial_into_cs_subnormal_range_passes(type_name, shape, alpha, splits):
    verdict, expected, types = check(type_name, shape, alpha, lambda inputs, element: split_k_alpha_on_partials(
        inputs.a, inputs.b, alpha, element, splits))
    assert np.abs(expected).max() < dtypes.smallest_normal(types.c), "C lies in its type's subnormal range"
    assert verdict.status == Status.PASS, (verdict.as_dict(), verdict.note)


def flushed(inputs, element) -> np.ndarray:
    return np.zeros(inputs.a.shape[:-1] + inputs.b.shape[-1:])


def test_a_c_flushed_to_zero_fails_where_its_reference_is_a_spacing_or_two():
    verdict, expected, types = check("bf16", (64, 64, 256), 1e-40, flushed)
    spacings = np.sqrt(np.mean(expected ** 2)) / dtypes.smallest_positive(types.c)
    assert spacings < dtypes.SAFETY / 2, "the reference is within the floor: the error alone cannot tell"
    assert verdict.status == Status.FAIL
    assert "flushed to zero" in verdict.note and "bf16" in verdict.note and "-ftz" in verdict.note


def test_an_untyped_fp32_c_flushed_to_zero_fails_saying_so():
    rng = np.random.default_rng(3)
    a, b = rng.uniform(-1, 1, (64, 48)).astype(np.float32), rng.uniform(-1, 1, (48, 64)).astype(np.float32)
    expected = 1e-45 * (a.astype(np.float64) @ b.astype(np.float64))
    verdict = compare(np.zeros((64, 64), np.float32), expected, rel_tolerance=1e-5)
    assert verdict.status == Status.FAIL and "flushed to zero" in verdict.note
