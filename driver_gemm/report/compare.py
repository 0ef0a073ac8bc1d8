"""Two runs side by side: each case matched by kernel (with its parameters), shape and GPU, and judged.

A timing difference counts only when it is larger than the noise both runs
measured: two cases whose interquartile ranges overlap are the SAME; beyond
that the new one is FASTER or SLOWER by the ratio of the medians. A case that
passed and now does not is BROKEN, the reverse FIXED; cases in one run only
are NEW or GONE. Pure: it reads results, never a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..results.records import CaseResult, RunResult

SAME, FASTER, SLOWER, BROKEN, FIXED, NEW, GONE, UNTIMED = (
    "SAME", "FASTER", "SLOWER", "BROKEN", "FIXED", "NEW", "GONE", "UNTIMED")
REGRESSIONS = (SLOWER, BROKEN)


@dataclass
class Comparison:
    """One case in both runs (or in one of them) and the verdict on it."""

    kernel: str
    shape: str
    gpu: str
    old: CaseResult | None
    new: CaseResult | None
    verdict: str
    change: float | None = None      # new median / old median - 1

    @property
    def regression(self) -> bool:
        return self.verdict in REGRESSIONS


def _key(case: CaseResult, across_gpus: bool) -> tuple[str, str, str]:
    gpu = "" if across_gpus else (case.device or {}).get("name", "")
    return case.kernel, case.shape.label, gpu


def judge(old: CaseResult, new: CaseResult, threshold: float = 0.0) -> tuple[str, float | None]:
    """The verdict on one matched case, and the relative change of its median time."""
    if old.ok and not new.ok:
        return BROKEN, None
    if not old.ok and new.ok:
        return FIXED, None
    if old.timing is None or new.timing is None:
        return UNTIMED, None
    change = new.timing.median_ms / old.timing.median_ms - 1
    overlap = old.timing.q1_ms <= new.timing.q3_ms and new.timing.q1_ms <= old.timing.q3_ms
    if overlap or abs(change) <= threshold:
        return SAME, change
    return (SLOWER if change > 0 else FASTER), change


def compare_runs(old: RunResult, new: RunResult, *, threshold: float = 0.0,
                 across_gpus: bool = False) -> list[Comparison]:
    """Every case of either run, matched and judged, in the new run's order (then the gone ones)."""
    old_cases = {_key(case, across_gpus): case for case in old.cases}
    seen = set()
    out = []
    for case in new.cases:
        key = _key(case, across_gpus)
        seen.add(key)
        before = old_cases.get(key)
        if before is None:
            out.append(Comparison(*key, None, case, NEW))
        else:
            verdict, change = judge(before, case, threshold)
            out.append(Comparison(*key, before, case, verdict, change))
    for key, case in old_cases.items():
        if key not in seen:
            out.append(Comparison(*key, case, None, GONE))
    return out
