"""The arguments of ``elementwise:`` functions: one beyond what float32 (where a kernel evaluates) or C's type holds
is refused at its item, as are a number YAML reads as text (with the hint other numeric fields give), a list where
one number is wanted, and a function written with a colon and nothing after it; the JSON schema takes what the
reader takes."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from driver_gemm.errors import SpecError
from driver_gemm.specfile import Shape, parse_spec
from driver_gemm.specfile.typed import evaluate_operands

from conftest import ROOT
from test_elementwise_epilogue import parsed, spec_text

INTEGER = "types: {a: int8, b: int8, c: int32, accumulate: int32}"
HALF = "types: {a: fp16, b: fp16, c: fp16, accumulate: fp32}"


def refused(elementwise: str, **kwargs) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parsed(elementwise, **kwargs)
    return caught.value


@pytest.mark.parametrize("value, types, out, needle", [
    ("[{add: 3000000000}]", INTEGER, "int", "C is int32"),
    ("[{mul: 1000000000000}, relu]", INTEGER, "int", "C is int32"),
    ("[{clamp: [-3000000000, 0]}]", INTEGER, "int", "C is int32"),
    ("[{mul: 1000000}]", HALF, "dg::half_t", "C is fp16"),
    ("[relu, {div: 1.0e-6}]", HALF, "dg::half_t", "C is fp16"),
])
def test_an_argument_beyond_cs_type_is_refused_at_its_item(value, types, out, needle):
    error = refused(f"elementwise: {value}", types=types, out=out)
    index = 1 if value.startswith("[relu") else 0
    assert error.field == f"kernels[fused].elementwise[{index}]", error.field
    assert needle in error.message and "beyond" in error.message, error.message
    assert "range" in error.hint, error.hint


@pytest.mark.parametrize("value, needle", [
    ("[{mul: 1.0e+300}]", "beyond float32's range"),
    ("[{add: -1.0e+39}]", "beyond float32's range"),
    ("[{div: 1.0e-320}]", "below float32's smallest normal"),
    ("[{mul: 1.0e-40}]", "below float32's smallest normal"),
])
def test_an_argument_float32_cannot_hold_is_refused_at_its_item(value, needle):
    error = refused(f"elementwise: {value}")
    assert error.field.startswith("kernels[fused].elementwise[0]."), error.field
    assert needle in error.message, error.message


def test_arguments_within_range_are_taken():
    kernel = parsed("elementwise: [{mul: 60000}, {div: 1.0e-4}, {clamp: [-65504, 65504]}, {add: -2}]", types=HALF,
                    out="dg::half_t")
    assert [step.name for step in kernel.operands.elementwise] == ["mul", "div", "clamp", "add"]
    kernel = parsed("elementwise: [{add: 2000000000}, {clamp: [-2147483647, 2147483647]}]", types=INTEGER,
                    out="int")
    assert len(kernel.operands.elementwise) == 2


@pytest.mark.parametrize("value, field, written", [
    ("[{mul: 1e-5}]", "elementwise[0].mul", "1.0e-5"),
    ("[{mul: 1.0e5}]", "elementwise[0].mul", "1.0e+5"),
    ("[{leaky_relu: 1e-2}]", "elementwise[0].leaky_relu", "1.0e-2"),
    ("[{clamp: [-1e3, 1e3]}]", "elementwise[0].clamp", "-1.0e+3"),
])
def test_a_number_yaml_reads_as_text_gets_the_yaml_hint(value, field, written):
    error = refused(f"elementwise: {value}")
    assert error.field == f"kernels[fused].{field}", error.field
    assert "YAML reads" in error.hint and f"write {written}" in error.hint, error.hint
    if "clamp" in value:
        assert "item 0 of its list is '-1e3'" in error.message and "pair" in error.message, error.message


def test_a_function_written_with_a_colon_and_nothing_is_told_to_drop_the_colon():
    error = refused("elementwise:\n    - relu:")
    assert error.field == "kernels[fused].elementwise[0].relu", error.field
    assert "without a colon" in error.hint, error.hint
    # one that takes a number is told how to give it
    error = refused("elementwise:\n    - mul:")
    assert "{mul: 1.5}" in error.hint, error.hint


def test_a_key_that_is_not_text_is_placed_at_its_item():
    error = refused("elementwise: [{null: 2}]")
    assert error.field == "kernels[fused].elementwise[0]", error.field
    assert "None" not in error.field


@pytest.mark.parametrize("value", ["[{mul: [2]}]", "[{add: [1]}]", "[{leaky_relu: [0.2]}]"])
def test_a_list_where_one_number_is_wanted_is_refused_as_the_schema_refuses_it(value):
    error = refused(f"elementwise: {value}")
    assert "takes one number, not a list" in error.message, error.message
    name = value.split("{")[1].split(":")[0]
    assert f"{{{name}: " in error.hint and "[" not in error.hint, error.hint
    schema = json.loads((ROOT / "driver_gemm" / "specfile" / "schema.json").read_text())
    document = yaml.safe_load(spec_text(f"elementwise: {value}"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, schema)


def test_the_schema_takes_the_bias_elements_the_reader_takes():
    schema = json.loads((ROOT / "driver_gemm" / "specfile" / "schema.json").read_text())
    for element, taken in (("fp32", True), ("bf16", True), ("ue8m0", False), ("e4m3", False)):
        text = spec_text("elementwise: [relu]").replace("element: fp32, size: N, bias: N",
                                                        f"element: {element}, size: N, bias: N")
        try:
            jsonschema.validate(yaml.safe_load(text), schema)
            schema_takes = True
        except jsonschema.ValidationError:
            schema_takes = False
        assert schema_takes == taken, element
        if taken:
            parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True)      # the reader takes it
        else:
            with pytest.raises(SpecError):
                parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True)


def test_the_group_count_is_a_name_in_the_expressions_of_groups():
    text = spec_text("").replace("  epilogue: overwrite\n",
                                 "  groups: {count: 4, weights: groups / 2, weight_index: [groups - 3, 0, 1, 0], "
                                 "align: groups}\n  epilogue: overwrite\n")
    kernel = parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True).kernels[0]
    operands, _ = evaluate_operands(kernel, Shape(64, 32, 16))
    assert operands.groups.count == 4 and operands.groups.describe()
    schema = json.loads((ROOT / "driver_gemm" / "specfile" / "schema.json").read_text())
    jsonschema.validate(yaml.safe_load(text), schema)
