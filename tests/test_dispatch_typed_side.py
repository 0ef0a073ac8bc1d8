"""A dispatch table's member that is typed where its family is not (or the other way round) is refused naming which
kernel is typed, with what fields and types, which is not, why it matters (their vendor rows, C's start where beta
is 0) and what gives both the same operand fields."""

from __future__ import annotations

import pytest

from driver_gemm.errors import SpecError
from driver_gemm.specfile import load_spec

from test_spec import write

SPEC = """\
shapes:
  - [128, 128, 128]
kernels:
  - name: fam
    source: ../kernels/02_smem_tiles.cu
    function: sgemm_smem_tiles
    params: {{TILE: 16}}
    block: [TILE, TILE]
    grid: [ceil(N / TILE), ceil(M / TILE)]
{family}  - name: mem
    source: ../kernels/02_smem_tiles.cu
    function: sgemm_smem_tiles
    params: {{TILE: 16}}
    block: [TILE, TILE]
    grid: [ceil(N / TILE), ceil(M / TILE)]
{member}dispatch:
  fam:
    - {{shape: [128, 128, 128], kernel: mem, params: {{TILE: 32}}}}
"""


def _refusal(tmp_path, family: str, member: str) -> str:
    with pytest.raises(SpecError) as raised:
        load_spec(write(tmp_path, SPEC.format(family=family, member=member)))
    return raised.value.message


@pytest.mark.parametrize("family, member, typed, untyped", [
    ("", "    types: {a: fp32}\n", "mem", "fam"),
    ("    types: {a: fp32}\n", "", "fam", "mem"),
])
def test_the_typed_kernel_and_the_untyped_one_are_named_with_why_and_the_fix(tmp_path, family, member, typed,
                                                                             untyped):
    message = _refusal(tmp_path, family, member)
    assert "typed operands on one side only" not in message, message
    assert f"{typed} is typed, fp32 in and out (types: {{a: fp32}}), and {untyped} is not (FP32)" in message, message
    assert f"{untyped}'s vendor row is cuBLAS SGEMM" in message and f"{typed}'s vendor row is cuBLASLt's" in message
    assert f"write types: {{a: fp32}} on {untyped} too, or leave it off {typed}" in message, message


def test_an_untyped_tf32_kernel_is_told_its_types_in_place_of_its_precision(tmp_path):
    message = _refusal(tmp_path, "    precision: tf32\n", "    types: {a: tf32}\n")
    assert "mem is typed, tf32 in, fp32 out (types: {a: tf32}), and fam is not (FP32 with precision: tf32)" \
        in message, message
    assert "write types: {a: tf32} on fam too (in place of precision: tf32)" in message, message


def test_a_typed_kernel_of_other_element_types_is_told_to_have_a_family_of_its_own(tmp_path):
    message = _refusal(tmp_path, "", "    types: {a: fp16}\n    ld: {a: K + 8}\n")
    assert "mem is typed, fp16 in and out (types: {a: fp16}; ld: {a: K + 8}), and fam is not (FP32)" in message
    assert "they multiply other element types" in message and "a family of its own types" in message, message
