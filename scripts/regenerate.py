"""Regenerate the headline results on this GPU machine and render docs/performance.md from them.

usage: python3 scripts/regenerate.py [--out DIR] [--page FILE] [--only STEP ...] [--budget SECONDS]

Run on a GPU machine after `. scripts/gpu_env.sh`. Each step below runs in its own process under its own
timeout (cut short with SIGINT, so that a run keeps the cases it finished); a step that fails or times out is
recorded and the next one runs. The results land in DIR/<gpu-name>/ (default bench/results/nvidia-h200/ on
an H200: the folder is named after the GPU), one gzip-compressed file per headline, beside `regenerate.json`,
which records each step's command, exit status, seconds and the tail of its output. The page is then rendered
from that folder by scripts/render_performance.py (which also runs offline, from committed files).

Steps (about 6 minutes in all on one H200; two-gpus only where the machine has two GPUs or more):
  seed       specs/seed.yaml: the seed kernels v0..v4 against cuBLAS              (~15 s)
  fp32       specs/fast.yaml at 4096^3: the SIMT ladder v4..v8                     (~20 s)
  tf32       specs/tma.yaml, v10 and v11 at 4096^3 and 8192^3                      (~30 s)
  bf16       specs/tma-bf16.yaml at 4096^3 and 8192^3: v12 and its persistent forms (~3 min)
  baselines  scripts/baseline_check.py --samples do-bench: our cuBLASLt rows, sampled as do_bench samples, against
             torch + triton on the same operands, interleaved (~75-100 s)
  two-gpus   scripts/two_gpus.py --only mixed: specs/mixed.yaml on one GPU and on two (~45 s)
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gzip
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN = ["python3", "-m", "driver_gemm", "run"]
LARGE = ["-s", "4096x4096x4096", "-s", "8192x8192x8192"]


@dataclass(frozen=True)
class Step:
    """One headline: the command that makes it (`{json}`: where it writes), its file and its timeout."""

    name: str
    title: str
    command: tuple[str, ...]
    timeout_s: float
    min_gpus: int = 1

    @property
    def file(self) -> str:
        return f"{self.name}.json.gz"


STEPS = (
    Step("seed", "Seed kernels (specs/seed.yaml)", (*RUN, "specs/seed.yaml", "-q", "--json", "{json}"), 60),
    Step("fp32", "FP32 ladder (specs/fast.yaml at 4096^3)",
         (*RUN, "specs/fast.yaml", "-s", "4096x4096x4096", "-q", "--json", "{json}"), 60),
    Step("tf32", "TF32 ladder (specs/tma.yaml: v10, v11)",
         (*RUN, "specs/tma.yaml", "-k", "v10", "-k", "v11", *LARGE, "-q", "--json", "{json}"), 90),
    Step("bf16", "BF16 ladder (specs/tma-bf16.yaml)", (*RUN, "specs/tma-bf16.yaml", *LARGE, "-q", "--json", "{json}"),
         270),
    Step("baselines", "Baselines check (cuBLASLt against torch and triton)",
         ("python3", "scripts/baseline_check.py", "--samples", "do-bench", "--json", "{json}"), 160),
    Step("two-gpus", "Two GPUs (specs/mixed.yaml on one GPU and on two)",
         ("python3", "scripts/two_gpus.py", "--only", "mixed", "--json", "{json}", "--out", "{work}/two-gpus"), 120,
         min_gpus=2),
)
STEP_NAMES = tuple(step.name for step in STEPS)
MANIFEST = "regenerate.json"
TAIL_LINES = 40


def folder_name(gpu_name: str) -> str:
    """The results folder of a GPU: its name in lower case, words joined by '-' ("NVIDIA H200" -> nvidia-h200)."""
    return re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-") or "gpu"


def local_gpus() -> list[str]:
    """The names of this machine's GPUs, from nvidia-smi (or the CUDA driver, through driver-gemm, without it)."""
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30)
        names = [line.strip() for line in done.stdout.splitlines() if line.strip()]
        if done.returncode == 0 and names:
            return names
    except (OSError, subprocess.TimeoutExpired):
        pass
    sys.path.insert(0, str(ROOT))
    import driver_gemm as dg

    return [dg.read_properties(ordinal).name for ordinal in range(dg.device_count())]


def command_line(step: Step, json_path: str = "FILE.json", work: str = ".") -> list[str]:
    """The step's command, writing `json_path`, with its scratch files under `work`."""
    return [part.replace("{json}", json_path).replace("{work}", work) for part in step.command]


