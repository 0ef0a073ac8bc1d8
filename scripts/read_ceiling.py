"""How close a skinny GEMM's time comes to reading its B once: the memory ceiling of the decode shapes.

usage: python3 scripts/read_ceiling.py [-s MxNxK ...] [--rounds R] [--json FILE]

On a GPU machine with torch and triton. A GEMM with few rows of A (a language model's decode step: M of 1 to 128
against K, N of thousands) reads all of B, K x N elements, once and does little arithmetic on each: its time is
bounded below by the time the GPU takes to read those bytes from memory at all. This script measures that bound
and sets the vendor library's time beside it, both timed the same way by triton's do_bench (the L2 cleared before
every call, the median of the calls), so that a reader can tell how much room a decode shape leaves above the
vendor row before a kernel is written for it.

For each shape it times, in `--rounds` rounds alternating with each other:
- read: B, K x N bf16, read whole by a Triton kernel that sums it (a few block sizes, the fastest kept), the bytes
  over that time the read rate;
- torch.mm: A (M x K) times B, bf16, as torch dispatches it (cuBLAS or cuBLASLt).
Each is also timed as a CUDA graph of repeated calls with no clearing between them (do_bench_cudagraph): the
kernels' own time, with the launch and the clearing's write-back out of it (where B fits in the L2, as at
N = K = 4096, the repeated calls read it from there). The table gives both medians, the read rate, and torch.mm's
time over the read's ("mm / read").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

try:
    import torch
    import triton
    import triton.language as tl
    from triton.testing import do_bench, do_bench_cudagraph
    MISSING = ""
except ImportError as error:   # the CPU machines that run the tests have neither
    MISSING = str(error)

if not MISSING:
    @triton.jit
    def read_all(src, out, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
        # Each program reads STEPS * BLOCK consecutive elements and writes their sum, so that the loads are kept.
        base = tl.program_id(0) * BLOCK * STEPS
        total = tl.zeros([BLOCK], dtype=tl.float32)
        for step in range(STEPS):
            offsets = base + step * BLOCK + tl.arange(0, BLOCK)
            total += tl.load(src + offsets, mask=offsets < n, other=0.0).to(tl.float32)
        tl.store(out + tl.program_id(0), tl.sum(total))


DEFAULT_SHAPES = ("1x4096x4096", "16x4096x4096", "64x4096x4096", "128x4096x4096",
                  "1x14336x4096", "128x14336x4096", "1x8192x8192", "128x8192x8192")
READ_BLOCKS = ((2048, 4), (4096, 4), (4096, 8), (8192, 4))   # (elements a step, steps a program)


def parse_shape(text: str) -> tuple[int, int, int]:
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: a shape is MxNxK with three positive integers, e.g. 1x4096x4096")
    m, n, k = (int(part) for part in parts)
    return m, n, k


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: rounds are a whole number, 1 or more")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-s", "--shape", action="append", type=parse_shape,
                        help="MxNxK (repeatable; default: the suite's decode and M = 128 shapes)")
    parser.add_argument("--rounds", type=positive, default=3,
                        help="rounds of read and torch.mm, alternating (default 3)")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    if MISSING:
        print(f"read_ceiling: needs torch and triton ({MISSING})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("read_ceiling: no CUDA device", file=sys.stderr)
        return 2

    def reader(b, block: int, steps: int):
        programs = triton.cdiv(b.numel(), block * steps)
        sums = torch.empty(programs, device=b.device, dtype=torch.float32)
        return lambda: read_all[(programs,)](b, sums, b.numel(), BLOCK=block, STEPS=steps)

    shapes = args.shape or [parse_shape(text) for text in DEFAULT_SHAPES]
    device = torch.cuda.get_device_name()
    rows = []
    torch.manual_seed(0)
    panels: dict[tuple[int, int], object] = {}
    for m, n, k in shapes:
        b = panels.setdefault((k, n), torch.randn(k, n, device="cuda", dtype=torch.bfloat16))
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        nbytes = b.numel() * b.element_size()
        readers = [reader(b, block, steps) for block, steps in READ_BLOCKS]
        for read in readers:
            read()
        # The fastest read form, chosen once on graph timings (no clearing: the kernels' own rates).
        graph_times = [do_bench_cudagraph(read, rep=100) for read in readers]
        best = min(range(len(readers)), key=graph_times.__getitem__)
        read = readers[best]

        def product(a=a, b=b):
            return torch.mm(a, b)

        product()
        read_ms, mm_ms = [], []
        for _ in range(args.rounds):
            read_ms.append(do_bench(read, warmup=25, rep=200, return_mode="median"))
            mm_ms.append(do_bench(product, warmup=25, rep=200, return_mode="median"))
        read_graph = do_bench_cudagraph(read, rep=200)
        mm_graph = do_bench_cudagraph(product, rep=200)
        row = {"shape": f"{m}x{n}x{k}", "b_bytes": nbytes, "read_block": list(READ_BLOCKS[best]),
               "read_us": statistics.median(read_ms) * 1e3, "mm_us": statistics.median(mm_ms) * 1e3,
               "read_graph_us": read_graph * 1e3, "mm_graph_us": mm_graph * 1e3,
               "read_rounds_us": [t * 1e3 for t in read_ms], "mm_rounds_us": [t * 1e3 for t in mm_ms]}
        row["read_tb_s"] = nbytes / row["read_us"] / 1e6
        row["read_graph_tb_s"] = nbytes / row["read_graph_us"] / 1e6
        rows.append(row)
        print(f"{row['shape']:>15}  read {row['read_us']:6.1f} us ({row['read_tb_s']:.2f} TB/s)  "
              f"torch.mm {row['mm_us']:6.1f} us  mm / read {row['mm_us'] / row['read_us']:.3f}  |  graphs: "
              f"read {row['read_graph_us']:6.1f} us ({row['read_graph_tb_s']:.2f} TB/s)  "
              f"torch.mm {row['mm_graph_us']:6.1f} us", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"gpu": device, "torch": torch.__version__, "triton": triton.__version__,
                       "rounds": args.rounds, "rows": rows}, handle, indent=1)
            handle.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
