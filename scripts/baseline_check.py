"""driver-gemm's cuBLASLt baseline against an independent harness: torch timed by Triton's do_bench.

On a GPU machine with torch and triton (about a minute; each step prints as it goes):

    python3 scripts/baseline_check.py --json bench/results/baseline-check.json

Combinations: bf16 and fp16 (layout NN, C of the input type) with torch.mm,
and fp8 e4m3 -> bf16 (layout NT: A row-major, B column-major, the only fp8
layout cuBLASLt has on sm_90; per-tensor scales 1) with torch._scaled_mm; at
1024x512x1024, 4096^3 and 8192^3. alpha = 1, beta = 0 on both sides.

Our side is driver-gemm's cuBLASLt row as the pipeline builds and times it:
`cublaslt.plan_matmul`, `CublasLtMatmul.prepare`, then `timing.measure` (an
L2 flush before every sample, events around the launch alone, median), but
without the pipeline's float64 check of the whole product, which at 8192^3
takes the host minutes: instead 16 rows of C, picked at random, are checked
against a float64 product of the same rows (a wrong layout or type fails it
at once). The torch side is `triton.testing.do_bench` (its cache flush before
every launch, median); where triton cannot be imported it says so and times
torch with CUDA events and its own flush instead.

All of our rows run first, in driver-gemm's own CUDA context, which is then
closed; torch starts after that, so the two never share a context. Each shape
has a wall-time budget (--shape-timeout); a shape over it is reported as a
timeout and the check goes on. The table gives ours, torch's, their ratio and
whether ours is within --limit % (3). Note that do_bench does not hold the
stream while it queues a launch, so at the smallest shape its figure carries
some launch latency that ours does not: a miss there is read with that in mind.
Exit status 1 unless every row is within the limit.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

import numpy as np

SHAPES = [(1024, 512, 1024), (4096, 4096, 4096), (8192, 8192, 8192)]
COMBINATIONS = {          # name: (driver-gemm types, layout)
    "bf16": ({"a": "bf16"}, "NN"),
    "fp16": ({"a": "fp16"}, "NN"),
    "e4m3-bf16": ({"a": "e4m3", "c": "bf16"}, "NT"),
}
CHECKED_ROWS = 16
STARTED = time.perf_counter()


def say(*parts) -> None:
    print(f"[{time.perf_counter() - STARTED:6.1f} s]", *parts, flush=True)


class ShapeTimeout(Exception):
    pass


class budget:
    """SIGALRM after `seconds`: a shape that takes longer raises ShapeTimeout when Python next runs."""

    def __init__(self, seconds: int):
        self.seconds = seconds

    def __enter__(self):
        def expire(signum, frame):
            raise ShapeTimeout(f"over {self.seconds} s")
        self.previous = signal.signal(signal.SIGALRM, expire)
        signal.alarm(self.seconds)

    def __exit__(self, *exc):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.previous)


# ------------------------------------------------------------------------------------------ inputs

def random_codes(element: str, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` storage codes of `element`, values in (-2, 2), none NaN or infinite: fast at 8192^2."""
    if element == "e4m3":
        # sign | exponent 0..7 | mantissa: magnitudes up to 1.875 (exponent field 7 is 2^0)
        return (rng.integers(0, 0x40, count, dtype=np.uint8) | (rng.integers(0, 2, count, dtype=np.uint8) << 7))
    values = rng.uniform(-1.0, 1.0, count).astype(np.float32)
    if element == "bf16":
        return (values.view(np.uint32) >> 16).astype(np.uint16)          # truncation: an exact bf16 value
    return values.astype(np.float16).view(np.uint16)


def decode(codes: np.ndarray, element: str) -> np.ndarray:
    from driver_gemm.measure import dtypes
    return dtypes.decode(codes, element)


# ------------------------------------------------------------------------------------------- ours

