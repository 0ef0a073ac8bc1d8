"""Fused element-wise epilogues (``elementwise:``): C = f(alpha * A @ B + beta * C0 + bias) with f a list of known
functions. Parsed and refused at their field with the known functions named; each function is PyTorch's and its
Lipschitz constant bounds its slope; the reference applies them after the bias, C's type rounding after them, and
the vendor row keeps the product alone; a kernel evaluating them in float32 passes its check in every output type,
and one that leaves a function out, or applies another, fails. No GPU: the kernel's output is a stand-in computed
in float32 on the host, as the kernel computes it."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.gemm import dtypes
from driver_gemm.gemm.elementwise import (ALIASES, FUNCTIONS, NOTHING, NUMBER, OPTIONAL_NUMBER, PAIR,
                                          ElementwiseFunction, apply_functions, check_note, elementwise_function)
from driver_gemm.gemm.operands import make_typed_inputs, output_bytes, reference
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.results.records import CaseResult
from driver_gemm.session.state import HeldTypedInputs
from driver_gemm.session.typed_steps import TypedCase, check_output, reference_step
from driver_gemm.specfile import Shape, parse_spec
from driver_gemm.specfile.model import VerifySettings
from driver_gemm.status import Status

from conftest import ROOT, TEST_KERNELS

SM90 = arch_limits("sm_90")


def spec_text(elementwise: str, types: str = "types: {a: bf16, b: bf16, c: fp32, accumulate: fp32}",
              out: str = "float") -> str:
    return (f"shapes: [[65, 130, 17]]\nkernels:\n- name: fused\n  source: {TEST_KERNELS / 'fused_elementwise.cu'}\n"
            f"  function: linear_act\n  params: {{ACT: 1, OUT: \"{out}\"}}\n  {types}\n  {elementwise}\n"
            "  epilogue: overwrite\n  block: [16, 16]\n  grid: [ceil(N / 16), ceil(M / 16)]\n"
            "  signature: [A, B, {name: bias, type: buffer, element: fp32, size: N, bias: N}, C, M, N, K]\n")


def parsed(elementwise: str, **kwargs):
    return parse_spec(spec_text(elementwise, **kwargs), ROOT / "spec.yaml", allow_outside_sources=True).kernels[0]


# ---------------------------------------------------------------------------------------------------- the field


def test_the_functions_are_read_in_order_with_their_arguments_and_make_the_kernel_typed():
    kernel = parsed("elementwise: [relu, {mul: 1.5}, {clamp: [-1, 1]}, swish, leaky_relu, {leaky_relu: 0.2}, "
                    "{div: 4}, {add: -2}]", types="layout: NN")
    assert kernel.is_typed and kernel.operands.types.c.name == "fp32"
    assert kernel.operands.elementwise == (
        ElementwiseFunction("relu"), ElementwiseFunction("mul", (1.5,)), ElementwiseFunction("clamp", (-1.0, 1.0)),
        ElementwiseFunction("silu"), ElementwiseFunction("leaky_relu", (0.01,)),
        ElementwiseFunction("leaky_relu", (0.2,)), ElementwiseFunction("div", (4.0,)),
        ElementwiseFunction("add", (-2.0,)))
    alone = parse_spec(spec_text("elementwise: [gelu]", types="").replace("  \n", ""), ROOT / "spec.yaml",
                       allow_outside_sources=True).kernels[0]
    assert alone.is_typed, "the field alone puts the kernel on the typed path, as structure: does"
    assert parsed("layout: NN").operands.elementwise == ()


@pytest.mark.parametrize("value, field, needle", [
    ("[rellu]", "elementwise[0]", "unknown element-wise function 'rellu'"),
    ("[relu, {mul: x}]", "elementwise[1].mul", "mul's argument is a number"),
    ("[mul]", "elementwise[0]", "mul takes a number: write it as {mul: 1.5}"),
    ("[{relu: 1}]", "elementwise[0].relu", "relu takes no argument"),
    ("[{clamp: [1, -1]}]", "elementwise[0].clamp", "low bound 1 is above its high bound -1"),
    ("[{clamp: 1}]", "elementwise[0].clamp", "clamp takes two finite numbers"),
    ("[{clamp: [-1, 0, 1]}]", "elementwise[0].clamp", "clamp takes two finite numbers"),
    ("[{div: 0}]", "elementwise[0].div", "div by 0"),
    ("[{mul: .inf}]", "elementwise[0].mul", "one finite number"),
    ("[{mul: true}]", "elementwise[0].mul", "mul's argument is a number"),
    ("[{mul: null}]", "elementwise[0].mul", "nothing (null) is no argument"),
    ("[{mul: 2, add: 1}]", "elementwise[0]", "a mapping of one name to its argument"),
    ("[[relu]]", "elementwise[0]", "got a list of 1"),
    ("relu", "elementwise", "elementwise is a list of functions"),
    ("[]", "elementwise", "got an empty list"),
])
def test_a_malformed_function_is_refused_at_its_item_naming_the_known_ones(value, field, needle):
    with pytest.raises(SpecError) as caught:
        parsed(f"elementwise: {value}")
    error = caught.value
    assert error.field == f"kernels[fused].{field}", error.field
    assert needle in error.message, error.message
    assert error.where.endswith(":8"), error.where       # the line of elementwise:
    if "unknown" in needle:
        assert all(name in error.hint for name in FUNCTIONS), error.hint


def test_an_integer_c_takes_only_the_functions_that_keep_whole_numbers_whole():
    integer = "types: {a: int8, b: int8, c: int32, accumulate: int32}"
    kernel = parsed("elementwise: [relu, {mul: 2}, {add: -3}, {clamp: [-100, 100]}, hardtanh]", types=integer,
                    out="int")
    assert [step.name for step in kernel.operands.elementwise] == ["relu", "mul", "add", "clamp", "hardtanh"]
    for value, index in (("[relu, gelu]", 1), ("[{mul: 1.5}]", 0)):
        with pytest.raises(SpecError) as caught:
            parsed(f"elementwise: {value}", types=integer, out="int")
        assert caught.value.field == f"kernels[fused].elementwise[{index}]"
        assert "C is int32" in caught.value.message and "relu, hardtanh" in caught.value.hint


def test_the_schema_takes_the_functions_the_reader_takes():
    schema = json.loads((ROOT / "driver_gemm" / "specfile" / "schema.json").read_text())
    branches = schema["$defs"]["kernel"]["properties"]["elementwise"]["items"]["oneOf"]
    bare, numbered, paired = branches[0]["enum"], branches[1]["propertyNames"]["enum"], \
        branches[2]["propertyNames"]["enum"]
    takes = {name: definition.takes for name, definition in FUNCTIONS.items()}
    assert set(bare) == {name for name, kind in takes.items() if kind in (NOTHING, OPTIONAL_NUMBER)} | set(ALIASES)
    assert set(numbered) == {name for name, kind in takes.items() if kind in (NUMBER, OPTIONAL_NUMBER)}
    assert set(paired) == {name for name, kind in takes.items() if kind == PAIR}


# ------------------------------------------------------------------------------------------------ the functions

# PyTorch's definitions (torch.nn.functional), one scalar at a time with Python's math module.
def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def _softplus(x: float) -> float:
    return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))


TORCH = {
    "relu": lambda x, _: max(x, 0.0),
    "leaky_relu": lambda x, s: x if x >= 0 else s[0] * x,
    "gelu": lambda x, _: 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x, _: 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x, _: x * _sigmoid(x),
    "sigmoid": lambda x, _: _sigmoid(x),
    "tanh": lambda x, _: math.tanh(x),
    "softplus": lambda x, _: _softplus(x),
    "mish": lambda x, _: x * math.tanh(_softplus(x)),
    "hardswish": lambda x, _: x * min(max(x + 3.0, 0.0), 6.0) / 6.0,
    "hardtanh": lambda x, _: min(max(x, -1.0), 1.0),
    "clamp": lambda x, bounds: min(max(x, bounds[0]), bounds[1]),
    "add": lambda x, c: x + c[0],
    "mul": lambda x, c: x * c[0],
    "div": lambda x, c: x / c[0],
}
ARGUMENTS = {"leaky_relu": (0.2,), "clamp": (-0.75, 1.25), "add": (-2.0,), "mul": (1.5,), "div": (-4.0,)}


def function(name: str) -> ElementwiseFunction:
    return elementwise_function(name, ARGUMENTS.get(name))


def test_every_known_function_is_written_out_here():
    assert set(TORCH) == set(FUNCTIONS)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_each_function_is_pytorchs(name):
    x = np.concatenate([np.linspace(-30, 30, 2001), [-1e-300, 0.0, 1e-300, -700.0, 700.0]])
    expected = np.array([TORCH[name](value, ARGUMENTS.get(name, ())) for value in x])
    assert np.allclose(function(name).applied(x), expected, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_each_functions_lipschitz_constant_bounds_its_slope(name):
    x = np.linspace(-12, 12, 480001)
    values = function(name).applied(x)
    slopes = np.abs(np.diff(values) / np.diff(x))     # within float64's rounding of the differences
    assert slopes.max() <= function(name).lipschitz * (1 + 1e-9), (name, slopes.max())
    assert slopes.max() >= 0.9 * function(name).lipschitz, "rounded up, not far above"


def test_the_plan_note_says_what_c_is_checked_against():
    functions = (ElementwiseFunction("relu"), ElementwiseFunction("mul", (1.5,)),
                 ElementwiseFunction("clamp", (-1.0, 1.0)))
    note = check_note(functions, alpha=2.0, beta=-0.5, bias_along="N")
    assert note.startswith("C checked against clamp(1.5 * relu(2 * A @ B - 0.5 * C0 + bias[n]), -1, 1)"), note
    assert "vendor row" in note and "product alone" in note
    assert check_note((ElementwiseFunction("add", (-2.0,)), ElementwiseFunction("div", (3.0,)))) \
        .startswith("C checked against (A @ B - 2) / 3")
    assert check_note(()) is None


# ------------------------------------------------------------------------------------------------- the check

def erf32(values: np.ndarray) -> np.ndarray:
    """erff as CUDA's math library gives it: erf, rounded to float32 (within its 2 ulps)."""
    return np.array([math.erf(value) for value in values.astype(np.float64).reshape(-1)],
                    np.float32).reshape(values.shape)


