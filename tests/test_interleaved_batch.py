"""Batches whose stride is smaller than one matrix: interleaved matrices (Megatron's baddbmm on [seq, batch * heads,
dim] tensors) and a stride that drops the last row's padding are described and laid out as they are in memory,
through the buffer, the draw, the reference, the check and the vendor row; matrices that share an element (of C,
which two writes would race on, or part of an input's) are refused with the element and the strides that would
do."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from driver_gemm.errors import SpecError
from driver_gemm.gemm.dtypes import FP32, element_type
from driver_gemm.gemm.operands import (gemm_operands, input_bytes, make_typed_inputs, matrix_layout, output_bytes,
                                       read_output, reference)
from driver_gemm.measure.cublaslt import plan_matmul, simulate
from driver_gemm.planning.spec_plan import plan_spec

from gpu_specs import write_spec

HEADS = 4


def heads_kernel(name: str = "heads", *, strides: str = "{a: K, b: K * N, c: N}", ld: str = "{a: 4 * K, c: 4 * N}",
                 extra: str = "") -> str:
    """A strided batched kernel of tests/kernels/interleaved_batch.cu over four heads laid out by `ld` and
    `strides`."""
    return textwrap.dedent(f"""\
    - name: {name}
      source: "@TESTS@/interleaved_batch.cu"
      function: strided_batched
      types: {{a: fp32}}
      ld: {ld}
      batch: {{count: {HEADS}, stride: {strides}}}
      scalars: {{alpha: 1.5, beta: 0.5}}
      {extra}
      signature: [M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC]
      block: [16, 16]
      grid: [ceil(N / 16), ceil(M / 16), batch]
      tile: [16, 16]
    """)


def interleaved_heads(M: int = 7, N: int = 5, K: int = 6):
    """A of [M, heads, K] and C of [M, heads, N], head h's matrix starting at h * K (h * N); B a plain batch."""
    return gemm_operands(M, N, K, ld={"a": HEADS * K, "c": HEADS * N}, batch=HEADS,
                         strides={"a": K, "b": K * N, "c": N})


def test_an_interleaved_batch_is_laid_out_as_the_tensor_it_is_a_view_of():
    operands = interleaved_heads()
    for layout, (rows, cols) in ((operands.a, (7, 6)), (operands.c, (7, 5))):
        # The buffer is the [M, heads, cols] tensor: every element belongs to exactly one matrix, none is padding.
        assert layout.elements == rows * HEADS * cols
        offsets = layout.offsets()
        assert np.unique(offsets).size == offsets.size == layout.elements
        assert not layout.padding_mask().any()
        tensor = np.arange(layout.elements).reshape(rows, HEADS, cols)
        for head in range(HEADS):
            assert np.array_equal(offsets[head], tensor[:, head, :])


def test_a_stride_that_drops_the_last_rows_padding_ends_the_buffer_at_the_last_element():
    M, K, padded = 10, 6, 9
    layout = matrix_layout("A", M, K, "row", ld=padded, batch=3, batch_stride=(M - 1) * padded + K)
    offsets = layout.offsets()
    assert np.unique(offsets).size == offsets.size
    assert layout.elements == int(offsets.max()) + 1
    # What lies between rows is padding, the gaps of the narrowed tensor.
    assert layout.padding_mask().sum() == layout.elements - offsets.size


def test_matrices_of_c_that_share_an_element_are_refused_with_the_element_and_the_strides_that_would_do():
    with pytest.raises(SpecError) as caught:
        matrix_layout("C", 7, 5, "row", ld=2 * 5, batch=HEADS, batch_stride=5, where="spec.yaml:9", field="c")
    error = caught.value
    message = str(error)
    assert error.field == "batch.stride.c" and message.startswith("spec.yaml:9: batch.stride.c:")
    # Matrix 2 starts at 10, row 1 of matrix 0.
    assert "element (row 1, column 0) of matrix 0 is element (row 0, column 0) of matrix 2" in message
    assert "race" in message
    assert "interleave" in error.hint and "ldc must be at least 4 x 5 = 20" in error.hint
    with pytest.raises(SpecError, match="of matrix 1"):
        matrix_layout("C", 3, 4, "col", ld=8, batch=2, batch_stride=2)


