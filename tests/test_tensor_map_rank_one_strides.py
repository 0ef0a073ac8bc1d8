"""A tensor map of rank 1 has no dimension above its innermost, so no byte strides: one given is refused in words
that say so and what to do, at its file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from driver_gemm.errors import SpecError
from driver_gemm.specfile import load_spec


def write_spec(folder: Path, map_fields: str) -> Path:
    (folder / "pyproject.toml").write_text("")
    (folder / "k.cu").write_text("")
    path = folder / "spec.yaml"
    path.write_text("shapes: [[64, 48, 40]]\nkernels:\n  - name: k\n    source: k.cu\n    function: f\n"
                    "    block: [1]\n    grid: [1]\n    signature:\n      - A\n      - B\n      - C\n"
                    f"      - {{name: row_scales, type: tensormap, tensor: scales, {map_fields}}}\n"
                    "      - {name: scales, type: buffer, element: float32, size: M, pass: none}\n")
    return path


@pytest.mark.parametrize("strides", ["[4]", "[4, 8]", "4", "null"])
def test_strides_on_a_map_of_rank_one_say_there_are_none_to_give(tmp_path, strides):
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(tmp_path, f"dims: [M], box: [16], strides: {strides}"))
    error = info.value
    assert error.field == "kernels[k].signature[3].strides" and error.where.endswith("spec.yaml:12")
    assert "rank 1" in error.message and "no strides" in error.message
    assert "dimensions 1 to 0" not in error.message and "0 expressions" not in error.message
    assert "leave strides out" in error.hint and "second dimension" in error.hint


def test_a_map_of_rank_one_takes_no_strides_or_an_empty_list(tmp_path):
    for fields in ("dims: [M], box: [16]", "dims: [M], box: [16], strides: []"):
        kernel = load_spec(write_spec(tmp_path, fields)).kernels[0]
        assert kernel.signature[3].tensor_map.strides == ()


def test_a_map_of_rank_two_names_its_one_stride(tmp_path):
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(tmp_path, "dims: [M, 2], box: [16, 1], strides: [4, 8]"))
    assert "the byte stride of dimension 1: a list of 1 expressions" in info.value.message
