"""Benchmark: cold NVRTC compile time of a spec's kernels, and start-up time with a warm cache.

usage: python3 scripts/bench_compile.py [SPEC] [--json FILE]

Cold: every source compiled with the cache off. Warm: a fresh Python process
that imports driver-gemm, loads the spec and gets every CUBIN from the cache
(what `driver-gemm run` pays before its first launch). Needs no GPU.
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
WARM_START = """
import time, sys
began = time.perf_counter()
from driver_gemm.planning.build import compile_spec
from driver_gemm.specfile import load_spec
compiled = compile_spec(load_spec(sys.argv[1]), "sm_90")
assert all(not isinstance(c, Exception) and c.from_cache for c in compiled.values())
print(time.perf_counter() - began)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec", nargs="?", default=str(ROOT / "specs" / "seed.yaml"),
                        help="the spec whose kernels are compiled (default: specs/seed.yaml)")
    parser.add_argument("--json", help="write the timings here as JSON")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from driver_gemm.cuda.compile import compile_source, nvrtc_version
    from driver_gemm.specfile import load_spec

    spec = load_spec(args.spec)
    with tempfile.TemporaryDirectory() as cache_dir:
        os.environ["DRIVER_GEMM_CACHE_DIR"] = cache_dir
        per_kernel = {}
        began = time.perf_counter()
        for kernel in spec.kernels:
            cubin = compile_source(kernel.source, [kernel.instance], kernel.target("sm_90"), kernel.options)
            per_kernel[kernel.label] = cubin.compile_seconds
        cold = time.perf_counter() - began
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        warm = [float(subprocess.run([sys.executable, "-c", WARM_START, args.spec], env=env, check=True,
                                     capture_output=True, text=True).stdout) for _ in range(3)]
    print(f"NVRTC {'.'.join(map(str, nvrtc_version()))}, spec {spec.name}, {len(spec.kernels)} kernels")
    for label, seconds in per_kernel.items():
        print(f"  cold compile {label:40s} {seconds * 1e3:8.1f} ms")
    print(f"cold compile, all kernels: {cold:.3f} s")
    print(f"warm-cache start (import + spec + {len(spec.kernels)} cache hits), best of 3: {min(warm):.3f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"spec": spec.name, "nvrtc": list(nvrtc_version()),
                                               "cold_seconds": cold, "per_kernel_seconds": per_kernel,
                                               "warm_start_seconds": warm}, indent=1))


if __name__ == "__main__":
    main()
