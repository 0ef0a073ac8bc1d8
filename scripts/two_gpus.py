"""Time a spec on one GPU against the same spec on two, and print the speed-up.

    python scripts/two_gpus.py                      # specs/mixed.yaml, then specs/ramp.yaml
    python scripts/two_gpus.py --only mixed --json two-gpus.json

Each run is ``driver-gemm run SPEC --device 0`` and ``driver-gemm run SPEC
--devices 0,1`` in a fresh process, timed from start to exit (Dask's start
included). The JSON written with --json holds the seconds of each run, the
speed-up, and the results files of the runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECS = {"mixed": ROOT / "specs" / "mixed.yaml", "ramp": ROOT / "specs" / "ramp.yaml"}


def timed_run(spec: Path, placement: list[str], results: Path) -> float:
    command = [sys.executable, "-m", "driver_gemm", "run", str(spec), "-q", *placement, "--json", str(results)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):          # 1: some case failed, the timing still counts
        raise SystemExit(f"{' '.join(command)} exited with {done.returncode}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=sorted(SPECS), action="append", help="run only this spec (repeatable)")
    parser.add_argument("--json", type=Path, help="write the timings here")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "two-gpus", help="folder for results files")
    args = parser.parse_args()
    report = {}
    for name in args.only or ["mixed", "ramp"]:
        one = timed_run(SPECS[name], ["--device", "0"], args.out / f"{name}-1gpu.json")
        two = timed_run(SPECS[name], ["--devices", "0,1"], args.out / f"{name}-2gpu.json")
        report[name] = {"one_gpu_s": round(one, 1), "two_gpus_s": round(two, 1), "speedup": round(one / two, 3),
                        "results": [str(args.out / f"{name}-1gpu.json"), str(args.out / f"{name}-2gpu.json")]}
        print(f"{name}: one GPU {one:.1f} s, two GPUs {two:.1f} s, speed-up {one / two:.2f}x", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
