"""A kernel library's regression tests, written with driver-gemm's pytest plugin.

    pytest examples/test_kernel_library.py                       # the tests below
    pytest --driver-gemm-spec=specs/seed.yaml                    # every case of a spec as its own test

Tests marked `driver_gemm_gpu` are skipped, with the reason, on a machine with no GPU.
"""

from pathlib import Path

import numpy as np
import pytest

import driver_gemm as dg

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.driver_gemm_gpu
@pytest.mark.parametrize("shape", ["1x1x1", "7x5x3", "127x33x65", "1001x513x777"])
def test_library_kernels_are_right_on_awkward_shapes(driver_gemm_run, shape):
    spec = dg.load_spec(ROOT / "specs" / "seed.yaml").select(shapes=[shape])
    run = driver_gemm_run(spec, options=dg.RunOptions(time=False))
    assert run.ok, "\n".join(f"{c.kernel}: {c.status} {c.message}" for c in run.cases if not c.ok)


@pytest.mark.driver_gemm_gpu
def test_v4_is_not_slower_than_half_of_cublas(driver_gemm_run):
    run = driver_gemm_run(dg.load_spec(ROOT / "specs" / "seed.yaml").select(["v4"], ["4096x4096x4096"]))
    v4 = next(c for c in run.cases if c.name == "v4")
    assert v4.ok and v4.pct_cublas > 40, f"v4 reaches {v4.pct_cublas:.1f}% of cuBLAS"


@pytest.mark.driver_gemm_gpu
def test_a_kernel_driven_by_hand(driver_gemm_device):
    stream = driver_gemm_device.stream()
    kernel = dg.load_kernel(driver_gemm_device, ROOT / "kernels" / "01_naive_col_on_x.cu", "sgemm_naive_col_on_x")
    a = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    A = driver_gemm_device.upload(a, stream)
    C = driver_gemm_device.alloc(a.nbytes)
    kernel.launch((2, 2), (32, 32), [("ptr", A), ("ptr", A), ("ptr", C), ("int32", 64), ("int32", 64),
                                     ("int32", 64)], stream)
    assert np.allclose(C.download((64, 64), np.float32, stream), a.astype(np.float64) @ a, rtol=1e-5)
