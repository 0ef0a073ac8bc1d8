"""Two runs side by side: each case matched by kernel (with its parameters), shape and GPU, and judged.

A kernel whose params a ``dispatch:`` table chose is matched by its name alone, so that a shape whose
pick changed between the runs is compared as one case (`Comparison.params_changed` says so) rather
than as one GONE and one NEW.

A timing difference counts only beyond the noise both runs measured: overlapping interquartile
ranges are the SAME, else FASTER or SLOWER by the ratio of the medians; where both cases keep raw
samples, `samples_verdict`'s rank test decides. A case that passed and now does not is BROKEN, the
reverse FIXED; cases in one run only are NEW or GONE. Pure: it reads results, never a GPU. Reading
a comparison: docs/timing.md.
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass

import numpy as np

from ..measure.stats import TimingSummary, mann_whitney_u
from ..errors import WrongArgumentType, WrongArgumentValue, flag_argument
from ..results.read import load_results
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

    @property
    def product_changed(self) -> str | None:
        """What differs between the two runs' products of this case, where its times are not of the same work: the
        batch's count of matrices, or the groups' rows (``groups of rows 512, 512 -> 300, 724``); None where they
        match or a side has no typed operands."""
        before, after = self.old, self.new
        if before is None or after is None or before.operands is None or after.operands is None:
            return None
        if before.matrices != after.matrices:    # a record without a batch is of one matrix, as its FLOPs count it
            return f"a batch of {before.matrices} -> {after.matrices} matrices"
        rows = [(part.groups or {}).get("rows") if isinstance(part.groups, dict) else None
                for part in (before.operands, after.operands)]
        if rows[0] != rows[1]:
            shown = [", ".join(map(str, found[:8])) + (", ..." if len(found) > 8 else "")
                     if isinstance(found, list) else "none" for found in rows]
            return f"groups of rows {shown[0]} -> {shown[1]}"
        return None

    @property
    def params_changed(self) -> tuple[str, str] | None:
        """(old label, new label) of a dispatched kernel whose pick for this shape changed between the runs."""
        if self.old is None or self.new is None or self.old.kernel == self.new.kernel:
            return None
        return self.old.kernel, self.new.kernel


def _key(case: CaseResult, across_gpus: bool) -> tuple[str, str, str]:
    gpu = "" if across_gpus else (case.device.name or "")
    return case.name if case.dispatch is not None else case.kernel, case.shape.label, gpu


# Two-sided significance below which a difference of the samples' ranks counts as real.
SIGNIFICANCE = 0.01
MIN_RANK_SAMPLES = 10     # below this a rank test cannot reach SIGNIFICANCE: the summary rule decides


def _usable(timing: TimingSummary | None) -> bool:
    return timing is not None and all(
        isinstance(value, (int, float)) and math.isfinite(value) and value > 0
        for value in (timing.median_ms, timing.q1_ms, timing.q3_ms))


def samples_verdict(old: TimingSummary, new: TimingSummary, threshold: float = 0.0) -> str | None:
    """SAME, FASTER or SLOWER from the raw samples of both summaries; None when either has too few.

    A difference counts when the Mann-Whitney rank test over the samples calls
    it significant (`SIGNIFICANCE`), the interquartile ranges do not overlap
    and the medians differ by more than `threshold`: with thousands of samples
    a rank test alone would call a shift far inside the noise real. Replace
    the rule here to change how every comparison (and `tune`'s tie) is judged.
    """
    old_samples = getattr(old, "samples_ms", None) or ()
    new_samples = getattr(new, "samples_ms", None) or ()
    if len(old_samples) < MIN_RANK_SAMPLES or len(new_samples) < MIN_RANK_SAMPLES:
        return None
    if summary_verdict(old, new, threshold) == SAME:
        return SAME
    change = new.median_ms / old.median_ms - 1
    if mann_whitney_u(old_samples, new_samples).p_value >= SIGNIFICANCE:
        return SAME
    return SLOWER if change > 0 else FASTER


def summary_verdict(old: TimingSummary, new: TimingSummary, threshold: float = 0.0) -> str:
    """SAME when the interquartile ranges overlap or the medians are within `threshold`; else FASTER or SLOWER."""
    change = new.median_ms / old.median_ms - 1
    overlap = old.q1_ms <= new.q3_ms and new.q1_ms <= old.q3_ms
    if overlap or abs(change) <= threshold:
        return SAME
    return SLOWER if change > 0 else FASTER


def judge(old: CaseResult, new: CaseResult, threshold: float = 0.0) -> tuple[str, float | None]:
    """The verdict on one matched case, and the relative change of its median time."""
    if old.ok and not new.ok:
        return BROKEN, None
    if not old.ok and new.ok:
        return FIXED, None
    if not _usable(old.timing) or not _usable(new.timing):
        return UNTIMED, None
    change = new.timing.median_ms / old.timing.median_ms - 1
    verdict = samples_verdict(old.timing, new.timing, threshold)
    return verdict or summary_verdict(old.timing, new.timing, threshold), change


def _run_argument(run, name: str) -> RunResult:
    if isinstance(run, RunResult):
        return run
    if isinstance(run, (str, os.PathLike)):
        return load_results(str(run))
    raise WrongArgumentType(f"compare_runs: {name} must be a RunResult (from run_spec or load_results(path)) or the "
                            f"path of a results file, got {type(run).__name__}")


def compare_runs(old: RunResult | str | os.PathLike[str], new: RunResult | str | os.PathLike[str], *,
                 threshold: float = 0.0,
                 across_gpus: bool = False) -> list[Comparison]:
    """Every case of either run, matched and judged, in the new run's order (then the gone ones).

    `old` and `new` are `RunResult`s, or the paths of results files (read with `load_results`); `threshold` is a
    fraction of the old time (0.05: 5%) that a change must pass to count, 0 or more.
    """
    # numbers.Real: NumPy's numbers too, taken as Python's
    if isinstance(threshold, (bool, np.bool_)) or not isinstance(threshold, numbers.Real):
        raise WrongArgumentType(f"compare_runs: threshold is a fraction such as 0.05, got {type(threshold).__name__}")
    threshold = float(threshold)
    if not 0 <= threshold < 1e4:      # also refuses NaN; no correct caller passes these (a ValueError: errors.py)
        raise WrongArgumentValue(f"compare_runs: threshold is a fraction from 0 to below 10,000 (1,000,000%), got "
                                 f"{threshold:g}")
    # "no" is truthy: it would match cases of different GPUs as one
    across_gpus = flag_argument("compare_runs", "across_gpus", across_gpus)
    old, new = _run_argument(old, "old"), _run_argument(new, "new")
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
