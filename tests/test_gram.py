"""Gram and SYRK kernels (``gram: {of: A, triangle: lower}``): one input matrix X, C = X X^T (or X^T X), the tied
operand the other's buffer read transposed. The spec's forms and refusals (each at its field and line), the plan of
a one-input kernel compiled with NVRTC, one buffer bound for both operands, the reference and the check of one
triangle on host arrays, the vendor row's GEMM of the buffer with itself; and, on a GPU, the kernels run."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.gemm import dtypes
from driver_gemm.gemm.operands import Gram, gemm_operands, input_bytes, make_typed_inputs, output_bytes, read_output
from driver_gemm.measure.cublaslt import plan_matmul, simulate
from driver_gemm.measure.memory import typed_needs
from driver_gemm.measure.verify import compare_written_part
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.planning.cases import cases_of, new_record
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.report.notes import checked_against_notes
from driver_gemm.results.records import OperandsRecord
from driver_gemm.results.diagnose import diagnose_output
from driver_gemm.session.bind import launch_values
from driver_gemm.session.typed_steps import check_output, held_inputs, operand_buffers, reference_step
from driver_gemm.specfile import Shape, parse_spec
from driver_gemm.specfile.typed import evaluate_operands
from driver_gemm.status import Status

from conftest import ROOT, TEST_KERNELS

GRAM_SOURCE = TEST_KERNELS / "gram.cu"


def kernel_text(fields: str, *, signature: str = "[A, C, M, K]", function: str = "gram_naive") -> str:
    return (f"- name: gram\n  source: {GRAM_SOURCE}\n  function: {function}\n  signature: {signature}\n"
            f"  block: [16, 16]\n  grid: [ceil(N / 16), ceil(M / 16)]\n{fields}")


def spec_text(fields: str, *, shapes: str = "[[48, 48, 40]]", **kernel) -> str:
    return f"shapes: {shapes}\nkernels:\n{kernel_text(fields, **kernel)}"


def parsed(text: str):
    return parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True)


def line_of(text: str, needle: str) -> int:
    """The 1-based line of `text` where `needle` first appears."""
    return next(number for number, line in enumerate(text.splitlines(), 1) if needle in line)


# ------------------------------------------------------------------------------------------------ the spec


@pytest.mark.parametrize("written, of, triangle", [
    ("gram: A", "a", None),
    ("gram: b", "b", None),
    ("gram: {of: A}", "a", None),
    ("gram: {of: B, triangle: upper}", "b", "upper"),
    ("gram: {of: a, triangle: lower}", "a", "lower"),
])
def test_the_accepted_forms_name_the_one_input_and_the_triangle(written, of, triangle):
    signature = "[A, C, M, K]" if of == "a" else "[B, C, N, K]"
    kernel = parsed(spec_text(f"  {written}\n", signature=signature)).kernels[0]
    assert kernel.is_typed and kernel.operands.gram == Gram(of, triangle)


def test_a_signature_without_the_tied_operand_is_taken_only_with_gram():
    assert parsed(spec_text("  gram: A\n")).kernels[0].operands.gram.tied == "b"
    with pytest.raises(SpecError, match="signature must take B exactly once"):
        parsed(spec_text("  types: {a: fp32}\n"))


def test_the_tied_operand_reads_the_other_buffer_transposed():
    kernel = parsed(spec_text("  gram: {of: A}\n  ld: {a: K + 8}\n  batch: 2\n",
                              signature="[A, B, C, M, N, K, lda, ldb]", function="gemm_a_bt")).kernels[0]
    operands, names = evaluate_operands(kernel, Shape(24, 24, 20))
    a, b = operands.a, operands.b
    assert (b.rows, b.cols, b.order) == (20, 24, "col") and (a.order, a.ld) == ("row", 28)
    assert (b.ld, b.batch, b.batch_stride) == (a.ld, a.batch, a.batch_stride) and names["ldb"] == names["lda"] == 28
    assert (b.elements, a.elements) == (a.elements, b.elements)
    # The transposed values laid out as B are A's bytes, element for element and padding alike.
    values = np.random.default_rng(1).integers(-4, 4, (2, 24, 20)).astype(np.float64)
    assert input_bytes(b, np.swapaxes(values, -1, -2), "fp32") == input_bytes(a, values, "fp32")


def test_gram_of_b_ties_a_to_b_and_a_col_major_a_agrees_with_its_layout():
    kernel = parsed(spec_text("  gram: {of: B}\n  layouts: {a: col}\n", signature="[B, C, N, K]")).kernels[0]
    operands, _ = evaluate_operands(kernel, Shape(32, 32, 16))
    assert (operands.a.order, operands.a.ld, operands.a.rows, operands.a.cols) == ("col", operands.b.ld, 32, 16)
    assert operands.b.order == "row"


REFUSED_AT_PARSE = [
    ("  gram: C\n", "gram: C", r"gram's of is the one input matrix, A or B, got 'C'", "kernels[gram].gram"),
    ("  gram: [A]\n", "gram: [A]", r"gram is a mapping like \{of: A, triangle: lower\}, or A or B",
     "kernels[gram].gram"),
    ("  gram: {triangle: lower}\n", "gram: {", "gram needs of", "kernels[gram].gram"),
    ("  gram: {of: A, triangle: diagonal}\n", "gram: {", "triangle is the triangle of C the kernel writes, lower "
     "or upper .*got 'diagonal'", "kernels[gram].gram.triangle"),
    ("  gram: {of: A, side: left}\n", "gram: {", "unknown field 'side'", "kernels[gram].gram.side"),
    ("  gram: A\n  layout: NN\n", "layout: NN", "gram of A: B is A transposed.*layout NN cannot be", "layout"),
    ("  gram: A\n  layouts: {b: row}\n", "layouts:", "gram of A.*column-major where A is row-major, not row-major",
     "layouts.b"),
    ("  gram: A\n  types: {a: bf16, b: fp16, c: fp32}\n", "types:", "gram of A.*B's type is A's \\(bf16\\), not fp16",
     "types.b"),
    ("  gram: A\n  structure: {b: upper}\n", "structure:", "gram of A.*its structure is A's transposed",
     "structure.b"),
    ("  gram: A\n  groups: {count: 2}\n", "groups:", "groups do not go with gram", "groups"),
    ("  gram: A\n  types: {a: e4m3, c: fp32}\n  scales: {a: 0.5, b: 2.0}\n", "scales:",
     r"gram of A.*its fp8 scale is A's \(0.5\), not 2", "scales.b"),
]


@pytest.mark.parametrize("fields, on_line, message, field", REFUSED_AT_PARSE)
def test_what_cannot_go_with_one_input_is_refused_at_its_field_and_line(fields, on_line, message, field):
    text = spec_text(fields)
    with pytest.raises(SpecError) as caught:
        parsed(text)
    error = caught.value
    assert re.search(message, error.message), error.message
    assert error.field.endswith(field), error.field
    assert error.where.endswith(f":{line_of(text, on_line)}"), (error.where, on_line)
    assert error.hint


def test_block_scales_of_the_tied_operand_and_a_quantized_b_are_refused_at_their_entries():
    scales = ("[A, C, M, K, {name: sfb, type: buffer, element: float32, size: 4, scales: {of: B, block: [K, 16]}}]")
    text = spec_text("  gram: A\n  types: {a: bf16, c: fp32}\n", signature=scales)
    with pytest.raises(SpecError, match="no block scales of its own") as caught:
        parsed(text)
    assert caught.value.field.endswith("signature[4].scales.of")
    quantized = ("[A, C, M, K, {name: codes, type: buffer, element: uint8, size: 4, "
                 "quantized: {of: B, part: codes, bits: 4, group: 32}}]")
    with pytest.raises(SpecError, match="quantized B .* does not go with gram") as caught:
        parsed(spec_text("  gram: A\n  types: {a: bf16, c: fp32}\n", signature=quantized))
    assert caught.value.field.endswith("signature[4].quantized")


def test_equal_fp8_scales_and_a_tied_layout_that_agrees_are_taken():
    kernel = parsed(spec_text("  gram: A\n  types: {a: e4m3, c: fp32}\n  layout: NT\n  scales: {a: 0.5}\n")).kernels[0]
    assert kernel.operands.scales == (0.5, 0.5) and kernel.operands.orders["b"] == "col"
    kernel = parsed(spec_text("  gram: A\n  types: {a: e4m3, c: fp32}\n  scales: {a: 0.5, b: 0.5}\n")).kernels[0]
    assert kernel.operands.scales == (0.5, 0.5)


@pytest.mark.parametrize("fields, field, message", [
    ("  gram: A\n", "gram", "gram of A computes C = A A\\^T, a square C, but this shape has M=48 and N=40"),
    ("  gram: A\n  ld: {a: K + 4, b: K}\n", "ld.b", "its ld is A's, 44, not 40"),
    ("  gram: A\n  batch: {count: 2, stride: {b: 0}}\n", "batch.stride.b", "its batch.stride is A's, 1920, not 0"),
])
def test_a_shape_that_cannot_hold_the_product_is_refused_at_the_field(fields, field, message):
    shape = Shape(48, 40, 40) if field == "gram" else Shape(48, 48, 40)
    kernel = parsed(spec_text(fields)).kernels[0]
    with pytest.raises(SpecError, match=message) as caught:
        evaluate_operands(kernel, shape)
    assert caught.value.field == field and "gram" in caught.value.message and caught.value.hint


# ------------------------------------------------------------------------------------------------ the plan


def test_the_plan_of_a_one_input_kernel_notes_one_buffer_and_refuses_a_c_that_is_not_square(tmp_path):
    spec = parsed(spec_text("  gram: {of: A, triangle: lower}\n", shapes="[[64, 64, 32], [64, 48, 32]]"))
    planned = plan_spec(spec, arch="sm_90")
    assert not planned.compile_errors, planned.compile_errors
    square, oblong = planned.plans
    assert square.valid and not oblong.valid
    assert any("B is A transposed: one buffer, C = A A^T (lower triangle written)" in note for note in square.notes)
    assert any("GEMM" in note and "2 M N K" in note for note in square.notes)
    (problem,) = oblong.problems
    assert "gram" in str(problem) and "M=64 and N=48" in str(problem), problem


def test_the_vendor_row_is_a_gemm_of_the_buffer_with_itself_apart_from_a_plain_gemm_of_that_layout():
    text = (spec_text("  gram: {of: A, triangle: lower}\n", shapes="[[32, 32, 16]]")
            + kernel_text("  types: {a: fp32}\n  layout: NT\n", signature="[A, B, C, M, N, K]", function="gemm_a_bt")
            .replace("name: gram", "name: plain"))
    cases = cases_of(parsed(text))
    rows = [case for case in cases if case.lt is not None]
    assert len(rows) == 2 and rows[0].label != rows[1].label
    (gram_row,) = [row for row in rows if row.lt.operands.gram is not None]
    assert gram_row.label.endswith("gramA") and gram_row.lt.operands.gram == Gram("a")     # the whole of C
    (kernel_case,) = [case for case in cases if case.label.startswith("gram")]
    assert kernel_case.baseline_label == gram_row.label
    assert new_record(gram_row, Status.PASS).operands.gram == {"of": "a"}
    # cuBLASLt's reading of the plan, on one buffer given as both A and B: X X^T.
    operands, types = gram_row.lt.operands, gram_row.lt.types
    x = np.random.default_rng(2).integers(-3, 3, (32, 16)).astype(np.float64)
    flat = operands.a.pack(x)
    c = simulate(gram_row.lt.plan, flat, flat, np.zeros(operands.c.elements))
    assert np.array_equal(operands.c.unpack(c)[0], x @ x.T)
    assert plan_matmul(types, operands).key != plan_matmul(types, gemm_operands(32, 32, 16, orders=operands.orders)).key


def test_one_buffer_is_bound_for_both_operands_and_none_is_counted_for_the_tied_one():
    kernel = parsed(spec_text("  gram: A\n", signature="[A, B, C, M, N, K]", function="gemm_a_bt")).kernels[0]
    operands, _ = evaluate_operands(kernel, Shape(32, 32, 16))
    held = {"A": SimpleNamespace(address=0x1000), "C": SimpleNamespace(address=0x2000)}
    buffers = operand_buffers(held, operands)
    _, values = launch_values(kernel, {"M": 32, "N": 32, "K": 16}, buffers, lambda argument, position: None)
    assert values[0] is values[1] is held["A"] and values[2] is held["C"]
    needs = typed_needs(operands, kernel.operands.types, reads_c=False)
    assert set(needs.device) == {"A", "C"}


# ------------------------------------------------------------------------------------------ reference and check


def test_the_inputs_are_one_matrix_and_its_transpose_and_the_reference_is_their_product():
    operands = gemm_operands(24, 24, 16, gram=Gram("a"), orders={"b": "col"})
    drawn = make_typed_inputs(operands, dtypes.parse_types({"a": "bf16", "c": "fp32"}), 5)
    assert np.array_equal(drawn.b, np.swapaxes(drawn.a, -1, -2))
    operands = gemm_operands(24, 24, 16, gram=Gram("b"), orders={"a": "col"})
    drawn = make_typed_inputs(operands, dtypes.parse_types({"a": "bf16", "c": "fp32"}), 5)
    assert np.array_equal(drawn.a, np.swapaxes(drawn.b, -1, -2))


def fake_run(kernel, shape: Shape, spec):
    plan = plan_case(kernel, shape, arch_limits("sm_90"))
    session = SimpleNamespace(typed_inputs_for=lambda key, draw, draw_bytes: draw(), stream=None, typed_buffers={})
    return SimpleNamespace(case=SimpleNamespace(plan=plan, kernel=kernel, shape=shape, lt=None), spec=spec,
                           session=session, record=SimpleNamespace(seed=None, verification=None, status=None),
                           typed=None)


def checked(run, c_values: np.ndarray):
    """`check_output` of `run` on a C buffer that started poisoned and holds `c_values` where they are not NaN."""
    typed = run.typed
    layout, element = typed.operands.c, typed.types.c
    codes = np.frombuffer(output_bytes(layout, element), dtype=element.storage_dtype).copy()
    values = np.asarray(c_values, np.float64).reshape(layout.batch, layout.rows, layout.cols)
    positions = layout.offsets()[~np.isnan(values)]
    codes[positions] = dtypes.encode(values[~np.isnan(values)], element)
    raw = codes.tobytes()
    run.session.typed_buffers["C"] = SimpleNamespace(
        download=lambda shape, dtype, stream: np.frombuffer(raw, dtype=np.uint8))
    return check_output(run)


def gram_run(triangle: str | None):
    fields = "  gram: {of: A" + (f", triangle: {triangle}" if triangle else "") + "}\n  types: {a: bf16, c: fp32}\n"
    spec = parsed(spec_text(fields, shapes="[[40, 40, 24]]"))
    run = fake_run(spec.kernels[0], spec.shapes[0], spec)
    held_inputs(run)
    reference_step(run)
    x = run.typed.inputs.a[0]
    assert np.allclose(run.expected, x @ x.T, rtol=1e-12, atol=0)
    return run, x @ x.T


def test_a_lower_triangle_passes_and_the_upper_one_must_be_left_as_it_was():
    run, product = gram_run("lower")
    lower = np.where(np.tri(40, dtype=bool), product, np.nan)
    verdict = checked(run, lower)
    assert verdict.status == Status.PASS, verdict
    assert (verdict.wrong, verdict.unwritten, verdict.right, verdict.elements) == (0, 0, 1600, 1600)

    run, product = gram_run("lower")
    verdict = checked(run, product)     # the whole of C: the upper triangle written too
    assert verdict.status == Status.FAIL and verdict.wrong == 40 * 39 // 2 and verdict.unwritten == 0
    assert (verdict.masks["wrong"] == np.triu(np.ones((40, 40), bool), 1)).all()
    assert "upper triangle" in run.record.verification.rows


def test_a_wrong_element_of_the_triangle_and_one_left_unwritten_are_named():
    run, product = gram_run("lower")
    lower = np.where(np.tri(40, dtype=bool), product, np.nan)
    lower[30, 7] += 100.0
    lower[12, 12] = np.nan
    verdict = checked(run, lower)
    assert verdict.status == Status.FAIL and (verdict.wrong, verdict.unwritten) == (1, 1)
    diagnosis = diagnose_output(verdict, run.output, run.expected)
    found = {(entry["row"], entry["col"], entry["kind"]) for entry in diagnosis["first_mismatches"]}
    assert found == {(30, 7, "wrong"), (12, 12, "unwritten")}
    assert all(np.isfinite(entry["expected"]) for entry in diagnosis["first_mismatches"])


def test_a_kernel_writing_all_of_c_is_checked_whole():
    run, product = gram_run(None)
    assert checked(run, product).status == Status.PASS
    run, product = gram_run(None)
    assert checked(run, np.where(np.tri(40, dtype=bool), product, np.nan)).unwritten == 40 * 39 // 2


def test_the_written_part_against_c0_counts_a_changed_element_outside_as_wrong():
    element = dtypes.element_type("fp32")
    operands = gemm_operands(6, 6, 3, gram=Gram("a", "upper"), orders={"b": "col"})
    start = np.arange(36, dtype=np.float64).reshape(1, 6, 6)
    expected = start + 100.0
    upper = Gram("a", "upper").written(6, 6)
    result = np.where(upper, expected, start)
    raw = output_bytes(operands.c, element, result)
    verdict = compare_written_part(read_output(operands.c, raw, element), expected, element, upper,
                                   rel_tolerance=1e-6, start=start)
    assert verdict.status == Status.PASS and verdict.right == 36
    result[0, 5, 0] = 7.0
    raw = output_bytes(operands.c, element, result)
    verdict = compare_written_part(read_output(operands.c, raw, element), expected, element, upper,
                                   rel_tolerance=1e-6, start=start)
    assert verdict.status == Status.FAIL and verdict.wrong == 1 and verdict.masks["wrong"][0, 5, 0]


def test_the_record_and_show_say_it_is_a_gram_product():
    record = OperandsRecord(gram={"of": "a", "triangle": "lower"})
    assert OperandsRecord.from_json(record.to_json()).gram == {"of": "a", "triangle": "lower"}
    assert "gram" not in OperandsRecord().to_json()
    case = SimpleNamespace(kernel="syrk", operands=record)
    (note,) = checked_against_notes([case])
    assert "C = A A^T" in note and "lower triangle written" in note


def test_a_gram_kernel_and_a_plain_gemm_do_not_compute_the_same_gemm():
    from driver_gemm.specfile.same_gemm import computes_differently
    gram = parsed(spec_text("  gram: A\n  layout: NT\n", signature="[A, B, C, M, N, K]",
                            function="gemm_a_bt")).kernels[0]
    plain = parsed(spec_text("  types: {a: fp32}\n  layout: NT\n", signature="[A, B, C, M, N, K]",
                             function="gemm_a_bt")).kernels[0]
    assert "gram" in computes_differently(gram, plain, Shape(32, 32, 16), {})
    assert computes_differently(gram, gram, Shape(32, 32, 16), {}) == ""


def test_check_kernel_refuses_a_gram_product_it_cannot_draw():
    import driver_gemm as dg

    class Operand:
        def __init__(self, shape, address):
            self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (address, False),
                                             "version": 3, "strides": None}

    with pytest.raises(dg.ArgumentError, match="gram= is not taken.*transposed view"):
        dg.check_kernel(source=GRAM_SOURCE, function="gemm_a_bt", a=Operand((32, 16), 0x7F0000000000),
                        b=Operand((16, 32), 0x7F0001000000), c=Operand((32, 32), 0x7F0002000000),
                        grid=["ceil(N / 16)", "ceil(M / 16)"], block=[16, 16], gram="A")


def test_the_schemas_take_the_field_and_the_record_and_refuse_other_values():
    jsonschema = pytest.importorskip("jsonschema")
    spec_schema = json.loads((ROOT / "driver_gemm/specfile/schema.json").read_text())
    validator = jsonschema.Draft202012Validator(spec_schema)
    for gram in ("A", {"of": "B", "triangle": "upper"}):
        document = {"shapes": [[32, 32, 16]], "kernels": [{"source": "gram.cu", "function": "gram_naive",
                                                          "block": [16, 16], "grid": [2, 2], "gram": gram}]}
        assert not list(validator.iter_errors(document)), gram
    for gram in ("C", {"of": "A", "triangle": "diagonal"}, {"triangle": "lower"}):
        document["kernels"][0]["gram"] = gram
        assert list(validator.iter_errors(document)), gram
    results_schema = json.loads((ROOT / "driver_gemm/results/schema.json").read_text())
    operands = jsonschema.Draft202012Validator(results_schema["$defs"]["case"]["properties"]["operands"])
    assert not list(operands.iter_errors(OperandsRecord(gram={"of": "a", "triangle": "lower"}).to_json()))
    assert list(operands.iter_errors({"gram": {"of": "c"}}))


# -------------------------------------------------------------------- C0 the input itself (a Newton-Schulz step)

PLUS_INPUT = "  gram: {of: A, c0: input}\n  types: {a: bf16, c: fp32}\n  scalars: {alpha: 1.5, beta: -0.5}\n"


def plus_input_spec(fields: str = PLUS_INPUT, shapes: str = "[[40, 40, 40]]", **kernel):
    kernel.setdefault("signature", "[A, C, M, alpha, beta]")
    kernel.setdefault("function", "gram_plus_input")
    return parsed(spec_text(fields, shapes=shapes, **kernel))


def test_c0_input_is_read_and_asks_for_a_square_input():
    kernel = plus_input_spec().kernels[0]
    assert kernel.operands.gram == Gram("a", None, "input") and kernel.operands.gram.adds_input
    assert parsed(spec_text("  gram: {of: A, c0: drawn}\n")).kernels[0].operands.gram == Gram("a")
    with pytest.raises(SpecError, match="gram of A with c0: input adds beta A.*K=24 and M=40") as caught:
        evaluate_operands(kernel, Shape(40, 40, 24))
    assert caught.value.field == "gram" and "K equal to M" in caught.value.hint
    with pytest.raises(SpecError, match="with c0: input.*K=40 and N=24"):
        evaluate_operands(plus_input_spec("  gram: {of: B, c0: input}\n", signature="[B, C, N, alpha, beta]")
                          .kernels[0], Shape(24, 24, 40))


@pytest.mark.parametrize("fields, on_line, message, field", [
    ("  gram: {of: A, c0: C}\n", "gram: {", "c0 is what beta multiplies: input .* or drawn .*got 'C'",
     "gram.c0"),
    ("  gram: {of: A, c0: [input]}\n", "gram: {", "c0 is what beta multiplies.*got a list", "gram.c0"),
    ("  gram: {of: A, c0: input}\n  types: {a: fp32, c: bf16}\n", "types:",
     "C's type holds A's values exactly, but fp32 values are not all bf16 values", "types.c"),
    ("  gram: {of: A, c0: input}\n  types: {a: e4m3, c: fp32}\n", "gram: {", "fp8 inputs are scaled", "gram.c0"),
])
def test_what_c0_input_cannot_go_with_is_refused_at_its_field(fields, on_line, message, field):
    text = spec_text(fields)
    with pytest.raises(SpecError) as caught:
        parsed(text)
    error = caught.value
    assert re.search(message, error.message), error.message
    assert error.field.endswith(field) and error.hint, (error.field, error.hint)
    assert error.where.endswith(f":{line_of(text, on_line)}"), (error.where, on_line)


def test_c0_input_with_block_scales_is_refused_at_their_entry():
    scales = "[A, C, M, K, {name: sfa, type: buffer, element: float32, size: 4, scales: {of: A, block: [1, 128]}}]"
    with pytest.raises(SpecError, match="block scales multiply A") as caught:
        parsed(spec_text("  gram: {of: A, c0: input}\n  types: {a: bf16, c: fp32}\n", signature=scales))
    assert caught.value.field.endswith("signature[4].scales")


def test_c0_input_starts_c_from_the_input_and_is_checked_against_alpha_x_xt_plus_beta_x():
    spec = plus_input_spec()
    run = fake_run(spec.kernels[0], spec.shapes[0], spec)
    held_inputs(run)
    reference_step(run)
    x = run.typed.inputs.a[0]
    assert np.array_equal(run.typed.inputs.c0[0], x)
    product = 1.5 * (x @ x.T) - 0.5 * x
    assert np.allclose(run.expected[0], product, rtol=1e-12, atol=0)
    assert checked(run, product).status == Status.PASS
    # A kernel that adds beta times a C0 of its own, or forgets the term, computes another product.
    run = fake_run(spec.kernels[0], spec.shapes[0], spec)
    held_inputs(run)
    reference_step(run)
    assert checked(run, 1.5 * (x @ x.T)).status == Status.FAIL


def test_the_plan_notes_the_added_input_and_a_drawn_c0_points_to_c0_input():
    planned = plan_spec(plus_input_spec(), arch="sm_90")
    assert not planned.compile_errors, planned.compile_errors
    (plan,) = planned.plans
    assert plan.valid, plan.problems
    assert any("C = A A^T, plus beta A (C0 is A itself)" in note for note in plan.notes), plan.notes
    assert not any("drawn apart" in note for note in plan.notes)
    drawn = plan_spec(plus_input_spec(PLUS_INPUT.replace(", c0: input", "")), arch="sm_90").plans[0]
    assert any("drawn apart from A" in note and "c0: input" in note for note in drawn.notes), drawn.notes


def test_c0_input_has_a_vendor_row_of_its_own_and_a_record_that_says_it():
    text = (spec_text(PLUS_INPUT, shapes="[[32, 32, 32]]", signature="[A, C, M, alpha, beta]",
                      function="gram_plus_input")
            + kernel_text(PLUS_INPUT.replace(", c0: input", ""), signature="[A, C, M, K, alpha, beta]",
                          function="gram_full").replace("name: gram", "name: drawn"))
    cases = cases_of(parsed(text))
    rows = {case.label: case for case in cases if case.lt is not None}
    assert len(rows) == 2, list(rows)
    (plus,) = [label for label in rows if label.endswith("gramA-plusA")]
    assert rows[plus].lt.operands.gram == Gram("a", None, "input")
    assert new_record(rows[plus], Status.PASS).operands.gram == {"of": "a", "c0": "input"}
    (note,) = checked_against_notes([SimpleNamespace(kernel="ns", operands=OperandsRecord(
        gram={"of": "a", "c0": "input"}))])
    assert "plus beta A (C0 is the input)" in note
    jsonschema = pytest.importorskip("jsonschema")
    results_schema = json.loads((ROOT / "driver_gemm/results/schema.json").read_text())
    operands = jsonschema.Draft202012Validator(results_schema["$defs"]["case"]["properties"]["operands"])
    assert not list(operands.iter_errors({"gram": {"of": "a", "c0": "input"}}))
    assert list(operands.iter_errors({"gram": {"of": "a", "c0": "c"}}))


def test_holds_drawn_values_is_what_the_types_hold():
    assert dtypes.holds_drawn_values("fp32", "bf16") and dtypes.holds_drawn_values("bf16", "bf16")
    assert dtypes.holds_drawn_values("fp32", "tf32") and dtypes.holds_drawn_values("int32", "int8")
    assert dtypes.holds_drawn_values("bf16", "e4m3")
    assert not dtypes.holds_drawn_values("bf16", "fp16") and not dtypes.holds_drawn_values("fp16", "bf16")
    assert not dtypes.holds_drawn_values("bf16", "fp32") and not dtypes.holds_drawn_values("int32", "fp16")


# ------------------------------------------------------------------------------------------------ on a GPU


@pytest.mark.gpu
def test_gram_kernels_pass_with_a_vendor_row(tmp_path):
    from driver_gemm.runners.one_gpu import run_spec
    from driver_gemm.session.state import RunOptions
    from driver_gemm.specfile import load_spec
    from gpu_specs import quick, write_spec

    kernels = """\
    - name: full
      source: "@TESTS@/gram.cu"
      function: gram_full
      signature: [A, C, M, K]
      gram: A
      block: [16, 16]
      grid: [ceil(N / 16), ceil(M / 16)]
    - name: lower
      source: "@TESTS@/gram.cu"
      function: gram_naive
      signature: [A, C, M, K]
      gram: {of: A, triangle: lower}
      block: [16, 16]
      grid: [ceil(N / 16), ceil(M / 16)]
    - name: both
      source: "@TESTS@/gram.cu"
      function: gemm_a_bt
      signature: [A, B, C, M, N, K]
      gram: {of: A}
      block: [16, 16]
      grid: [ceil(N / 16), ceil(M / 16)]
    """
    path = write_spec(tmp_path, kernels, ["128x128x64", "100x100x33"])
    run = run_spec(quick(load_spec(path)), options=RunOptions())
    ours = [case for case in run.cases if case.name in ("full", "lower", "both")]
    assert len(ours) == 6
    for case in ours:
        assert case.status == Status.PASS, (case.name, case.shape.label, case.status, case.message)
        assert case.pct_cublas is not None and case.baseline.endswith("gramA")
    vendor = [case for case in run.cases if case.kernel.startswith("cublaslt")]
    assert len(vendor) == 2 and all(case.status == Status.PASS for case in vendor), \
        [(case.kernel, case.status, case.message) for case in vendor]


@pytest.mark.gpu
def test_a_kernel_adding_its_input_passes_and_its_mirrored_form_needs_a_symmetric_input(tmp_path):
    from driver_gemm.runners.one_gpu import run_spec
    from driver_gemm.session.state import RunOptions
    from driver_gemm.specfile import load_spec
    from gpu_specs import quick, write_spec

    entry = """\
    - name: {name}
      source: "@TESTS@/gram.cu"
      function: {function}
      signature: [A, C, M, alpha, beta]
      gram: {{of: A, c0: input}}
      scalars: {{alpha: 1.5, beta: -0.5}}
      block: [16, 16]
      grid: [ceil(N / 16), ceil(M / 16)]
"""
    kernels = (entry.format(name="plus", function="gram_plus_input")
               + entry.format(name="mirrored", function="gram_plus_input_mirrored")
               + entry.format(name="mirrored-sym", function="gram_plus_input_mirrored")
               + "      structure: {a: symmetric}\n")
    path = write_spec(tmp_path, kernels, ["128x128x128", "100x100x100"])
    run = run_spec(quick(load_spec(path)), options=RunOptions())
    status = {(case.name, case.shape.label): case for case in run.cases}
    for shape in ("128x128x128", "100x100x100"):
        for name in ("plus", "mirrored-sym"):
            case = status[(name, shape)]
            assert case.status == Status.PASS, (name, shape, case.status, case.message)
            assert case.pct_cublas is not None and case.baseline.endswith("gramA-plusA")
        # beta X[row][col] stored at (col, row) too: wrong above the diagonal where X is not symmetric.
        assert status[("mirrored", shape)].status == Status.FAIL
    vendor = [case for case in run.cases if case.kernel.startswith("cublaslt")]
    assert vendor and all(case.status == Status.PASS for case in vendor), \
        [(case.kernel, case.status, case.message) for case in vendor]
