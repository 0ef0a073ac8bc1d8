"""A drawn bias is as large as C's elements, so that a kernel that leaves it out, or adds it to the wrong columns,
fails the run's own check at every K, even where that check's tolerance is wide: fp8 inputs and an fp16 accumulator
at long K. The bias is still exact in every type a bias buffer holds, and drawn the same way for the same shape.
No GPU: the kernel's output is made here, rounded to C's type, and judged by the run's comparison."""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.gemm import dtypes
from driver_gemm.gemm.operands import KernelOutput, make_typed_inputs, reference
from driver_gemm.measure.verify import compare_typed
from driver_gemm.planning.buffer_plans import BIAS_STEPS
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import Shape, parse_spec

from conftest import ROOT

SM90 = arch_limits("sm_90")

TYPES = {
    "e4m3->bf16": "{a: e4m3, b: e4m3, c: bf16, accumulate: fp32}",
    "e4m3->fp16": "{a: e4m3, b: e4m3, c: fp16, accumulate: fp32}",
    "e4m3->fp32": "{a: e4m3, b: e4m3, c: fp32, accumulate: fp32}",
    "fp16 accumulating in fp16": "{a: fp16, b: fp16, c: fp16, accumulate: fp16}",
    "bf16": "{a: bf16, b: bf16, c: bf16, accumulate: fp32}",
    "tf32": "{a: tf32, b: tf32, c: fp32, accumulate: fp32}",
    "fp32": "{a: fp32, b: fp32, c: fp32, accumulate: fp32}",
}
SCALES_A = "{name: scales_a, type: buffer, element: float32, size: ceil(K / 128) * M, " \
           "scales: {of: A, block: [1, 128], order: col}}"
SCALES_B = "{name: scales_b, type: buffer, element: float32, size: ceil(N / 128) * ceil(K / 128), " \
           "scales: {of: B, block: [128, 128], order: col}}"


def bias_kernel(types: str, along: str = "N", element: str = "float32", *more: str):
    buffers = (*more, f"{{name: bias, type: buffer, element: {element}, size: {along}, bias: {along}}}")
    arguments = "".join(f"    - {item}\n" for item in ("A", "B", "C", "M", "N", "K", *buffers))
    text = (f"shapes: [[64, 96, 1024]]\nkernels:\n- name: gemm-bias\n"
            f"  source: {ROOT / 'kernels/outside/fp8_block_scaled.cu'}\n  function: fp8_block_scaled\n  arch: sm_90\n"
            f"  types: {types}\n  layout: NT\n  epilogue: overwrite\n  block: [16, 16]\n"
            f"  grid: [ceil(N / 16), ceil(M / 16)]\n  signature:\n{arguments}")
    return parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True).kernels[0]


def planned(kernel, shape: Shape):
    plan = plan_case(kernel, shape, SM90)
    assert plan.valid, plan.problems
    return plan


def verdict_of(values: np.ndarray, expected: np.ndarray, types: dtypes.GemmTypes, K: int):
    """The run's verdict on a kernel that wrote `values` (M x N, float64) into C, rounded to C's type."""
    codes = dtypes.encode(values, types.c)
    output = KernelOutput(dtypes.decode(codes, types.c)[None], codes[None], 0)
    return compare_typed(output, expected, types.c, rel_tolerance=dtypes.error_bound(types, K))


@pytest.mark.parametrize("K", [1024, 4096, 16384, 32768])
@pytest.mark.parametrize("label", list(TYPES))
@pytest.mark.parametrize("along", ["N", "M"])
def test_a_bias_left_out_or_reversed_fails_and_a_right_one_passes_at_every_k(label, K, along):
    kernel = bias_kernel(TYPES[label], along)
    shape = Shape(64, 96, K)
    plan = planned(kernel, shape)
    types = kernel.operands.types
    inputs = make_typed_inputs(plan.operands, types, seed=7)
    product = reference(inputs.a, inputs.b)
    bias = plan.buffers["bias"].bias
    expected = bias.added(product.copy())
    reversed_bias = np.flip(bias.values())
    wrong_columns = product[0] + (reversed_bias[None, :] if along == "N" else reversed_bias[:, None])
    assert verdict_of(expected[0], expected, types, K).status == "PASS", (label, K)
    assert verdict_of(product[0], expected, types, K).status == "FAIL", f"{label}, K = {K}: a bias left out passes"
    assert verdict_of(wrong_columns, expected, types, K).status == "FAIL", \
        f"{label}, K = {K}: a bias added to the wrong {'columns' if along == 'N' else 'rows'} passes"


