"""A dispatch table's member computes its family's GEMM, the element-wise functions applied to the product and the
inputs' structure included: a member checked against other functions, or drawn other inputs, is refused at its
entry, naming what differs."""

from __future__ import annotations

import pytest

from driver_gemm.errors import SpecError
from driver_gemm.specfile import load_spec

from conftest import TEST_KERNELS


def kernel(name: str, act: int, extra: str) -> str:
    return (f"- name: {name}\n  source: {TEST_KERNELS / 'fused_elementwise.cu'}\n  function: linear_act\n"
            f"  params: {{ACT: {act}, OUT: \"float\"}}\n  types: {{a: bf16, b: bf16, c: fp32, accumulate: fp32}}\n"
            f"{extra}  epilogue: overwrite\n  block: [16, 16]\n  grid: [ceil(N / 16), ceil(M / 16)]\n"
            "  signature: [A, B, {name: bias, type: buffer, element: fp32, size: N, bias: N}, C, M, N, K]\n")


def table(tmp_path, family: str, member: str):
    text = ("shapes: [[65, 130, 17], [128, 128, 64]]\nkernels:\n" + kernel("fused", 1, family) +
            kernel("other", 2, member) +
            "dispatch:\n  fused:\n    - {shape: [65, 130, 17], params: {ACT: 1}}\n"
            "    - {shape: [128, 128, 64], kernel: other, params: {ACT: 2}}\n")
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return load_spec(path, allow_outside_sources=True)


@pytest.mark.parametrize("family, member, needle", [
    ("  elementwise: [relu]\n", "  elementwise: [gelu, {mul: 3}]\n", "elementwise [gelu, {mul: 3}], not [relu]"),
    ("  elementwise: [relu]\n", "", "elementwise none, not [relu]"),
    ("  elementwise: [{clamp: [-1, 1]}]\n", "  elementwise: [{clamp: [-2, 1]}]\n",
     "elementwise [{clamp: [-2, 1]}], not [{clamp: [-1, 1]}]"),
    ("  elementwise: [relu]\n", "  elementwise: [relu]\n  structure: {a: upper}\n", "structure {a: upper}, not none"),
])
def test_a_member_with_other_functions_or_structure_is_refused_at_its_entry(tmp_path, family, member, needle):
    with pytest.raises(SpecError) as caught:
        table(tmp_path, family, member)
    error = caught.value
    assert "dispatch.fused[1]" in error.field, error.field
    assert "computes another GEMM than fused" in error.message and needle in error.message, error.message


def test_a_member_with_the_same_functions_and_structure_is_taken(tmp_path):
    same = "  elementwise: [relu, {mul: 1.5}]\n  structure: {a: upper}\n"
    spec = table(tmp_path, same, same)
    assert spec.dispatch_members == {"other"}
