"""Launch times remembered from earlier runs, so that a run on several GPUs deals out its work by what it costs.

Before a run, the cost model (`schedule.CostModel`) knows a kernel only by
its FLOPs and an assumed speed (10 TFLOP/s), while the kernels people run
span 0.5 to 50 TFLOP/s on an H200: a naive kernel's task at 8192^3 took
28 s where 15 were estimated, and the GPU that drew it finished last. So
after each ``driver-gemm run``, every timed case's median launch is
remembered under the GPU's name and the spec's name, by (kernel label,
shape); a later run of that spec on several GPUs of the same model plans
with those times (`CostModel.launch_ms`), and with the assumed speed for a
case never timed there. They only steer the dealing: a stale time (the
kernel changed since) can cost balance, never a result, and the run records
how many of its cases were planned from a remembered time
(``settings["estimates"]``).

They live beside the CUBIN cache, under ``estimates/``, one file per GPU
name and spec name in the cache's checksummed format (`cuda.cache`);
``DRIVER_GEMM_NO_CACHE=1`` turns them off, and a file that does not read
back whole is ignored (and replaced by the next run's).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from ..cuda import cache
from ..results.records import RunResult

_MAGIC = b"driver-gemm-estimates-v1\n"
# Cases kept per file: a long sweep's are all kept, a runaway one's are not (the oldest go first).
MAX_ENTRIES = 100_000


def path_for(gpu: str, spec_name: str) -> Path:
    key = hashlib.sha256(json.dumps([gpu, spec_name]).encode()).hexdigest()
    return cache.directory() / "estimates" / key[:2] / f"{key}.json"


def recall(spec_name: str, gpu: str | None) -> dict[tuple[str, str], float]:
    """The launch medians (ms) remembered for `spec_name` on GPUs named `gpu`, by (kernel label, shape label)."""
    if not gpu or not cache.enabled():
        return {}
    body = cache.read_entry(path_for(gpu, spec_name), _MAGIC)
    try:
        rows = json.loads(body)["launch_ms"] if body is not None else []
    except (ValueError, KeyError, TypeError):
        return {}
    known = {}
    for row in rows if isinstance(rows, list) else []:
        if (isinstance(row, list) and len(row) == 3 and all(isinstance(text, str) for text in row[:2])
                and isinstance(row[2], (int, float)) and math.isfinite(row[2]) and row[2] > 0):
            known[row[0], row[1]] = float(row[2])
    return known


def remember(result: RunResult) -> int:
    """Add `result`'s timed cases to what is remembered for its spec, per GPU name; how many were stored."""
    if not cache.enabled():
        return 0
    by_gpu: dict[str, dict[tuple[str, str], float]] = {}
    for case in result.cases:
        gpu = (case.device or {}).get("name")
        if gpu and case.timing is not None and math.isfinite(case.timing.median_ms) and case.timing.median_ms > 0:
            by_gpu.setdefault(gpu, {})[case.kernel, case.shape.label] = case.timing.median_ms
    for gpu, measured in by_gpu.items():
        known = recall(result.spec, gpu)
        for key in measured:              # re-inserted at the end: the newest are the last dropped
            known.pop(key, None)
        known.update(measured)
        rows = [[label, shape, ms] for (label, shape), ms in list(known.items())[-MAX_ENTRIES:]]
        cache.write_entry(path_for(gpu, result.spec), _MAGIC, json.dumps({"launch_ms": rows}).encode())
    return sum(len(measured) for measured in by_gpu.values())
