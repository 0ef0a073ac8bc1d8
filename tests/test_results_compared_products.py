"""Whether two runs' records of a case are of the same product, as `compare` says it: by the count of matrices the
case's FLOPs are of, so that a record without a batch (one matrix) and one of a batch
of 1 are the same work, and only another count is said to differ."""

from __future__ import annotations

import pytest

from driver_gemm.report.comparison import Comparison
from driver_gemm.results.records import CaseResult, OperandsRecord
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status

SHAPE = Shape(1024, 512, 256)


def row(operands: OperandsRecord) -> CaseResult:
    return CaseResult(kernel="cublaslt-bf16-NN", name="cublaslt-bf16-NN", shape=SHAPE, status=Status.PASS,
                      operands=operands)


@pytest.mark.parametrize("old, new", [
    (OperandsRecord(), OperandsRecord(batch=1)),
    (OperandsRecord(batch=None, layout="NN"), OperandsRecord(batch=1, layout="NN")),
])
def test_a_record_without_a_batch_is_of_one_matrix_as_a_batch_of_1_is(old, new):
    comparison = Comparison("cublaslt-bf16-NN", SHAPE.label, "GPU", row(old), row(new), "SAME")
    assert row(old).flops == row(new).flops
    assert comparison.product_changed is None


def test_another_count_of_matrices_is_said_as_counts():
    comparison = Comparison("cublaslt-bf16-NN", SHAPE.label, "GPU", row(OperandsRecord()),
                            row(OperandsRecord(batch=4)), "SLOWER")
    assert comparison.product_changed == "a batch of 1 -> 4 matrices"