def our_rows(shapes, combinations, shape_timeout: int) -> dict[tuple[str, str], dict]:
    """(combination, MxNxK) -> {"ms", "samples", "check", "error"}: driver-gemm's cuBLASLt row timed by
    driver-gemm's timing, with a sampled-row check."""
    import driver_gemm as dg
    from driver_gemm.measure import cublaslt
    from driver_gemm.measure.dtypes import parse_types
    from driver_gemm.measure.operands import gemm_operands, parse_layout
    from driver_gemm.measure.timing import L2Flusher, LaunchGate, measure
    from driver_gemm.spec.model import MeasureSettings

    rows = {}
    settings = MeasureSettings(timeout_s=3.0)
    with dg.Device(0) as device:
        stream = device.stream()
        flusher, gate = L2Flusher(device, stream), LaunchGate(device, stream)
        with cublaslt.CublasLtMatmul(device, stream) as lt:
            for name in combinations:
                node, layout = COMBINATIONS[name]
                types = parse_types(node)
                for M, N, K in shapes:
                    label = f"{M}x{N}x{K}"
                    say(f"ours  {name:<10} {label}: inputs, matmul, check, timing ...")
                    try:
                        with budget(shape_timeout):
                            rows[name, label] = our_row(device, stream, lt, flusher, gate, settings, types,
                                                        gemm_operands(M, N, K, orders=parse_layout(layout)),
                                                        measure, cublaslt)
                    except ShapeTimeout as exc:
                        stream.synchronize()
                        rows[name, label] = {"ms": None, "error": f"timeout ({exc})"}
                    except Exception as exc:  # noqa: BLE001 -- one row's failure is that row's result
                        rows[name, label] = {"ms": None, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                    row = rows[name, label]
                    say(f"ours  {name:<10} {label}: " + (f"{row['ms']:.4f} ms, check {row['check']}"
                                                         if row["ms"] is not None else row["error"]))
        gate.close()
        flusher.close()
    return rows


def our_row(device, stream, lt, flusher, gate, settings, types, gemm, measure, cublaslt) -> dict:
    rng = np.random.default_rng(7)
    a_codes = random_codes(types.a.name, gemm.a.elements, rng)
    b_codes = random_codes(types.b.name, gemm.b.elements, rng)
    plan = cublaslt.plan_matmul(types, gemm, 1.0, 0.0)
    A, B = device.upload(a_codes, stream), device.upload(b_codes, stream)
    C = device.alloc(gemm.c.elements * types.c.storage_bytes)
    try:
        launch = lt.prepare(plan, A, B, C)
        launch()
        stream.synchronize()
        check = sampled_check(gemm, types, a_codes, b_codes, C, stream, rng)
        summary, _ = measure(launch, device, stream, settings, flusher, gate)
        return {"ms": summary.median_ms, "samples": summary.samples, "check": check, "error": None}
    finally:
        for buffer in (A, B, C):
            buffer.close()


def sampled_check(gemm, types, a_codes, b_codes, C, stream, rng) -> str:
    """CHECKED_ROWS random rows of C against float64 (A row-major; B row-major for NN, column-major for NT)."""
    M, N, K = gemm.M, gemm.N, gemm.K
    rows = np.sort(rng.choice(M, size=min(CHECKED_ROWS, M), replace=False))
    a = decode(a_codes.reshape(M, K)[rows], types.a.name).astype(np.float64)
    b = decode(b_codes, types.b.name).astype(np.float64)
    b = b.reshape(K, N) if gemm.b.order == "row" else b.reshape(N, K).T
    expected = a @ b
    raw = C.download((M * N,), np.dtype(types.c.storage_dtype), stream)
    got = decode(raw.reshape(M, N)[rows], types.c.name).astype(np.float64)
    error = float(np.linalg.norm(got - expected) / max(np.linalg.norm(expected), 1e-300))
    unit = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}.get(types.c.name, 2.0 ** -24)
    return f"{'ok' if error < 4 * unit else 'FAILED'} (rel err {error:.1e} over {len(rows)} rows)"


# ------------------------------------------------------------------------------------------ torch

def torch_timer(warmup: int, rep: int):
    """(timer(fn) -> median ms, its name): do_bench where triton imports, else CUDA events with a flush."""
    import torch
    try:
        from triton.testing import do_bench
        timer = lambda fn: do_bench(fn, warmup=warmup, rep=rep, return_mode="median")  # noqa: E731
        # The first call sets triton's driver up (on a fresh machine it may build a helper): once, on a tiny op.
        scratch = torch.zeros(1024, device="cuda")
        timer(lambda: scratch.add_(1.0))
        return timer, "triton do_bench"
    except Exception as exc:  # noqa: BLE001
        say(f"triton's do_bench unusable ({type(exc).__name__}: {str(exc)[:200]}); "
            "timing torch with CUDA events and a 256 MiB flush instead")
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")

    def events(fn) -> float:
        for _ in range(5):
            fn()
        times = []
        for _ in range(50):
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return float(np.median(times))
    return events, "torch CUDA events"


