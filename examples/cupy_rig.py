"""A kernel checked and timed on a CuPy rig's own arrays, in CuPy's context and on its stream.

    python examples/cupy_rig.py           (needs a GPU, CuPy and driver-gemm)
"""

from pathlib import Path

import driver_gemm as dg

try:
    import cupy as cp
except ModuleNotFoundError:   # said in one line by main(), as node_acceptance.py says a missing GPU
    cp = None

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
M, N, K = 1000, 520, 770


def main() -> int:
    # Exit 3, as node_acceptance.py: this machine cannot run the rig, which is no failure of the kernel.
    if cp is None:
        print("cupy rig: CuPy is not installed (pip install cupy-cuda13x, the CuPy for CUDA 13)")
        return 3
    try:
        gpus = cp.cuda.runtime.getDeviceCount()
    except cp.cuda.runtime.CUDARuntimeError as exc:   # no driver, or none that sees a GPU
        print(f"cupy rig: CuPy finds no CUDA GPU ({exc})")
        return 3
    if not gpus:
        print("cupy rig: CuPy finds no CUDA GPU on this machine")
        return 3
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        a = cp.random.random((M, K), dtype=cp.float32)
        b = cp.random.random((K, N), dtype=cp.float32)
        c = cp.random.random((M, N), dtype=cp.float32)
        c0 = c.copy()
        # C = 1.5 A B - 0.5 C, checked against the rig's own product.
        record = dg.check_kernel(KERNELS / "types" / "smem_typed.cu", "gemm_smem_typed", a, b, c, stream=stream,
                                 params={"TA": "float", "TB": "float", "TC": "float", "ACC": "float",
                                         "LA": "dg::Row", "LB": "dg::Row", "TILE": 16},
                                 signature=["A", "B", "C", "M", "N", "K", "lda", "ldb", "ldc", "strideA",
                                            "strideB", "strideC", "alpha", "beta"],
                                 grid=["ceil(N / TILE)", "ceil(M / TILE)", "batch"], block=["TILE", "TILE"],
                                 alpha=1.5, beta=-0.5, reference=1.5 * (a @ b) - 0.5 * c0)
    print(f"{record.kernel} {record.status.value} {record.gflops or 0:.0f} GFLOP/s {record.message}")
    stream.synchronize()
    assert cp.allclose(c, 1.5 * (a @ b) - 0.5 * c0, rtol=1e-4, atol=1e-4)   # C holds the checked result
    return 0 if record.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
