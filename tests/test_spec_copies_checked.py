"""A Spec or KernelSpec changed with dataclasses.replace (as the docs show) is held to what the spec reader makes:
a wrong kind names its field at once, rather than surfacing deep inside the plan."""

from __future__ import annotations

import dataclasses

import pytest

import driver_gemm as dg
from driver_gemm.errors import WrongArgumentType, WrongArgumentValue

from conftest import ROOT


@pytest.fixture(scope="module")
def spec():
    return dg.spec_from_dict({"shapes": [[64, 64, 64]], "kernels": [{
        "name": "v2", "source": str(ROOT / "kernels" / "02_smem_tiles.cu"), "function": "sgemm_smem_tiles",
        "params": {"TILE": 32}, "block": ["TILE", "TILE"], "grid": ["ceil(N / TILE)", "ceil(M / TILE)"]}]})


def test_a_right_copy_plans_as_documented(spec):
    kernel = spec.kernels[0]
    changed = dataclasses.replace(kernel, params={**kernel.params, "TILE": 16})
    assert changed.label == "v2[TILE=16]"
    assert dataclasses.replace(spec, kernels=[changed]).kernels == (changed,)


@pytest.mark.parametrize("changes, error, words", [
    ({"params": {"TILE": [16, 32]}}, WrongArgumentType, "KernelSpec.params['TILE']: one configuration's value"),
    ({"params": None}, WrongArgumentType, "KernelSpec.params: a mapping"),
    ({"params": {"TILE": 1.5}}, WrongArgumentType, "KernelSpec.params['TILE']: a whole number"),
    ({"block": ("TILE", "TILE")}, WrongArgumentType, "KernelSpec.block: a tuple of parsed expressions"),
    ({"name": "a b/c"}, WrongArgumentValue, "KernelSpec.name: a kernel name is letters"),
    ({"options": ["-DX=1"]}, WrongArgumentType, "KernelSpec.options: a tuple of compiler options"),
])
def test_a_kernel_copy_of_a_wrong_kind_names_its_field(spec, changes, error, words):
    with pytest.raises(error) as info:
        dataclasses.replace(spec.kernels[0], **changes)
    assert words in str(info.value)


@pytest.mark.parametrize("changes, error, words", [
    ({"shapes": ((64, 64, 64),)}, WrongArgumentType, "Spec.shapes: a tuple of Shape(M, N, K)"),
    ({"measure": {"warmup": 3}}, WrongArgumentType, "Spec.measure: a MeasureSettings"),
    ({"verify": None}, WrongArgumentType, "Spec.verify: a VerifySettings"),
    ({"baseline": "no"}, WrongArgumentType, "Spec: baseline is True or False"),
    ({"scalars": {"alpha": "x"}}, WrongArgumentType, "Spec.scalars: a mapping of names to numbers"),
])
def test_a_spec_copy_of_a_wrong_kind_names_its_field(spec, changes, error, words):
    with pytest.raises(error) as info:
        dataclasses.replace(spec, **changes)
    assert words in str(info.value)


def test_a_kernel_given_twice_is_refused_as_the_reader_refuses_it(spec):
    kernel = spec.kernels[0]
    with pytest.raises(WrongArgumentValue, match=r"Spec.kernels: kernel v2\[TILE=32\] appears twice"):
        dataclasses.replace(spec, kernels=(kernel, kernel))
