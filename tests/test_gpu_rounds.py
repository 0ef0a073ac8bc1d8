"""GPU: measure.rounds through `run_spec`: FP32 and typed kernels timed in turn with their own vendor rows, in this
process and isolated, over several shapes."""

from __future__ import annotations

import statistics

import pytest

from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.options import Placement
from driver_gemm.specfile import load_spec

from conftest import SPECS
from gpu_specs import quick, with_measure, write_spec
from test_gpu_typed import typed_kernel

pytestmark = pytest.mark.gpu

SHAPES = ["[256, 128, 64]", "[129, 132, 68]"]


def check_rounds(run, rounds: int) -> None:
    bad = [(c.kernel, c.shape.label, c.status, c.message) for c in run.cases if not c.ok]
    assert not bad, bad
    vendor_rows = {(c.shape, c.kernel): c for c in run.cases if c.is_baseline}
    kernels = [c for c in run.cases if not c.is_baseline]
    assert kernels
    for case in kernels:
        record = case.interleaved
        assert record is not None, (case.kernel, case.shape.label)
        assert record.vendor == case.baseline_label and (case.shape, record.vendor) in vendor_rows
        assert record.rounds == rounds == len(record.kernel_round_ms) == len(record.vendor_round_ms)
        assert record.kernel_ms == pytest.approx(statistics.median(record.kernel_round_ms))
        assert case.pct_cublas == pytest.approx(100 * record.vendor_ms / record.kernel_ms)
        # the vendor launch timed in the rounds is the row's own: the same product, so about its time
        assert record.vendor_ms == pytest.approx(vendor_rows[case.shape, record.vendor].median_ms, rel=0.5)
        assert case.timing.samples >= rounds * 3


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "isolated"])
def test_fp32_kernels_take_turns_with_cublas(isolate):
    spec = quick(load_spec(SPECS / "seed.yaml")).select(["v2", "v4"], ["1024x512x1024", "1001x513x777"])
    run = run_spec(with_measure(spec, rounds=3), placement=Placement(isolate=isolate))
    check_rounds(run, 3)


def test_typed_kernels_take_turns_with_their_cublaslt_rows(tmp_path):
    kernels = typed_kernel("smem_bf16_NN", "bf16", "NN") + typed_kernel("smem_fp16_TN", "fp16", "TN")
    spec = quick(load_spec(write_spec(tmp_path, kernels, SHAPES, extra="")))
    run = run_spec(with_measure(spec, rounds=2))
    check_rounds(run, 2)
    assert {case.baseline_label for case in run.cases if not case.is_baseline} == \
        {"cublaslt-bf16-NN", "cublaslt-fp16-TN"}
