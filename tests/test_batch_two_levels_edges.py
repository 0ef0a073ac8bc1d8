"""A batch of two levels at its edges: counts whose product no memory holds are refused at ``batch.count`` before
the overlap check builds anything, and strides so large that counts times strides pass int64 are checked in
Python integers, accepted or refused by the overlap check like any other."""

from __future__ import annotations

import textwrap
import tracemalloc

import pytest

import driver_gemm.gemm.operands as operands
from driver_gemm.errors import SpecError
from driver_gemm.gemm.operands import MAX_TWO_LEVEL_MATRICES, MatrixLayout, gemm_operands
from driver_gemm.specfile import parse_spec
from driver_gemm.specfile.model import Shape
from driver_gemm.specfile.typed import evaluate_operands


def laid_out(tmp_path, batch: str, shape: Shape = Shape(7, 5, 6)):
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(float* A, float* B, float* C, int M, int N, int K) {}')
    spec = textwrap.dedent(f"""\
    shapes: [7x5x6]
    kernels:
      - name: k
        source: k.cu
        function: k
        types: {{a: fp32}}
        batch: {batch}
        grid: [1, 1, batch]
        block: [32]
    """)
    kernel, = parse_spec(spec, tmp_path / "spec.yaml").kernels
    return evaluate_operands(kernel, shape)


@pytest.mark.parametrize("count", ["[2, 1000000000000]", "[1000000000000, 2]", "[100000, 100000]"])
def test_counts_whose_product_passes_the_limit_are_refused_at_the_count_before_anything_is_built(tmp_path, count):
    with pytest.raises(SpecError) as caught:
        laid_out(tmp_path, f"{{count: {count}, stride: {{a: 0, b: 0}}}}")
    assert caught.value.field == "batch.count"
    assert "MAX_TWO_LEVEL_MATRICES" in str(caught.value) and f"{MAX_TWO_LEVEL_MATRICES:,}" in str(caught.value)


def test_counts_at_the_limit_are_laid_out():
    outer = MAX_TWO_LEVEL_MATRICES // 2
    operands = gemm_operands(1, 1, 1, batch=outer * 2, strides={"a": 0, "b": 0}, levels=(outer, 2))
    assert operands.batch == MAX_TWO_LEVEL_MATRICES and operands.c.elements == MAX_TWO_LEVEL_MATRICES


def test_an_outer_stride_past_int64_over_its_count_is_laid_out_in_python_integers():
    outer_stride = 1 << 62
    operands = gemm_operands(7, 5, 6, batch=9, strides={"a": (outer_stride, 1000)}, levels=(3, 3))
    assert operands.a.level_strides == (outer_stride, 1000)
    assert operands.a.elements == 2 * outer_stride + 2 * 1000 + 42


@pytest.mark.parametrize("outer_stride", [(1 << 63) - 1, 1 << 62])
def test_an_overlap_beside_a_huge_outer_stride_is_still_found_and_named(outer_stride):
    # the inner stride is one row of a tight 7 x 6 A: matrix (0, 1) starts on row 1 of matrix (0, 0)
    with pytest.raises(SpecError) as caught:
        gemm_operands(7, 5, 6, batch=6, strides={"a": (outer_stride, 6)}, levels=(2, 3))
    assert caught.value.field == "batch.stride.a"
    assert "element (row 1, column 0) of matrix (0, 0) is element (row 0, column 0) of matrix (0, 1)" in \
        str(caught.value)


def test_the_overlap_check_with_huge_strides_matches_the_elements_each_matrix_holds():
    layout = MatrixLayout("C", 2, 3, "row", 3, 4, 1 << 62, (2, 2), 1 << 62)
    assert layout.first_shared_pair() == ((0, 1), (0, 0), (1, 0), (0, 0))
    apart = MatrixLayout("C", 2, 3, "row", 3, 4, 1 << 61, (2, 2), 1 << 62)
    assert apart.first_shared_pair() is None


def test_the_overlap_check_in_chunks_smaller_than_the_inner_count_finds_what_one_chunk_finds(monkeypatch):
    # Chunks of 1 to 5 moves split the inner level (up to 2 x 6 - 1 moves) as a count of millions is split: each
    # layout is refused or laid out as a check of one chunk does it, naming the same pair of matrices.
    def verdicts() -> list:
        found = []
        for ld, strides in ((4, (0, 4)), (24, (0, 4)), (24, (96, 4)), (24, (50, 3)), (10, (30, 7)), (4, (70, 16))):
            for levels in ((1, 6), (3, 6), (5, 2)):
                layout = MatrixLayout("A", 3, 4, "row", ld, levels[0] * levels[1], strides[1], levels, strides[0])
                found.append(layout.first_shared_pair())
        return found

    whole = verdicts()
    assert any(pair is None for pair in whole) and any(pair is not None for pair in whole)
    for chunk in (1, 2, 3, 5):
        monkeypatch.setattr(operands, "OVERLAP_CHUNK", chunk)
        assert verdicts() == whole, chunk


def test_the_overlap_check_holds_its_arrays_to_its_chunk_however_many_matrices_the_inner_level_has(monkeypatch):
    # An inner level of 2^20 matrices side by side within the rows (stride 4, lda 2^22): with chunks of 4,096
    # moves, the arrays stay a few hundred KiB where one array over every inner move would be tens of MiB.
    monkeypatch.setattr(operands, "OVERLAP_CHUNK", 1 << 12)
    inner = 1 << 20
    layout = MatrixLayout("A", 4, 4, "row", 4 * inner, inner, 4, (1, inner), 0)
    tracemalloc.start()
    try:
        assert layout.first_shared_pair() is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak
