"""Embedding beside torch and CuPy on a GPU: kernels launched on their tensors, in their context and on their
stream, with no host copy; our buffers read back as their tensors through DLPack; the rig examples."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

import driver_gemm as dg

from conftest import ROOT, SPECS
from gpu_specs import with_measure

pytestmark = pytest.mark.gpu

KERNEL = ROOT / "kernels" / "02_smem_tiles.cu"
TYPED = ROOT / "kernels" / "types" / "smem_typed.cu"
TYPED_SIGNATURE = ["A", "B", "C", "M", "N", "K", "lda", "ldb", "ldc", "strideA", "strideB", "strideC", "alpha", "beta"]


def no_host_copies(monkeypatch):
    """Fail on any device-to-host or host-to-device copy made through the driver."""
    from cuda.bindings import driver

    def refused(*args):
        raise AssertionError("a host copy was made")

    monkeypatch.setattr(driver, "cuMemcpyDtoHAsync", refused)
    monkeypatch.setattr(driver, "cuMemcpyHtoDAsync", refused)


def test_a_kernel_runs_on_torch_tensors_in_torch_context_and_stream_with_no_host_copy(monkeypatch):
    torch = pytest.importorskip("torch")
    from cuda.bindings import driver

    M, N, K = 300, 200, 100
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        a, b = torch.rand(M, K, device="cuda"), torch.rand(K, N, device="cuda")
        c = torch.full((M, N), float("nan"), device="cuda")
    _, torch_context = driver.cuCtxGetCurrent()
    with dg.Device(0) as device:
        assert device.context_kind == "primary" and int(device.context) == int(torch_context)
        ours = device.stream(handle=stream)                       # torch's stream, read through its protocol
        assert ours.address == stream.cuda_stream
        kernel = dg.load_kernel(device, KERNEL, "sgemm_smem_tiles<16>")
        no_host_copies(monkeypatch)
        kernel.launch((math.ceil(N / 16), math.ceil(M / 16)), (16, 16),
                      [("ptr", a), ("ptr", b), ("ptr", c), ("int32", M), ("int32", N), ("int32", K)], ours)
        stream.synchronize()
        monkeypatch.undo()
    assert torch.allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert float((a @ b).sum()) > 0                                # torch's context is still whole


def test_a_kernel_runs_on_cupy_arrays_in_cupy_context_and_stream_with_no_host_copy(monkeypatch):
    cp = pytest.importorskip("cupy")
    M, N, K = 130, 70, 90
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        a = cp.random.random((M, K), dtype=cp.float32)
        b = cp.random.random((K, N), dtype=cp.float32)
        c = cp.full((M, N), cp.nan, dtype=cp.float32)
    with dg.Device(0) as device:
        ours = device.stream(handle=stream)
        assert ours.address == stream.ptr
        kernel = dg.load_kernel(device, KERNEL, "sgemm_smem_tiles<16>")
        no_host_copies(monkeypatch)
        kernel.launch((math.ceil(N / 16), math.ceil(M / 16)), (16, 16),
                      [("ptr", a), ("ptr", b), ("ptr", c), ("int32", M), ("int32", N), ("int32", K)], ours)
        stream.synchronize()
        monkeypatch.undo()
    assert cp.allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_a_spec_runs_in_process_on_a_torch_stream_given_as_the_object():
    torch = pytest.importorskip("torch")
    stream = torch.cuda.Stream()
    spec = with_measure(dg.load_spec(SPECS / "seed.yaml").select(["v4"], ["127x33x65"]), min_time_s=0,
                        timeout_s=0.05)
    run = dg.run_spec(spec, dg.RunOptions(), dg.Placement(stream=stream))
    assert run.ok, [case.message for case in run.cases]
    assert float(torch.ones(4, device="cuda").sum()) == 4.0             # torch's context is still whole


def test_a_result_is_read_back_as_a_torch_tensor_through_dlpack():
    torch = pytest.importorskip("torch")
    M, N, K = 64, 48, 32
    rng = np.random.default_rng(3)
    a, b = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
    with dg.Device(0) as device:
        stream = device.stream()
        A, B, C = device.upload(a, stream), device.upload(b, stream), device.alloc(4 * M * N)
        kernel = dg.load_kernel(device, KERNEL, "sgemm_smem_tiles<16>")
        kernel.launch((math.ceil(N / 16), math.ceil(M / 16)), (16, 16),
                      [("ptr", A), ("ptr", B), ("ptr", C), ("int32", M), ("int32", N), ("int32", K)], stream)
        result = torch.from_dlpack(C.view((M, N), "float32", stream=stream))
        assert result.is_cuda and result.shape == (M, N) and result.data_ptr() == C.address
        expected = torch.from_dlpack(A) @ torch.from_dlpack(B)         # uploads keep their shape and type
        assert torch.allclose(result, expected, rtol=1e-4, atol=1e-4)
        del result, expected
        torch.cuda.synchronize()


def test_check_kernel_on_torch_tensors_gives_a_spec_runs_record():
    torch = pytest.importorskip("torch")
    M, N, K = 257, 129, 65
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        a, b = torch.rand(M, K, device="cuda"), torch.rand(K, N, device="cuda")
        c = torch.empty(M, N, device="cuda")
    record = dg.check_kernel(KERNEL, "sgemm_smem_tiles<16>", a, b, c, stream=stream,
                             grid=["ceil(N / 16)", "ceil(M / 16)"], block=[16, 16],
                             measure={"min_time_s": 0, "timeout_s": 0.05})
    assert isinstance(record, dg.CaseResult) and record.ok, record.message
    assert (record.shape.M, record.shape.N, record.shape.K) == (M, N, K)
    assert record.timing is not None and record.gflops > 0 and record.resources is not None
    assert record.operands.layout == "NN" and record.verification.reference == "numpy-float64"
    assert torch.allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_check_kernel_reads_a_column_major_bf16_view_and_a_callable_reference():
    torch = pytest.importorskip("torch")
    M, N, K = 96, 80, 64
    a = torch.rand(K, M, device="cuda").to(torch.bfloat16).t()        # column-major, ld = M
    b = torch.rand(K, N, device="cuda").to(torch.bfloat16)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    record = dg.check_kernel(TYPED, "gemm_smem_typed", a, b, c, signature=TYPED_SIGNATURE, time=False,
                             params={"TA": "dg::bfloat16_t", "TB": "dg::bfloat16_t", "TC": "dg::bfloat16_t",
                                     "ACC": "float", "LA": "dg::Col", "LB": "dg::Row", "TILE": 16},
                             grid=["ceil(N / TILE)", "ceil(M / TILE)", "batch"], block=["TILE", "TILE"],
                             reference=lambda a, b, c: a.float() @ b.float())
    assert record.ok, record.message
    assert record.operands.layout == "TN" and record.operands.ld == {"a": M, "b": N, "c": N}
    assert record.verification.reference == "rig"
    # The wrong layout for the same memory is caught: the kernel reads A as row-major.
    wrong = dg.check_kernel(TYPED, "gemm_smem_typed", a.contiguous(), b, c, signature=TYPED_SIGNATURE, time=False,
                            params={"TA": "dg::bfloat16_t", "TB": "dg::bfloat16_t", "TC": "dg::bfloat16_t",
                                    "ACC": "float", "LA": "dg::Col", "LB": "dg::Row", "TILE": 16},
                            grid=["ceil(N / TILE)", "ceil(M / TILE)", "batch"], block=["TILE", "TILE"])
    assert wrong.status.value == "FAIL" and wrong.diagnosis is not None


def test_check_kernel_with_beta_leaves_c_holding_the_checked_result_on_cupy():
    cp = pytest.importorskip("cupy")
    M, N, K = 120, 60, 40
    a = cp.random.random((M, K), dtype=cp.float32)
    b = cp.random.random((K, N), dtype=cp.float32)
    c = cp.random.random((M, N), dtype=cp.float32)
    c0 = c.copy()
    record = dg.check_kernel(TYPED, "gemm_smem_typed", a, b, c, signature=TYPED_SIGNATURE, alpha=2.0, beta=-1.0,
                             params={"TA": "float", "TB": "float", "TC": "float", "ACC": "float",
                                     "LA": "dg::Row", "LB": "dg::Row", "TILE": 16},
                             grid=["ceil(N / TILE)", "ceil(M / TILE)", "batch"], block=["TILE", "TILE"],
                             measure={"min_time_s": 0, "timeout_s": 0.05})
    assert record.ok and record.timing is not None, record.message
    assert cp.allclose(c, 2.0 * (a @ b) - c0, rtol=1e-4, atol=1e-4)      # restored and launched once more


@pytest.mark.parametrize("example, module", [("torch_rig.py", "torch"), ("cupy_rig.py", "cupy")])
def test_the_rig_examples_run(example, module):
    pytest.importorskip(module)
    done = subprocess.run([sys.executable, str(ROOT / "examples" / example)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout
