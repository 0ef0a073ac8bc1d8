"""A results file records what else a typed case's C was checked against beside its product (the inputs' structure,
a drawn bias, the element-wise functions), the results schema takes it, and `show` says it under the shape's
table. No GPU."""

from __future__ import annotations

import dataclasses
import json

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.planning.cases import cases_of, new_record
from driver_gemm.report.notes import checked_against_notes
from driver_gemm.results.records import CaseResult, OperandsRecord
from driver_gemm.specfile import Shape, parse_spec
from driver_gemm.status import Status

from conftest import ROOT

SHAPE = Shape(65, 130, 17)


def spec_text(fields: str) -> str:
    return (f"shapes: [[65, 130, 17]]\nkernels:\n- name: fused\n  source: {ROOT / 'tests/kernels/fused_elementwise.cu'}"
            f"\n  function: linear_act\n  params: {{ACT: 1, OUT: \"float\"}}\n"
            f"  types: {{a: bf16, b: bf16, c: fp32, accumulate: fp32}}\n{fields}"
            "  epilogue: overwrite\n  block: [16, 16]\n  grid: [ceil(N / 16), ceil(M / 16)]\n"
            "  signature: [A, B, {name: bias, type: buffer, element: fp32, size: N, bias: N}, C, M, N, K]\n")


def recorded(fields: str) -> OperandsRecord:
    spec = parse_spec(spec_text(fields), ROOT / "spec.yaml", allow_outside_sources=True)
    case = next(case for case in cases_of(spec) if case.kernel is not None)
    case = dataclasses.replace(case, plan=plan_case(spec.kernels[0], SHAPE, arch_limits("sm_90")))
    return new_record(case, Status.PASS).operands


def test_the_record_holds_the_structure_the_bias_and_the_functions_and_reads_back():
    operands = recorded("  structure: {a: lower}\n  elementwise: [relu, {mul: 1.5}, {clamp: [-1, 1]}]\n")
    assert operands.structure == {"a": "lower"} and operands.bias == "N"
    assert operands.elementwise == ["relu", {"mul": 1.5}, {"clamp": [-1.0, 1.0]}]
    assert OperandsRecord.from_json(json.loads(json.dumps(operands.to_json()))) == operands
    plain = recorded("")
    assert plain.structure is None and plain.elementwise is None and "elementwise" not in plain.to_json()


def test_the_results_schema_takes_the_new_keys_and_refuses_a_wrong_bias_axis():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "driver_gemm/results/schema.json").read_text())
    operands_schema = schema["$defs"]["case"]["properties"]["operands"]
    validator = jsonschema.Draft202012Validator(operands_schema)
    good = recorded("  structure: {a: lower}\n  elementwise: [relu, {mul: 1.5}]\n").to_json()
    assert not list(validator.iter_errors(good))
    assert list(validator.iter_errors({**good, "bias": "K"}))


def test_show_notes_what_c_was_checked_with_and_leaves_odd_values_out():
    case = CaseResult(kernel="fused", name="fused", shape=SHAPE, status=Status.PASS,
                      operands=OperandsRecord(structure={"a": "lower"}, bias="N",
                                              elementwise=["relu", {"mul": 1.5}, {"clamp": [-1, 1]}]))
    note, = checked_against_notes([case])
    assert note == ("fused: C checked with inputs drawn A lower; a bias added per column; then relu, mul(1.5), "
                    "clamp(-1, 1)")
    odd = CaseResult(kernel="odd", name="odd", shape=SHAPE, status=Status.PASS,
                     operands=OperandsRecord(structure="lower", bias="K", elementwise="relu"))
    assert checked_against_notes([odd]) == []
