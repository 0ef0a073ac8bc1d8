"""A batch of two levels on a GPU: a kernel over the heads of [B, S, H, D] tensors per (b, h), B shared by the heads
of a batch, PASSes, as does its cuBLASLt row (count[0] calls, its strides being no single strided batch), and a
kernel that ignores the outer level FAILs, its matrices of every later batch unwritten."""

from __future__ import annotations

import pytest

from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.state import RunOptions
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from gpu_specs import quick, write_spec
from test_batch_two_levels import two_level_kernel

pytestmark = pytest.mark.gpu

SHAPES = ["100x64x64", "33x20x24"]


def test_a_two_level_batch_passes_with_its_vendor_row_and_a_kernel_ignoring_the_outer_level_fails(tmp_path):
    path = write_spec(tmp_path, two_level_kernel("two", "two_levels") + two_level_kernel("inner", "inner_level_only"),
                      SHAPES)
    run = run_spec(quick(load_spec(path)), options=RunOptions())
    by_name: dict[str, list] = {}
    for case in run.cases:
        by_name.setdefault(case.name, []).append(case)
    assert len(by_name["two"]) == len(SHAPES)
    for case in by_name["two"]:
        assert case.status == Status.PASS, (case.shape.label, case.status, case.message)
        assert case.verification.wrong == 0 and case.pct_cublas is not None
        assert case.operands.batch_levels == [2, 3]
    vendor = [case for name, cases in by_name.items() if name.startswith("cublaslt") for case in cases]
    assert vendor and all(case.status in (Status.PASS, Status.REF) for case in vendor), \
        [(case.name, case.status, case.message) for case in vendor]
    checked = [case for case in vendor if case.status == Status.PASS]
    assert checked and all("2 cuBLASLt calls" in case.message for case in checked), \
        [(case.name, case.status, case.message) for case in vendor]
    for case in by_name["inner"]:
        assert case.status == Status.FAIL, (case.shape.label, case.status, case.message)
        assert case.verification.wrong > 0 or case.verification.unwritten > 0
        assert "matrix (" in case.message, case.message     # the matrices named by (i, j)
