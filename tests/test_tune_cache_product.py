"""The tuning cache's key holds a typed kernel's product: two descriptions of one function that are checked against
different products (types, storage orders, a Gram product, its triangle) never share a key, and one description
keeps its key."""

from __future__ import annotations

import pytest

from driver_gemm.specfile import Shape, parse_spec
from driver_gemm.tune.tune_cache import tuning_key

from conftest import ROOT, TEST_KERNELS

ENVIRONMENT = {"device": {"name": "NVIDIA H200", "sm_count": 132}, "driver_version": "13.0", "nvrtc_version": "13.0"}
SHAPE = Shape(64, 64, 32)


def key_of(fields: str, signature: str = "[A, C, M, K]") -> str:
    text = (f"shapes: [[64, 64, 32]]\nkernels:\n- name: k\n  source: {TEST_KERNELS / 'gram.cu'}\n"
            f"  function: gram_naive\n  signature: {signature}\n  block: [16, 16]\n"
            f"  grid: [ceil(N / 16), ceil(M / 16)]\n{fields}")
    spec = parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True)
    return tuning_key(spec, spec.kernels[0], SHAPE, ENVIRONMENT, "sm_90")


GRAM_OF_A = "  gram: A\n"
OTHERS = {
    "types": "  gram: A\n  types: {a: bf16, c: fp32}\n",
    "a triangle": "  gram: {of: A, triangle: lower}\n",
    "the other triangle": "  gram: {of: A, triangle: upper}\n",
    "a column-major C": "  gram: A\n  layouts: {c: col}\n",
}


def test_one_description_keeps_its_key():
    assert key_of(GRAM_OF_A) == key_of(GRAM_OF_A)


@pytest.mark.parametrize("what", OTHERS)
def test_a_gram_kernel_described_otherwise_has_another_key(what):
    assert key_of(OTHERS[what]) != key_of(GRAM_OF_A), what


def test_the_two_triangles_have_their_own_keys():
    assert key_of(OTHERS["a triangle"]) != key_of(OTHERS["the other triangle"])


def test_a_plain_gemm_of_the_same_layout_is_not_the_gram_product():
    plain = key_of("  types: {a: fp32}\n  layout: NT\n", signature="[A, B, C, M, N, K]")
    gram = key_of(GRAM_OF_A, signature="[A, B, C, M, N, K]")
    assert plain != gram


def test_plain_gemms_that_differ_only_in_types_or_layout_have_other_keys():
    base = key_of("  types: {a: fp32}\n", signature="[A, B, C, M, N, K]")
    assert key_of("  types: {a: bf16, c: fp32}\n", signature="[A, B, C, M, N, K]") != base
    assert key_of("  types: {a: fp32}\n  layout: NT\n", signature="[A, B, C, M, N, K]") != base