F = np.float32
# Each function as a kernel evaluates it in float32: expf, tanhf, erff and the operations around them.
IN_FP32 = {
    "relu": lambda x, _: np.maximum(x, F(0)),
    "leaky_relu": lambda x, s: np.where(x >= 0, x, F(s[0]) * x),
    "gelu": lambda x, _: F(0.5) * x * (F(1) + erf32(x * F(0.70710678118654752))),
    "gelu_tanh": lambda x, _: F(0.5) * x * (F(1) + np.tanh(F(0.7978845608) * (x + F(0.044715) * x * x * x))),
    "silu": lambda x, _: x / (F(1) + np.exp(-x)),
    "sigmoid": lambda x, _: F(1) / (F(1) + np.exp(-x)),
    "tanh": lambda x, _: np.tanh(x),
    "softplus": lambda x, _: np.logaddexp(F(0), x),
    "mish": lambda x, _: x * np.tanh(np.logaddexp(F(0), x)),
    "hardswish": lambda x, _: x * np.clip(x + F(3), F(0), F(6)) / F(6),
    "hardtanh": lambda x, _: np.clip(x, F(-1), F(1)),
    "clamp": lambda x, bounds: np.clip(x, F(bounds[0]), F(bounds[1])),
    "add": lambda x, c: x + F(c[0]),
    "mul": lambda x, c: x * F(c[0]),
    "div": lambda x, c: x / F(c[0]),
}
OUTPUTS = {"fp32": ("types: {a: bf16, b: bf16, c: fp32, accumulate: fp32}", "float"),
           "bf16": ("types: {a: bf16, b: bf16, c: bf16, accumulate: fp32}", "dg::bfloat16_t"),
           "fp16": ("types: {a: fp16, b: fp16, c: fp16, accumulate: fp32}", "dg::half_t")}
