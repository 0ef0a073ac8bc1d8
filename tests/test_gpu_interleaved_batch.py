"""An interleaved batch on a GPU: a strided batched kernel over the heads of a [seq, heads, dim] A and C (Megatron's
baddbmm layout, stride dim, rows heads * dim apart) PASSes, as does its cuBLASLt row on the same buffers, and a
kernel that reads A's rows tight, ignoring lda, FAILs."""

from __future__ import annotations

import textwrap

import pytest

from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.state import RunOptions
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from gpu_specs import quick, write_spec

pytestmark = pytest.mark.gpu

SHAPES = ["100x64x64", "33x20x24"]


def heads_kernel(name: str, function: str) -> str:
    return textwrap.dedent(f"""\
    - name: {name}
      source: "@TESTS@/interleaved_batch.cu"
      function: {function}
      types: {{a: fp32}}
      ld: {{a: 4 * K, c: 4 * N}}
      batch: {{count: 4, stride: {{a: K, b: K * N, c: N}}}}
      scalars: {{alpha: 1.5, beta: 0.5}}
      signature: [M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC]
      block: [16, 16]
      grid: [ceil(N / 16), ceil(M / 16), batch]
      tile: [16, 16]
    """)


def test_an_interleaved_batch_passes_with_its_vendor_row_and_a_kernel_ignoring_lda_fails(tmp_path):
    path = write_spec(tmp_path, heads_kernel("heads", "strided_batched") + heads_kernel("tight", "tight_rows"),
                      SHAPES)
    run = run_spec(quick(load_spec(path)), options=RunOptions())
    by_name: dict[str, list] = {}
    for case in run.cases:
        by_name.setdefault(case.name, []).append(case)
    assert len(by_name["heads"]) == len(SHAPES)
    for case in by_name["heads"]:
        assert case.status == Status.PASS, (case.shape.label, case.status, case.message)
        assert case.verification.wrong == 0 and case.pct_cublas is not None
    vendor = [case for name, cases in by_name.items() if name.startswith("cublaslt") for case in cases]
    assert vendor and all(case.status in (Status.PASS, Status.REF) for case in vendor), \
        [(case.name, case.status, case.message) for case in vendor]
    for case in by_name["tight"]:
        assert case.status == Status.FAIL, (case.shape.label, case.status, case.message)
        assert case.verification.wrong > 0
