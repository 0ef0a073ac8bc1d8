"""``type: pointers`` against a kernel that reads its array of addresses as raw 8-byte words or ``void*``."""

from __future__ import annotations

import pytest

from driver_gemm.cuda.mangling import ParamType
from driver_gemm.cuda.signature_check import check_signature
from driver_gemm.specfile.model import Argument

OPERANDS = {"A": "fp16", "B": "fp16", "C": "fp16"}


def pointer_array_problems(kernel_text: str) -> list[str]:
    """The signature check's problems for one ``{name: x_ptr, type: pointers, to: A}`` against `kernel_text`."""
    slots = [(0, 0, 8)]
    types = [ParamType("pointer", 8, kernel_text)]
    return check_signature(slots, types, (Argument("x_ptr", "ptr", pointers_to="A"),), OPERANDS)


@pytest.mark.parametrize("kernel_text", [
    "const long long*", "long long*", "const unsigned long long*", "unsigned long*", "const long*",
    "void*", "const void*", "const long long* __restrict__",
])
def test_addresses_as_eight_byte_words_or_void_are_accepted(kernel_text):
    # flashinfer's host code builds its pointer arrays as int64 tensors, read as const int64_t*; CUTLASS takes void*.
    assert pointer_array_problems(kernel_text) == []


@pytest.mark.parametrize("kernel_text", ["const __half*", "__half*", "const float*", "const int*"])
def test_a_pointer_to_the_data_is_still_refused_with_the_way_out(kernel_text):
    problems = pointer_array_problems(kernel_text)
    assert len(problems) == 1
    assert "parameter 1 (x_ptr, ptr)" in problems[0] and kernel_text in problems[0]
    assert "give A itself" in problems[0] and "int64_t*" in problems[0]


def test_pointers_to_pointers_of_another_element_type_are_still_judged():
    problems = pointer_array_problems("const __nv_bfloat16* const*")
    assert problems and "fp16" in problems[0]
