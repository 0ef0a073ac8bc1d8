"""Block scales stored a byte a factor: ``element: ue8m0`` (an 8-bit exponent, 2^(e - 127): MXFP8's E8M0) and
``element: e4m3`` (an fp8 factor: NVFP4's). The buffer holds each drawn factor in that storage, its own NaN
elsewhere, and the reference multiplies by the factors' values. No GPU."""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.gemm import dtypes
from driver_gemm.planning.buffer_plans import SCALE_EXPONENTS
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import Shape, parse_spec

from conftest import ROOT

SM90 = arch_limits("sm_90")
SHAPE = Shape(1000, 512, 768)
SOURCE = ROOT / "kernels" / "outside" / "fp8_block_scaled.cu"


def scales_buffer(element: str, operand: str = "A") -> str:
    if operand == "A":
        return (f"{{name: a_sf, type: buffer, element: {element}, size: M * K / 32, "
                "scales: {of: A, block: [1, 32]}}")
    return (f"{{name: b_sf, type: buffer, element: {element}, size: N * K / 32, "
            "scales: {of: B, block: [32, 1], order: col}}")


def spec_text(*buffers: str) -> str:
    listed = "".join(f"    - {item}\n" for item in ("A", "B", *buffers, "C", "M", "N", "K"))
    return (f"shapes: [[1000, 512, 768]]\nkernels:\n- name: mx\n  source: {SOURCE}\n  function: f\n"
            f"  types: {{a: e4m3, b: e4m3, c: bf16, accumulate: fp32}}\n  layout: NT\n  epilogue: overwrite\n"
            f"  block: [16, 16]\n  grid: [ceil(N / 16), ceil(M / 16)]\n  signature:\n{listed}")


def parsed(text: str):
    return parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True)


@pytest.mark.parametrize("storage", dtypes.SCALE_STORAGES)
def test_every_drawn_factor_is_exact_in_each_storage_and_reads_back_as_itself(storage):
    factors = np.ldexp(1.0, np.arange(SCALE_EXPONENTS[0], SCALE_EXPONENTS[1] + 1))
    codes = dtypes.encode_scale_factors(np.append(factors, np.nan), storage)
    assert codes.dtype == np.uint8
    decoded = dtypes.decode_scale_factors(codes, storage)
    assert np.array_equal(decoded[:-1], factors) and np.isnan(decoded[-1])


def test_ue8m0_is_a_biased_exponent_and_holds_only_powers_of_two():
    assert list(dtypes.encode_scale_factors([1.0, 0.125, 8.0, np.nan], "ue8m0")) == [127, 124, 130, 0xFF]
    with pytest.raises(ValueError, match="ue8m0 does not hold the scale factor 3 exactly"):
        dtypes.encode_scale_factors([3.0], "ue8m0")


@pytest.mark.parametrize("element, storage", [("ue8m0", "ue8m0"), ("e8m0", "ue8m0"), ("e4m3", "e4m3")])
def test_a_buffer_of_block_scales_in_a_byte_storage_reaches_the_kernel_as_bytes(element, storage):
    spec = parsed(spec_text(scales_buffer(element), scales_buffer(element, "B")))
    buffers = {argument.name: argument.buffer for argument in spec.kernels[0].signature if argument.buffer}
    assert buffers["a_sf"].element == "uint8" and buffers["a_sf"].scales.storage == storage
    plan = plan_case(spec.kernels[0], SHAPE, SM90)
    assert plan.valid, plan.problems
    assert any(f"stored as {storage}" in note for note in plan.notes), plan.notes
    for name in ("a_sf", "b_sf"):
        buffer = plan.buffers[name]
        raw = buffer.initial_bytes()
        assert raw.size == buffer.count      # one byte a factor
        values = dtypes.decode_scale_factors(raw, storage)
        offsets = buffer.grid.offsets()
        assert np.array_equal(values[offsets], buffer.grid.factors())    # what the reference multiplies by
        elsewhere = np.ones(buffer.count, dtype=bool)
        elsewhere[offsets.ravel()] = False
        assert np.isnan(values[elsewhere]).all()


def test_block_scales_read_through_the_buffers_bytes_give_the_reference_product():
    spec = parsed(spec_text(scales_buffer("ue8m0"), scales_buffer("e4m3", "B")))
    plan = plan_case(spec.kernels[0], Shape(64, 32, 96), SM90)
    rng = np.random.default_rng(0)
    a, b = rng.integers(-4, 5, size=(64, 96)).astype(float), rng.integers(-4, 5, size=(96, 32)).astype(float)
    # What a kernel computes from the bytes: A's factor of row m and block k // 32, B's of column n and block k // 32.
    a_sf = dtypes.decode_scale_factors(plan.buffers["a_sf"].initial_bytes(), "ue8m0").reshape(64, 3)
    b_sf = dtypes.decode_scale_factors(plan.buffers["b_sf"].initial_bytes(), "e4m3").reshape(32, 3)
    kernel = (a * np.repeat(a_sf, 32, axis=1)) @ (b * np.repeat(b_sf, 32, axis=1).T)
    reference = plan.buffers["a_sf"].grid.applied(a[None])[0] @ plan.buffers["b_sf"].grid.applied(b[None])[0]
    assert np.array_equal(kernel, reference)


def test_block_scales_in_bytes_of_no_storage_are_refused_naming_the_storages():
    with pytest.raises(SpecError) as caught:
        parsed(spec_text(scales_buffer("uint8")))
    message = str(caught.value)
    assert "block scales are stored as float32, float64, float16, bfloat16, ue8m0, e4m3, got uint8" in message
    assert caught.value.field == "kernels[mx].signature[2].element"
    assert "element: ue8m0" in caught.value.hint and "element: e4m3" in caught.value.hint


def test_a_byte_storage_of_scales_is_refused_for_a_buffer_that_holds_no_block_scales():
    with pytest.raises(SpecError) as caught:
        parsed(spec_text("{name: w, type: buffer, element: ue8m0, size: M}"))
    assert "ue8m0 is how block scales are stored" in str(caught.value)
    assert caught.value.hint == "a buffer of raw bytes is element: uint8"
    with pytest.raises(SpecError, match="e4m3 is how block scales are stored"):
        parsed(spec_text("{name: bias, type: buffer, element: e4m3, size: N, bias: N}"))
