"""Grouped GEMMs whose groups share weights (``groups: {..., weights: W, weight_index: ...}``, flashinfer's segment
GEMM with its ``weight_indices``): the group -> weight mapping, B holding W matrices, the buffer that passes the
index, the reference, the check, the vendor row, the plan's note and the refusals. No GPU."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.gemm import dtypes
from driver_gemm.gemm.groups import GroupsError, make_groups
from driver_gemm.gemm.operands import make_typed_inputs, output_bytes
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.planning.cases import cases_of
from driver_gemm.results.records import CaseResult
from driver_gemm.specfile import Shape, parse_spec
from driver_gemm.status import Status

from conftest import ROOT

SM90 = arch_limits("sm_90")
SHAPE = Shape(1001, 520, 776)
OFFSETS = "{name: offsets, type: buffer, element: int64, size: groups + 1, groups: offsets}"
INDEX = "{name: weight_index, type: buffer, element: int64, size: groups, groups: weight_index}"


def segment_spec(groups: str, *buffers: str, grid: str = "[ceil(N / 16), ceil(M / 16)]") -> str:
    """A kernel of the segment GEMM's arguments (A, B, C, the groups' buffers, M, N, K) with `groups`."""
    listed = "".join(f"    - {item}\n" for item in ("A", "B", "C", *buffers, "M", "N", "K"))
    return (f"shapes: [[{SHAPE.M}, {SHAPE.N}, {SHAPE.K}]]\nkernels:\n- name: segment\n"
            f"  source: {ROOT / 'kernels/outside/args_grouped.cu'}\n  function: args_grouped_ends\n"
            f"  params: {{SAME_B: false}}\n  types: {{a: bf16, b: bf16, c: bf16, accumulate: fp32}}\n"
            f"  groups: {groups}\n  epilogue: overwrite\n  block: [16, 16]\n  grid: {grid}\n  tile: [16, 16]\n"
            f"  signature:\n{listed}")


def parsed(text: str):
    return parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True)


def planned(text: str):
    return plan_case(parsed(text).kernels[0], SHAPE, SM90)


# ------------------------------------------------------------------------------------ the group -> weight mapping

def test_cyclic_weights_give_group_g_weight_g_mod_w_and_are_the_default():
    cyclic = make_groups("contiguous", 100, 8, 8, count=7, weights=3, weight_index="cyclic")
    assert cyclic.weight_index == tuple(g % 3 for g in range(7))
    assert cyclic.b_matrices == 3 and [cyclic.weight_of(g) for g in range(7)] == list(cyclic.weight_index)
    assert make_groups("contiguous", 100, 8, 8, count=7, weights=3) == cyclic


def test_random_weights_are_the_same_on_every_run_and_every_weight_has_a_group():
    for count, weights in ((6, 4), (16, 16), (40, 3), (5, 1)):
        drawn = make_groups("contiguous", 100, 8, 8, count=count, weights=weights, weight_index="random")
        assert drawn == make_groups("contiguous", 100, 8, 8, count=count, weights=weights, weight_index="random")
        assert len(drawn.weight_index) == count and set(drawn.weight_index) == set(range(weights))


def test_listed_weights_are_kept_and_may_leave_weights_unused():
    listed = make_groups("masked", 50, 8, 8, rows=[5, 6, 7], weights=8, weight_index=[7, 0, 7])
    assert listed.weight_index == (7, 0, 7) and listed.b_matrices == 8 and listed.weight_rule is None


def test_groups_without_weights_each_take_their_own_b():
    own = make_groups("contiguous", 100, 8, 8, count=4)
    assert not own.shares_weights and own.b_matrices == 4 and [own.weight_of(g) for g in range(4)] == [0, 1, 2, 3]
    assert "weights" not in own.as_dict() and "sharing" not in own.describe()


@pytest.mark.parametrize("weights, weight_index, needle", [
    (5, "cyclic", "5 weights over 4 groups: weight_index cyclic gives every weight a group"),
    (5, "random", "5 weights over 4 groups: weight_index random"),
    (None, [0, 1, 0, 1], "weight_index says which weight each group takes, but the groups share none"),
    (2, [0, 1, 2, 1], r"weight_index\[2\] is 2: group 2's weight is one of B's 2 matrices, 0 to 1"),
    (2, [0, -1, 0, 1], r"weight_index\[1\] is -1"),
    (2, [0, 1, 0], "weight_index lists 3 weights for 4 groups"),
    (0, "cyclic", "the groups share 1 to"),
    (2, "round-robin", "weight_index is a list of each group's weight, or one of cyclic, random"),
])
def test_a_mapping_that_names_no_weight_or_cannot_use_them_all_is_refused_saying_why(weights, weight_index, needle):
    with pytest.raises(GroupsError, match=needle):
        make_groups("contiguous", 100, 8, 8, count=4, weights=weights, weight_index=weight_index)


# ------------------------------------------------------------------------------------------- the reference

@pytest.mark.parametrize("layout, rows, align", [("contiguous", [3, 0, 4, 2, 5], 2), ("masked", [4, 1, 0, 3, 4], 1)])
def test_each_group_is_computed_with_its_own_weight(layout, rows, align):
    rng = np.random.default_rng(3)
    M, N, K = (20, 6, 5) if layout == "contiguous" else (4, 6, 5)
    groups = make_groups(layout, M, N, K, rows=rows, align=align, weights=3, weight_index=[2, 0, 2, 1, 0])
    matrices = 1 if layout == "contiguous" else len(rows)
    a, b = rng.standard_normal((matrices, M, K)), rng.standard_normal((3, K, N))
    c0 = rng.standard_normal((matrices, M, N))
    out = groups.product(a, b, alpha=1.5, beta=-0.5, c0=c0)
    expected = np.zeros((matrices, M, N))
    for g, (start, count) in enumerate(zip(groups.starts, groups.rows)):
        matrix = g if layout == "masked" else 0
        held = slice(start, start + count)
        expected[matrix, held] = 1.5 * a[matrix, held] @ b[groups.weight_index[g]] - 0.5 * c0[matrix, held]
    assert np.allclose(out, expected)


def test_a_b_with_fewer_matrices_than_the_weights_is_refused():
    groups = make_groups("contiguous", 8, 4, 4, rows=[4, 4], weights=2, weight_index=[1, 0])
    with pytest.raises(ValueError, match="B holds 1 matrices, but the groups multiply by 2"):
        groups.product(np.ones((1, 8, 4)), np.ones((1, 4, 4)))


# ------------------------------------------------------------------------------------------------ the plan

def test_the_plan_lays_b_out_as_the_weights_says_the_mapping_and_fills_the_index_buffer():
    plan = planned(segment_spec("{count: 6, rows: random, weights: 4, weight_index: random}", OFFSETS, INDEX))
    assert not plan.problems, plan.problems
    groups = plan.operands.groups
    assert plan.operands.b.batch == 4 and plan.operands.c.batch == 1
    index = np.frombuffer(plan.buffers["weight_index"].initial_bytes().tobytes(), "<i8").tolist()
    assert index == list(groups.weight_index) and set(index) == {0, 1, 2, 3}
    note = next(note for note in plan.notes if "groups of N" in note)
    assert f"sharing 4 weights of B, group -> weight {', '.join(map(str, index))} (drawn" in note
    assert groups.as_dict()["weight_index"] == index and groups.as_dict()["weights"] == 4


def test_listed_weights_reach_the_plan_from_expressions_of_the_shape():
    plan = planned(segment_spec("{rows: [100, 200, 300], weights: 2, weight_index: [1, 'K % 2', 0]}", INDEX))
    assert not plan.problems, plan.problems
    assert plan.operands.groups.weight_index == (1, SHAPE.K % 2, 0)
    assert any("group -> weight 1, 0, 0 (listed)" in note for note in plan.notes)


def test_a_weight_count_that_outgrows_the_groups_on_a_shape_makes_the_case_invalid():
    plan = planned(segment_spec("{count: 4, weights: 'N // 100'}", OFFSETS))
    assert any("5 weights over 4 groups" in problem.message for problem in plan.problems), plan.problems


def test_an_index_buffer_of_groups_that_share_no_weights_makes_the_case_invalid():
    plan = planned(segment_spec("{count: 4}", OFFSETS, INDEX))
    found = [problem for problem in plan.problems if "buffer weight_index" in problem.message]
    assert found and "the groups each have their own B" in found[0].message
    assert "weights: COUNT" in found[0].message and found[0].field.endswith(".groups")


@pytest.mark.parametrize("groups, needle, field", [
    ("{count: 4, weight_index: cyclic}", "weights (how many matrices B holds) is not given", "weight_index"),
    ("{count: 4, weights: 2, weight_index: [0, 2, 1, 0]}", "group 1's weight is 2: B holds 2 weights, 0 to 1",
     "weight_index[1]"),
    ("{count: 4, weights: 2, weight_index: [0, 1]}", "weight_index lists 2 weights for 4 groups", "weight_index"),
    ("{count: 4, weights: 6}", "6 weights over 4 groups: weight_index cyclic", "weights"),
    ("{rows: [5, 5], weights: 3, weight_index: random}", "3 weights over 2 groups", "weights"),
    ("{count: 4, weights: 0}", "the groups share 1 to", "weights"),
    ("{count: 4, weights: 2, weight_index: sometimes}", "one of cyclic, random; got 'sometimes'",
     "weight_index"),
    ("{count: 4, weights: 2, weight_index: []}", "weight_index is a list of each group's weight", "weight_index"),
])
def test_a_malformed_sharing_of_weights_is_refused_at_its_line(groups, needle, field):
    with pytest.raises(SpecError, match=re.escape(needle)) as raised:
        parsed(segment_spec(groups, OFFSETS))
    assert raised.value.where and raised.value.field.endswith(f"groups.{field}")


def test_the_schema_takes_the_weights_and_the_index_buffer():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "driver_gemm/specfile/schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    for groups in ("{count: 4, weights: 2, weight_index: [0, 1, 1, 0]}", "{count: 4, weights: 2}",
                   "{count: 4, weights: 2, weight_index: random}"):
        errors = [error.message for error in validator.iter_errors(yaml.safe_load(segment_spec(groups, INDEX)))]
        assert not errors, (groups, errors)
    wrong = yaml.safe_load(segment_spec("{count: 4, weights: 2, weight_index: sometimes}", INDEX))
    assert list(validator.iter_errors(wrong))


# ------------------------------------------------------------------------------------ the check and the vendor row

def checked(plan, weight_of):
    """The reference and check steps of a grouped case on C as a kernel would leave it, each group computed with
    the matrix of B `weight_of(g)` names."""
    from driver_gemm.session.state import HeldTypedInputs
    from driver_gemm.session.typed_steps import TypedCase, check_output, reference_step
    from driver_gemm.specfile.model import VerifySettings
    types, operands, groups = plan.kernel.operands.types, plan.operands, plan.operands.groups
    inputs = make_typed_inputs(operands, types, seed=5)
    assert inputs.b.shape[0] == groups.b_matrices
    product = np.zeros((1, operands.M, operands.N))
    for g, (start, rows) in enumerate(zip(groups.starts, groups.rows)):
        product[0, start:start + rows] = inputs.a[0, start:start + rows] @ inputs.b[weight_of(g)]
    codes = np.frombuffer(output_bytes(operands.c, types.c), dtype=types.c.storage_dtype.newbyteorder("<")).copy()
    held_rows, flat = groups.held_rows(), operands.c.offsets()
    codes[flat[held_rows]] = dtypes.encode(product[held_rows], types.c)
    raw = codes.tobytes()
    download = SimpleNamespace(tobytes=lambda: raw)
    session = SimpleNamespace(typed_buffers={"C": SimpleNamespace(download=lambda *_: download)}, stream=None)
    run = SimpleNamespace(typed=TypedCase(types, operands, 1.0, 0.0, inputs, HeldTypedInputs(plan.shape, inputs, {})),
                          spec=SimpleNamespace(verify=VerifySettings()), session=session,
                          case=SimpleNamespace(shape=plan.shape, lt=None, plan=plan),
                          record=CaseResult(kernel="k", name="k", shape=plan.shape, status=Status.PASS))
    reference_step(run)
    return check_output(run)


def test_a_kernel_that_multiplies_each_group_by_its_weight_passes_and_one_that_reads_b_g_fails():
    plan = planned(segment_spec("{rows: [300, 200, 250, 251], weights: 2, weight_index: [1, 0, 0, 1]}", INDEX))
    groups = plan.operands.groups
    assert checked(plan, groups.weight_of).status == Status.PASS
    ignoring = checked(plan, lambda g: g % 2)     # the index left out: group g takes B[g] (of the two there are)
    assert ignoring.status == Status.FAIL
    wrong_rows = np.flatnonzero(ignoring.masks["wrong"].any(axis=-1).reshape(-1))
    assert wrong_rows.min() == 0 and wrong_rows.max() < 500    # groups 0 and 1, whose weight is not their number


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_the_vendor_row_of_groups_that_share_weights_is_a_plain_product(layout):
    text = segment_spec(f"{{layout: {layout}, count: 4, weights: 2}}", OFFSETS if layout == "contiguous" else INDEX,
                        grid="[ceil(N / 16), ceil(M / 16), groups]")
    spec = parsed(text)
    vendor = next(case for case in cases_of(spec) if case.lt is not None).lt.operands
    assert vendor.groups is None
    if layout == "contiguous":
        assert vendor.b.batch == 1 and vendor.batch == 1
    else:        # a batch of every group's matrices: a B for each, as a batched product multiplies them
        assert vendor.batch == 4 and vendor.b.batch == 4 and vendor.a.batch == 4


def test_an_array_of_pointers_to_b_of_groups_that_share_weights_makes_the_case_invalid():
    # its addresses are B's matrices, one per weight, while a grouped kernel reads one per group
    pointers = "{name: b_pointers, type: pointers, to: B}"
    plan = planned(segment_spec("{count: 4, weights: 2}", OFFSETS, pointers))
    found = [problem for problem in plan.problems if "b_pointers is an array of pointers to B" in problem.message]
    assert found and found[0].field.endswith("signature[4]")
    assert not planned(segment_spec("{count: 4}", OFFSETS, pointers)).problems