SHAPES = [Shape(65, 130, 17), Shape(257, 130, 776)]


def yaml_of(functions: list[ElementwiseFunction]) -> str:
    return "elementwise: " + json.dumps([function.as_spec() for function in functions])


def checked(described: list[ElementwiseFunction], applied: list[ElementwiseFunction], output: str, shape: Shape,
            vendor: bool = False):
    """The check of a kernel that stores `applied` (evaluated in float32) of its product and bias, rounded to C's
    type once, described with `described`: the verdict, and the run."""
    types_text, out = OUTPUTS[output]
    kernel = parsed(yaml_of(described) if described else "", types=types_text, out=out)
    plan = plan_case(kernel, shape, SM90)
    types, operands = kernel.operands.types, plan.operands
    inputs = make_typed_inputs(operands, types, seed=11)
    bias = plan.buffers["bias"].bias.values()
    x = inputs.a[0].astype(np.float32) @ inputs.b[0].astype(np.float32) + bias[None, :].astype(np.float32)
    for step in applied:
        with np.errstate(over="ignore"):    # exp(-x) of a large negative x is inf in float32, as on the GPU
            x = IN_FP32[step.name](x.astype(np.float32), step.argument).astype(np.float32)
    codes = np.frombuffer(output_bytes(operands.c, types.c), dtype=types.c.storage_dtype.newbyteorder("<")).copy()
    codes[operands.c.offsets()] = dtypes.encode(x[None].astype(np.float64), types.c)
    raw = codes.tobytes()
    download = SimpleNamespace(tobytes=lambda: raw)
    session = SimpleNamespace(typed_buffers={"C": SimpleNamespace(download=lambda *_: download)}, stream=None)
    run = SimpleNamespace(typed=TypedCase(types, operands, 1.0, 0.0, inputs, HeldTypedInputs(shape, inputs, {})),
                          spec=SimpleNamespace(verify=VerifySettings()), session=session,
                          case=SimpleNamespace(shape=shape, lt=SimpleNamespace() if vendor else None, plan=plan),
                          record=CaseResult(kernel="fused", name="fused", shape=shape, status=Status.PASS))
    reference_step(run)
    return check_output(run), run


