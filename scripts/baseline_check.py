"""driver-gemm's cuBLASLt baseline rows against an independent harness: torch (cuBLASLt) timed by Triton's do_bench.

On a GPU machine with torch and triton:

    python3 scripts/baseline_check.py --json bench/results/baseline-check.json

For BF16 (NN), FP16 (NN) and FP8 e4m3 -> BF16 (NT, torch._scaled_mm), at
1024x512x1024, 4096^3 and 8192^3, it times torch's matmul with
``triton.testing.do_bench`` (L2 flushed before each launch, median of the
repetitions; --warmup and --rep in ms) and driver-gemm's own cuBLASLt row for
the same product (its cases of a spec built here, run through the pipeline:
inputs, check against the CPU reference, cold-L2 median). It prints one
line per case with the difference in %; the rows agree when driver-gemm's
median is within --limit % (3) of the harness's. Exit status 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SHAPES = [(1024, 512, 1024), (4096, 4096, 4096), (8192, 8192, 8192)]
COMBINATIONS = {          # name: (driver-gemm types, layout, the kernel's C++ types)
    "bf16": ({"a": "bf16"}, "NN", ("dg::bfloat16_t",) * 3),
    "fp16": ({"a": "fp16"}, "NN", ("dg::half_t",) * 3),
    "e4m3-bf16": ({"a": "e4m3", "c": "bf16"}, "NT", ("dg::e4m3_t", "dg::e4m3_t", "dg::bfloat16_t")),
}


def torch_ms(name: str, M: int, N: int, K: int, warmup: int, rep: int) -> float:
    """Median ms of torch's matmul for combination `name`, L2 flushed before each launch (do_bench)."""
    import torch
    from triton.testing import do_bench

    if name == "e4m3-bf16":
        a = (torch.rand(M, K, device="cuda") - 0.5).to(torch.float8_e4m3fn)
        b = (torch.rand(N, K, device="cuda") - 0.5).to(torch.float8_e4m3fn).t()      # column-major K x N
        one = torch.ones((), device="cuda")
        return do_bench(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                        warmup=warmup, rep=rep, return_mode="median")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[name]
    a = torch.rand(M, K, device="cuda", dtype=dtype) - 0.5
    b = torch.rand(K, N, device="cuda", dtype=dtype) - 0.5
    return do_bench(lambda: torch.mm(a, b), warmup=warmup, rep=rep, return_mode="median")


def driver_gemm_rows(shapes) -> dict[tuple[str, str], tuple[float | None, str]]:
    """(combination, MxNxK) -> (median ms of driver-gemm's cuBLASLt row, its status): only the rows run."""
    from driver_gemm.bundled import kernels_dir
    from driver_gemm.pipeline.cases import cases_of
    from driver_gemm.pipeline.runner import run_in_process
    from driver_gemm.pipeline.session import RunOptions
    from driver_gemm.spec import spec_from_dict

    kernels = []
    for name, (types, layout, (ta, tb, tc)) in COMBINATIONS.items():
        orders = {"N": "dg::Row", "T": "dg::Col"}
        kernels.append({
            "name": f"rowof_{name}", "source": str(kernels_dir() / "types" / "naive_typed.cu"),
            "function": "gemm_naive_typed", "types": types, "layout": layout,
            "params": {"TA": ta, "TB": tb, "TC": tc, "ACC": "float", "LA": orders[layout[0]],
                       "LB": orders[layout[1]]},
            "signature": ["A", "B", "C", "M", "N", "K", "lda", "ldb", "ldc", "strideA", "strideB", "strideC",
                          "alpha", "beta"],
            "block": [16, 16], "grid": ["ceil(N / 16)", "ceil(M / 16)", "batch"]})
    spec = spec_from_dict({"name": "baseline-check", "shapes": [list(s) for s in shapes], "kernels": kernels})
    rows = [case for case in cases_of(spec) if case.lt is not None]     # the rows only: no kernel is run
    results = []
    run_in_process(spec, rows, {}, 0, RunOptions(), results.append)
    by_label = {case.label: case.lt.types.label for case in rows}    # bf16, fp16, e4m3-bf16
    return {(by_label[record.kernel], record.shape.label): (record.median_ms, str(record.status) +
                                                           (f" {record.message}" if record.message else ""))
            for record in results}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the table here as JSON")
    parser.add_argument("--warmup", type=int, default=25, help="do_bench warm-up, ms")
    parser.add_argument("--rep", type=int, default=200, help="do_bench repetitions, ms")
    parser.add_argument("--limit", type=float, default=3.0, help="the agreement asked for, %%")
    args = parser.parse_args(argv)

    ours = driver_gemm_rows(SHAPES)
    table, agree = [], True
    print(f"{'case':<26} {'torch ms':>10} {'driver-gemm ms':>15} {'diff %':>8}  status")
    for name in COMBINATIONS:
        for M, N, K in SHAPES:
            label = f"{M}x{N}x{K}"
            reference = torch_ms(name, M, N, K, args.warmup, args.rep)
            median, status = ours.get((name, label), (None, "missing"))
            difference = None if median is None else 100.0 * (median - reference) / reference
            ok = difference is not None and abs(difference) <= args.limit
            agree &= ok
            table.append({"combination": name, "shape": label, "torch_ms": reference, "driver_gemm_ms": median,
                          "difference_pct": difference, "status": status, "within_limit": ok})
            shown = "-" if difference is None else f"{difference:+.1f}"
            print(f"{name + ' ' + label:<26} {reference:>10.4f} {median or float('nan'):>15.4f} {shown:>8}  {status}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"limit_pct": args.limit, "cases": table}, indent=1) + "\n")
    print("all within" if agree else "NOT all within", f"{args.limit}% of the independent harness")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
