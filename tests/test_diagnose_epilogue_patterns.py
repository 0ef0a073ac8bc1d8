"""The FAIL summary names an epilogue the check does not apply: a value added per column or per row (a bias the spec
does not describe, left out, or along the other axis), a ReLU, a leaky ReLU or a clamp; and names none of them for
an ordinary wrong kernel (a tile, a column, a part of K, a C left at zero). No GPU."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from driver_gemm.gemm import dtypes
from driver_gemm.gemm.operands import KernelOutput
from driver_gemm.measure.verify import POISON_WORD, compare, compare_typed
from driver_gemm.planning.buffer_plans import BIAS_STEPS, BiasVector, BufferPlan
from driver_gemm.results.diagnose import diagnose_output

M, N, K = 96, 80, 256
EPILOGUE_WORDS = ("C minus the expected", "ReLU", "clamp")


def operands(seed: int = 5):
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-0.5, 0.5, (M, K)), rng.uniform(-0.5, 0.5, (K, N))
    return a, b, a @ b


def bias_of(length: int, seed: int = 9) -> np.ndarray:
    return np.random.default_rng(seed).integers(-BIAS_STEPS, BIAS_STEPS + 1, length) / BIAS_STEPS * 2


def summary_of(output, expected, plan=None, tolerance=1e-5) -> str:
    output = np.asarray(output, np.float32)
    verdict = compare(output, expected, rel_tolerance=tolerance)
    assert verdict.status == "FAIL"
    return diagnose_output(verdict, output, expected, plan)["summary"]


def plan_with_bias(along: str, values: np.ndarray):
    """A case's plan as the diagnosis reads it: its tile, its block, and a bias buffer along `along`."""
    steps = np.round(values * BIAS_STEPS).astype(np.int8).tobytes()
    buffer = BufferPlan("bias", "float32", len(values), "bias", bias=BiasVector(along, steps))
    return SimpleNamespace(tile=(16, 16), config=SimpleNamespace(block=(16, 16, 1)), buffers={"bias": buffer})


# ------------------------------------------------------------------------------------------- what is named


def test_a_bias_the_spec_does_not_describe_is_named_per_column_and_per_row():
    _, _, product = operands()
    summary = summary_of(product + bias_of(N)[None, :], product)
    assert summary.startswith("C minus the expected is one value per column (as a bias along N adds): a bias the "
                              "spec does not describe (a buffer with bias: N)"), summary
    summary = summary_of(product + bias_of(M)[:, None], product)
    assert summary.startswith("C minus the expected is one value per row (as a bias along M adds): a bias the spec "
                              "does not describe (a buffer with bias: M)"), summary


def test_a_described_bias_left_out_or_scaled_is_named_with_its_buffer():
    _, _, product = operands()
    bias = bias_of(N)
    plan = plan_with_bias("N", bias / 2)
    expected = product + bias[None, :]
    for output in (product, product + 1.5 * bias[None, :], product + np.flip(bias)[None, :]):
        summary = summary_of(output, expected, plan)
        assert summary.startswith("C minus the expected is one value per column (as a bias along N adds): the bias "
                                  "bias left out, added to the wrong columns, or scaled"), summary


def test_a_bias_added_along_the_other_axis_is_named_as_such():
    _, _, product = operands()
    along_m, along_n = bias_of(M, 1), bias_of(N, 2)
    summary = summary_of(product + along_n[None, :], product + along_m[:, None], plan_with_bias("M", along_m / 2))
    assert summary.startswith("C minus the expected is one value per row plus one per column: a bias added along the "
                              "other axis than the spec's bias (bias: M) describes"), summary


def test_a_constant_added_everywhere_is_named():
    _, _, product = operands()
    assert summary_of(product + 0.75, product).startswith("C minus the expected is 0.75 everywhere")


