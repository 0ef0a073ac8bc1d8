"""A kernel checked and timed on a torch rig's own tensors, in torch's context and on its stream.

    python examples/torch_rig.py          (needs a GPU, torch and driver-gemm)

The tensors say M, N, K, the element types and each operand's layout; nothing is copied to the host
but what the float64 reference needs (the first check) and C, read back to be checked.
"""

from pathlib import Path

import driver_gemm as dg

try:
    import torch
except ModuleNotFoundError:   # said in one line by main(), as node_acceptance.py says a missing GPU
    torch = None

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
M, N, K = 1000, 520, 770


def main() -> int:
    # Exit 3, as node_acceptance.py: this machine cannot run the rig, which is no failure of the kernel.
    if torch is None:
        print("torch rig: torch is not installed (pip install torch)")
        return 3
    if not torch.cuda.is_available():
        print("torch rig: torch sees no CUDA GPU on this machine")
        return 3
    stream = torch.cuda.Stream()                      # the rig's stream: the kernel runs on it
    with torch.cuda.stream(stream):
        a = torch.rand(M, K, device="cuda")
        b = torch.rand(K, N, device="cuda")
        c = torch.empty(M, N, device="cuda")
        # FP32, row-major: checked against a float64 product of A and B.
        fp32 = dg.check_kernel(KERNELS / "02_smem_tiles.cu", "sgemm_smem_tiles<16>", a, b, c, stream=stream,
                               grid=["ceil(N / 16)", "ceil(M / 16)"], block=[16, 16])
        # bf16 with A column-major (a transposed view, no copy), against torch's own product.
        a16 = torch.rand(K, M, device="cuda").to(torch.bfloat16).t()
        b16 = torch.rand(K, N, device="cuda").to(torch.bfloat16)
        c16 = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        bf16 = dg.check_kernel(
            KERNELS / "types" / "smem_typed.cu", "gemm_smem_typed", a16, b16, c16, stream=stream,
            params={"TA": "dg::bfloat16_t", "TB": "dg::bfloat16_t", "TC": "dg::bfloat16_t", "ACC": "float",
                    "LA": "dg::Col", "LB": "dg::Row", "TILE": 16},
            signature=["A", "B", "C", "M", "N", "K", "lda", "ldb", "ldc", "strideA", "strideB", "strideC",
                       "alpha", "beta"],
            grid=["ceil(N / TILE)", "ceil(M / TILE)", "batch"], block=["TILE", "TILE"],
            reference=lambda a, b, c: a.float() @ b.float())
    for record in (fp32, bf16):
        print(f"{record.kernel:28} {record.status.value:5} {record.gflops or 0:8.0f} GFLOP/s  {record.message}")
    stream.synchronize()
    assert torch.allclose(c, a @ b, rtol=1e-4, atol=1e-3)      # C holds the checked product
    return 0 if fp32.ok and bf16.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
