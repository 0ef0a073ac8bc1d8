"""The check of a 16-bit C's rounding: a kernel that rounds C toward zero (truncates) where it should round to
nearest stays within the tolerance, which allows for C's rounding without asking which way it went, so where a
correct kernel's C is the nearest number to the exact product in all but a few elements, C rounded toward zero
fails, saying so.

Left out: tf32 inputs, which the tensor cores convert by truncation, so that a correct TF32 kernel's products
already lean toward zero; fp8 inputs, whose tensor cores keep about 14 bits of a sum; an fp16 accumulator; and a K
long enough for the accumulation to move C by a fair part of its rounding (tensor cores truncate their fp32
sums, Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor cores", 2021)."""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.gemm import dtypes
from driver_gemm.gemm.operands import KernelOutput, gemm_operands, make_typed_inputs, reference
from driver_gemm.measure.verify import compare_typed
from driver_gemm.session import steps, typed_steps
from driver_gemm.status import Status

from test_typed_pipeline import parse, spec_text, typed_run, write_result


def truncated(values: np.ndarray, element: dtypes.ElementType) -> np.ndarray:
    """`values` rounded toward zero to `element` (as __float2bfloat16_rz or __float2half_rz do)."""
    nearest = dtypes.round_to(values, element)
    overshoot = np.abs(nearest) > np.abs(values)
    codes = dtypes.encode(nearest, element).astype(np.int64)
    codes[overshoot] -= 1          # the codes of a sign count up with the magnitude: one down is one toward zero
    return dtypes.decode(codes.astype(element.storage_dtype), element)


def fp32_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float64)


def tensor_core_sum(a: np.ndarray, b: np.ndarray, step: int = 16) -> np.ndarray:
    """An fp32 accumulation that adds `step` exact products at a time and truncates each sum toward zero, as the
    tensor cores do: a correct kernel's C then leans toward zero, by far less than its rounding."""
    total = np.zeros(a.shape[:-1] + b.shape[-1:], np.float32)
    for start in range(0, a.shape[-1], step):
        exact = total.astype(np.float64) + a[..., start:start + step] @ b[..., start:start + step, :]
        single = exact.astype(np.float32)
        total = np.where(np.abs(single) > np.abs(exact), np.nextafter(single, np.float32(0)), single)
    return total.astype(np.float64)


def check(types, M: int, N: int, K: int, kernel) -> object:
    operands = gemm_operands(M, N, K)
    inputs = make_typed_inputs(operands, types, 3)
    expected = reference(inputs.a, inputs.b)
    values = kernel(inputs, types.c)
    codes = dtypes.encode(values, types.c)
    return compare_typed(KernelOutput(dtypes.decode(codes, types.c), codes, 0), expected, types.c,
                         rel_tolerance=dtypes.error_bound(types, K),
                         check_rounding=dtypes.rounding_direction_visible(types, K))


@pytest.mark.parametrize("type_name, c", [("bf16", None), ("fp16", None), ("fp32", "bf16"), ("fp16", "bf16")])
def test_c_rounded_toward_zero_fails_saying_so(type_name, c):
    types = dtypes.parse_types({"a": type_name, **({"c": c} if c else {})})
    verdict = check(types, 96, 80, 64, lambda inputs, element: truncated(fp32_sum(inputs.a, inputs.b), element))
    assert verdict.status == Status.FAIL
    assert verdict.wrong == 0 and verdict.rel_fro_error <= verdict.tolerance, "within the tolerance: the test is apart"
    assert "rounded toward zero" in verdict.note and types.c.name in verdict.note


@pytest.mark.parametrize("type_name, K", [("bf16", 64), ("bf16", 4096), ("fp16", 64), ("fp16", 2048)])
def test_a_correct_kernel_passes_even_with_the_tensor_cores_truncated_sums(type_name, K):
    types = dtypes.parse_types({"a": type_name})
    assert dtypes.rounding_direction_visible(types, K)
    for kernel in (fp32_sum, tensor_core_sum):
        verdict = check(types, 48, 40, K, lambda inputs, element: kernel(inputs.a, inputs.b))
        assert verdict.status == Status.PASS, (kernel.__name__, verdict.as_dict(), verdict.note)


@pytest.mark.parametrize("types, K", [
    ({"a": "tf32"}, 64),                     # fp32 C, and tf32's conversion truncates
    ({"a": "bf16", "c": "fp32"}, 64),        # a 32-bit C
    ({"a": "e4m3", "c": "bf16"}, 64),        # fp8's tensor cores keep about 14 bits of a sum
    ({"a": "fp16", "accumulate": "fp16"}, 64),
    ({"a": "bf16"}, 65536),                  # an accumulation long enough to move C by a fair part of its rounding
    ({"a": "fp16"}, 4096),
])
def test_where_a_correct_kernels_rounding_direction_is_not_sure_it_is_not_checked(types, K):
    assert not dtypes.rounding_direction_visible(dtypes.parse_types(types), K)


def test_the_typed_check_tests_the_rounding_and_the_message_says_it(tmp_path):
    run = typed_run(parse(spec_text("types: {a: bf16}", shapes="[[64, 48, 40]]"), tmp_path))
    typed_steps.inputs(run)
    typed_steps.reference_step(run)
    typed_steps._reset_output(run)
    write_result(run, truncated(fp32_sum(run.typed.inputs.a, run.typed.inputs.b), run.typed.types.c))
    assert typed_steps.check_output(run).status == Status.FAIL
    steps.diagnose(run)
    assert run.record.message.startswith("C is rounded toward zero, not to nearest")
    assert "__float2bfloat16_rn" in run.record.message