def run_step(step: Step, work: Path, timeout_s: float) -> dict:
    """Run one step in its own process group: SIGINT to it at its timeout, SIGKILL to the group 15 s later.

    Returns the step's record for the manifest (its command with the scratch folder left out of the paths).
    """
    written = work / f"{step.name}.json"
    command = command_line(step, str(written), str(work))
    log = work / f"{step.name}.log"
    started = time.monotonic()
    with open(log, "w") as output:
        executable = [sys.executable if part == "python3" else part for part in command]
        process = subprocess.Popen(executable, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        timed_out = False
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            process.send_signal(signal.SIGINT)     # the command itself: it stops its workers and keeps what finished
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    seconds = time.monotonic() - started
    tail = log.read_text(errors="replace").splitlines()[-TAIL_LINES:]
    print("\n".join(tail), flush=True)
    shown = [part.replace(str(work) + "/", "") for part in command]
    return {"name": step.name, "command": shlex.join(shown), "exit_code": process.returncode,
            "timed_out": timed_out, "timeout_s": round(timeout_s), "seconds": round(seconds, 1), "output_tail": tail}


def keep(step: Step, work: Path, folder: Path) -> str | None:
    """Compress what the step wrote into the results folder: its whole file, else its case log (a run cut short)."""
    candidates = ((work / f"{step.name}.json", step.file), (work / f"{step.name}.jsonl", f"{step.name}.jsonl.gz"))
    for written, name in candidates:
        if written.exists() and written.stat().st_size > 0:
            (folder / name).write_bytes(gzip.compress(written.read_bytes(), 9, mtime=0))
            return name
    return None


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results",
                        help="the results go into OUT/<gpu-name>/ (default: bench/results)")
    parser.add_argument("--page", type=Path, default=ROOT / "docs" / "performance.md",
                        help="the page rendered from them (default: docs/performance.md)")
    parser.add_argument("--only", choices=STEP_NAMES, action="append", help="run only this step (repeatable)")
    parser.add_argument("--budget", type=float, default=540.0,
                        help="seconds for all the steps together: a step gets at most what is left (default 540)")
    args = parser.parse_args(argv)
    started, clock = now(), time.monotonic()
    gpus = local_gpus()
    if not gpus:
        parser.error("no GPU on this machine")
    folder = args.out / folder_name(gpus[0])
    folder.mkdir(parents=True, exist_ok=True)
    for stale in [*folder.glob("*.json.gz"), *folder.glob("*.jsonl.gz")]:   # a step that fails leaves no old figure
        if args.only is None or stale.name.split(".")[0] in args.only:
            stale.unlink()
    manifest_path = folder / MANIFEST
    previous = json.loads(manifest_path.read_text()) if args.only and manifest_path.exists() else {}
    records = {record["name"]: record for record in previous.get("steps", [])}
    print(f"=== {len(gpus)} GPU(s): {', '.join(gpus)}; results into {folder}", flush=True)
    with tempfile.TemporaryDirectory(prefix="regenerate-") as scratch:
        work = Path(scratch)
        for step in STEPS:
            if args.only and step.name not in args.only:
                continue
            if len(gpus) < step.min_gpus:
                records[step.name] = {"name": step.name, "command": shlex.join(command_line(step)),
                                      "skipped": f"needs {step.min_gpus} GPUs; this machine has {len(gpus)}"}
                print(f"=== {step.name}: skipped ({records[step.name]['skipped']})", flush=True)
                continue
            left = args.budget - (time.monotonic() - clock)
            if left < 20:
                records[step.name] = {"name": step.name, "command": shlex.join(command_line(step)),
                                      "skipped": f"the budget of {args.budget:g} s was spent"}
                print(f"=== {step.name}: skipped (budget spent)", flush=True)
                continue
            print(f"=== {step.name} ({now()}; at most {min(step.timeout_s, left):.0f} s)", flush=True)
            record = run_step(step, work, min(step.timeout_s, left))
            record["file"] = keep(step, work, folder)
            records[step.name] = record
            print(f"=== {step.name}: exit {record['exit_code']} in {record['seconds']} s"
                  + (" (timed out)" if record["timed_out"] else "") + f", kept {record['file']}", flush=True)
    manifest = {"command": "python3 scripts/regenerate.py", "started": previous.get("started", started),
                "finished": now(), "gpus": gpus,
                "steps": [records[name] for name in STEP_NAMES if name in records]}
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from render_performance import render

    args.page.parent.mkdir(parents=True, exist_ok=True)
    args.page.write_text(render(folder))
    print(f"=== page: {args.page}", flush=True)
    print("=== summary")
    for record in manifest["steps"]:
        print(f"{record['name']}: " + (f"skipped ({record['skipped']})" if "skipped" in record else
                                       f"exit {record['exit_code']} in {record['seconds']} s, file {record['file']}"))
    failed = [r for r in manifest["steps"] if "skipped" not in r and (r["exit_code"] != 0 or not r["file"])]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
