"""A batch of two levels (``batch: {count: [B, H], stride: {a: [OUTER, INNER], ...}}``), as attention multiplies the
heads of a [B, S, H, D] tensor per (b, h): read from the spec with its malformed forms refused at their field, laid
out as the NumPy view of the tensor it describes, its overlaps refused naming the two matrices (i, j), planned with
its note, checked per matrix, recorded, and timed against cuBLASLt in one strided batch or count[0] calls."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

from driver_gemm.errors import SpecError
from driver_gemm.gemm.dtypes import FP32
from driver_gemm.gemm.operands import gemm_operands, make_typed_inputs, matrix_layout, reference
from driver_gemm.measure.cublaslt import one_strided_batch, plan_matmul, simulate
from driver_gemm.measure.verify import compare
from driver_gemm.planning.case_plan import pointer_array_offsets
from driver_gemm.planning.cases import operands_summary
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.report.notes import checked_against_notes
from driver_gemm.results.diagnose import diagnose_output
from driver_gemm.results.document_checks import check_against_schema, results_schema
from driver_gemm.results.records import CaseResult, OperandsRecord
from driver_gemm.specfile import parse_spec
from driver_gemm.specfile.model import Shape
from driver_gemm.specfile.typed import evaluate_operands
from driver_gemm.status import Status

from gpu_specs import write_spec
from test_matrix_tensor_maps import planned

BATCHES, HEADS = 2, 3
# A and C are [B, S, H, D] tensors (S = M rows of K, or of N, per head); B one K x N matrix per batch, shared by its
# heads (inner stride 0).
ATTENTION = "{a: [M * lda, K], b: [K * N, 0], c: [M * ldc, N]}"


def two_level_kernel(name: str = "two", function: str = "two_levels", *, count: str = f"[{BATCHES}, {HEADS}]",
                     strides: str = ATTENTION, ld: str = f"{{a: {HEADS} * K, c: {HEADS} * N}}") -> str:
    """A kernel of tests/kernels/two_level_batch.cu over `count` matrices laid out by `ld` and `strides`; grid z
    numbers the matrices, z = i * heads + j."""
    return textwrap.dedent(f"""\
    - name: {name}
      source: "@TESTS@/two_level_batch.cu"
      function: {function}
      types: {{a: fp32}}
      ld: {ld}
      batch: {{count: {count}, stride: {strides}}}
      scalars: {{alpha: 1.5, beta: 0.5}}
      signature: [M, N, K, alpha, A, lda, {{name: outerA, type: int64, value: M * lda}}, strideA, B, ldb,
                  {{name: outerB, type: int64, value: K * N}}, strideB, beta, C, ldc,
                  {{name: outerC, type: int64, value: M * ldc}}, strideC, {{name: heads, type: int32, value: {HEADS}}}]
      block: [16, 16]
      grid: [ceil(N / 16), ceil(M / 16), batch]
      tile: [16, 16]
    """)


def spec_text(batch: str, extra: str = "") -> str:
    return textwrap.dedent(f"""\
    shapes: [7x5x6]
    kernels:
      - name: k
        source: k.cu
        function: k
        types: {{a: fp32}}
        ld: {{a: {HEADS} * K, c: {HEADS} * N}}
        batch: {batch}
        grid: [1, 1, batch]
        block: [32]
    {extra}""")


def read(tmp_path, batch: str):
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(float* A, float* B, float* C, int M, int N, int K) {}')
    return parse_spec(spec_text(batch), tmp_path / "spec.yaml")


def laid_out(tmp_path, batch: str, shape: Shape = Shape(7, 5, 6)):
    kernel, = read(tmp_path, batch).kernels
    return evaluate_operands(kernel, shape)


# ------------------------------------------------------------------------------------------------ the spec


def test_the_spec_reads_two_counts_and_a_pair_of_strides_per_operand(tmp_path):
    operands, names = laid_out(tmp_path, f"{{count: [{BATCHES}, {HEADS}], stride: {ATTENTION}}}")
    M, N, K = 7, 5, 6
    assert operands.levels == (BATCHES, HEADS) and names["batch"] == BATCHES * HEADS
    assert operands.a.level_strides == (M * HEADS * K, K)
    assert operands.b.level_strides == (K * N, 0)
    assert operands.c.level_strides == (M * HEADS * N, N)
    # strideA and the others are the inner strides
    assert (names["strideA"], names["strideB"], names["strideC"]) == (K, 0, N)


def test_left_out_strides_put_the_matrices_one_after_another_and_a_single_zero_broadcasts_both_levels(tmp_path):
    operands, _ = laid_out(tmp_path, f"{{count: [{BATCHES}, {HEADS}], stride: {{b: 0}}}}")
    a = operands.a
    assert a.level_strides == (HEADS * a.matrix_elements, a.matrix_elements)
    assert operands.b.level_strides == (0, 0) and operands.b.elements == operands.b.matrix_elements
    starts = a.matrix_starts()
    assert list(starts) == [z * a.matrix_elements for z in range(BATCHES * HEADS)]


@pytest.mark.parametrize("batch, field, words", [
    ("{count: [2, 3, 4]}", "batch.count", "a list of two [outer, inner] for a batch of two levels, got a list of 3"),
    ("{count: []}", "batch.count", "a list of two [outer, inner] for a batch of two levels, got an empty list"),
    ("{count: [2, {x: 1}]}", "batch.count[1]", "a mapping"),
    ("{count: [2, true]}", "batch.count[1]", "true"),
    ("{count: [0, 3]}", "batch.count[0]", "positive integer, got 0"),
    ("{count: [2, -3]}", "batch.count[1]", "positive integer, got -3"),
    ("{count: [2, 3], stride: {a: K}}", "batch.stride.a", "is a list [outer, inner], or 0"),
    ("{count: [2, 3], stride: {a: [K]}}", "batch.stride.a", "[outer, inner], got a list of 1"),
    ("{count: [2, 3], stride: {a: [M * lda, K, 1]}}", "batch.stride.a", "a list of 3"),
    ("{count: [2, 3], stride: {a: [M * lda, -6]}}", "batch.stride.a[1]", "0 or more, got -6"),
    ("{count: [2, 3], stride: {a: [M * lda, [K]]}}", "batch.stride.a[1]", "a list of 1"),
    ("{count: [2, 3], stride: {c: 0}}", "batch.stride.c", "race"),
    ("{count: [2, 3], stride: {d: [1, 2]}}", "batch.stride.d", "unknown"),
    ("{count: [2, 3], stride: [1, 2]}", "batch.stride", "a list of 2"),
    ("{count: 6, stride: {a: [M * lda, K]}}", "batch.stride.a", "batch of two levels"),
])
def test_a_malformed_two_level_batch_is_refused_at_its_field_and_line(tmp_path, batch, field, words):
    with pytest.raises(SpecError) as caught:
        read(tmp_path, batch)
    error = caught.value
    assert error.field == f"kernels[k].{field}", (error.field, str(error))
    assert words in str(error), str(error)
    assert "spec.yaml:8" in str(error), str(error)      # the batch: line


def test_a_count_or_stride_that_evaluates_negative_on_a_shape_is_refused_at_its_field(tmp_path):
    with pytest.raises(SpecError) as caught:
        laid_out(tmp_path, "{count: [2, K - 7]}")
    assert caught.value.field == "batch.count[1]" and "got -1" in str(caught.value)
    with pytest.raises(SpecError) as caught:
        laid_out(tmp_path, "{count: [2, 3], stride: {a: [K - 7, K]}}")
    assert caught.value.field == "batch.stride.a[0]" and "0 or more" in str(caught.value)


# ------------------------------------------------------------------------------------------------ the layout


@pytest.mark.parametrize("order", ["row", "col"])
def test_the_offsets_are_the_numpy_view_of_a_b_s_h_d_tensor(order):
    B, S, H, D = 3, 5, 4, 6
    rows, cols = (S, D) if order == "row" else (D, S)
    layout = matrix_layout("A", rows, cols, order, ld=H * D, batch=B * H, batch_stride=(S * H * D, D),
                           levels=(B, H))
    tensor = np.arange(B * S * H * D, dtype=np.int64)
    # An independent reading of the same memory: matrix (b, h) of the tensor, S x D with rows H * D apart.
    step = tensor.itemsize
    view = as_strided(tensor, shape=(B, H, S, D), strides=(S * H * D * step, D * step, H * D * step, step))
    expected = view if order == "row" else np.swapaxes(view, -1, -2)
    assert np.array_equal(layout.offsets(), expected.reshape(B * H, rows, cols))
    assert layout.elements == tensor.size and not layout.padding_mask().any()
    values = np.random.default_rng(1).standard_normal((B * H, rows, cols))
    assert np.array_equal(layout.unpack(layout.pack(values)), values)


def test_a_padded_batch_of_two_levels_keeps_its_padding_and_ends_after_its_last_matrix():
    rows, cols, ld = 4, 3, 5
    layout = matrix_layout("C", rows, cols, "row", ld=ld, batch=6, batch_stride=(70, 20), levels=(2, 3))
    assert layout.elements == 70 + 2 * 20 + rows * ld
    offsets = layout.offsets()
    assert np.unique(offsets).size == offsets.size
    assert layout.padding_mask().sum() == layout.elements - offsets.size


def test_matrices_of_c_that_share_an_element_are_refused_naming_both_matrices_and_the_strides():
    # matrix (1, 0) starts at 30, matrix (0, 2) at 40: row 1 of (1, 0), its rows 10 apart, is the first of (0, 2)
    with pytest.raises(SpecError) as caught:
        matrix_layout("C", 4, 5, "row", ld=10, batch=6, batch_stride=(30, 20), levels=(2, 3), where="spec.yaml:9",
                      field="c")
    error = caught.value
    message = str(error)
    assert error.field == "batch.stride.c" and message.startswith("spec.yaml:9: batch.stride.c:")
    assert "[30, 20]" in message and "race" in message
    assert "element (row 1, column 0) of matrix (1, 0) is element (row 0, column 0) of matrix (0, 2)" in message
    assert "[120, 40]" in error.hint and "outer stride at least 4 x ldc = 40" in error.hint
    # the strides the hint gives are taken
    matrix_layout("C", 4, 5, "row", ld=10, batch=6, batch_stride=(120, 40), levels=(2, 3))


def test_two_matrices_at_one_start_are_refused_and_a_broadcast_level_of_an_input_is_taken():
    # (0, 1) and (1, 0) both start at 30: not a broadcast, two matrices on one place
    with pytest.raises(SpecError) as caught:
        matrix_layout("A", 3, 10, "row", batch=4, batch_stride=(30, 30), levels=(2, 2), broadcast_allowed=True)
    assert "of matrix (0, 1) is element (row 0, column 0) of matrix (1, 0)" in str(caught.value)
    assert "only as a whole" in str(caught.value)
    shared = matrix_layout("B", 3, 10, "row", batch=4, batch_stride=(30, 0), levels=(2, 2), broadcast_allowed=True)
    assert shared.elements == 60
    with pytest.raises(SpecError, match="race"):
        matrix_layout("C", 3, 10, "row", batch=4, batch_stride=(30, 0), levels=(2, 2))


def test_the_overlap_check_matches_a_brute_force_count_of_shared_elements():
    rng = np.random.default_rng(7)
    for _ in range(300):
        rows, cols = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        ld = cols + int(rng.integers(0, 4))
        levels = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        strides = (int(rng.integers(0, 40)), int(rng.integers(0, 20)))
        try:
            layout = matrix_layout("C", rows, cols, "row", ld=ld, batch=levels[0] * levels[1], batch_stride=strides,
                                   levels=levels)
            refused = False
        except SpecError:
            refused = True
        probe = matrix_layout("C", rows, cols, "row", ld=ld)
        starts = (np.arange(levels[0])[:, None] * strides[0] + np.arange(levels[1])[None, :] * strides[1]).ravel()
        offsets = (starts[:, None, None] + probe.offsets()[0]).ravel()
        assert refused == (np.unique(offsets).size != offsets.size), (rows, cols, ld, levels, strides)
        if not refused:
            assert layout.elements >= offsets.max() + 1


def test_the_overlap_check_of_many_matrices_stays_within_its_chunks():
    # 4096 x 4096 matrices, the heads interleaved within rows: checked without a pair list of 2**24 x 2**13
    rows, cols, heads = 3, 2, 4096
    layout = matrix_layout("C", rows, cols, "row", ld=heads * cols, batch=4096 * heads,
                           batch_stride=(rows * heads * cols, cols), levels=(4096, heads))
    assert layout.elements == 4096 * rows * heads * cols


# ------------------------------------------------------------------------------------------------ the check


def attention_operands(M: int = 7, N: int = 5, K: int = 6):
    return gemm_operands(M, N, K, ld={"a": HEADS * K, "c": HEADS * N}, batch=BATCHES * HEADS, levels=(BATCHES, HEADS),
                         strides={"a": (M * HEADS * K, K), "b": (K * N, 0), "c": (M * HEADS * N, N)})


def test_the_inputs_broadcast_a_level_of_stride_zero_and_the_reference_is_per_matrix():
    M, N, K = 7, 5, 6
    operands = attention_operands(M, N, K)
    drawn = make_typed_inputs(operands, FP32, seed=3, with_c=True)
    b = drawn.b.reshape(BATCHES, HEADS, K, N)
    assert all(np.array_equal(b[i, j], b[i, 0]) for i in range(BATCHES) for j in range(HEADS))
    assert not np.array_equal(b[0, 0], b[1, 0])
    expected = reference(drawn.a, drawn.b, 1.5, 0.5, drawn.c0)
    # The same product worked out from the buffers, through views of the [B, S, H, D] tensors they hold.
    a_flat, b_flat, c_flat = operands.a.pack(drawn.a), operands.b.pack(drawn.b), operands.c.pack(drawn.c0)
    step = a_flat.itemsize
    a4 = as_strided(a_flat, (BATCHES, HEADS, M, K), (M * HEADS * K * step, K * step, HEADS * K * step, step))
    c4 = as_strided(c_flat, (BATCHES, HEADS, M, N), (M * HEADS * N * step, N * step, HEADS * N * step, step))
    b3 = b_flat.reshape(BATCHES, K, N)
    by_hand = 1.5 * np.einsum("bhmk,bkn->bhmn", a4, b3) + 0.5 * c4
    assert np.allclose(expected.reshape(BATCHES, HEADS, M, N), by_hand)


def test_plan_takes_a_kernel_over_a_two_level_batch_and_says_how_it_is_numbered(tmp_path):
    kernels = two_level_kernel() + two_level_kernel("racing", ld=f"{{a: {HEADS} * K, c: 2 * N}}")
    planned = plan_spec(write_spec(tmp_path, kernels, ["100x64x64", "33x20x24"]), arch="sm_90")
    good = [plan for plan in planned.plans if plan.kernel.name == "two"]
    assert len(good) == 2 and all(plan.valid for plan in good), [[str(p) for p in plan.problems] for plan in good]
    for plan in good:
        note, = (note for note in plan.notes if "two levels" in note)
        assert f"{BATCHES} x {HEADS} = {BATCHES * HEADS} matrices" in note and f"z = i * {HEADS} + j" in note
        assert plan.config.grid[2] == BATCHES * HEADS
    refused = [plan for plan in planned.plans if plan.kernel.name == "racing"]
    assert refused and not any(plan.valid for plan in refused)
    for plan in refused:
        problem, = plan.problems
        assert problem.field.endswith("batch.stride.c") and "of matrix (" in str(problem)


def test_the_record_keeps_both_levels_and_a_one_level_record_is_written_as_before():
    operands = attention_operands()
    record = operands_summary(FP32, operands)
    data = record.to_json()
    assert data["batch_levels"] == [BATCHES, HEADS] and data["batch"] == BATCHES * HEADS
    assert data["batch_stride"]["b"] == [5 * 6, 0]
    assert OperandsRecord.from_json(data).batch_levels == [BATCHES, HEADS]
    one = operands_summary(FP32, gemm_operands(7, 5, 6, batch=3)).to_json()
    assert "batch_levels" not in one and one["batch_stride"] == {"a": 42, "b": 30, "c": 35}


# ------------------------------------------------------------------------------------------------ the vendor row


def test_levels_that_collapse_to_one_stride_are_one_strided_batched_call():
    M, N, K = 7, 5, 6
    operands = gemm_operands(M, N, K, batch=6, levels=(2, 3))       # one matrix after another: z * matrix
    assert one_strided_batch(operands)
    plan = plan_matmul(FP32, operands)
    assert plan.calls == 1 and plan.c.batch_count == 6 and plan.c.batch_offset == M * N
    assert plan.call_offsets() == [{"A": 0, "B": 0, "C": 0}]


def test_other_levels_are_one_call_per_outer_index_with_the_pointers_moved_by_the_outer_stride():
    M, N, K = 7, 5, 6
    operands = attention_operands(M, N, K)
    assert not one_strided_batch(operands)
    plan = plan_matmul(FP32, operands, 1.5, 0.5)
    assert plan.calls == BATCHES and "x2x3" in plan.label
    # C row-major: cuBLASLt's A is our B, its B our A
    assert (plan.a.operand, plan.a.batch_count, plan.a.batch_offset) == ("B", HEADS, 0)
    assert (plan.b.operand, plan.b.batch_count, plan.b.batch_offset) == ("A", HEADS, K)
    assert (plan.c.batch_count, plan.c.batch_offset) == (HEADS, N)
    assert plan.call_offsets() == [{"A": i * M * HEADS * K * 4, "B": i * K * N * 4, "C": i * M * HEADS * N * 4}
                                   for i in range(BATCHES)]
    drawn = make_typed_inputs(operands, FP32, seed=4, with_c=True)
    expected = reference(drawn.a, drawn.b, 1.5, 0.5, drawn.c0)
    out = simulate(plan, operands.a.pack(drawn.a), operands.b.pack(drawn.b), operands.c.pack(drawn.c0))
    assert np.allclose(operands.c.unpack(out), expected)


def test_the_schemas_take_the_two_level_form_and_refuse_other_shapes_of_it():
    jsonschema = pytest.importorskip("jsonschema")
    root = Path(__file__).resolve().parents[1]
    validator = jsonschema.Draft202012Validator(json.loads((root / "driver_gemm/specfile/schema.json").read_text()))
    kernel = {"source": "k.cu", "function": "k", "block": [32], "grid": [1, 1, "batch"]}
    good = {"count": [2, "H"], "stride": {"a": ["M * lda", "K"], "b": 0}}
    assert not list(validator.iter_errors({"shapes": [[8, 8, 8]], "kernels": [{**kernel, "batch": good}]}))
    for bad in ({"count": [2, 3, 4]}, {"count": [2, 3], "stride": {"a": ["M", "K", 1]}}):
        assert list(validator.iter_errors({"shapes": [[8, 8, 8]], "kernels": [{**kernel, "batch": bad}]})), bad
    record = operands_summary(FP32, attention_operands()).to_json()
    operands_schema = results_schema()["$defs"]["case"]["properties"]["operands"]
    check_against_schema(record, operands_schema, "results.json")
    assert not list(jsonschema.Draft202012Validator(operands_schema).iter_errors(record))


def test_show_says_the_two_levels_and_a_wrong_matrix_is_named_by_its_indices():
    case = CaseResult(kernel="two", name="two", shape=Shape(7, 5, 6), status=Status.PASS,
                      operands=OperandsRecord(batch=6, batch_levels=[2, 3]))
    note, = checked_against_notes([case])
    assert note == "two: C checked with each matrix (i, j) of a batch of two levels, 2 x 3"
    assert checked_against_notes([dataclasses.replace(case, operands=OperandsRecord(batch_levels="2x3"))]) == []
    # matrix (1, 2), z = 5, left as it started: the diagnosis names it by (i, j)
    expected = np.random.default_rng(2).uniform(1, 2, (6, 4, 4))
    output = expected.copy()
    output[5] = 0.0
    rows = output.reshape(24, 4)
    verdict = compare(rows.astype(np.float32), expected.reshape(24, 4), rel_tolerance=1e-5)
    summary = diagnose_output(verdict, rows, expected.reshape(24, 4), None, 6, levels=(2, 3))["summary"]
    assert "matrix (1, 2)" in summary and "matrix 5" not in summary, summary


def test_a_tensor_map_over_an_operand_of_a_two_level_batch_is_refused_saying_why():
    # the bf16 kernel of kernels/outside taking A and B through maps
    plan = planned("box: [64, 128]", batch="batch: {count: [2, 3]}")
    refused = [problem for problem in plan.problems if "two levels" in str(problem)]
    assert [problem.field.rsplit(".", 1)[-1] for problem in refused] == ["signature[0]", "signature[1]"]
    for problem, name, operand in zip(refused, ("map_a", "map_b"), "AB"):
        assert f"{name}: a tensor map over {operand}" in str(problem) and "not described" in str(problem)
        assert "by pointer" in problem.hint
    assert not any("two levels" in str(problem) for problem in planned("box: [64, 128]", batch="").problems)


def test_the_matrices_past_those_described_one_by_one_are_named_by_their_indices_too():
    expected = np.random.default_rng(5).uniform(1, 2, (6, 4, 4))
    output = expected.copy()
    output[:, 0, 0] = 0.0       # one wrong element in every matrix: three described, the rest counted
    rows = output.reshape(24, 4)
    verdict = compare(rows.astype(np.float32), expected.reshape(24, 4), rel_tolerance=1e-5)
    summary = diagnose_output(verdict, rows, expected.reshape(24, 4), None, 6, levels=(2, 3))["summary"]
    assert "matrix (1, 0), matrix (1, 1) and matrix (1, 2) fail too" in summary, summary
    plain = diagnose_output(verdict, rows, expected.reshape(24, 4), None, 6)["summary"]
    assert "matrices 3-5 fail too" in plain, plain


def test_an_array_of_pointers_holds_each_matrix_i_j_where_its_two_strides_put_it(tmp_path):
    kernel, = read(tmp_path, f"{{count: [{BATCHES}, {HEADS}], stride: {ATTENTION}}}").kernels
    operands, _ = evaluate_operands(kernel, Shape(7, 5, 6))
    M, K = 7, 6
    assert pointer_array_offsets(kernel, operands, "A") == [
        (i * M * HEADS * K + j * K) * 4 for i in range(BATCHES) for j in range(HEADS)]
