"""What a kernel that reads C added to beta C0 is held against alpha A @ B, with room for C's own roundings as the
whole-C tolerance allows them: a correct kernel may round at C's size more than once (a split-K that reduces its
partial sums through C, as CUTLASS's serial split-K or atomic adds into a C set to beta C0 do), and passes; a kernel
that writes beta C0 alone still fails wherever the product is clearly larger than that room, and the message gives
its figures with significant digits however small they are."""

from __future__ import annotations

import re

import numpy as np
import pytest

from driver_gemm.gemm import dtypes
from driver_gemm.gemm.operands import KernelOutput, gemm_operands, make_typed_inputs, reference
from driver_gemm.measure.verify import compare, compare_typed
from driver_gemm.session import steps, typed_steps
from driver_gemm.specfile.model import VerifySettings
from driver_gemm.status import Status

from test_typed_pipeline import write_result
from test_verdict_beta_part import typed_pipeline_run


def rounded(values: np.ndarray, element: dtypes.ElementType) -> np.ndarray:
    """`values` rounded to nearest in `element` (float32 for fp32)."""
    if element.name == "fp32":
        return np.asarray(values, np.float64).astype(np.float32).astype(np.float64)
    return dtypes.round_to(values, element)


def partial_sums(a: np.ndarray, b: np.ndarray, splits: int) -> list[np.ndarray]:
    """A @ B's K split into `splits` slices, each summed in fp32."""
    bounds = np.linspace(0, a.shape[-1], splits + 1).astype(int)
    return [np.matmul(a[..., low:high].astype(np.float32), b[..., low:high, :].astype(np.float32)).astype(np.float64)
            for low, high in zip(bounds[:-1], bounds[1:])]


def serial_split_k(a, b, alpha, beta, c0, element, splits):
    """CUTLASS's serial split-K: split 0 writes alpha p0 + beta C0 in C's type; each next split reads it back as its
    source with beta 1, adds alpha p in fp32 and writes C's type again."""
    parts = partial_sums(a, b, splits)
    as_fp32 = lambda values: rounded(values, dtypes.ELEMENT_TYPES["fp32"])       # noqa: E731
    written = rounded(as_fp32(as_fp32(alpha * parts[0]) + as_fp32(beta * c0)), element)
    for part in parts[1:]:
        written = rounded(as_fp32(as_fp32(alpha * part) + written), element)
    return written


def atomic_split_k(a, b, alpha, beta, c0, element, splits):
    """C set to beta C0 in its type, then each split's alpha x partial sum added atomically in C's type."""
    written = rounded(beta * c0, element)
    parts = partial_sums(a, b, splits)
    for index in np.random.default_rng(2).permutation(splits):
        written = rounded(written + rounded(alpha * parts[index], element), element)
    return written


def pipeline_run(tmp_path, type_line: str, alpha: float, beta: float, shape=(64, 64, 64)):
    return typed_pipeline_run(tmp_path, None, alpha, beta, shape, type_line=type_line)


@pytest.mark.parametrize("kernel", [serial_split_k, atomic_split_k])
def test_a_split_k_that_reduces_through_a_16_bit_c_passes(tmp_path, kernel):
    run = pipeline_run(tmp_path, "types: {a: bf16}", 0.01, -1.0)
    typed = run.typed
    write_result(run, kernel(typed.inputs.a, typed.inputs.b, typed.alpha, typed.beta, typed.inputs.c0,
                             typed.types.c, 16))
    verdict = typed_steps.check_output(run)
    assert verdict.status == Status.PASS, (verdict.as_dict(), verdict.note)


@pytest.mark.parametrize("type_name, shape, alpha, beta, splits", [
    ("bf16", (64, 64, 1024), 0.001, 1.0, 16), ("fp16", (64, 64, 1024), 0.001, 1.0, 64),
    ("bf16", (1, 1, 64), 0.01, 1.0, 16),
])
def test_atomic_split_k_into_c_passes_at_small_alpha(type_name, shape, alpha, beta, splits):
    types = dtypes.parse_types({"a": type_name})
    M, N, K = shape
    inputs = make_typed_inputs(gemm_operands(M, N, K), types, 3, with_c=True)
    alpha, beta = float(np.float32(alpha)), float(np.float32(beta))
    values = atomic_split_k(inputs.a, inputs.b, alpha, beta, inputs.c0, types.c, splits)
    codes = dtypes.encode(values, types.c)
    verdict = compare_typed(KernelOutput(dtypes.decode(codes, types.c), codes, 0),
                            reference(inputs.a, inputs.b, alpha, beta, inputs.c0), types.c,
                            rel_tolerance=dtypes.error_bound(types, K), start=inputs.c0, beta=beta,
                            epilogue_roundoff=types.accumulate.unit_roundoff)
    assert verdict.status == Status.PASS, (verdict.as_dict(), verdict.note)


