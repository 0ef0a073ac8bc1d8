"""Compile every kernel of some specs in parallel threads, as `driver-gemm run` does, and report any kernel
whose ptxas report (registers, shared memory) is missing from its compile's log.

    python3 scripts/compile_check.py specs/seed.yaml specs/fast.yaml --rounds 3

NVRTC compiling in several threads has been seen to return an empty log; `compile` then compiles once
more and, if the report is still missing, reads the resources from the CUBIN (its log says so). This
counts the kernels whose resources are still missing (a failure) and those read from the CUBIN.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from driver_gemm.cuda.compile import compile_source  # noqa: E402
from driver_gemm.specfile import load_spec  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("specs", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 4)
    args = parser.parse_args()
    jobs = []
    for path in args.specs:
        jobs += [(k.source, k.instance, k.target("sm_90")) for k in load_spec(path).kernels if k.binary is None]
    jobs *= args.rounds

    def one(job):
        source, instance, arch = job
        built = compile_source(source, [instance], arch, (), use_cache=False)
        return instance, built

    missing = from_image = 0
    with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
        for instance, built in pool.map(one, jobs):
            from_image += "read from the CUBIN" in built.log
            if built.symbol(instance) not in built.resources:
                missing += 1
                print(f"MISSING {instance}: resources for {list(built.resources)}; log {len(built.log)} chars:")
                print("    " + "\n    ".join(built.log.splitlines()[:12]), flush=True)
    print(f"{len(jobs)} compiles on {args.threads} threads: {missing} without resources, {from_image} with them "
          f"read from the CUBIN after the log came back without ptxas's report twice", flush=True)
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
