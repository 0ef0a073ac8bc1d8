"""A tune's progress, as its bar shows it: records landed of those planned, the time left, and the best so far.

Pure state fed one record at a time, with the time given by the caller, so
that the estimate and the best are tested with a fake clock; `cli/tune.py`
draws it with rich on a terminal (elsewhere a tune prints a line per case).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..results.records import CaseResult
from ..status import Status


@dataclass
class TuneProgress:
    """Records landed of `planned` (every case of the spec: configurations and baseline rows), from `started`.

    The rate is of measured records only: configurations refused before any
    GPU work (INVALID) land at once, first, and would make the rest look fast.
    A budget in seconds caps the time left.
    """

    planned: int
    started: float
    budget_s: float | None = None
    done: int = 0
    failed: int = 0
    measured: int = 0
    best: dict[tuple[str, str], CaseResult] = field(default_factory=dict)   # by kernel name and shape
    current: tuple[str, str] | None = None          # the kernel and shape of the last configuration

    def record(self, case: CaseResult) -> None:
        """Count `case`; a passing, timed configuration faster than its kernel and shape's best becomes it."""
        self.done += 1
        self.failed += not case.ok
        if case.status != Status.INVALID:
            self.measured += 1
        if case.is_baseline:
            return
        key = (case.name, case.shape.label)
        self.current = key
        if case.ok and case.median_ms is not None:
            best = self.best.get(key)
            if best is None or case.median_ms < best.median_ms:
                self.best[key] = case

    def eta_s(self, now: float) -> float | None:
        """Seconds left at `now`: the mean time of a measured record times the records left, at most what the
        time budget leaves; None before anything was measured, 0 once every planned record landed."""
        left = max(0, self.planned - self.done)
        if left == 0:
            return 0.0
        elapsed = max(0.0, now - self.started)
        budget_left = max(0.0, self.budget_s - elapsed) if self.budget_s is not None else None
        if self.measured == 0:
            return budget_left
        estimate = elapsed / self.measured * left
        return estimate if budget_left is None else min(estimate, budget_left)

    def best_text(self) -> str:
        """The best so far of the kernel and shape being searched, e.g. ``v8[BM=128,...] 2.87 ms``; ``-`` before one."""
        best = self.best.get(self.current) if self.current else None
        if best is None:
            return "-"
        return f"{best.kernel} {best.median_ms:.4g} ms"


def clock_text(seconds: float | None) -> str:
    """``1:02:03``, ``2:03`` or ``-:--`` (unknown): the time left as the bar prints it."""
    if seconds is None:
        return "-:--"
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