def test_a_relu_a_leaky_relu_and_a_clamp_are_named_with_the_elementwise_field():
    _, _, product = operands()
    summary = summary_of(np.maximum(product, 0), product)
    assert summary.startswith("C equals the expected where that is positive and 0 elsewhere: a ReLU epilogue, which "
                              "the check does not apply (describe it with the kernel's elementwise: [relu])"), summary
    summary = summary_of(np.where(product > 0, product, 0.01 * product), product)
    assert summary.startswith("C equals the expected where that is positive and 0.01 times it elsewhere: a leaky "
                              "ReLU epilogue"), summary
    assert "elementwise: [{leaky_relu: 0.01}]" in summary, summary
    summary = summary_of(np.clip(product, -1, 1), product)
    assert summary.startswith("C equals the expected clamped to [-1, 1]: a clamp (hardtanh) epilogue"), summary
    assert "elementwise: [{clamp: [-1, 1]}]" in summary, summary
    assert summary_of(np.minimum(product, 1.5), product).startswith("C equals the expected clamped to at most 1.5")


def test_a_relu_is_named_on_a_narrow_output_within_its_tolerance():
    # bf16 C at a long K: the output's own rounding is far above fp32's, and the pattern still accounts for C.
    rng = np.random.default_rng(4)
    long_k = 8192
    a, b = (dtypes.draw(shape, "bf16", rng) for shape in ((64, long_k), (long_k, 48)))
    expected = a @ b + bias_of(48)[None, :] * 4
    types = dtypes.GemmTypes(*(dtypes.element_type(name) for name in ("bf16", "bf16", "bf16", "fp32")))
    codes = dtypes.encode(np.maximum(expected, 0), types.c)
    output = KernelOutput(dtypes.decode(codes, types.c)[None], codes[None], 0)
    verdict = compare_typed(output, expected[None], types.c, rel_tolerance=dtypes.error_bound(types, long_k))
    verdict.masks = {name: mask.reshape(64, 48) for name, mask in verdict.masks.items()}
    summary = diagnose_output(verdict, output.values[0], expected)["summary"]
    assert "a ReLU epilogue" in summary, summary


# --------------------------------------------------------------------------------- what is not named


def dropped_part_of_k(a, b, _):
    return a[:, :K - 8] @ b[:K - 8]


def wrong_tile(_, __, product):
    output = product.copy()
    output[16:32, 32:48] = np.random.default_rng(0).uniform(-3, 3, (16, 16))
    return output


def zero_columns(_, __, product):
    output = product.copy()
    output[:, 64:] = 0
    return output


def one_wrong_element(_, __, product):
    output = product.copy()
    output[40, 7] += 50
    return output


def noise_everywhere(_, __, product):
    return product + np.random.default_rng(1).normal(0, 0.05, product.shape)


def rows_swapped(_, __, product):
    return product[::-1].copy()


def largest_elements_zeroed(_, __, product):
    output = product.copy()
    output[np.abs(product) > 2.5] = 0
    return output


@pytest.mark.parametrize("wrong", [
    dropped_part_of_k, wrong_tile, zero_columns, one_wrong_element, noise_everywhere, rows_swapped,
    largest_elements_zeroed,
    lambda a, b, product: np.zeros_like(product),
    lambda a, b, product: np.ones_like(product),
    lambda a, b, product: 2 * product,
    lambda a, b, product: np.abs(product),
    lambda a, b, product: product * (1 + np.random.default_rng(2).uniform(-0.1, 0.1, product.shape)),
], ids=["part-of-K", "tile", "zero-columns", "one-element", "noise", "rows-swapped", "largest-zeroed", "zeros",
        "ones", "doubled", "absolute", "scaled-each"])
def test_an_ordinary_wrong_kernel_is_not_called_an_epilogue(wrong):
    a, b, product = operands()
    summary = summary_of(wrong(a, b, product), product)
    assert not any(word in summary for word in EPILOGUE_WORDS), summary


def test_a_c_partly_unwritten_is_described_by_where_not_as_an_epilogue():
    _, _, product = operands()
    output = np.asarray(product + bias_of(N)[None, :], np.float32)
    output[:, 40:] = np.array(POISON_WORD, np.uint32).view(np.float32)
    summary = summary_of(output, product)
    assert summary.startswith("3840 elements unwritten: columns 40-79"), summary
    assert not any(word in summary for word in EPILOGUE_WORDS), summary


def test_an_offset_is_not_fitted_on_a_c_too_small_to_tell_it_from_any_difference():
    rng = np.random.default_rng(3)
    product = rng.uniform(-1, 1, (3, 64))
    summary = summary_of(product + rng.uniform(-1, 1, (3, 64)), product)
    assert "C minus the expected" not in summary, summary
