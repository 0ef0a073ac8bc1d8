"""What a run pays before its first case and after its last, each part timed alone in fresh processes.

    python scripts/start_costs.py [--repeats 3] [--json start-costs.json]

Each line is the median wall time of `--repeats` fresh Python processes that
do one thing: start the interpreter, import the command line, import what a
GPU worker process imports, initialise the CUDA driver (cuInit and the GPU
count, as `run` does before it asks for a GPU), read every GPU's properties,
and make a worker's whole session (context, stream, L2 flusher, cuBLAS,
NVML) with its parts as `Session.start_steps` records them. A second GPU
halves none of these: the command pays its own once, and each GPU's worker
pays its own at the same time as the others.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBES = {
    "interpreter": "pass",
    "import the command line": "import driver_gemm.cli.main",
    "import a GPU worker": "import driver_gemm.runners.worker",
    "cuInit and GPU count": "from driver_gemm.cuda.device import device_count; device_count()",
    "read every GPU's properties": ("from driver_gemm.cuda.device import device_count, read_properties; "
                                    "[read_properties(d) for d in range(device_count())]"),
}
SESSION = ("import json, time; t = time.monotonic(); from driver_gemm.session.state import Session; "
           "i = time.monotonic() - t; s = Session(0, True); print(json.dumps({'imports_s': round(i, 3), "
           "**s.start_steps})); s.close()")


def wall_s(code: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{code!r} failed:\n{done.stderr[-2000:]}")
    return seconds, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report: dict = {}
    for name, code in PROBES.items():
        report[name] = round(statistics.median(wall_s(code)[0] for _ in range(args.repeats)), 3)
        print(f"{name:32s} {report[name]:6.3f} s", flush=True)
    sessions = [wall_s(SESSION) for _ in range(args.repeats)]
    report["a worker's session, whole process"] = round(statistics.median(s for s, _ in sessions), 3)
    parts = [json.loads(out.strip().splitlines()[-1]) for _, out in sessions]
    report["session parts"] = {key: round(statistics.median(p[key] for p in parts), 3) for key in parts[0]}
    whole = "a worker's session, whole process"
    print(f"{whole:32s} {report[whole]:6.3f} s")
    for key, seconds in report["session parts"].items():
        print(f"  {key:30s} {seconds:6.3f} s")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
