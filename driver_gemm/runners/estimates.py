"""What each case cost in earlier runs, remembered so that a run on several GPUs deals out its work by it.

Without them the cost model (`schedule.CostModel`) knows a case only by its FLOPs and guesses,
which can be off by a factor of several. After each run, every case is remembered under the GPU's
name and the spec's name: its wall seconds and, when timed, its median launch. They only steer the
dealing: a stale figure can cost balance, never a result. They live beside the CUBIN cache, under
``estimates/``, in its checksummed format; ``DRIVER_GEMM_NO_CACHE=1`` turns them off.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..cuda import cache
from ..results.records import RunResult

_MAGIC = b"driver-gemm-estimates-v1\n"
# Cases kept per file: a long sweep's are all kept, a runaway one's are not (the oldest go first).
MAX_ENTRIES = 100_000


def path_for(gpu: str, spec_name: str) -> Path:
    key = hashlib.sha256(json.dumps([gpu, spec_name]).encode()).hexdigest()
    return cache.directory() / "estimates" / key[:2] / f"{key}.json"


@dataclass
class Remembered:
    """What earlier runs recorded, by (kernel label, shape label): median launch (ms) and case wall seconds."""

    launch_ms: dict[tuple[str, str], float] = field(default_factory=dict)
    case_s: dict[tuple[str, str], float] = field(default_factory=dict)

    def update(self, other: "Remembered") -> None:
        """Take `other`'s figures over these (a key taken anew moves to the end: the newest are dropped last)."""
        for mine, theirs in ((self.launch_ms, other.launch_ms), (self.case_s, other.case_s)):
            for key, value in theirs.items():
                mine.pop(key, None)
                mine[key] = value


def _figure(value) -> float | None:
    """A stored figure: a finite positive number, else None (missing or damaged)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(value)
    return None


def recall(spec_name: str, gpu: str | None) -> Remembered:
    """What is remembered for `spec_name` on GPUs named `gpu` (nothing, when caching is off or nothing is)."""
    known = Remembered()
    if not gpu or not cache.enabled():
        return known
    body = cache.read_entry(path_for(gpu, spec_name), _MAGIC)
    try:
        rows = json.loads(body)["cases"] if body is not None else []
    except (ValueError, KeyError, TypeError):
        return known
    for row in rows if isinstance(rows, list) else []:
        if not (isinstance(row, list) and len(row) == 4 and all(isinstance(text, str) for text in row[:2])):
            continue
        launch_ms, case_s = _figure(row[2]), _figure(row[3])
        if launch_ms is not None:
            known.launch_ms[row[0], row[1]] = launch_ms
        if case_s is not None:
            known.case_s[row[0], row[1]] = case_s
    return known


def remember(result: RunResult) -> int:
    """Add the cases of `result` that ran to what is remembered for its spec, per GPU name; how many were stored."""
    if not cache.enabled():
        return 0
    by_gpu: dict[str, Remembered] = {}
    for case in result.cases:
        gpu = case.device.name
        if not gpu or case.not_run:
            continue
        measured = by_gpu.setdefault(gpu, Remembered())
        key = (case.kernel, case.shape.label)
        launch_ms = _figure(case.timing.median_ms) if case.timing is not None else None
        # a record a caller built may hold phases of any kind: only step name -> seconds is a cost
        phases = case.phases if isinstance(case.phases, dict) else {}
        case_s = _figure(sum(value for value in phases.values() if _figure(value) is not None))
        if launch_ms is not None:
            measured.launch_ms[key] = launch_ms
        if case_s is not None:
            measured.case_s[key] = case_s
    stored = 0
    for gpu, measured in by_gpu.items():
        known = recall(result.spec, gpu)
        known.update(measured)
        keys = list(dict.fromkeys([*known.case_s, *known.launch_ms]))[-MAX_ENTRIES:]
        rows = [[label, shape, known.launch_ms.get((label, shape)), known.case_s.get((label, shape))]
                for label, shape in keys]
        cache.write_entry(path_for(gpu, result.spec), _MAGIC, json.dumps({"cases": rows}).encode())
        stored += len(set(measured.launch_ms) | set(measured.case_s))
    return stored
