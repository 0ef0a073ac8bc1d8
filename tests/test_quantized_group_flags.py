"""A quantized B's parts agree on their group where their expressions give the same number: a param's true or false
counts as 1 or 0 there, as in every expression."""

from __future__ import annotations

import pytest

from driver_gemm.errors import SpecError
from driver_gemm.specfile import parse_spec

from conftest import ROOT


def _spec(flag: str) -> str:
    return (f"shapes: [[33, 40, 64]]\nkernels:\n- name: w4a16\n  source: {ROOT / 'kernels/outside/args_w4a16.cu'}\n"
            f"  function: args_w4a16\n  params: {{IGNORE_ZEROS: {flag}}}\n"
            "  types: {a: fp16, b: fp16, c: fp16, accumulate: fp32}\n  epilogue: overwrite\n  block: [16, 16]\n"
            "  grid: [ceil(N / 16), ceil(M / 16)]\n  tile: [16, 16]\n  signature:\n    - A\n"
            "    - {name: qweight, type: buffer, element: int32, size: K / 8 * N, quantized: {of: B, part: codes, "
            "bits: 4, group: IGNORE_ZEROS + 8, pack: {along: K, order: [0, 1, 2, 3, 4, 5, 6, 7]}}}\n"
            "    - {name: scales, type: buffer, element: float16, size: K / 8 * N, quantized: {of: B, part: scales, "
            "group: 8, bits: 4}}\n"
            "    - {name: qzeros, type: buffer, element: int32, size: K / 8 * ceil(N / 8), quantized: {of: B, "
            "part: zeros, pack: {along: N}}}\n"
            "    - C\n    - M\n    - N\n    - K\n    - {name: group, type: int32, value: 8}\n")


def test_a_group_reading_a_false_flag_equals_the_number_it_gives():
    spec = parse_spec(_spec("false"), ROOT / "spec.yaml", allow_outside_sources=True)
    assert spec.kernels[0].label == "w4a16[IGNORE_ZEROS=false]"


def test_a_group_reading_a_true_flag_differs_from_the_number_without_it():
    with pytest.raises(SpecError, match="group 8, but the codes") as info:
        parse_spec(_spec("true"), ROOT / "spec.yaml", allow_outside_sources=True)
    assert info.value.field == "kernels[w4a16].signature[2].quantized.group"