def test_inputs_that_share_part_of_a_matrix_are_refused_but_one_matrix_for_every_batch_is_taken():
    # Each matrix of A would start half a row after the previous one: neighbours would share half of every row.
    M, N, K = 5, 3, 8
    with pytest.raises(SpecError) as caught:
        gemm_operands(M, N, K, ld={"a": HEADS * K}, batch=HEADS, strides={"a": K // 2}, where="spec.yaml:7")
    message = str(caught.value)
    assert caught.value.field == "batch.stride.a"
    assert "element (row 0, column 4) of matrix 0 is element (row 0, column 0) of matrix 1" in message
    assert "only as a whole (stride 0" in message
    broadcast = gemm_operands(M, N, K, ld={"a": HEADS * K}, batch=HEADS, strides={"a": 0})
    assert broadcast.a.elements == M * HEADS * K


def test_the_check_and_the_vendor_row_read_an_interleaved_batch_where_it_lies():
    operands = interleaved_heads()
    types = FP32
    drawn = make_typed_inputs(operands, types, seed=5, with_c=True)
    expected = reference(drawn.a, drawn.b, 1.5, 0.5, drawn.c0)
    # A kernel that writes each matrix where its stride puts it: no element is left unwritten, none of the padding.
    start = np.frombuffer(output_bytes(operands.c, types.c, drawn.c0), dtype=np.float32).astype(np.float64)
    written = start.copy()
    written[operands.c.offsets()] = expected
    output = read_output(operands.c, written.astype(np.float32).tobytes(), types.c)
    assert output.padding_written == 0 and not output.unwritten(types.c).any()
    assert np.allclose(output.values, expected, rtol=1e-6)
    # cuBLASLt's strided batch, given the same buffers, computes the same product.
    plan = plan_matmul(types, operands, 1.5, 0.5)
    a_flat = operands.a.pack(drawn.a)
    b_flat = operands.b.pack(drawn.b)
    c_flat = operands.c.pack(drawn.c0)
    assert np.allclose(operands.c.unpack(simulate(plan, a_flat, b_flat, c_flat)), expected)


def test_plan_takes_interleaved_and_narrowed_batches_and_refuses_matrices_that_overlap(tmp_path):
    kernels = heads_kernel() + heads_kernel("narrowed", ld="{a: K + 16}", strides="{a: (M - 1) * (K + 16) + K}") + \
        heads_kernel("racing", ld="{a: 4 * K, c: 2 * N}") + heads_kernel("windows", strides="{a: K // 2, c: N}")
    path = write_spec(tmp_path, kernels, ["100x64x64", "33x20x24"])
    planned = plan_spec(path, arch="sm_90")
    valid = {(plan.kernel.name, plan.shape.label): plan.valid for plan in planned.plans}
    assert all(valid[(name, shape)] for name in ("heads", "narrowed") for shape in ("100x64x64", "33x20x24")), \
        [(plan.kernel.name, [str(p) for p in plan.problems]) for plan in planned.plans if not plan.valid]
    for name, operand, words in (("racing", "c", "race"), ("windows", "a", "only as a whole")):
        refused = [plan for plan in planned.plans if plan.kernel.name == name]
        assert refused and all(not plan.valid for plan in refused)
        for plan in refused:
            (problem,) = plan.problems
            assert problem.field.endswith(f"batch.stride.{operand}") and words in str(problem)


def test_the_uploads_fill_the_buffers_an_interleaved_batch_is_sized_for():
    # The draw and the upload agree on the buffer's length for every operand of an interleaved batch.
    operands = interleaved_heads(9, 4, 3)
    types = FP32
    drawn = make_typed_inputs(operands, types, seed=1)
    fp32 = element_type("fp32")
    assert len(input_bytes(operands.a, drawn.a, types.a)) == operands.a.elements * fp32.storage_bytes
    assert len(input_bytes(operands.b, drawn.b, types.b)) == operands.b.elements * fp32.storage_bytes
