"""Grouped GEMMs (``groups:``): the groups laid out on a shape, what their buffers hold, the pointers to them, the
reference and the check of the rows the groups hold, the vendor row and the FLOP count. No GPU: the kernels' own runs
are in tests/test_gpu_outside_args.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.gemm import dtypes
from driver_gemm.gemm.groups import GroupsError, make_groups
from driver_gemm.gemm.operands import make_typed_inputs, output_bytes
from driver_gemm.planning.case_plan import plan_case, pointer_array_offsets
from driver_gemm.planning.cases import cases_of
from driver_gemm.results.records import CaseResult, OperandsRecord
from driver_gemm.specfile import Shape, parse_spec
from driver_gemm.status import Status

from conftest import ROOT

SM90 = arch_limits("sm_90")
SPEC = ROOT / "specs/outside-grouped.yaml"


def grouped_spec(groups: str, *buffers: str, function: str = "args_grouped_ends", extra: str = "",
                 grid: str = "[ceil(N / 16), ceil(M / 16)]", signature: tuple[str, ...] | None = None) -> str:
    arguments = signature if signature is not None else ("A", "B", "C", *buffers, "M", "N", "K")
    listed = "".join(f"    - {item}\n" for item in arguments)
    params = "  params: {SAME_B: false}\n" if function == "args_grouped_ends" else ""
    return (f"shapes: [[1001, 520, 776]]\nkernels:\n- name: grouped\n"
            f"  source: {ROOT / 'kernels/outside/args_grouped.cu'}\n  function: {function}\n{params}"
            f"  types: {{a: bf16, b: bf16, c: bf16, accumulate: fp32}}\n  groups: {groups}\n{extra}"
            f"  epilogue: overwrite\n  block: [16, 16]\n  grid: {grid}\n  tile: [16, 16]\n  signature:\n{listed}")


def planned(text: str, shape: Shape = Shape(1001, 520, 776)):
    spec = parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True)
    return plan_case(spec.kernels[0], shape, SM90)


ENDS = "{name: ends, type: buffer, element: int32, size: groups, groups: ends}"
COUNT = "{name: group_count, type: int32, value: groups}"


# ------------------------------------------------------------------------------------------- laying out groups

def test_even_groups_share_m_out_and_the_first_ones_take_what_does_not_divide():
    groups = make_groups("contiguous", 1001, 8, 8, count=3)
    assert groups.rows == (334, 334, 333) and groups.starts == (0, 334, 668)
    aligned = make_groups("contiguous", 1000, 8, 8, count=3, align=128)
    assert aligned.rows == (384, 256, 256) and aligned.starts == (0, 384, 640)
    assert make_groups("masked", 100, 8, 8, count=4).rows == (100,) * 4


def test_random_groups_are_the_same_on_every_run_fit_m_and_may_be_empty():
    first = make_groups("contiguous", 4096, 2048, 1024, count=8, rows="random", align=128)
    again = make_groups("contiguous", 4096, 2048, 1024, count=8, rows="random", align=128)
    assert first == again
    assert all(start % 128 == 0 for start in first.starts)
    assert first.starts[-1] + first.rows[-1] <= 4096
    counts = [make_groups("contiguous", 64, 8, 8, count=16, rows="random", align=1).rows for _ in range(1)]
    assert sum(counts[0]) == 64 and 0 in counts[0]       # 16 groups over 64 rows: some get none
    masked = make_groups("masked", 300, 8, 8, count=6, rows="random")
    assert all(0 <= rows <= 300 for rows in masked.rows)


@pytest.mark.parametrize("layout, rows, align, needle", [
    ("contiguous", [600, 500], 1, "reach row 1,100, past A's and C's M = 1,001"),
    ("contiguous", [500, 490], 128, "each starting at a multiple of 128, reach row 1,002"),
    ("masked", [10, 1002], 1, "group 1 has 1002 rows, more than its matrix's M = 1001"),
    ("contiguous", [10, -1], 1, "group 1 has -1 rows"),
    ("masked", [10], 4, "align is for contiguous groups"),
    ("diagonal", [10], 1, "layout is contiguous or masked"),
])
def test_groups_that_do_not_fit_their_shape_are_refused_saying_why(layout, rows, align, needle):
    with pytest.raises(GroupsError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        make_groups(layout, 1001, 8, 8, rows=rows, align=align)


def test_what_a_buffer_may_hold_about_the_groups():
    groups = make_groups("contiguous", 10, 4, 3, rows=[2, 0, 3], align=4)
    assert groups.starts == (0, 4, 4)
    assert groups.metadata("rows") == [2, 0, 3]
    assert groups.metadata("starts") == [0, 4, 4]
    assert groups.metadata("ends") == [2, 4, 7]
    assert groups.metadata("offsets") == [0, 2, 4, 7]
    assert groups.metadata("row_group") == [0, 0, -1, -1, 2, 2, 2, -1, -1, -1]
    assert groups.metadata("problems") == [2, 4, 3, 0, 4, 3, 3, 4, 3]
    masked = make_groups("masked", 3, 4, 3, rows=[1, 3])
    assert masked.metadata("row_group") == [0, -1, -1, 1, 1, 1]


def test_each_groups_product_uses_its_own_b_and_rows_no_group_holds_stay_zero():
    rng = np.random.default_rng(1)
    groups = make_groups("contiguous", 9, 4, 5, rows=[3, 0, 4], align=2)
    a, b = rng.standard_normal((1, 9, 5)), rng.standard_normal((3, 5, 4))
    c0 = rng.standard_normal((1, 9, 4))
    out = groups.product(a, b, alpha=2.0, beta=0.5, c0=c0)
    assert np.allclose(out[0, 0:3], 2 * a[0, 0:3] @ b[0] + 0.5 * c0[0, 0:3])
    assert np.allclose(out[0, 4:8], 2 * a[0, 4:8] @ b[2] + 0.5 * c0[0, 4:8])
    assert not out[0, 3].any() and not out[0, 8].any()
    masked = make_groups("masked", 4, 4, 5, rows=[4, 2])
    a2 = rng.standard_normal((2, 4, 5))
    out = masked.product(a2, b[:2])
    assert np.allclose(out[1, :2], a2[1, :2] @ b[1]) and not out[1, 2:].any()


# ----------------------------------------------------------------------------------------------- the spec

@pytest.mark.parametrize("groups, extra, needle", [
    ("[8]", "", "groups is a mapping"),
    ("{layout: diagonal, count: 2}", "", "layout is contiguous or masked"),
    ("{count: 2, rows: some}", "", "rows is a list of row counts, or one of even, random"),
    ("{rows: []}", "", "this list is empty"),
    ("{layout: contiguous}", "", "groups needs a count, or rows listing each group's"),
    ("{layout: masked, count: 2, align: 8}", "", "align is for contiguous groups"),
    ("{count: 2, colour: red}", "", "colour"),
    ("{count: 2}", "  batch: 2\n", "a grouped kernel takes no batch"),
    ("{count: PARTS}", "", "PARTS"),
])
def test_a_malformed_groups_field_is_refused_at_its_line(groups, extra, needle):
    with pytest.raises(SpecError, match=needle) as raised:
        parse_spec(grouped_spec(groups, ENDS, COUNT, extra=extra), ROOT / "spec.yaml", allow_outside_sources=True)
    assert raised.value.where and raised.value.field


@pytest.mark.parametrize("buffer, needle", [
    ("{name: ends, type: buffer, element: int32, size: groups, groups: sizes}", "one of rows, starts, ends"),
    ("{name: ends, type: buffer, element: float32, size: groups, groups: ends}", "element is one of int32"),
    ("{name: ends, type: buffer, element: int32, size: groups, groups: ends, fill: iota}", "it takes no fill"),
])
def test_a_malformed_groups_buffer_is_refused_at_its_field(buffer, needle):
    with pytest.raises(SpecError, match=needle):
        parse_spec(grouped_spec("{count: 4}", buffer, COUNT), ROOT / "spec.yaml", allow_outside_sources=True)


def test_the_shipped_grouped_spec_plans_every_case_and_says_its_groups():
    spec = parse_spec(SPEC.read_text(), SPEC)
    for kernel in spec.kernels:
        for shape in spec.shapes:
            plan = plan_case(kernel, shape, SM90)
            assert not plan.problems, (kernel.label, shape, plan.problems)
            assert plan.operands.groups is not None
            assert any(note.startswith(f"{plan.operands.groups.count} ") and "groups of N" in note
                       for note in plan.notes)


def test_a_groups_buffer_holds_what_the_groups_say_and_too_short_a_one_makes_the_case_invalid():
    plan = planned(grouped_spec("{count: 3, rows: [300, 0, 500]}", ENDS, COUNT))
    assert np.frombuffer(plan.buffers["ends"].initial_bytes().tobytes(), "<i4").tolist() == [300, 300, 800]
    assert plan.argument_values["group_count"] == 3
    short = planned(grouped_spec("{count: 3}", ENDS.replace("size: groups", "size: 2"), COUNT))
    assert any("holds 2 elements, but the 3 groups' ends are 3" in problem.message for problem in short.problems)
    index = "{name: index, type: buffer, element: uint16, size: M, groups: row_group}"
    unsigned = planned(grouped_spec("{count: 2, rows: [10, 10], align: 128}", index, COUNT,
                                    function="args_grouped_row_index"))
    assert any("-1, which does not fit uint16" in problem.message for problem in unsigned.problems)


def test_a_groups_buffer_in_a_kernel_without_groups_makes_the_case_invalid():
    text = grouped_spec("{count: 2}", ENDS, COUNT).replace("  groups: {count: 2}\n", "")
    plan = planned(text)
    assert any("holds the groups' ends, but the kernel has no groups:" in problem.message
               for problem in plan.problems)


def test_arrays_of_pointers_point_at_each_groups_first_row_of_a_and_c_and_its_own_b():
    spec = parse_spec(SPEC.read_text(), SPEC)
    kernel = next(k for k in spec.kernels if k.name == "grouped-pointers")
    plan = plan_case(kernel, Shape(1001, 520, 776), SM90)
    groups = plan.operands.groups
    assert pointer_array_offsets(kernel, plan.operands, "A") == [start * 776 * 2 for start in groups.starts]
    assert pointer_array_offsets(kernel, plan.operands, "C") == [start * 520 * 2 for start in groups.starts]
    assert pointer_array_offsets(kernel, plan.operands, "B") == [g * 776 * 520 * 2 for g in range(6)]
    lds = [np.frombuffer(plan.buffers[name].initial_bytes().tobytes(), "<i8").tolist()
           for name in ("lda_groups", "ldb_groups", "ldc_groups")]
    assert lds == [[776] * 6, [520] * 6, [520] * 6]


def test_a_fill_expression_is_evaluated_per_shape_and_one_that_does_not_fit_is_refused():
    buffer = "{name: big, type: buffer, element: int16, size: 4, fill: M * N}"
    plan = planned(grouped_spec("{count: 2}", ENDS, buffer, COUNT))
    assert any("fill holds 520520 on this shape, which int16 cannot hold" in problem.message
               for problem in plan.problems)
    with pytest.raises(SpecError, match="'WIDTH' reads WIDTH, which no case has") as raised:
        planned(grouped_spec("{count: 2}", ENDS, "{name: w, type: buffer, element: int32, size: 4, fill: WIDTH}",
                             COUNT))
    assert raised.value.field.endswith("signature[4].fill") and raised.value.where


def test_the_vendor_row_of_contiguous_groups_is_the_dense_product_and_of_masked_ones_the_batch():
    spec = parse_spec(SPEC.read_text(), SPEC)
    rows = {case.label: case for case in cases_of(spec) if case.lt is not None and case.shape.M == 1001}
    by_kernel = {case.kernel.name: case.baseline_label for case in cases_of(spec)
                 if case.kernel is not None and case.shape.M == 1001}
    dense = rows[by_kernel["grouped-ends"]].lt.operands
    assert dense.groups is None and dense.b.batch == 1 and dense.batch == 1
    assert by_kernel["grouped-pointers"] == by_kernel["grouped-ends"]
    batch = rows[by_kernel["grouped-masked"]].lt.operands
    assert batch.groups is None and batch.batch == 4


# ------------------------------------------------------------------------------------------- the check

def checked(plan, rows_written: str, *, same_b: bool = False):
    """Run the reference and check steps of a grouped case on C as a kernel would leave it: every held row the right
    product (group 0's B for all, with `same_b`), and the rows no group holds `rows_written` (poisoned or junk)."""
    from driver_gemm.session.state import HeldTypedInputs
    from driver_gemm.session.typed_steps import TypedCase, check_output, reference_step
    from driver_gemm.specfile.model import VerifySettings
    types, operands, groups = plan.kernel.operands.types, plan.operands, plan.operands.groups
    inputs = make_typed_inputs(operands, types, seed=5)
    held = HeldTypedInputs(plan.shape, inputs, {})
    product = groups.product(inputs.a, inputs.b[:1].repeat(groups.count, axis=0) if same_b else inputs.b)
    # C starts poisoned, as a run leaves it before the launch; the kernel writes the groups' rows
    codes = np.frombuffer(output_bytes(operands.c, types.c), dtype=types.c.storage_dtype.newbyteorder("<")).copy()
    held_rows, flat = groups.held_rows(), operands.c.offsets()
    codes[flat[held_rows]] = dtypes.encode(product[held_rows], types.c)
    if rows_written == "junk":
        codes[flat[~held_rows]] = dtypes.encode(np.full(flat[~held_rows].shape, 7.0), types.c)
    raw = codes.tobytes()
    download = SimpleNamespace(tobytes=lambda: raw)
    session = SimpleNamespace(typed_buffers={"C": SimpleNamespace(download=lambda *_: download)}, stream=None)
    run = SimpleNamespace(typed=TypedCase(types, operands, 1.0, 0.0, inputs, held),
                          spec=SimpleNamespace(verify=VerifySettings()), session=session,
                          case=SimpleNamespace(shape=plan.shape, lt=None, plan=plan),
                          record=CaseResult(kernel="k", name="k", shape=plan.shape, status=Status.PASS))
    reference_step(run)
    return check_output(run), run


@pytest.mark.parametrize("name", ["grouped-ends", "grouped-row-index", "grouped-masked"])
@pytest.mark.parametrize("rows_written", ["poisoned", "junk"])
def test_the_check_judges_the_rows_the_groups_hold_and_leaves_the_others_to_the_kernel(name, rows_written):
    spec = parse_spec(SPEC.read_text(), SPEC)
    kernel = next(k for k in spec.kernels if k.name == name)
    plan = plan_case(kernel, Shape(1001, 520, 776), SM90)
    verdict, run = checked(plan, rows_written)
    groups = plan.operands.groups
    assert verdict.status == Status.PASS, verdict.as_dict()
    assert verdict.elements == groups.total_rows * 520
    # what the diagnosis and the error map read: C's own rows, those no group holds blank
    held = groups.held_rows().reshape(-1)
    assert run.output.shape == (held.size, 520) and not run.output[~held].any() and not run.expected[~held].any()


def test_a_kernel_that_reads_group_zeros_b_for_every_group_fails_from_the_second_group_on():
    spec = parse_spec(SPEC.read_text(), SPEC)
    plan = plan_case(spec.kernels[0], Shape(1001, 520, 776), SM90)
    verdict, _ = checked(plan, "poisoned", same_b=True)
    first = plan.operands.groups.rows[0]
    assert verdict.status == Status.FAIL
    assert not verdict.masks["wrong"][:first].any() and verdict.masks["wrong"][first:].any()


def test_a_grouped_case_counts_the_flops_of_the_rows_its_groups_hold_and_a_batch_each_matrix():
    shape = Shape(1001, 520, 776)
    grouped = CaseResult(kernel="k", name="k", shape=shape, status=Status.PASS,
                         operands=OperandsRecord(batch=1, groups={"layout": "contiguous", "rows": [300, 0, 500]}))
    assert grouped.flops == 2 * 800 * 520 * 776
    batched = CaseResult(kernel="k", name="k", shape=shape, status=Status.PASS, operands=OperandsRecord(batch=4))
    assert batched.flops == 4 * shape.flops
    broken = CaseResult(kernel="k", name="k", shape=shape, status=Status.PASS,
                        operands=OperandsRecord(batch=1, groups={"rows": "many"}))
    assert broken.flops == shape.flops     # a record read from a damaged file: the shape's own count
    assert CaseResult.from_dict(grouped.as_dict()).operands.groups == grouped.operands.groups
    assert "groups" not in CaseResult.from_dict(batched.as_dict()).as_dict()["operands"]


def test_a_batched_cases_gflops_count_every_matrix():
    from driver_gemm.measure.stats import TimingSummary
    from driver_gemm.runners.one_gpu import _finish_figures
    shape = Shape(256, 256, 256)
    case = CaseResult(kernel="k", name="k", shape=shape, status=Status.PASS, operands=OperandsRecord(batch=4))
    case.timing = TimingSummary(median_ms=1.0, mean_ms=1.0, min_ms=1.0, max_ms=1.0, stdev_ms=0.0, q1_ms=1.0,
                                q3_ms=1.0, samples=3, total_ms=3.0, stop_reason="samples")
    _finish_figures(case, None, None)
    assert case.gflops == pytest.approx(4 * shape.flops / 1e-3 / 1e9)


def test_a_failing_grouped_cases_diagnosis_names_cs_own_rows_and_each_mismatchs_group():
    # Group 4 of contiguous groups starting at multiples of 128 holds rows 384-683: one wrong element at row 394 is
    # said to be there (not at its place among the held rows), in block row 394 // 16, with its group.
    from driver_gemm.results.diagnose import diagnose_output
    text = grouped_spec("{rows: [0, 130, 0, 5, 300], align: 128}", "{name: index, type: buffer, element: int32, "
                        "size: M, groups: row_group}", function="args_grouped_row_index")
    plan = planned(text)
    assert not plan.problems and plan.operands.groups.starts[4] == 384
    _, run = checked(plan, "poisoned")
    run.output[394, 3] += 1.0
    from driver_gemm.measure.verify import compare
    verdict = compare(run.output, run.expected, rel_tolerance=1e-3)
    found = diagnose_output(verdict, run.output, run.expected, plan, 1)
    assert "row 394" in found["summary"], found["summary"]
    entry = found["first_mismatches"][0]
    assert (entry["row"], entry["col"], entry["block"]) == (394, 3, [0, 394 // 16])


@pytest.mark.parametrize("groups, needle", [
    ("{count: 2, align: 100000}", "hold no rows on this shape"),
    ("{layout: masked, rows: [0, 0]}", "hold no rows on this shape"),
    ("{count: 100000000}", "1 to 65,536 groups, got 100,000,000"),
])
def test_groups_that_hold_no_rows_or_are_too_many_make_the_case_invalid(groups, needle):
    plan = planned(grouped_spec(groups, ENDS.replace("groups: ends", "groups: rows"), COUNT))
    assert any(needle in problem.message for problem in plan.problems), [p.message for p in plan.problems]


def test_a_groups_kind_that_is_no_word_is_refused_and_masked_groups_have_no_ends():
    with pytest.raises(SpecError, match="one of rows, starts, ends"):
        parse_spec(grouped_spec("{count: 2}", "{name: e, type: buffer, element: int32, size: groups, groups: [ends]}",
                                COUNT), ROOT / "spec.yaml", allow_outside_sources=True)
    plan = planned(grouped_spec("{layout: masked, count: 2}", ENDS, COUNT))
    assert any("masked groups each start their own matrix" in problem.message for problem in plan.problems)


def test_row_counts_a_results_file_holds_as_bools_are_no_row_counts():
    shape = Shape(1001, 520, 776)
    record = CaseResult(kernel="k", name="k", shape=shape, status=Status.PASS,
                        operands=OperandsRecord(batch=1, groups={"layout": "contiguous", "rows": [True, False]}))
    assert record.flops == shape.flops


@pytest.mark.parametrize("extra_buffer, groups, needle", [
    ("{name: q, type: buffer, element: int32, size: K / 8 * N, quantized: {of: B, part: codes, bits: 4, group: 8, "
     "pack: {along: K}}}", "{count: 2}", "a quantized B is one matrix; this kernel's groups each have their own B"),
    ("{name: s, type: buffer, element: float32, size: groups * ceil(N / 128) * ceil(K / 128), scales: {of: B, "
     "block: [128, 128]}}", "{count: 2}", "block scales are one grid for one matrix; this kernel's groups each"),
    ("{name: s, type: buffer, element: float32, size: groups * M * ceil(K / 128), scales: {of: A, block: [1, 128]}}",
     "{layout: masked, count: 2}", "groups each have their own A"),
])
def test_a_quantized_b_and_block_scales_of_a_per_group_matrix_are_refused(extra_buffer, groups, needle):
    # One grid (or one set of codes) for every group's matrix would pass a kernel that reads group 0's everywhere.
    with pytest.raises(SpecError, match=needle):
        parse_spec(grouped_spec(groups, ENDS.replace("groups: ends", "groups: rows"), extra_buffer, COUNT),
                   ROOT / "spec.yaml", allow_outside_sources=True)


def test_block_scales_of_contiguous_groups_a_are_one_matrixs_and_plan():
    scales = "{name: s, type: buffer, element: float32, size: M * ceil(K / 128), scales: {of: A, block: [1, 128]}}"
    plan = planned(grouped_spec("{count: 2}", ENDS, scales, COUNT))
    assert plan.buffers["s"].grid is not None


def test_a_tensor_map_without_dims_over_a_b_per_group_is_noted_as_reaching_the_first_only():
    signature = ("A", "{name: map_b, type: tensormap, tensor: B, box: [64, 64], pass: pointer}", "C",
                 "{name: index, type: buffer, element: int32, size: M, groups: row_group}", "M", "N", "K")
    plan = planned(grouped_spec("{count: 4, align: 128}", function="args_grouped_row_index", signature=signature),
                   Shape(1024, 512, 256))
    first_only = [note for note in plan.notes if note.startswith(
        "tensor map map_b: describes the first of B's 4 matrices only (it has no dims:); a map over them all "
        "is of rank 3, dims [512, 256, groups] innermost first, the batch stride among its strides")]
    assert len(first_only) == 1 and "count: groups, a map per matrix" in first_only[0]
    whole = signature[1].replace("box: [64, 64]", "box: [64, 64, 1], dims: [N, K, groups], strides: [2 * N, 2 * N * K]")
    plan = planned(grouped_spec("{count: 4, align: 128}", function="args_grouped_row_index",
                                signature=(signature[0], whole, *signature[2:])), Shape(1024, 512, 256))
    assert not any("describes the first of" in note for note in plan.notes)
