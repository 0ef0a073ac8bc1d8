"""The tolerance of a kernel with ``elementwise:`` follows the product's error element by element: a function that
is flat where an element lies (tanh, sigmoid or hardtanh saturated, a clamp) moves none of its error, so a wrong C
(all zeros, half the right one, of the other sign) fails; a kernel evaluating its functions in float32 passes in
every output type up to K = 16384; and the relative tolerance never passes `MAX_TOLERANCE`, the verdict saying
where it was capped. No GPU: the kernel's output is a stand-in computed in float32 on the host."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

import test_elementwise_epilogue as epilogue
from driver_gemm.gemm import dtypes
from driver_gemm.gemm.elementwise import MAX_TOLERANCE, FunctionsBound, apply_functions, elementwise_function
from driver_gemm.session.typed_steps import capped_note, typed_tolerance
from driver_gemm.specfile import Shape
from driver_gemm.specfile.model import VerifySettings
from driver_gemm.status import Status

LONG = Shape(64, 64, 16384)
FP8 = ("types: {a: e4m3, b: e4m3, c: bf16, accumulate: fp32}", "dg::bfloat16_t")
F = np.float32
# What a wrong kernel does instead of, or after, the described functions.
WRONG = {"zero": lambda x, _: x * F(0), "half": lambda x, _: x * F(0.5), "negated": lambda x, _: -x}


@pytest.fixture(autouse=True)
def fp8_and_wrong_steps(monkeypatch):
    monkeypatch.setitem(epilogue.OUTPUTS, "fp8", FP8)
    for name, step in WRONG.items():
        monkeypatch.setitem(epilogue.IN_FP32, name, step)


def wrong(name: str):
    return SimpleNamespace(name=name, argument=())


def function(name: str, *argument: float):
    return elementwise_function(name, argument or None)


@pytest.mark.parametrize("output", ["fp8", "bf16"])
@pytest.mark.parametrize("applied", [[wrong("zero")], [function("tanh"), wrong("half")]], ids=["zero", "half"])
def test_a_saturated_tanh_checks_its_c(output, applied):
    verdict, _ = epilogue.checked([function("tanh")], applied, output, LONG)
    assert verdict.status == Status.FAIL, verdict.as_dict()
    assert verdict.tolerance < 0.5


def test_a_halved_hardtanh_fails_with_fp8_inputs():
    verdict, _ = epilogue.checked([function("hardtanh")], [function("hardtanh"), wrong("half")], "fp8", LONG)
    assert verdict.status == Status.FAIL, verdict.as_dict()


@pytest.mark.parametrize("after", ["sigmoid", "hardtanh"])
def test_a_large_factor_before_a_saturating_function_still_checks_the_sign(after):
    described = [function("mul", 1.0e6), function(after)]
    verdict, _ = epilogue.checked(described, [function("mul", -1.0e6), function(after)], "fp32",
                                  Shape(257, 130, 776))
    assert verdict.status == Status.FAIL, verdict.as_dict()
    verdict, _ = epilogue.checked(described, [wrong("zero")], "fp32", Shape(257, 130, 776))
    assert verdict.status == Status.FAIL, verdict.as_dict()
    verdict, _ = epilogue.checked(described, described, "fp32", Shape(257, 130, 776))
    assert verdict.status == Status.PASS, verdict.as_dict()


@pytest.mark.parametrize("output", ["fp32", "bf16", "fp16", "fp8"])
@pytest.mark.parametrize("names", epilogue.CHAINS, ids=lambda names: "-".join(names))
def test_a_kernel_evaluating_its_functions_in_fp32_passes_at_a_long_k(names, output):
    functions = [epilogue.function(name) for name in names]
    verdict, _ = epilogue.checked(functions, functions, output, LONG)
    assert verdict.status == Status.PASS, verdict.as_dict()
    assert verdict.rel_fro_error < verdict.tolerance / 4, "the tolerance holds the error with room"


def test_a_bound_above_the_cap_is_checked_at_the_cap_and_the_verdict_says_so():
    types = dtypes.parse_types({"a": "e4m3", "b": "e4m3", "c": "bf16", "accumulate": "fp32"})
    # values where tanh is steep everywhere and the product's budget is as large as they are: a bound above 1
    x = np.random.default_rng(5).standard_normal((1, 32, 32)) * 0.01
    _, bound = apply_functions((function("mul", 1000.0), function("tanh"), function("mul", 1.0e-3)), x)
    huge = dtypes.error_bound(types, 1 << 30)
    assert bound.tolerance(huge, types.c.unit_roundoff, dtypes.SAFETY) > MAX_TOLERANCE
    settings = VerifySettings()
    assert typed_tolerance(settings, types, 1 << 30, bound) == MAX_TOLERANCE
    note = capped_note(settings, types, 1 << 30, bound)
    assert f"capped at {MAX_TOLERANCE:g}" in note and "verify: {tolerance: ...}" in note
    assert capped_note(settings, types, 64, bound) == "", "a bound under the cap is said nowhere"


def test_values_that_leave_nothing_finite_give_the_cap_not_nan():
    types = dtypes.parse_types({"a": "bf16", "c": "fp32", "accumulate": "fp32"})
    x = np.array([[[1.0e300, -1.0e300], [2.0, 3.0]]])
    _, bound = apply_functions((function("mul", 1.0e30),), x)
    assert isinstance(bound, FunctionsBound)
    tolerance = typed_tolerance(VerifySettings(), types, 64, bound)
    assert math.isfinite(tolerance) and tolerance == MAX_TOLERANCE
