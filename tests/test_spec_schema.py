"""The JSON Schema of the spec format (driver_gemm/specfile/schema.json, for editors) against the spec reader.

The schema is written by hand, so it drifts whenever the reader learns a key or a word. These tests compare it
with the reader class by class: every mapping the reader checks the keys of has the same keys in the schema,
every word list (types, swizzles, modes...) is the reader's own tuple, the bounds are the reader's limits, and
every spec of the repository and every example of the docs is valid under it.
"""

from __future__ import annotations

import ast
import json
import re

import pytest
import yaml

from driver_gemm.argtypes import STANDARD_ARGUMENTS
from driver_gemm.gemm import dtypes
from driver_gemm.gemm.operands import LAYOUT_CODES, ORDERS
from driver_gemm.specfile import (archs, device_buffers, dispatch, kernels, launch_fields, limits, load, model,
                                  parse_spec, sample_patterns, signature, typed)

from conftest import ROOT, SPECS

SPECFILE = ROOT / "driver_gemm" / "specfile"
SCHEMA = json.loads((SPECFILE / "schema.json").read_text())


def at(pointer: str) -> dict:
    """The schema's object at JSON pointer `pointer` ("" is the whole document)."""
    node = SCHEMA
    for part in pointer.split("/")[1:]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


@pytest.fixture(scope="module")
def validator():
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


def errors_at(validator, pointer: str, instance) -> list:
    """What the schema's object at `pointer` says of `instance` (its $refs resolved in the whole schema)."""
    return [f"{'/'.join(map(str, e.absolute_path)) or '.'}: {e.message[:200]}"
            for e in validator.evolve(schema=at(pointer)).iter_errors(instance)]


def with_aliases(names, aliases: dict[str, str]) -> set[str]:
    """`names` and every alias the reader turns into one of them."""
    return set(names) | {alias for alias, name in aliases.items() if name in names}


# ------------------------------------------------------------------------------------------- keys of mappings

# Every mapping of the schema, with the keys the reader takes there: a constant of the reader, or the key list
# the reader writes inline in its check_keys call (as written there, the function named beside it). A check_keys
# call whose list is in no row fails test_every_mapping_the_reader_checks_keys_of_is_compared_with_the_schema.
MAPPINGS = {
    "": (load, "TOP_KEYS"),
    "/properties/measure": (load, "MEASURE_KEYS"),
    "/properties/verify": (load, "VERIFY_KEYS"),
    "/properties/verify/properties/tolerance/oneOf/1": '("rel", "abs")',          # load._parse_verify
    "/$defs/kernel": (kernels, "KERNEL_KEYS"),
    "/$defs/shapeSet": '("M", "N", "K", "MNK", "MN")',                             # shapes._shape_set
    "/$defs/range": '("from", "to", "step", "times")',                             # shapes._range_values
    "/$defs/scalarArgument": '("name", "type", "value")',                         # signature._typed_argument
    # device_buffers.scalar_pointer_argument:
    "/$defs/scalarPointer": '("name", "type", "element")',
    "/$defs/tensorMap": (launch_fields, "TENSOR_MAP_KEYS"),
    "/$defs/structArgument": '("name", "type", "fields", "builder")',            # signature._struct_argument
    "/$defs/pointerArray": '("name", "type", "to")',                              # signature._pointer_array_argument
    "/$defs/constant": (signature, "CONSTANT_KEYS"),
    "/$defs/followingLaunch": (kernels, "THEN_KEYS"),
    "/$defs/buffer": (device_buffers, "BUFFER_KEYS"),
    "/$defs/bufferScales": (device_buffers, "SCALES_KEYS"),
    "/$defs/bufferQuantized": (device_buffers, "QUANTIZED_KEYS"),
    "/$defs/quantizedPack": (device_buffers, "PACK_KEYS"),
    "/$defs/fillFile": (device_buffers, "FILL_SOURCE_KEYS"),
    "/$defs/kernel/properties/types": '("a", "b", "c", "accumulate")',           # typed._types
    "/$defs/kernel/properties/layouts": (typed, "OPERANDS"),                     # gemm.operands.parse_layout: a, b, c
    "/$defs/kernel/properties/ld": (typed, "OPERANDS"),                          # typed._expressions
    "/$defs/kernel/properties/batch/oneOf/1": '("count", "stride")',             # typed._batch
    "/$defs/kernel/properties/batch/oneOf/1/properties/stride": (typed, "OPERANDS"),
    "/$defs/kernel/properties/scales": '("a", "b")',                             # typed._scales
    "/$defs/groups": (typed, "GROUPS_KEYS"),
    "/$defs/kernel/properties/gram/oneOf/1": (typed, "GRAM_KEYS"),
    "/$defs/kernel/properties/scalars": (typed, "SCALAR_NAMES"),                 # typed.parse_kernel_scalars
    # Not by check_keys: dispatch._parse_entry writes the entry's keys inline as a set, and reads when's by
    # DIMENSIONS and "if".
    "/$defs/dispatchEntry": ("shape", "params", "when", "label", "kernel"),
    "/$defs/dispatchEntry/properties/when": (*dispatch.DIMENSIONS, "if"),
}


