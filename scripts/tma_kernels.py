"""Check and time v11 (TF32) and v12 (BF16), the TMA warp-specialised kernels, launched by hand.

    python scripts/tma_kernels.py [--json OUT.json] [--shapes 4096x4096x4096 ...]

Each configuration is checked against a float64 reference on small shapes (every element
written, relative Frobenius error within the type's tolerance) and timed on large ones:
median of event-timed launches with the L2 cache flushed before each, next to torch.mm
(cuBLAS / cuBLASLt) timed the same way on the same GPU. A development tool for the kernels
before they run from a spec; `driver-gemm run specs/tma.yaml` is the measurement of record.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import driver_gemm as dg  # noqa: E402
from driver_gemm.cuda.tensormap import TensorMapPlan  # noqa: E402

POISON = 0x7FC0DEAD
CHECK_SHAPES = [(1000, 1024, 1024), (129, 136, 72), (256, 256, 64), (1001, 520, 776), (64, 8, 8)]


def bf16_round(x: np.ndarray) -> np.ndarray:
    bits = x.astype(np.float32).view(np.uint32)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.view(np.float32)


def v11(BM, CWG, STAGES, GROUP=8):
    instance = f"sgemm_tf32_tma_ws<{BM}, {CWG}, {STAGES}, {GROUP}>"
    BN = 64 * CWG
    smem = STAGES * (BM + BN) * 128 + 16 * STAGES + 1024
    return dict(name=f"v11[BM={BM},CWG={CWG},STAGES={STAGES}]", source=ROOT / "kernels/11_tf32_tma_ws.cu",
                instance=instance, dtype="fp32", element="fp32", box_a=(32, BM), box_b=(32, 32),
                grid=lambda M, N: (math.ceil(N / BN), math.ceil(M / BM)), block=128 * (CWG + 1), smem=smem,
                swizzle="128B", out="fp32", tolerance=2e-3, torch="tf32")


def v12(CWG, STAGES, OUT=32, BDESC=0, GROUP=8):
    instance = f"gemm_bf16_tma_ws<{CWG}, {STAGES}, {GROUP}, {OUT}, {BDESC}>"
    BM = 64 * CWG
    smem = STAGES * (BM + 256) * 128 + 16 * STAGES + 1024
    return dict(name=f"v12[CWG={CWG},STAGES={STAGES},OUT={OUT},BDESC={BDESC}]",
                source=ROOT / "kernels/12_bf16_tma_ws.cu", instance=instance, dtype="bf16", element="bf16",
                box_a=(64, BM), box_b=(64, 64), grid=lambda M, N: (math.ceil(N / 256), math.ceil(M / BM)),
                block=128 * (CWG + 1), smem=smem, swizzle="128B", out="fp32" if OUT == 32 else "bf16",
                tolerance=2e-2 if OUT == 16 else 5e-3, torch="bf16")


def run_one(device, stream, kernel, config, M, N, K, rng, time_it, flush):
    if config["dtype"] == "bf16":
        a = bf16_round(rng.random((M, K), dtype=np.float32) - 0.5)
        b = bf16_round(rng.random((K, N), dtype=np.float32) - 0.5)
        a_dev = (a.view(np.uint32) >> 16).astype(np.uint16)
        b_dev = (b.view(np.uint32) >> 16).astype(np.uint16)
    else:
        a = rng.random((M, K), dtype=np.float32) - 0.5
        b = rng.random((K, N), dtype=np.float32) - 0.5
        a_dev, b_dev = a, b
    A, B = device.upload(a_dev, stream), device.upload(b_dev, stream)
    out_bytes = 4 if config["out"] == "fp32" else 2
    C = device.alloc(out_bytes * M * N)
    map_a = TensorMapPlan.for_matrix(config["element"], M, K, K, config["box_a"][1], config["box_a"][0],
                                     swizzle=config["swizzle"])
    map_b = TensorMapPlan.for_matrix(config["element"], K, N, N, config["box_b"][1], config["box_b"][0],
                                     swizzle=config["swizzle"])
    problems = map_a.problems(A.address) + map_b.problems(B.address)
    if problems:
        return {"status": "INVALID", "message": "; ".join(m for _, m in problems)}
    arguments = [("tensormap", map_a.encode(device.driver, A.address)),
                 ("tensormap", map_b.encode(device.driver, B.address)),
                 ("ptr", C), ("int32", M), ("int32", N), ("int32", K)]
    launch = kernel.prepare(config["grid"](M, N), (config["block"],), arguments, stream, config["smem"])
    C.fill_u32(POISON, stream, nbytes=out_bytes * M * N)
    launch()
    stream.synchronize()
    out = {"status": "RAN"}
    if not time_it:
        if config["out"] == "fp32":
            c = C.download((M, N), np.float32, stream).astype(np.float64)
        else:
            raw = C.download((M, N), np.uint16, stream).astype(np.uint32) << 16
            c = raw.view(np.float32).astype(np.float64)
        expected = a.astype(np.float64) @ b.astype(np.float64)
        finite = np.isfinite(c)
        error = float(np.linalg.norm(np.where(finite, c, 0) - expected) / np.linalg.norm(expected))
        out.update(rel_error=error, nonfinite=int((~finite).sum()),
                   status="PASS" if finite.all() and error <= config["tolerance"] else "FAIL")
    else:
        out["median_ms"] = time_launch(device, stream, launch, flush)
        out["tflops"] = 2 * M * N * K / out["median_ms"] / 1e9
    for buffer in (A, B, C):
        buffer.close()
    return out


def time_launch(device, stream, launch, flush, samples=60):
    start, end = device.event(), device.event()
    times = []
    for _ in range(5):
        launch()
    for _ in range(samples):
        flush()
        start.record(stream)
        launch()
        end.record(stream)
        end.synchronize()
        times.append(end.elapsed_ms_since(start))
    return statistics.median(times)


def torch_reference(shapes):
    """torch.mm in TF32 and BF16 timed with triton's do_bench (L2 flushed), where both are present."""
    try:
        import torch
        from triton.testing import do_bench
    except ImportError:
        return {}
    out = {}
    for M, N, K in shapes:
        for kind in ("tf32", "bf16"):
            torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
            dtype = torch.float32 if kind == "tf32" else torch.bfloat16
            a = torch.rand(M, K, device="cuda", dtype=dtype) - 0.5
            b = torch.rand(K, N, device="cuda", dtype=dtype) - 0.5
            ms = do_bench(lambda: torch.mm(a, b), warmup=50, rep=300, return_mode="median")
            out[f"{kind} {M}x{N}x{K}"] = {"median_ms": ms, "tflops": 2 * M * N * K / ms / 1e9}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--shapes", nargs="*", default=["4096x4096x4096", "8192x8192x8192"])
    args = parser.parse_args()
    timed_shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes]
    configs = [v11(256, 2, 4), v11(128, 2, 6), v11(128, 3, 5),
               v12(2, 4, 32, 0), v12(2, 4, 32, 1), v12(2, 4, 16, 0), v12(2, 4, 16, 1), v12(2, 5, 16, 0)]
    results = {"checks": [], "timings": [], "torch": {}}
    rng = np.random.default_rng(11)
    with dg.Device(0) as device:
        stream = device.stream()
        scratch = device.alloc(2 * device.properties.l2_bytes)
        flush = lambda: scratch.fill_u32(0, stream)  # noqa: E731
        for config in configs:
            try:
                kernel = dg.load_kernel(device, config["source"], config["instance"], arch="sm_90a")
            except dg.DriverGemmError as exc:
                results["checks"].append({"kernel": config["name"], "status": "ERROR", "message": str(exc)})
                continue
            passed = True
            for M, N, K in CHECK_SHAPES:
                try:
                    outcome = run_one(device, stream, kernel, config, M, N, K, rng, False, flush)
                except dg.DriverGemmError as exc:
                    outcome = {"status": "ERROR", "message": str(exc)}
                results["checks"].append({"kernel": config["name"], "shape": f"{M}x{N}x{K}", **outcome})
                print(f"{config['name']:44s} {M}x{N}x{K:<6} {outcome['status']} {outcome.get('rel_error', '')}",
                      flush=True)
                passed &= outcome["status"] in ("PASS", "INVALID")
            if not passed:
                continue
            for M, N, K in timed_shapes:
                outcome = run_one(device, stream, kernel, config, M, N, K, rng, True, flush)
                results["timings"].append({"kernel": config["name"], "shape": f"{M}x{N}x{K}", **outcome})
                print(f"{config['name']:44s} {M}x{N}x{K:<6} {outcome.get('median_ms', 0):.4f} ms "
                      f"{outcome.get('tflops', 0):.1f} TFLOP/s", flush=True)
    results["torch"] = torch_reference(timed_shapes)
    for key, value in results["torch"].items():
        print(f"torch.mm {key:24s} {value['median_ms']:.4f} ms {value['tflops']:.1f} TFLOP/s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