@pytest.mark.parametrize("label, more", [("e4m3->bf16", ()), ("fp16 accumulating in fp16", ()),
                                         ("e4m3->fp32", (SCALES_A, SCALES_B))])
@pytest.mark.parametrize("K", [16, 776, 32768])
def test_the_bias_is_about_as_large_as_the_product_it_is_added_to(label, more, K):
    kernel = bias_kernel(TYPES[label], "N", "float32", *more)
    plan = planned(kernel, Shape(64, 256, K))
    inputs = make_typed_inputs(plan.operands, kernel.operands.types, seed=3)
    a, b = inputs.a, inputs.b
    for buffer in plan.buffers.values():
        if buffer.grid is not None:
            a, b = (buffer.grid.applied(a), b) if buffer.grid.operand == "a" else (a, buffer.grid.applied(b))
    product_rms = float(np.sqrt(np.mean(reference(a, b) ** 2)))
    bias_rms = float(np.sqrt(np.mean(plan.buffers["bias"].bias.values() ** 2)))
    assert 0.3 < bias_rms / product_rms < 2, (label, K, bias_rms, product_rms)


@pytest.mark.parametrize("element, decoded", [("float32", "<f4"), ("float64", "<f8"), ("float16", "<f2"),
                                              ("bfloat16", None)])
@pytest.mark.parametrize("K", [1, 776, 1 << 20])
def test_the_scaled_bias_is_exact_in_every_type_a_bias_buffer_holds(element, decoded, K):
    plan = planned(bias_kernel(TYPES["e4m3->fp32"], "N", element), Shape(16, 200, K))
    buffer = plan.buffers["bias"]
    values = buffer.bias.values()
    data = buffer.initial_bytes()
    if decoded is None:   # bfloat16: the top half of a float32
        held = (np.frombuffer(data.tobytes(), dtype="<u2").astype("<u4") << 16).view("<f4").astype(np.float64)
    else:
        held = np.frombuffer(data.tobytes(), dtype=decoded).astype(np.float64)
    assert np.array_equal(held[:200], values)
    steps = np.ldexp(values, -buffer.bias.exponent) * BIAS_STEPS
    assert np.array_equal(steps, np.round(steps)) and np.abs(steps).max() <= BIAS_STEPS
    assert len(np.unique(values)) > 20


def test_the_bias_is_drawn_the_same_for_the_same_shape_and_scaled_with_k():
    kernel = bias_kernel(TYPES["bf16"])
    first, again = (planned(kernel, Shape(64, 96, 4096)).buffers["bias"].bias for _ in range(2))
    assert first == again
    short, long = (planned(kernel, Shape(64, 96, K)).buffers["bias"].bias for K in (64, 16384))
    assert long.exponent > short.exponent


@pytest.mark.parametrize("route", ["", "    - {name: scale_a, type: ptr}\n    - {name: scale_b, type: ptr}\n"],
                         ids=["applied in no way", "by pointer"])
def test_the_bias_follows_fp8s_per_tensor_scales_wherever_they_reach_the_kernel(route):
    # The check computes with alpha x scale a x scale b: a bias drawn at the unscaled product's size would be 4,096
    # times C here, and hide a wrong product under its own size.
    text = (f"shapes: [[64, 96, 4096]]\nkernels:\n- name: gemm-bias\n"
            f"  source: {ROOT / 'kernels/outside/fp8_block_scaled.cu'}\n  function: fp8_block_scaled\n  arch: sm_90\n"
            f"  types: {TYPES['e4m3->bf16']}\n  scales: {{a: 0.015625, b: 0.015625}}\n  layout: NT\n"
            f"  epilogue: overwrite\n  block: [16, 16]\n  grid: [ceil(N / 16), ceil(M / 16)]\n  signature:\n"
            "    - A\n    - B\n    - C\n    - M\n    - N\n    - K\n"
            "    - {name: bias, type: buffer, element: float32, size: N, bias: N}\n" + route)
    kernel = parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True).kernels[0]
    plan = planned(kernel, Shape(64, 96, 4096))
    inputs = make_typed_inputs(plan.operands, kernel.operands.types, seed=3)
    product_rms = float(np.sqrt(np.mean(reference(inputs.a, inputs.b, 0.015625 ** 2) ** 2)))
    bias_rms = float(np.sqrt(np.mean(plan.buffers["bias"].bias.values() ** 2)))
    assert 0.3 < bias_rms / product_rms < 2, (bias_rms, product_rms)