def torch_rows(shapes, combinations, warmup: int, rep: int, shape_timeout: int) -> tuple[dict, str]:
    say("torch: importing torch and triton ...")
    import torch
    say("torch: setting the timer up (triton's first do_bench) ...")
    timer, harness = torch_timer(warmup, rep)
    say(f"torch: harness {harness}")
    rows = {}
    for name in combinations:
        for M, N, K in shapes:
            label = f"{M}x{N}x{K}"
            say(f"torch {name:<10} {label} ...")
            try:
                with budget(shape_timeout):
                    if name == "e4m3-bf16":
                        a = (torch.rand(M, K, device="cuda") * 2 - 1).to(torch.float8_e4m3fn)
                        b = (torch.rand(N, K, device="cuda") * 2 - 1).to(torch.float8_e4m3fn).t()   # K x N, col-major
                        one = torch.ones((), device="cuda")
                        rows[name, label] = timer(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                                                           out_dtype=torch.bfloat16))
                    else:
                        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[name]
                        a = torch.rand(M, K, device="cuda", dtype=dtype) * 2 - 1
                        b = torch.rand(K, N, device="cuda", dtype=dtype) * 2 - 1
                        rows[name, label] = timer(lambda: torch.mm(a, b))
            except ShapeTimeout as exc:
                torch.cuda.synchronize()
                rows[name, label] = f"timeout ({exc})"
            except Exception as exc:  # noqa: BLE001
                rows[name, label] = f"{type(exc).__name__}: {str(exc)[:200]}"
            value = rows[name, label]
            say(f"torch {name:<10} {label}: " + (f"{value:.4f} ms" if isinstance(value, float) else value))
    return rows, harness


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the table here as JSON")
    parser.add_argument("--warmup", type=int, default=25, help="do_bench warm-up, ms")
    parser.add_argument("--rep", type=int, default=100, help="do_bench repetitions, ms")
    parser.add_argument("--limit", type=float, default=3.0, help="the agreement asked for, %%")
    parser.add_argument("--shape-timeout", type=int, default=25, help="wall-time budget of one shape, s")
    parser.add_argument("--only", choices=sorted(COMBINATIONS), action="append", help="these combinations")
    parser.add_argument("--shapes", nargs="+", help="MxNxK shapes instead of the three default ones")
    args = parser.parse_args(argv)
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes] if args.shapes else SHAPES
    combinations = args.only or list(COMBINATIONS)

    ours = our_rows(shapes, combinations, args.shape_timeout)
    theirs, harness = torch_rows(shapes, combinations, args.warmup, args.rep, args.shape_timeout)

    table, agree = [], True
    say(f"=== driver-gemm cuBLASLt row vs torch ({harness}), alpha 1 beta 0, L2 flushed, medians")
    print(f"{'combination':<11} {'layout':<6} {'shape':<15} {'ours ms':>9} {'torch ms':>9} {'ratio':>7}  "
          f"within {args.limit:g}%  check", flush=True)
    for name in combinations:
        for M, N, K in shapes:
            label = f"{M}x{N}x{K}"
            row = ours.get((name, label), {"ms": None, "error": "not run"})
            reference = theirs.get((name, label))
            ratio = row["ms"] / reference if row["ms"] is not None and isinstance(reference, float) else None
            ok = ratio is not None and abs(ratio - 1.0) * 100.0 <= args.limit and \
                (row.get("check") or "").startswith("ok")
            agree &= ok
            table.append({"combination": name, "layout": COMBINATIONS[name][1], "shape": label,
                          "ours_ms": row["ms"], "torch_ms": reference if isinstance(reference, float) else None,
                          "ratio": ratio, "within_limit": ok, "check": row.get("check"),
                          "error": row.get("error") or (None if isinstance(reference, float) else reference)})
            shown = lambda value: f"{value:9.4f}" if isinstance(value, float) else f"{'-':>9}"  # noqa: E731
            note = row.get("check") or row.get("error") or ""
            if not isinstance(reference, float):
                note += f"; torch: {reference}"
            print(f"{name:<11} {COMBINATIONS[name][1]:<6} {label:<15} {shown(row['ms'])} {shown(reference)} "
                  f"{(f'{ratio:7.3f}' if ratio else '      -')}  {'yes' if ok else 'NO':<10} {note}", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"limit_pct": args.limit, "harness": harness, "checked_rows": CHECKED_ROWS,
                                         "cases": table}, indent=1) + "\n")
    say("all within" if agree else "NOT all within", f"{args.limit:g}% of the independent harness")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
