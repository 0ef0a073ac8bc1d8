"""Benchmark: `driver-gemm plan` of one kernel on 10^4, 10^5 and 10^6 shapes, as CSV, in a fresh process each.

usage: python3 scripts/bench_plan.py [--sizes 10000,100000,1000000] [--json FILE]

The spec is the README's kind: kernels/02_smem_tiles.cu (v2, TILE=32) with its
shapes as ranges of M and N at K = 256. Prints, per size, the wall time, the
time to the first row on stdout, and the peak resident memory of the process
(the compile is cached after the first size). Needs no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = """\
name: big
shapes:
  - {{M: {{from: 1, to: {m}, step: 1}}, N: {{from: 1, to: {n}, step: 1}}, K: 256}}
kernels:
  - name: v2
    source: {source}
    function: sgemm_smem_tiles
    params: {{TILE: 32}}
    block: [TILE, TILE]
    grid: [ceil(N / TILE), ceil(M / TILE)]
    tile: [TILE, TILE]
"""
# The plan in a child that reports its own peak resident memory (KiB) on its last stderr line.
CHILD = """
import resource, sys
from driver_gemm.cli.main import main
code = main(["plan", sys.argv[1], "--arch", "sm_90", "--csv", "--allow-outside-sources"])
# VmHWM: this process's own peak; ru_maxrss also counts what a forking parent had resident before the exec.
try:
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(peak, file=sys.stderr)
sys.exit(code)
"""


def bench(cases: int, folder: Path) -> dict:
    m = 1000 if cases >= 1000 else cases
    spec = folder / f"plan-{cases}.yaml"
    spec.write_text(SPEC.format(m=m, n=cases // m, source=ROOT / "kernels" / "02_smem_tiles.cu"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    began = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(spec)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, cwd=folder)
    first_row, rows = None, -1
    for line in child.stdout:
        rows += 1
        if rows == 1:
            first_row = time.perf_counter() - began
    err = child.stderr.read().decode()
    child.wait()
    wall = time.perf_counter() - began
    if child.returncode != 0:
        raise SystemExit(f"plan of {cases:,} shapes exited {child.returncode}:\n{err}")
    peak_mib = int(err.strip().splitlines()[-1]) / 1024
    return {"cases": rows, "wall_s": wall, "first_row_s": first_row, "peak_rss_mib": peak_mib,
            "us_per_case": 1e6 * wall / max(rows, 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,1000000", help="numbers of shapes, comma-separated")
    parser.add_argument("--json", help="write the figures here as JSON")
    args = parser.parse_args()
    figures = []
    with tempfile.TemporaryDirectory() as folder:
        for cases in (int(size) for size in args.sizes.split(",")):
            figure = bench(cases, Path(folder))
            figures.append(figure)
            print(f"plan --csv of {figure['cases']:>9,} cases: {figure['wall_s']:7.1f} s "
                  f"({figure['us_per_case']:.0f} us a case), first row after {figure['first_row_s']:.1f} s, "
                  f"peak memory {figure['peak_rss_mib']:.0f} MiB", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