def untyped_split_k_case(alpha: float = 1e-5, splits: int = 128, K: int = 8192, beta: float = 1.0):
    """An FP32 C = alpha A @ B + beta C, K split `splits` ways, C set to beta C0 and each split's alpha x partial sum
    added atomically in fp32: C, its reference and C0."""
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (64, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, 64)).astype(np.float32)
    c0 = rng.uniform(-1, 1, (64, 64)).astype(np.float32)
    expected = alpha * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c0.astype(np.float64)
    written = np.float32(beta) * c0
    parts = partial_sums(a, b, splits)
    for index in np.random.default_rng(2).permutation(splits):
        written = written + np.float32(alpha) * parts[index].astype(np.float32)
    return written, expected, c0


def test_an_untyped_split_k_with_atomic_adds_into_c_passes():
    written, expected, c0 = untyped_split_k_case()
    verdict = compare(written, expected, rel_tolerance=dtypes.error_bound(dtypes.FP32, 8192), start=c0, beta=1.0)
    assert verdict.status == Status.PASS, (verdict.as_dict(), verdict.note)


@pytest.mark.parametrize("named_types", [{"a": "bf16", "c": "fp32"}, {"a": "fp16", "accumulate": "fp16"}])
def test_beta_c0_alone_still_fails_where_the_product_is_clearly_above_cs_roundings(tmp_path, named_types):
    # The product at about 10 times C's roundings (SAFETY x u_C x |C|) and within C's whole tolerance.
    types = dtypes.parse_types(named_types)
    rounding_share = dtypes.SAFETY * types.c.unit_roundoff
    whole = typed_steps.typed_tolerance(VerifySettings(), types, 1024)
    assert 10 * rounding_share < whole / 2, "room between C's roundings and C's tolerance"
    # |A @ B| per element is about sqrt(K) / 12 and |0.5 C0| about 0.5 / sqrt(12): alpha sets the product's share.
    alpha = 10 * rounding_share * (0.5 / 12 ** 0.5) / (1024 ** 0.5 / 12)
    type_line = "types: {" + ", ".join(f"{key}: {value}" for key, value in named_types.items()) + "}"
    run = pipeline_run(tmp_path, type_line, alpha, 0.5, shape=(64, 64, 1024))
    typed = run.typed
    left_out = typed.beta * typed.inputs.c0
    assert np.linalg.norm(left_out - run.expected) / np.linalg.norm(run.expected) < whole, \
        "C as a whole is within its tolerance: only the beta part finds it"
    write_result(run, left_out)
    assert typed_steps.check_output(run).status == Status.FAIL
    steps.diagnose(run)
    assert "C - beta C0 is not alpha A @ B" in run.record.message and "missing" in run.record.message


def ratios_in(note: str) -> list[float]:
    """The two ratios the beta part's note gives: the error's and the allowance's, as shares of the product."""
    found = re.search(r"its error is (\S+) times the product's norm, over the (\S+) times", note)
    assert found, note
    return [float(found.group(1)), float(found.group(2))]


def test_the_note_gives_small_ratios_with_significant_digits():
    # An untyped C = 1e-5 A @ B + 0.5 C written as 0.5 C alone, checked with a spec's looser tolerance (1e-3): C as
    # a whole passes, the product is missing, and the allowance is a few thousandths of the product.
    written, expected, c0 = untyped_split_k_case(alpha=1e-5, splits=1, K=1024, beta=0.5)
    verdict = compare(np.float32(0.5) * c0, expected, rel_tolerance=1e-3, start=c0, beta=0.5)
    assert verdict.status == Status.FAIL and verdict.note is not None
    assert verdict.rel_fro_error < 1e-3
    error_ratio, allowed_ratio = ratios_in(verdict.note)
    assert error_ratio == pytest.approx(1.0, rel=1e-2)
    assert 1e-3 < allowed_ratio < 1e-2, verdict.note
