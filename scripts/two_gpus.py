"""Time a spec on one GPU against the same spec on two, and print the speed-up.

usage: python3 scripts/two_gpus.py [--only mixed|ramp] [--json FILE] [--out DIR] [--run-timeout S] [--cold]

    python3 scripts/two_gpus.py                      # specs/mixed.yaml, then specs/ramp.yaml
    python3 scripts/two_gpus.py --only mixed --json two-gpus.json --out results/two-gpus

Each run is ``driver-gemm run SPEC --device 0`` and ``driver-gemm run SPEC
--devices 0,1`` in a fresh process, timed from start to exit (the process's
start and the GPUs' worker processes included). Before them, ``driver-gemm plan SPEC`` compiles the spec's kernels
into the disk cache and reads the package's files once, so that neither run
pays a cold cache the other does not. Per spec it prints both times, the
speed-up, each GPU's busy seconds in the two-GPU run (the tasks it ran, and
the sum of its cases' steps), the seconds its worker process took to start (and where they went),
each run's timeline (`driver_gemm.timeline`: seconds from the process's
start to its moments, e.g. each GPU's first and last case, to its exit; the
moments after the results file was written are kept beside it, in
NAME-moments.json), how many of the
two-GPU run's cases were planned from launch times an earlier run recorded
(`driver_gemm.runners.estimates`: the one-GPU run just before records
them), and what the cost model (`driver_gemm.runners.schedule`), fed the launch
times the one-GPU run measured, predicted for the two-GPU run. The JSON
written with --json holds the same, rewritten after each spec, so a run cut
short keeps the specs it finished.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECS = {"mixed": ROOT / "specs" / "mixed.yaml", "ramp": ROOT / "specs" / "ramp.yaml"}


# `driver-gemm run` whose whole timeline (`driver_gemm.timeline`) is kept: the results file has the moments up
# to its writing; the rest (the tables, the workers let go, the moment of the command's exit) are written to the
# file named first, as the command exits (its `console` ends the process with os._exit, which runs no atexit
# hook: that call is where they are written).
RUN_KEEPING_MOMENTS = """
import json, os, sys
from driver_gemm import timeline
moments, exit_now = sys.argv.pop(1), os._exit
def exit_keeping_moments(code):
    timeline.mark("exit")
    with open(moments, "w") as out:
        json.dump(timeline.marks(), out)
    exit_now(code)
os._exit = exit_keeping_moments
from driver_gemm.cli.main import console
console()
"""


def moments_file(results: Path) -> Path:
    return results.with_name(results.stem + "-moments.json")


def timed_run(spec: Path, placement: list[str], results: Path, timeout_s: float) -> float:
    command = [sys.executable, "-c", RUN_KEEPING_MOMENTS, str(moments_file(results)), "run", str(spec), "-q",
               *placement, "--json", str(results)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, timeout=timeout_s)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):          # 1: some case failed, the timing still counts
        raise SystemExit(f"{' '.join(command)} exited with {done.returncode}")
    return seconds


def busy(results: Path) -> dict:
    """Per GPU of a run: seconds of its tasks, of its cases' steps, its cases, its worker processes' start-up."""
    run = json.loads(results.read_text())
    gpus: dict[str, dict] = {}
    for case in run["cases"]:
        entry = gpus.setdefault(str((case.get("device") or {}).get("ordinal")), {"cases": 0, "steps_s": 0.0})
        entry["cases"] += 1
        entry["steps_s"] += sum((case.get("phases") or {}).values())
    for task in run["settings"].get("tasks", []):
        entry = gpus.setdefault(str(task["device"]), {"cases": 0, "steps_s": 0.0})
        entry["tasks"] = entry.get("tasks", 0) + 1
        entry["tasks_s"] = entry.get("tasks_s", 0.0) + task["wall_s"]
    for held in run["settings"].get("gpu_workers", []):
        entry = gpus.setdefault(str(held["device"]), {})
        entry["worker_start_s"], entry["start_steps"] = held.get("worker_start_s"), held.get("start_steps")
    if "worker_start_s" in run["settings"] and len(gpus) == 1:
        entry = next(iter(gpus.values()))
        entry["worker_start_s"] = run["settings"]["worker_start_s"]
        entry["start_steps"] = run["settings"].get("worker_start_steps")
    return {ordinal: {key: round(value, 2) if isinstance(value, float) else value for key, value in entry.items()}
            for ordinal, entry in sorted(gpus.items())}


def timeline_of(results: Path) -> dict:
    """The run's moments (seconds since its process started) to its exit, and how its tasks were estimated."""
    settings = json.loads(results.read_text())["settings"]
    moments = dict(settings.get("timeline_s", {}))
    if moments_file(results).exists():
        moments.update(json.loads(moments_file(results).read_text()))
    return {"timeline_s": dict(sorted(moments.items(), key=lambda item: item[1])),
            "estimates": settings.get("estimates")}


