"""Kernels right only for the inputs their problem promises, on a GPU: a triangular product PASSes when its spec
draws A and B triangular (`structure:`) and FAILs when they are drawn full, and a segment GEMM whose segments share
weights PASSes when it reads each segment's weight from the index buffer the plan fills, and FAILs, in the segments
whose weight is not their number, when it ignores the index."""

from __future__ import annotations

import pytest

from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.state import RunOptions
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from gpu_specs import quick, write_spec

pytestmark = pytest.mark.gpu

TRIANGULAR_SHAPES = ["256x256x256", "129x129x129"]


def triangular_kernel(structure: str) -> str:
    return f"""\
    - name: lower
      source: "@TESTS@/structured_and_shared.cu"
      function: lower_triangular_product
      types: {{a: bf16, b: bf16, c: fp32, accumulate: fp32}}
      {structure}
      epilogue: overwrite
      block: [16, 16]
      grid: [ceil(N / 16), ceil(M / 16)]
      tile: [16, 16]
      signature: [A, B, C, M, N, K]
    """


def cases_of(path, name: str) -> list:
    run = run_spec(quick(load_spec(path)), options=RunOptions())
    return [case for case in run.cases if case.name == name]


def test_a_triangular_product_passes_on_triangular_inputs_and_its_vendor_row_multiplies_the_same(tmp_path):
    path = write_spec(tmp_path, triangular_kernel("structure: {a: lower, b: lower}"), TRIANGULAR_SHAPES)
    run = run_spec(quick(load_spec(path)), options=RunOptions())
    ours = [case for case in run.cases if case.name == "lower"]
    assert len(ours) == 2
    for case in ours:
        assert case.status == Status.PASS, (case.shape.label, case.status, case.message)
        assert case.verification.wrong == 0 and case.pct_cublas is not None
    assert all(case.status in (Status.PASS, Status.REF) for case in run.cases), \
        [(case.name, case.status, case.message) for case in run.cases]


def test_the_same_kernel_on_full_inputs_fails_off_the_last_row(tmp_path):
    # Drawn full, every element but those whose sum the triangle covers whole (row M - 1, column 0) misses terms.
    path = write_spec(tmp_path, triangular_kernel(""), ["129x129x129"])
    (case,) = cases_of(path, "lower")
    assert case.status == Status.FAIL, case.message
    assert case.verification.wrong > case.verification.right
    assert case.diagnosis.first_mismatches and all(entry["row"] < 128 or entry["col"] > 0
                                                   for entry in case.diagnosis.first_mismatches)


SEGMENT_SHAPES = ["1001x520x776"]


def segment_kernel(ignore_index: bool) -> str:
    return f"""\
    - name: segment
      source: "@TESTS@/structured_and_shared.cu"
      function: segment_shared_weights
      params: {{IGNORE_INDEX: {str(ignore_index).lower()}}}
      types: {{a: bf16, b: bf16, c: bf16, accumulate: fp32}}
      groups: {{layout: contiguous, rows: [300, 200, 250, 251], weights: 2, weight_index: [1, 0, 0, 1]}}
      epilogue: overwrite
      block: [16, 16]
      grid: [ceil(N / 16), ceil(M / 16)]
      tile: [16, 16]
      signature:
        - A
        - B
        - C
        - {{name: offsets, type: buffer, element: int64, size: groups + 1, groups: offsets}}
        - {{name: weight_index, type: buffer, element: int64, size: groups, groups: weight_index}}
        - {{name: segments, type: int32, value: groups}}
        - {{name: weights, type: int32, value: 2}}
        - M
        - N
        - K
    """


def test_segments_that_share_weights_pass_reading_the_index_and_are_timed_against_one_dense_product(tmp_path):
    path = write_spec(tmp_path, segment_kernel(False), SEGMENT_SHAPES)
    run = run_spec(quick(load_spec(path)), options=RunOptions())
    (case,) = [case for case in run.cases if case.name == "segment"]
    assert case.status == Status.PASS, case.message
    assert case.operands.groups["weight_index"] == [1, 0, 0, 1]
    assert case.verification.elements == 1001 * 520 and case.pct_cublas is not None
    assert all(case.status in (Status.PASS, Status.REF) for case in run.cases), \
        [(case.name, case.status, case.message) for case in run.cases]


def test_a_segment_kernel_that_ignores_the_index_fails_in_the_segments_whose_weight_is_not_their_number(tmp_path):
    # Segments 0 and 1 (rows 0 to 499) take weights 1 and 0; ignoring the index they read 0 and 1. Segments 2 and 3
    # read their own weight either way.
    path = write_spec(tmp_path, segment_kernel(True), SEGMENT_SHAPES)
    (case,) = cases_of(path, "segment")
    assert case.status == Status.FAIL, case.message
    assert case.diagnosis.first_mismatches and all(entry["row"] < 500 and entry["group"] in (0, 1)
                                                   for entry in case.diagnosis.first_mismatches)