def reader_keys(source) -> tuple:
    if isinstance(source, str):
        return ast.literal_eval(source)
    if len(source) == 2 and not isinstance(source[0], str):
        module, name = source
        return getattr(module, name)
    return source


def _normal(text: str) -> str:
    return ast.unparse(ast.parse(text, mode="eval").body)


def check_keys_calls() -> list[tuple[str, str]]:
    """(file:line, the allowed keys as written) of every check_keys call of the spec reader."""
    calls = []
    for path in sorted(SPECFILE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check_keys":
                calls.append((f"{path.name}:{node.lineno}", ast.unparse(node.args[2])))
    return calls


@pytest.mark.parametrize("pointer", MAPPINGS, ids=lambda pointer: pointer or "top level")
def test_the_schema_takes_every_key_the_reader_takes(pointer):
    expected = reader_keys(MAPPINGS[pointer])
    properties = at(pointer)["properties"]
    assert sorted(properties) == sorted(expected), (
        f"schema {pointer or 'top level'}: missing {sorted(set(expected) - set(properties))}, "
        f"extra {sorted(set(properties) - set(expected))}")


def test_every_mapping_the_reader_checks_keys_of_is_compared_with_the_schema():
    known = {_normal(source) if isinstance(source, str) else source[1]
             for source in MAPPINGS.values() if isinstance(source, str) or not isinstance(source[0], str)}
    calls = check_keys_calls()
    assert len(calls) > 15, "check_keys calls were not found: did the reader's checking function change its name?"
    unknown = [(where, allowed) for where, allowed in calls if allowed not in known]
    assert not unknown, f"check_keys calls whose keys no row of MAPPINGS compares with the schema: {unknown}"


def test_every_mapping_of_the_schema_is_closed_and_compared_with_the_reader():
    mappings = []     # objects of named keys; the branches of oneOf, if or not that hold properties only constrain

    def walk(node, pointer):
        if isinstance(node, dict):
            if "properties" in node and node.get("type") == "object":
                mappings.append(pointer)
                assert node.get("additionalProperties") is False, f"{pointer or 'top level'} takes any key"
            for key, value in node.items():
                if key not in ("enum", "const", "default"):
                    walk(value, f"{pointer}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{pointer}/{index}")

    walk(SCHEMA, "")
    assert sorted(set(mappings) - set(MAPPINGS)) == [], "mappings of the schema that no row of MAPPINGS checks"
    assert sorted(set(MAPPINGS) - set(mappings)) == [], "rows of MAPPINGS that are no mapping of the schema"


# ------------------------------------------------------------------------------------------- words

def _layout_codes() -> set[str]:
    codes = {first + second for first in LAYOUT_CODES for second in LAYOUT_CODES}
    return codes | {code.lower() for code in codes}     # parse_layout takes any case; the schema lists these


# Every word list of the schema and the reader's words there. The reader writes a few inline (the function
# named beside them); type names it takes in any case are listed as written in the reader's tables.
WORDS = {
    "/properties/measure/properties/mode": load.MEASURE_MODES,
    "/properties/verify/properties/reference": load.REFERENCES,
    "/$defs/kernel/properties/compiler": (*kernels.COMPILERS, None),      # null only beside binary (kernels._code)
    "/$defs/kernel/properties/epilogue": kernels.EPILOGUES,
    "/$defs/kernel/properties/precision": model.PRECISIONS,
    "/$defs/kernel/properties/arch": archs.KNOWN_ARCHS,
    "/$defs/kernel/properties/cluster_scheduling": launch_fields.CLUSTER_SCHEDULING,
    "/$defs/kernel/properties/types/properties/a": with_aliases(dtypes.INPUT_TYPES, dtypes.ALIASES),
    "/$defs/kernel/properties/types/properties/b": with_aliases(dtypes.INPUT_TYPES, dtypes.ALIASES),
    "/$defs/kernel/properties/types/properties/c": with_aliases(dtypes.OUTPUT_TYPES, dtypes.ALIASES),
    "/$defs/kernel/properties/types/properties/accumulate": with_aliases(dtypes.ACCUMULATE_TYPES, dtypes.ALIASES),
    "/$defs/kernel/properties/layout": _layout_codes(),
    "/$defs/kernel/properties/layouts/properties/a": ORDERS,
    "/$defs/kernel/properties/layouts/properties/b": ORDERS,
    "/$defs/kernel/properties/layouts/properties/c": ORDERS,
    "/$defs/standardArgument": tuple(STANDARD_ARGUMENTS),
    "/$defs/scalarArgument/properties/type": tuple(name for name in signature.ARGUMENT_TYPES
                                                   if name not in ("tensormap", "struct", "buffer", "pointers")),
    "/$defs/pointerArray/properties/to": ("A", "B", "C"),                   # signature._pointer_array_argument
    "/$defs/constant/properties/type": signature.CONSTANT_TYPES,              # signature.parse_constants
    "/$defs/scalarPointer/properties/name": typed.SCALAR_NAMES,           # signature._typed_argument
    "/$defs/scalarPointer/properties/element": device_buffers.SCALAR_POINTER_ELEMENTS,
    "/$defs/tensorMap/properties/element": with_aliases(launch_fields.TENSOR_MAP_ELEMENTS,
                                                        launch_fields.TENSOR_MAP_ELEMENT_ALIASES),
    "/$defs/tensorMap/properties/swizzle": launch_fields.TENSOR_MAP_SWIZZLES,
    "/$defs/tensorMap/properties/l2_promotion": launch_fields.TENSOR_MAP_L2_PROMOTIONS,
    "/$defs/tensorMap/properties/oob_fill": launch_fields.TENSOR_MAP_OOB_FILLS,
    "/$defs/tensorMap/properties/interleave": launch_fields.TENSOR_MAP_INTERLEAVES,
    "/$defs/tensorMap/properties/pass": launch_fields.TENSOR_MAP_PASSING,
    "/$defs/buffer/properties/element": with_aliases(device_buffers.BUFFER_ELEMENTS,
                                                     device_buffers.BUFFER_ELEMENT_ALIASES),
    "/$defs/buffer/dependentSchemas/scales/properties/element": with_aliases(device_buffers.DRAWN_ELEMENTS,
                                                                             device_buffers.BUFFER_ELEMENT_ALIASES),
    "/$defs/buffer/dependentSchemas/bias/properties/element": with_aliases(device_buffers.BIAS_ELEMENTS,
                                                                           device_buffers.BUFFER_ELEMENT_ALIASES),
    "/$defs/buffer/properties/fill/anyOf/0": ("zero", "iota"),              # device_buffers._fill
    "/$defs/buffer/properties/pass": ("parameter", "none"),                 # device_buffers.buffer_argument
    "/$defs/buffer/properties/bias": ("M", "N"),                            # device_buffers._bias
    "/$defs/bufferScales/properties/of": ("A", "B", "a", "b"),              # device_buffers._block_scales
    "/$defs/bufferScales/properties/order": ("row", "col"),                 # device_buffers._block_scales
}


@pytest.mark.parametrize("pointer", WORDS)
def test_the_schema_takes_every_word_the_reader_takes(pointer):
    expected = set(WORDS[pointer])
    words = at(pointer)["enum"]
    assert len(words) == len(set(words)), f"{pointer} lists a word twice"
    assert set(words) == expected, (f"schema {pointer}: missing {sorted(expected - set(words), key=str)}, "
                                    f"extra {sorted(set(words) - expected, key=str)}")


def test_the_argument_kinds_of_the_schema_are_the_types_the_reader_takes():
    kinds = [at(branch["$ref"][1:]) for branch in at("/$defs/argument")["oneOf"]]
    typed_kinds = [kind for kind in kinds if "properties" in kind]
    types = set()
    for kind in typed_kinds:
        declared = kind["properties"]["type"]
        types |= set(declared.get("enum", [declared.get("const")]))
    assert types == set(signature.ARGUMENT_TYPES)


def test_the_schema_takes_the_sample_patterns_the_reader_takes(validator):
    candidates = [f"{kind}{tail}" for kind in (*sample_patterns.PATTERNS, "flushes", "burst-idle")
                  for tail in ("", ":5", ":8:50", ":2.5", ":x", ":1:2:3")]
    for text in candidates:
        try:
            sample_patterns.SamplePattern.parse(text)
            reader = True
        except ValueError:
            reader = False
        schema = not errors_at(validator, "/properties/measure/properties/samples", text)
        assert schema == reader, f"samples: {text!r}: the reader {'takes' if reader else 'refuses'} it"


# ------------------------------------------------------------------------------------------- bounds

BOUNDS = [
    ("/$defs/expression", "maxLength", limits.MAX_EXPRESSION_CHARS),
    ("/$defs/value", "maxLength", limits.MAX_EXPRESSION_CHARS),
    ("/$defs/dimension/oneOf/0", "maximum", limits.MAX_DIMENSION),
    ("/$defs/range/properties/from", "maximum", limits.MAX_DIMENSION),
    ("/$defs/range/properties/to", "maximum", limits.MAX_DIMENSION),
    ("/$defs/exactShape/oneOf/0/items", "maximum", limits.MAX_DIMENSION),
    ("/$defs/dispatchEntry/properties/when/properties/M/items", "maximum", limits.MAX_DIMENSION),
    ("/$defs/scalarArgument/properties/value/oneOf/3", "maxItems", limits.MAX_ARRAY_ELEMENTS),
    ("/$defs/buffer/properties/fill/anyOf/3", "maxItems", limits.MAX_BUFFER_VALUES),
    ("/$defs/tensorMap/properties/box", "maxItems", launch_fields.TENSOR_MAP_MAX_RANK),
    ("/$defs/tensorMap/properties/dims", "maxItems", launch_fields.TENSOR_MAP_MAX_RANK),
    ("/$defs/tensorMap/properties/element_strides", "maxItems", launch_fields.TENSOR_MAP_MAX_RANK),
    ("/$defs/tensorMap/properties/strides", "maxItems", launch_fields.TENSOR_MAP_MAX_RANK - 1),
    ("/$defs/kernel/properties/function", "maxLength", limits.MAX_FUNCTION_CHARS),
    ("/properties/measure/properties/rounds", "maximum", load.MAX_ROUNDS),
]


@pytest.mark.parametrize("pointer, keyword, limit", BOUNDS, ids=[f"{p}.{k}" for p, k, _ in BOUNDS])
def test_the_schema_bounds_are_the_readers_limits(pointer, keyword, limit):
    assert at(pointer)[keyword] == limit


def test_names_in_the_schema_are_as_long_as_the_reader_allows():
    for pointer in ("/properties/name", "/$defs/kernel/properties/name"):
        assert at(pointer)["pattern"].endswith(f"{{0,{limits.MAX_NAME_CHARS - 1}}}$"), pointer


@pytest.mark.parametrize("pointer, suffixes", [
    ("/$defs/kernel/properties/source", limits.SOURCE_SUFFIXES),
    ("/$defs/kernel/properties/binary", kernels.BINARY_SUFFIXES),
], ids=["source", "binary"])
def test_the_schema_takes_the_file_suffixes_the_reader_takes(pointer, suffixes):
    assert at(pointer)["pattern"] == "\\.(" + "|".join(suffix[1:] for suffix in suffixes) + ")$"


def test_a_builder_in_the_schema_is_a_file_the_reader_takes():
    assert limits.BUILDER_SUFFIXES == (".py",)
    assert "\\.py:" in at("/$defs/structArgument/properties/builder")["pattern"]


# ------------------------------------------------------------------------------------------- specs

SPEC_FILES = sorted([*SPECS.glob("*.yaml"), *(ROOT / "tests").rglob("*.yaml"), *(ROOT / "tests").rglob("*.yml")])


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_spec_file_of_the_repository_is_valid_under_the_schema(validator, path):
    assert not errors_at(validator, "", yaml.safe_load(path.read_text()))


# Each kind of field the reader takes, once; the reader reads it first, so the example cannot go stale.
EVERY_KIND = """\
name: every-kind
shapes:
  - {MN: [64, 128], K: {from: 64, to: 256, step: 64}}
  - "128x128x128"
  - {MNK: {from: 64, to: 256, times: 2}}
scalars: {alpha: 1.5, gamma: 0.25}
measure: {samples: "burst:8:50", case_timeout_s: 10, mode: events}
verify: {tolerance: {rel: 1.0e-3, abs: 0.5}, reference: cpu}
kernels:
  - name: narrow
    source: ../kernels/04_coarsen_2d.cu
    function: sgemm_coarsen_2d
    params: {CFG: "config<64, 128>", T: unsigned int, ORDER: "lib::Order::Col", FLAG: true, BM: [64, 128]}
    values: {S: [8, 16]}
    block: [S, S]
    grid: [ceil(N / S), ceil(M / S)]
    signature:
      - A
      - B
      - C
      - {name: h, type: float16, value: 0.5}
      - {name: bf, type: bfloat16, value: gamma}
      - {name: flag, type: bool, value: true}
      - {name: i8, type: int8, value: -3}
      - {name: u8, type: uint8, value: 200}
      - {name: i16, type: int16, value: M}
      - {name: u16, type: uint16, value: 7}
      - {name: ws, type: buffer, element: half, size: M, fill: [1, 2]}
      - {name: table, type: buffer, element: double, size: M, fill: {file: "t-{M}.npy"}}
      - {name: args, type: struct, fields: [M, {name: stride, type: int64, value: [K, 1]}]}
  - name: fp8
    source: ../kernels/04_coarsen_2d.cu
    function: sgemm_coarsen_2d
    types: {a: e4m3, c: bf16}
    layout: TN
    block: 128
    grid: [ceil(N / 128), ceil(M / 128)]
    cluster: [2, 1, 1]
    cluster_scheduling: spread
    signature:
      - {name: map_a, type: tensormap, tensor: A, box: [128, 128], element: e4m3, swizzle: 128B}
      - B
      - C
      - {name: sa, type: buffer, element: fp32, size: ceil(K / 128) * M, pass: none,
         scales: {of: A, block: [1, 128], order: col, ld: M}}
      - {name: map_sa, type: tensormap, tensor: sa, dims: [M, K // 128], strides: [M * 4], box: [128, 1],
         element: float32, pass: value}
      - {name: bias, type: buffer, element: bf16, size: N, bias: N}
      - {name: alpha, type: ptr, element: float64}
      - {name: D, type: ptr, value: C}
      - {name: nothing, type: ptr, value: null}
  - &plain
    name: plain
    source: ../kernels/04_coarsen_2d.cu
    compiler: nvcc
    options: [-DX=1]
    function: sgemm_coarsen_2d<64, 64, 16, 4, 4>
    block: [16, 16]
    grid: [ceil(N / 64), ceil(M / 64)]
    signature: [A, B, C, M, N, K]
    epilogue: accumulate
  - <<: *plain
    name: prebuilt
    binary: ../kernels/prebuilt/v4_coarsen_2d_64x64x16_4x4_sm90.cubin
    source: null
    compiler: null
    options: null
dispatch:
  fp8:
    - {shape: "64x64x64", params: {}, when: {M: [1, null], if: "M > 0"}}
"""


def test_a_spec_with_every_kind_of_field_is_valid_to_the_reader_and_the_schema(validator):
    spec = parse_spec(EVERY_KIND, SPECS / "every-kind.yaml")
    assert {kernel.name for kernel in spec.kernels} == {"narrow", "fp8", "plain", "prebuilt"}
    assert not errors_at(validator, "", yaml.safe_load(EVERY_KIND))


# ------------------------------------------------------------------------------------------- the docs

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
YAML_BLOCK = re.compile(r"^```yaml[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)

def docs_blocks() -> list:
    """Every ```yaml block of README.md and docs/*.md, named file:line."""
    blocks = []
    for path in DOCS:
        text = path.read_text()
        for match in YAML_BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            blocks.append(pytest.param(match.group(1), id=f"{path.relative_to(ROOT)}:{line}"))
    return blocks


def schema_parts(block) -> list[tuple[str, object]]:
    """(schema pointer, instance) for a docs block: a whole spec (kernels and shapes), top-level fields, kernel
    fields, a list of dispatch entries or a list of signature entries."""
    if isinstance(block, dict) and {"kernels", "shapes"} <= set(block):
        return [("", block)]
    if isinstance(block, dict) and set(block) <= set(load.TOP_KEYS):
        return [(f"/properties/{key}", value) for key, value in block.items()]
    if isinstance(block, dict) and set(block) <= set(kernels.KERNEL_KEYS):
        return [(f"/$defs/kernel/properties/{key}", value) for key, value in block.items()]
    if isinstance(block, list) and all(isinstance(item, dict) and "shape" in item for item in block):
        return [("/$defs/dispatchEntry", item) for item in block]
    if isinstance(block, list):
        return [("/$defs/argument", item) for item in block]
    raise AssertionError(f"a yaml block that is no part of a spec: {str(block)[:200]}")


def test_the_docs_show_yaml_blocks():
    assert len(docs_blocks()) >= 10


@pytest.mark.parametrize("text", docs_blocks())
def test_every_yaml_block_in_the_docs_parses(text):
    assert yaml.safe_load(text) is not None


@pytest.mark.parametrize("text", docs_blocks())
def test_every_yaml_block_in_the_docs_is_valid_under_the_schema(validator, text):
    block = yaml.safe_load(text)
    problems = [f"{pointer or 'spec'}: {error}" for pointer, instance in schema_parts(block)
                for error in errors_at(validator, pointer, instance)]
    assert not problems
