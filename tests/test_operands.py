"""Operand layouts: row/column-major with leading dimensions, strided batches, bytes both ways, the reference."""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.errors import SpecError
from driver_gemm.gemm import dtypes, operands
from driver_gemm.gemm.dtypes import parse_types
from driver_gemm.gemm.operands import gemm_operands, matrix_layout, parse_layout

LAYOUTS = ("NN", "NT", "TN", "TT")


def test_element_addresses_follow_order_ld_and_stride():
    row = matrix_layout("A", 3, 4, "row", ld=6, batch=2, batch_stride=20)
    assert row.offsets()[1, 2, 3] == 20 + 2 * 6 + 3
    assert row.elements == 20 + 3 * 6 and row.tight_ld == 4
    col = matrix_layout("A", 3, 4, "col", ld=5, batch=2)
    assert col.batch_stride == 4 * 5 and col.offsets()[1, 2, 3] == 20 + 3 * 5 + 2
    tight = matrix_layout("B", 3, 4, "col")
    assert tight.ld == 3 and tight.elements == 12


@pytest.mark.parametrize("order", ["row", "col"])
def test_pack_matches_numpy_strided_views(order):
    values = np.arange(2 * 3 * 5, dtype=np.float64).reshape(2, 3, 5)
    layout = matrix_layout("A", 3, 5, order, ld=7, batch=2, batch_stride=40)
    flat = layout.pack(values)
    # Build the same storage independently: a padded row-major (or transposed) array per batch.
    expected = np.full(layout.elements, np.nan)
    for b in range(2):
        block = values[b] if order == "row" else values[b].T
        lines, inner = block.shape
        for line in range(lines):
            start = b * 40 + line * 7
            expected[start:start + inner] = block[line]
    assert np.array_equal(flat, expected, equal_nan=True)
    assert np.array_equal(layout.unpack(flat), values)
    assert layout.padding_mask().sum() == layout.elements - values.size
    assert np.isnan(flat[layout.padding_mask()]).all()


def test_row_major_tight_is_numpy_c_order_and_column_major_is_fortran_order():
    values = np.random.default_rng(0).random((4, 6))
    assert np.array_equal(matrix_layout("A", 4, 6, "row").pack(values), values.ravel(order="C"))
    assert np.array_equal(matrix_layout("A", 4, 6, "col").pack(values), values.ravel(order="F"))


@pytest.mark.parametrize("operand, order, ld, needed, what", [
    ("A", "row", 776, 777, "length of a row"),
    ("A", "col", 1000, 1001, "length of a column"),
    ("B", "col", 10, 777, "length of a column"),
])
def test_too_small_leading_dimension_names_the_operand_and_minimum(operand, order, ld, needed, what):
    rows, cols = (1001, 777) if operand == "A" else (777, 513)
    with pytest.raises(SpecError) as caught:
        matrix_layout(operand, rows, cols, order, ld=ld, where="specs/types.yaml:30", field=operand.lower())
    message = str(caught.value)
    assert f"ld{operand.lower()} = {ld} is too small for {operand} ({rows} x {cols}" in message
    assert f">= {needed} (the {what})" in message and message.startswith("specs/types.yaml:30: ld.")


def test_batch_stride_smaller_than_a_matrix_is_refused_but_inputs_may_broadcast():
    with pytest.raises(SpecError, match=r"batch stride of C, 100, is smaller than one matrix.*needs >= 120"):
        matrix_layout("C", 10, 12, "row", batch=3, batch_stride=100)
    with pytest.raises(SpecError, match="batch stride of C"):
        matrix_layout("C", 10, 12, "row", batch=3, batch_stride=0)
    shared = matrix_layout("B", 10, 12, "row", batch=3, batch_stride=0, broadcast_allowed=True)
    assert shared.elements == 120
    one = np.random.default_rng(1).random((10, 12))
    assert np.array_equal(shared.unpack(shared.pack(np.stack([one] * 3))), np.stack([one] * 3))
    with pytest.raises(ValueError, match="broadcast"):
        shared.pack(np.random.default_rng(2).random((3, 10, 12)))


def test_gemm_operands_checks_every_operand_and_reports_the_field():
    with pytest.raises(SpecError) as caught:
        gemm_operands(129, 132, 68, orders=parse_layout("TN"), ld={"a": 100}, where="s.yaml:4")
    assert caught.value.field == "ld.a" and "needs lda >= 129" in str(caught.value)
    with pytest.raises(SpecError, match="unknown operand 'd'"):
        gemm_operands(4, 4, 4, ld={"d": 4})
    with pytest.raises(SpecError, match="batch count"):
        gemm_operands(4, 4, 4, batch=0)


def test_layout_codes():
    assert parse_layout("NN") == {"a": "row", "b": "row", "c": "row"}
    assert parse_layout("TN") == {"a": "col", "b": "row", "c": "row"}
    assert parse_layout("nt") == {"a": "row", "b": "col", "c": "row"}
    assert parse_layout(orders={"a": "col", "b": "row"}) == parse_layout("TN")
    assert parse_layout("TT", {"c": "col"})["c"] == "col"
    assert operands.layout_code(parse_layout("NT", {"c": "col"})) == "NT-Ccol"
    for bad in ("N", "NX", "NNN"):
        with pytest.raises(SpecError, match="two letters"):
            parse_layout(bad)
    with pytest.raises(SpecError, match="contradicts"):
        parse_layout("NN", {"a": "col"})


