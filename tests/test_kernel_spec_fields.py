"""A KernelSpec built or changed in Python (dataclasses.replace) is held to the spec reader's rules as it is made: a
field of the wrong kind is a WrongArgumentType, one of the right kind but a value the reader refuses a
WrongArgumentValue, each naming the field and the value, before anything plans with it."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from driver_gemm.errors import DriverGemmError, WrongArgumentType, WrongArgumentValue
from driver_gemm.specfile import load_spec


@pytest.fixture
def kernel(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "k.cu").write_text("")
    path = tmp_path / "spec.yaml"
    path.write_text("shapes: [[64, 48, 40]]\nkernels:\n  - {name: k, source: k.cu, function: f, block: [1], grid: [1],"
                    " min_pct: 50}\n")
    return load_spec(path).kernels[0]


@pytest.mark.parametrize("field, value", [
    ("arch", 5), ("binary", 5), ("binary", "k.cubin"), ("project", "/nowhere"), ("launch_attributes", 5),
    ("operands", 5), ("constants", 5), ("constants", [1]), ("then", 5), ("then", (1,)), ("memory", 5),
    ("memory", (("signature[3]", 5),)), ("entry", 5), ("min_pct", "80"), ("min_pct", [80]), ("min_pct", True),
    ("precision", None), ("compiler", None), ("epilogue", 5), ("rows_on", 5), ("where", None),
    ("launch_values", ["S"]), ("sizeofs", {"__sizeof0": 4}), ("allow_outside_headers", "no"),
])
def test_a_field_of_the_wrong_kind_is_refused_by_name(kernel, field, value):
    with pytest.raises(WrongArgumentType) as info:
        dataclasses.replace(kernel, **{field: value})
    assert "KernelSpec" in str(info.value) and field in str(info.value) and repr(value)[:20] in str(info.value)


@pytest.mark.parametrize("field, value, rule", [
    ("arch", "sm_1", "sm_"), ("precision", "fp64", "fp32 or tf32"), ("compiler", "gcc", "nvrtc or nvcc"),
    ("epilogue", "replace", "overwrite or accumulate"), ("rows_on", "z", "x or y"),
    ("min_pct", math.nan, "finite"), ("min_pct", math.inf, "finite"), ("min_pct", -1, "above 0"),
    ("min_pct", 0, "above 0"),
])
def test_a_value_the_reader_refuses_is_refused_by_name(kernel, field, value, rule):
    with pytest.raises(WrongArgumentValue) as info:
        dataclasses.replace(kernel, **{field: value})
    assert f"KernelSpec.{field}" in str(info.value) and rule in str(info.value)
    assert isinstance(info.value, DriverGemmError)


def test_values_the_reader_gives_are_taken_and_numbers_kept_plain(kernel):
    changed = dataclasses.replace(kernel, arch="sm_90a", precision="tf32", compiler="nvcc", epilogue="accumulate",
                                  rows_on="x", min_pct=np.float64(75.5), binary=None, entry={"name": "k"})
    assert changed.arch == "sm_90a" and changed.rows_on == "x"
    assert changed.min_pct == 75.5 and type(changed.min_pct) is float
    assert type(dataclasses.replace(kernel, min_pct=80).min_pct) is float
    assert dataclasses.replace(kernel, min_pct=None).min_pct is None