CHAINS = [[name] for name in FUNCTIONS] + [["relu", "mul"], ["mul", "hardtanh", "gelu"], ["silu", "div", "clamp"],
                                           ["add", "silu", "tanh", "gelu", "hardtanh"], ["mish", "mish"]]


@pytest.mark.parametrize("output", OUTPUTS)
@pytest.mark.parametrize("names", CHAINS, ids=lambda names: "-".join(names))
def test_a_kernel_evaluating_its_functions_in_fp32_passes_in_every_output_type(names, output):
    functions = [function(name) for name in names]
    for shape in SHAPES:
        verdict, run = checked(functions, functions, output, shape)
        assert verdict.status == Status.PASS, (shape.label, verdict.as_dict())
        assert verdict.rel_fro_error < verdict.tolerance / 4, "the tolerance holds the error with room"
        assert run.typed.functions_bound is not None


@pytest.mark.parametrize("output", ["fp32", "bf16"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_a_kernel_that_applies_a_function_the_spec_does_not_describe_fails(name, output):
    # Described without the function, the check compares C with the product and bias alone.
    verdict, _ = checked([], [function(name)], output, SHAPES[1])
    assert verdict.status == Status.FAIL, verdict.as_dict()
    # Described with it and the kernel leaves it out: the same the other way round.
    verdict, _ = checked([function(name)], [], output, SHAPES[1])
    assert verdict.status == Status.FAIL, verdict.as_dict()


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.label)
def test_gelu_checked_as_its_tanh_approximation_fails_in_fp32(shape):
    verdict, _ = checked([function("gelu_tanh")], [function("gelu")], "fp32", shape)
    assert verdict.status == Status.FAIL, verdict.as_dict()


def test_functions_applied_in_another_order_fail():
    verdict, _ = checked([function("relu"), function("add")], [function("add"), function("relu")], "fp32",
                         SHAPES[1])
    assert verdict.status == Status.FAIL


def test_the_reference_applies_the_functions_after_the_bias_unrounded_and_the_vendor_row_keeps_the_product():
    functions = [function("relu"), function("mul")]
    _, run = checked(functions, functions, "bf16", SHAPES[0])
    typed, plan = run.typed, run.case.plan
    bias = plan.buffers["bias"].bias.values()
    product = reference(typed.inputs.a, typed.inputs.b) + bias[None, None, :]
    assert np.allclose(run.expected, 1.5 * np.maximum(product[0], 0.0), rtol=1e-14, atol=0)
    # not rounded to bf16 before or after the functions: C's type rounds the kernel's answer only
    assert not np.array_equal(run.expected, dtypes.decode(dtypes.encode(run.expected, typed.types.c), typed.types.c))
    _, vendor = checked(functions, functions, "bf16", SHAPES[0], vendor=True)
    assert np.allclose(vendor.expected, reference(typed.inputs.a, typed.inputs.b)[0], rtol=1e-14, atol=0)
    assert vendor.typed.functions_bound is None


def test_the_tolerance_follows_the_products_error_through_each_function():
    types = dtypes.parse_types({"a": "bf16", "c": "fp32", "accumulate": "fp32"})
    product = dtypes.error_bound(types, 776)
    x = np.random.default_rng(3).standard_normal((1, 64, 64)) * 30.0
    # sigmoid saturates on inputs of size 30: where it is flat it moves no error, so C's relative tolerance stays
    # far under its slope of 1/4 times the ratio of the norms
    _, bound = apply_functions((function("sigmoid"),), x)
    ratio = bound.norms[0] / bound.norms[1]
    assert bound.tolerance(product, types.c.unit_roundoff, dtypes.SAFETY) < 0.25 * product * ratio / 4
    # a function that moves errors one for one and adds none (relu of positive values) keeps the product's
    # tolerance, and C's own rounding
    _, relu = apply_functions((function("relu"),), np.abs(x))
    assert relu.tolerance(product, types.c.unit_roundoff, dtypes.SAFETY) == pytest.approx(
        product + dtypes.SAFETY * types.c.unit_roundoff, rel=0.05)
    # C all zeros: the bound is absolute, as the verdict then measures the error; relu far below 0 moves none
    _, zeros = apply_functions((function("relu"),), -np.abs(x) - 1.0)
    assert zeros.norms[-1] == 0 and zeros.tolerance(product, 0.0, 1.0) == 0.0


# ----------------------------------------------------------------------------------------- the GPU test's kernel

@pytest.mark.parametrize("elementwise", ["[relu]", "[gelu]", "[gelu_tanh]", ""])
@pytest.mark.parametrize("out", ["fp32", "bf16"])
def test_the_gpu_tests_fused_kernel_plans_offline(tmp_path, elementwise, out):
    from test_drawn_buffers import planned_gpu_test
    from test_gpu_elementwise import SHAPES as GPU_SHAPES, fused_kernel
    line = f"elementwise: {elementwise}" if elementwise else ""
    for activation in ("relu", "gelu"):
        plans = planned_gpu_test(tmp_path, fused_kernel(activation, out, line), GPU_SHAPES)
        described = plans[0].kernel.operands.elementwise
        assert [step.name for step in described] == ([elementwise[1:-1]] if elementwise else [])



def with_epilogue(epilogue: str) -> str:
    return spec_text("").replace("epilogue: overwrite", f"epilogue: {epilogue}")


@pytest.mark.parametrize("epilogue, field", [("relu", "elementwise: [relu]"), ("add", "elementwise: [{add: 1.5}]"),
                                             ("swish", "elementwise: [swish]"),
                                             ("clamp", "elementwise: [{clamp: [-1, 1]}]")])
def test_an_epilogue_naming_an_element_wise_function_is_pointed_to_the_elementwise_field(epilogue, field):
    with pytest.raises(SpecError, match="epilogue is overwrite") as raised:
        parse_spec(with_epilogue(epilogue), ROOT / "spec.yaml", allow_outside_sources=True)
    assert field in raised.value.hint and raised.value.field.endswith(".epilogue")
    with pytest.raises(SpecError, match="epilogue is overwrite") as other:
        parse_spec(with_epilogue("sometimes"), ROOT / "spec.yaml", allow_outside_sources=True)
    assert "elementwise" not in (other.value.hint or "")


def test_the_plan_says_what_c_is_checked_against_and_a_kernel_without_functions_gets_no_such_note():
    kernel = parsed("elementwise: [relu, {mul: 1.5}]")
    notes = plan_case(kernel, Shape(65, 130, 17), SM90).notes
    assert "C checked against 1.5 * relu(A @ B + bias[n]): the element-wise functions applied in float64" \
        in " ".join(notes), notes
    plain = plan_case(parsed(""), Shape(65, 130, 17), SM90).notes
    assert not any("C checked against" in note for note in plain)