@pytest.mark.parametrize("code", LAYOUTS)
@pytest.mark.parametrize("padded", [False, True], ids=["tight", "padded"])
def test_every_layout_round_trips_through_bytes_and_gives_the_batched_reference(code, padded):
    M, N, K, batch = 7, 5, 9, 3
    orders = parse_layout(code)
    ld = {"a": 11, "b": 13, "c": 8} if padded else None
    strides = {"a": 200, "b": 150, "c": 64} if padded else None
    problem = gemm_operands(M, N, K, orders=orders, ld=ld, batch=batch, strides=strides)
    assert problem.layout_code == code
    types = parse_types({"a": "bf16"})
    inputs = operands.make_typed_inputs(problem, types, seed=5, with_c=True)
    for key, values in (("a", inputs.a), ("b", inputs.b)):
        layout = getattr(problem, key)
        raw = operands.input_bytes(layout, values, "bf16")
        assert len(raw) == layout.elements * 2
        flat = dtypes.from_bytes(raw, "bf16", (layout.elements,))
        assert np.array_equal(layout.unpack(flat), values)
        assert np.isnan(flat[layout.padding_mask()]).all()
    expected = operands.reference(inputs.a, inputs.b, 2.0, -0.5, inputs.c0)
    for b in range(batch):
        assert np.allclose(expected[b], 2.0 * inputs.a[b] @ inputs.b[b] - 0.5 * inputs.c0[b], rtol=0, atol=1e-12)
    # A kernel's output: simulate one that writes C[b] in C's layout, leaving the padding alone.
    start = operands.output_bytes(problem.c, "bf16", inputs.c0)
    codes = np.frombuffer(start, np.uint16).copy()
    codes[problem.c.offsets()] = dtypes.encode(expected, "bf16")
    output = operands.read_output(problem.c, codes.tobytes(), "bf16")
    assert output.padding_written == 0 and not output.unwritten("bf16").any()
    assert np.array_equal(output.values, dtypes.round_to(expected, "bf16"))


def test_read_output_finds_unwritten_elements_and_writes_into_padding():
    layout = matrix_layout("C", 4, 3, "row", ld=5, batch=2)
    codes = np.frombuffer(operands.output_bytes(layout, "fp16"), np.uint16).copy()
    offsets = layout.offsets()
    codes[offsets] = dtypes.encode(np.ones((2, 4, 3)), "fp16")
    codes[offsets[1, 2, 1]] = dtypes.poison_code("fp16")          # one element never written
    codes[offsets[0, 3, 2] + 1] = dtypes.encode([7.0], "fp16")[0]  # one write past the end of a row
    output = operands.read_output(layout, codes.tobytes(), "fp16")
    assert output.unwritten("fp16").sum() == 1 and output.unwritten("fp16")[1, 2, 1]
    assert output.padding_written == 1
    with pytest.raises(ValueError, match="bytes read back"):
        operands.read_output(layout, codes.tobytes()[:-2], "fp16")


def test_an_fp32_output_starts_as_the_nan_poison_and_its_padding_reads_unwritten():
    layout = matrix_layout("C", 2, 3, "row", ld=4)
    start = operands.output_bytes(layout, "fp32")
    assert np.frombuffer(start, "<u4").tolist() == [0x7FC0DEAD] * 8
    codes = np.frombuffer(start, "<f4").copy()
    codes[layout.offsets()] = 1.5
    output = operands.read_output(layout, codes.tobytes(), "fp32")
    assert output.padding_written == 0 and not output.unwritten("fp32").any()
    codes[layout.offsets()[0, 1, 2] + 1] = np.float32("nan")        # a NaN written past the end of a row
    assert operands.read_output(layout, codes.tobytes(), "fp32").padding_written == 1


def test_int8_padding_uses_a_value_outside_the_draws():
    layout = matrix_layout("A", 2, 3, "row", ld=4)
    raw = operands.input_bytes(layout, np.ones((2, 3)), "int8")
    assert np.frombuffer(raw, np.int8).tolist() == [1, 1, 1, -128, 1, 1, 1, -128]


def test_reference_applies_fp8_scales_and_needs_c0_for_beta():
    a, b = np.eye(3)[None] * 2, np.ones((1, 3, 2))
    assert np.array_equal(operands.reference(a, b, 1.0, scale_a=0.5, scale_b=4.0), np.full((1, 3, 2), 4.0))
    with pytest.raises(ValueError, match="needs C's starting values"):
        operands.reference(a, b, 1.0, 1.0)


def test_kernel_scalars_follow_the_signature_convention():
    problem = gemm_operands(6, 4, 5, orders=parse_layout("NT"), ld={"b": 8}, batch=2)
    assert problem.kernel_scalars() == {"lda": 5, "ldb": 8, "ldc": 4, "strideA": 30, "strideB": 32, "strideC": 24}
