"""GPU: typed kernels and cuBLASLt rows through `run_spec`, from spec to verdict and % of their own baseline."""

from __future__ import annotations

import pytest

from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.state import RunOptions
from driver_gemm.specfile import load_spec

from gpu_specs import quick, write_spec

pytestmark = pytest.mark.gpu

SHAPES = ["1001x513x777", "129x132x68", "1x1x1", "67x1x131"]
TYPES = {"fp16": "dg::half_t", "bf16": "dg::bfloat16_t"}
LAYOUT = {"N": "dg::Row", "T": "dg::Col"}


def typed_kernel(name: str, dtype: str, code: str, *, extra: str = "") -> str:
    c_type = TYPES[dtype]
    return f"""\
- name: {name}
  source: @KERNELS@/types/smem_typed.cu
  function: gemm_smem_typed
  types: {{a: {dtype}}}
  layout: {code}
  params: {{TA: {c_type}, TB: {c_type}, TC: {c_type}, ACC: float, LA: {LAYOUT[code[0]]},
           LB: {LAYOUT[code[1]]}, TILE: 16}}
  signature: [A, B, C, M, N, K, lda, ldb, ldc, strideA, strideB, strideC, alpha, beta]
  block: [TILE, TILE]
  grid: [ceil(N / TILE), ceil(M / TILE), batch]
{extra}"""


def test_typed_kernels_and_their_cublaslt_rows_pass_on_awkward_shapes(tmp_path):
    kernels = "".join(typed_kernel(f"smem_{dtype}_{code}", dtype, code) for dtype in TYPES for code in ("NN", "TN"))
    kernels += typed_kernel("smem_bf16_TN_batched", "bf16", "TN",
                            extra="  ld: {a: M + 8}\n  batch: {count: 3, stride: {b: 0}}\n")
    spec = quick(load_spec(write_spec(tmp_path, kernels, [s.replace("x", ", ").join("[]") for s in SHAPES])))
    run = run_spec(spec)
    bad = [(c.kernel, c.shape.label, c.status, c.message) for c in run.cases if c.status != "PASS"]
    assert not bad, bad
    for case in run.cases:
        if case.is_baseline:
            assert case.kernel.startswith("cublaslt-") and case.timing is not None
        else:
            assert case.baseline == f"cublaslt-{case.name.split('_')[1]}-{case.name.split('_')[2]}" + \
                ("-x3-ld" if "batched" in case.name else "")
            # % of the dense tensor-core peak of its own types (gemm.peaks), not of the FP32 peak
            assert case.pct_peak == pytest.approx(100 * case.gflops / case.peak_gflops(run.environment["device"]))
            assert case.math in ("fp16", "bf16")


def test_the_shipped_types_spec_passes_where_cublaslt_can_run(tmp_path):
    from driver_gemm.bundled import default_spec_path

    spec = quick(load_spec(default_spec_path().parent / "types.yaml")).select(shapes=SHAPES)
    run = run_spec(spec, options=RunOptions(time=False))
    for case in run.cases:
        if case.kernel == "cublaslt-e5m2.e4m3-fp16-NN":
            assert case.status == "INVALID" and "layout NT" in case.message
        elif case.is_baseline and case.kernel.startswith(("cublaslt-e4m3", "cublaslt-e5m2")):
            # No K here is a multiple of 16: refused at plan time, saying why (cuBLAS's fp8 requirements)
            assert case.status == "INVALID" and "16-byte aligned matrix dimensions" in case.message, \
                (case.kernel, case.message)
        else:
            assert case.status == "PASS", (case.kernel, case.shape.label, case.message, case.verification)


def test_the_wrong_bf16_kernel_fails_with_a_diagnosis(tmp_path):
    kernel = """\
- name: skips_k_tail
  source: @TESTS@/bf16_skips_k_tail.cu
  function: bf16_gemm_skips_k_tail
  types: {a: bf16}
  params: {TILE: 16}
  tile: [TILE, TILE]
  signature: [A, B, C, M, N, K, lda, ldb, ldc, strideA, strideB, strideC, alpha, beta]
  block: [TILE, TILE]
  grid: [ceil(N / TILE), ceil(M / TILE), batch]
"""
    spec = quick(load_spec(write_spec(tmp_path, kernel, ["[1001, 513, 777]", "[129, 132, 64]"])))
    run = run_spec(spec, options=RunOptions(time=False))
    by_shape = {c.shape.label: c for c in run.cases if not c.is_baseline}
    assert by_shape["129x132x64"].status == "PASS"      # TILE divides K: nothing skipped
    failed = by_shape["1001x513x777"]
    assert failed.status == "FAIL" and "wrong" in failed.diagnosis.summary, failed.diagnosis
    assert failed.verification.unwritten == 0


def test_half_precision_c_read_back_with_beta_passes_where_answers_land_on_their_start(tmp_path):
    # C = A @ B + 0.5 C in fp16: wherever A @ B is about half of C's start, the right answer is the very code C
    # started with. Those elements are right, so the kernel and its cuBLASLt row both pass.
    spec = quick(load_spec(write_spec(tmp_path, typed_kernel("smem_fp16_NN", "fp16", "NN"),
                                      ["[1024, 512, 1024]", "[1001, 513, 777]"],
                                      extra="scalars: {alpha: 1.0, beta: 0.5}\n")))
    run = run_spec(spec, options=RunOptions(time=False))
    assert [(c.kernel, c.shape.label, c.status) for c in run.cases if c.status != "PASS"] == []
    assert {c.kernel.split("[")[0] for c in run.cases} == {"cublaslt-fp16-NN-a1b0.5", "smem_fp16_NN"}
