"""The FAIL summary names what C holds when alpha, beta or a scale went wrong: the product times a factor at bf16's
tolerance too, alpha not applied, C0 left out, added twice or without beta, alpha and beta swapped; elements still
holding C's starting value are worded as such; and none of these is said of a kernel wrong in one place. No GPU."""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.gemm import dtypes
from driver_gemm.gemm.operands import KernelOutput
from driver_gemm.measure.verify import POISON_WORD, compare, compare_typed
from driver_gemm.results.diagnose import diagnose_output

M, N, K = 128, 96, 256


def inputs(seed: int = 6):
    """bf16-exact A and B, their float32-accumulated product in float64, and a bf16-exact C0."""
    rng = np.random.default_rng(seed)
    a, b, c0 = (dtypes.decode(dtypes.encode(rng.uniform(-1, 1, shape), "bf16"), "bf16")
                for shape in ((M, K), (K, N), (M, N)))
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float64), c0


def summary_of(values: np.ndarray, expected: np.ndarray, c_type: str, start: np.ndarray | None = None,
               **facts) -> str:
    """`values` written as C of `c_type` (C started from `start`, or poisoned), checked and diagnosed."""
    if c_type == "fp32":
        output = np.asarray(values, np.float32)
        verdict = compare(output, expected, rel_tolerance=5e-6, start=start)
    else:
        types = dtypes.GemmTypes(*(dtypes.element_type(name) for name in ("bf16", "bf16", c_type, "fp32")))
        codes = dtypes.encode(values, types.c)
        typed = KernelOutput(dtypes.decode(codes, types.c)[None], codes[None], 0)
        verdict = compare_typed(typed, expected[None], types.c, rel_tolerance=dtypes.error_bound(types, K),
                                start=start[None] if start is not None else None)
        verdict.masks = {name: mask[0] for name, mask in verdict.masks.items()}
        output = typed.values[0]
    assert verdict.status == "FAIL"
    return diagnose_output(verdict, output, expected, start=start, **facts)["summary"]


@pytest.mark.parametrize("alpha", [1.25, 1.1, 2.0])
def test_alpha_left_out_is_named_as_a_factor_at_bf16_tolerance(alpha):
    product, _ = inputs()
    summary = summary_of(product, alpha * product, "bf16")
    assert summary.startswith(f"every element is the product times {1 / alpha:.4g} ("), summary
    assert "part of K" not in summary and "off too" not in summary, summary
    summary = summary_of(product, alpha * product, "bf16", alpha=alpha)
    assert summary.startswith(f"C equals A @ B: alpha = {alpha:g} (with any scale folded into it) not applied"), \
        summary


def test_no_factor_is_named_for_a_kernel_wrong_in_one_tile():
    product, _ = inputs()
    values = product.copy()
    values[64:128, 0:64] *= 0.5
    summary = summary_of(values, product, "bf16", alpha=1.0)
    assert "times" not in summary and "alpha" not in summary, summary


@pytest.mark.parametrize("c_type", ["bf16", "fp32"])
def test_beta_mistakes_are_named_given_c0_alpha_and_beta(c_type):
    product, c0 = inputs()
    alpha, beta = 1.0, 0.5
    expected = alpha * product + beta * c0
    facts = {"alpha": alpha, "beta": beta}
    summary = summary_of(product, expected, c_type, c0, **facts)
    assert summary.startswith("C equals alpha A @ B without beta C0 (beta = 0.5): C's starting values never read"), \
        summary
    summary = summary_of(product + 2 * beta * c0, expected, c_type, c0, **facts)
    assert summary.startswith("C equals alpha A @ B + 2 beta C0 (beta = 0.5): beta C0 added twice, or C0 added "
                              "without beta"), summary
    alpha, beta = 2.0, 0.25
    expected = alpha * product + beta * c0
    summary = summary_of(beta * product + alpha * c0, expected, c_type, c0, alpha=alpha, beta=beta)
    assert "alpha and beta swapped" in summary, summary


def test_without_c0_and_beta_no_beta_mistake_is_claimed():
    product, c0 = inputs()
    summary = summary_of(product, product + 0.5 * c0, "fp32")
    assert "beta" not in summary and "C0" not in summary, summary


def test_a_right_c_with_one_wrong_tile_is_not_called_a_beta_mistake():
    product, c0 = inputs()
    expected = product + 0.5 * c0
    values = expected.copy()
    values[0:64, 0:64] = product[0:64, 0:64]                      # one tile forgot C0
    summary = summary_of(values, expected, "fp32", c0, alpha=1.0, beta=0.5)
    assert "C equals" not in summary and summary.endswith("every element elsewhere right"), summary


def test_elements_still_holding_cs_start_are_worded_as_such():
    product, c0 = inputs()
    expected = product + c0
    values = expected.copy()
    values[0:64, 64:96] = c0[0:64, 64:96]                         # a tile never written: C0 left there
    summary = summary_of(values, expected, "fp32", c0, alpha=1.0, beta=1.0)
    assert summary.startswith("2048 elements still holding C's starting value (unwritten, or written with that very "
                              "value)"), summary
    poison = np.array(POISON_WORD, np.uint32).view(np.float32)
    poisoned = summary_of(np.where(np.arange(N) < 64, product.astype(np.float32), poison), product, "fp32")
    assert "unwritten" in poisoned and "starting value" not in poisoned, poisoned
