"""The check of C below its type's smallest normal number: rounding there loses relative precision that no kernel
can keep, so a correct result in C's subnormal range passes, while a kernel that flushes it to zero still fails,
and a C of normal numbers is held to the relative tolerance alone."""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.gemm import dtypes
from driver_gemm.gemm.operands import KernelOutput, gemm_operands, make_typed_inputs, reference
from driver_gemm.measure.verify import compare, compare_typed
from driver_gemm.status import Status


def typed_case(type_name: str, alpha: float, M: int = 64, N: int = 64, K: int = 64):
    """The types, the exact float64 reference and the inputs of a typed GEMM scaled by `alpha`."""
    types = dtypes.parse_types({"a": type_name})
    operands = gemm_operands(M, N, K)
    inputs = make_typed_inputs(operands, types, 7)
    return types, reference(inputs.a, inputs.b, alpha), inputs


def correct_output(types, inputs, alpha: float) -> KernelOutput:
    """What a correct kernel leaves in C: an fp32 sum, times alpha in fp32, rounded once to nearest in C's type."""
    accumulated = np.matmul(inputs.a.astype(np.float32), inputs.b.astype(np.float32))
    values = (np.float32(alpha) * accumulated).astype(np.float64)
    codes = dtypes.encode(values, types.c)
    return KernelOutput(dtypes.decode(codes, types.c), codes, 0)


def check(types, output: KernelOutput, expected: np.ndarray):
    return compare_typed(output, expected, types.c, rel_tolerance=dtypes.error_bound(types, 64))


@pytest.mark.parametrize("type_name, alpha", [("fp16", 1e-6), ("bf16", 1e-39), ("fp32", 1e-40)])
def test_a_correct_result_in_the_subnormal_range_passes(type_name, alpha):
    types, expected, inputs = typed_case(type_name, alpha)
    assert np.abs(expected).max() < dtypes.smallest_normal(types.c), "C lies in its type's subnormal range"
    verdict = check(types, correct_output(types, inputs, alpha), expected)
    assert verdict.status == Status.PASS, verdict.as_dict()
    # What a results file holds must read as a pass: the error within the tolerance the record gives.
    assert verdict.rel_fro_error <= verdict.tolerance


@pytest.mark.parametrize("type_name, alpha", [("fp16", 1e-6), ("fp32", 1e-40)])
def test_a_subnormal_result_flushed_to_zero_still_fails(type_name, alpha):
    types, expected, _ = typed_case(type_name, alpha)
    zeros = np.zeros_like(expected)
    codes = dtypes.encode(zeros, types.c)
    verdict = check(types, KernelOutput(zeros, codes, 0), expected)
    assert verdict.status == Status.FAIL and verdict.wrong > 0


def test_a_subnormal_result_off_by_a_tenth_of_k_fails():
    types, expected, inputs = typed_case("fp32", 1e-40)
    partial = np.matmul(inputs.a[..., :58].astype(np.float32), inputs.b[..., :58, :].astype(np.float32))
    values = (np.float32(1e-40) * partial).astype(np.float64)
    codes = dtypes.encode(values, types.c)
    assert check(types, KernelOutput(dtypes.decode(codes, types.c), codes, 0), expected).status == Status.FAIL


@pytest.mark.parametrize("type_name", ["fp16", "bf16", "fp32"])
def test_normal_results_are_held_to_the_relative_tolerance_alone(type_name):
    types, expected, inputs = typed_case(type_name, 1.0)
    assert np.abs(expected[expected != 0]).min() >= dtypes.smallest_normal(types.c)
    verdict = check(types, correct_output(types, inputs, 1.0), expected)
    assert verdict.status == Status.PASS and verdict.tolerance == dtypes.error_bound(types, 64)


def test_the_floor_is_no_larger_than_the_relative_allowance_at_the_smallest_normal_number():
    for name in ("fp16", "bf16", "fp32"):
        element = dtypes.element_type(name)
        relative_at_smallest_normal = dtypes.SAFETY * element.unit_roundoff * dtypes.smallest_normal(element)
        assert 0 < dtypes.subnormal_floor(element) <= relative_at_smallest_normal
    assert dtypes.subnormal_floor("int32") == 0.0


def test_an_untyped_fp32_result_in_the_subnormal_range_passes():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((48, 40)).astype(np.float32), rng.standard_normal((40, 32)).astype(np.float32)
    alpha = 1e-40
    expected = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    output = np.float32(alpha) * (a @ b)
    verdict = compare(output, expected, rel_tolerance=1e-5)
    assert verdict.status == Status.PASS, verdict.as_dict()
    assert compare(np.zeros_like(output), expected, rel_tolerance=1e-5).status == Status.FAIL