def inside_run_s(results: Path) -> float:
    """Seconds from the run's start to its end as the results record them (to the second): the rest is outside the run."""
    from datetime import datetime

    run = json.loads(results.read_text())
    return (datetime.fromisoformat(run["finished"]) - datetime.fromisoformat(run["started"])).total_seconds()


def predicted(spec_path: Path, one_gpu_results: Path) -> dict:
    """The cost model's seconds for one and two GPUs, fed the launch medians the one-GPU run measured."""
    sys.path.insert(0, str(ROOT))
    from driver_gemm.runners.schedule import CostModel, predicted_run_s
    from driver_gemm.specfile import load_spec

    launch_ms = {(c["name"], c["shape"]["label"]): c["timing"]["median_ms"]
                 for c in json.loads(one_gpu_results.read_text())["cases"] if c.get("timing")}
    spec, model = load_spec(spec_path), CostModel(launch_ms=launch_ms)
    return {"one_gpu_s": round(predicted_run_s(spec, 1, model), 1), "two_gpus_s": round(predicted_run_s(spec, 2, model), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=sorted(SPECS), action="append", help="run only this spec (repeatable)")
    parser.add_argument("--json", type=Path, help="write the timings here")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "two-gpus", help="folder for results files")
    parser.add_argument("--run-timeout", type=float, default=420.0, help="seconds any one run may take")
    parser.add_argument("--cold", action="store_true",
                        help="before the two-GPU run, also time one planned without remembered launch times (as "
                             "a spec's first run on these GPUs is): the launch times are forgotten for it")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report = {}
    for name in args.only or ["mixed", "ramp"]:
        spec = SPECS[name]
        subprocess.run([sys.executable, "-m", "driver_gemm", "plan", str(spec)], cwd=ROOT, stdout=subprocess.DEVNULL,
                       timeout=120)
        single, double = args.out / f"{name}-1gpu.json", args.out / f"{name}-2gpu.json"
        one = timed_run(spec, ["--device", "0"], single, args.run_timeout)
        if args.cold:
            sys.path.insert(0, str(ROOT))
            from driver_gemm.cuda import cache

            shutil.rmtree(cache.directory() / "estimates", ignore_errors=True)
            cold = args.out / f"{name}-2gpu-cold.json"
            cold_s = timed_run(spec, ["--device", "0,1"], cold, args.run_timeout)
            print(f"{name}: two GPUs without remembered launch times {cold_s:.1f} s, speed-up {one / cold_s:.2f}x "
                  f"({busy(cold)}; {timeline_of(cold)})", flush=True)
        two = timed_run(spec, ["--device", "0,1"], double, args.run_timeout)
        report[name] = {"one_gpu_s": round(one, 1), "two_gpus_s": round(two, 1), "speedup": round(one / two, 3),
                        "one_gpu_run_s": inside_run_s(single), "two_gpus_run_s": inside_run_s(double),
                        "one_gpu": busy(single), "two_gpus": busy(double), "model": predicted(spec, single),
                        "one_gpu_timeline": timeline_of(single), "two_gpus_timeline": timeline_of(double),
                        "results": [str(single), str(double)]}
        if args.json:
            run = json.loads(single.read_text())
            report["environment"] = {**run["environment"], "started": report.get("environment", {}).get(
                "started", run["started"])}
            args.json.write_text(json.dumps(report, indent=1) + "\n")
        print(f"{name}: one GPU {one:.1f} s, two GPUs {two:.1f} s, speed-up {one / two:.2f}x "
              f"(model: {report[name]['model']['one_gpu_s']} s and {report[name]['model']['two_gpus_s']} s; "
              f"inside the runs: {report[name]['one_gpu_run_s']:.0f} s and {report[name]['two_gpus_run_s']:.0f} s)",
              flush=True)
        for ordinal, entry in report[name]["two_gpus"].items():
            print(f"  GPU {ordinal}: {entry.get('tasks', 0)} tasks in {entry.get('tasks_s', 0.0):.1f} s, "
                  f"{entry.get('cases', 0)} cases whose steps took {entry.get('steps_s', 0.0):.1f} s, "
                  f"worker start {entry.get('worker_start_s')} {entry.get('start_steps') or ''}", flush=True)
        one_gpu = next(iter(report[name]["one_gpu"].values()), {})
        print(f"  one GPU: worker start {one_gpu.get('worker_start_s')} {one_gpu.get('start_steps') or ''}",
              flush=True)
        for placement, seconds in (("one GPU", one), ("two GPUs", two)):
            moments = report[name][f"{'one_gpu' if placement == 'one GPU' else 'two_gpus'}_timeline"]
            print(f"  timeline, {placement} (s since start; exit at {seconds:.1f}): "
                  + ", ".join(f"{moment} {at:.2f}" for moment, at in moments["timeline_s"].items())
                  + (f"; estimates {moments['estimates']}" if moments["estimates"] else ""), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
