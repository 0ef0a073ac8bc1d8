"""Figures that say the clock they were measured at: a row's median SM clock, "% of cuBLAS" at equal clock,
and runs compared at one clock.

A power-bound tensor-core GEMM's SM clock depends on what runs between samples, so a kernel row and its
vendor row may run a few percent apart in clock; its time then scales about as one over the clock. When
two rows compared differ by more than `CLOCK_TOLERANCE`, the kernel's time is also given scaled to the
vendor row's clock (t x f_kernel / f_vendor), marked, beside the figure as measured. Pure: reads results.
Why the clocks differ: docs/timing.md, "Clocks".
"""

from __future__ import annotations

import dataclasses
import math

from ..measure.stats import TimingSummary
from ..results.records import CaseResult, RunResult
from ..results.text import printable

CLOCK_TOLERANCE = 0.02        # rows or runs whose clocks differ by more are compared at equal clock too
EQUAL_CLOCK_MARK = "*"


def median_clock(case: CaseResult | None) -> float | None:
    """The case's median SM clock over its kept batches (MHz), where NVML read one."""
    clock = case.timing.sm_clock_mhz if case is not None and case.timing is not None else None
    return float(clock) if isinstance(clock, (int, float)) and math.isfinite(clock) and clock > 0 else None


def under_maximum(case: CaseResult) -> bool:
    """Whether the case ran under the GPU's maximum SM clock (the reference its throttle check reads)."""
    clock = median_clock(case)
    maximum = case.timing.sm_clock_reference_mhz if case.timing is not None else None
    return clock is not None and isinstance(maximum, (int, float)) and clock < maximum


def clock_ratio(case: CaseResult | None, other: CaseResult | None) -> float | None:
    """`case`'s clock over `other`'s, where both are known."""
    mine, theirs = median_clock(case), median_clock(other)
    return mine / theirs if mine is not None and theirs is not None else None


class TimedRows:
    """A run's timed rows by kernel label and shape, in the run's order: gathered once, so that finding the
    baseline row of every case of a run is one look-up each, not a pass over the run per case."""

    def __init__(self, run: RunResult):
        # The first timed row of each (label, shape), and of each (label, shape, GPU): a file may repeat a row
        # thousands of times, and a list of them searched per case would make a table quadratic in the repeats.
        self.first: dict[tuple, CaseResult] = {}
        self.first_on_gpu: dict[tuple, CaseResult] = {}
        for row in run.cases:
            if row.timing is not None:
                self.first.setdefault((row.kernel, row.shape), row)
                self.first_on_gpu.setdefault((row.kernel, row.shape, row.device.key), row)

    def baseline_case(self, case: CaseResult) -> CaseResult | None:
        """As the module's `baseline_case`, for a case of the run these rows are of."""
        label = case.baseline_label
        if label is None or case.is_baseline:
            return None
        if case.measured_against is not None:
            label = case.measured_against.kernel
        on_gpu = self.first_on_gpu.get((label, case.shape, case.device.key))
        return on_gpu if on_gpu is not None else self.first.get((label, case.shape))


def baseline_case(run: RunResult, case: CaseResult, rows: TimedRows | None = None) -> CaseResult | None:
    """The row whose time is `case`'s 100%: its baseline label, at its shape, on its GPU where several ran.
    `rows`: the run's `TimedRows`, where the caller looks up many cases of it."""
    return (rows or TimedRows(run)).baseline_case(case)


def vendor_clock(case: CaseResult, baseline: CaseResult | None) -> float | None:
    """The SM clock of the vendor time that `case`'s % of cuBLAS is of: the vendor's in the rounds it shared with
    the case (``measure.rounds``), else the baseline row's own."""
    return case.timed_in_rounds.vendor_sm_clock_mhz if case.timed_in_rounds is not None else median_clock(baseline)


def equal_clock_pct(case: CaseResult, baseline: CaseResult | None,
                    tolerance: float = CLOCK_TOLERANCE) -> float | None:
    """`case`'s % of cuBLAS with its time scaled to the clock of the vendor time it is of (`vendor_clock`), when
    the two clocks differ by more than `tolerance` (else None: the figure as measured stands)."""
    mine, theirs = median_clock(case), vendor_clock(case, baseline)
    if case.pct_cublas is None or mine is None or theirs is None or abs(mine / theirs - 1) <= tolerance:
        return None
    return case.pct_cublas * theirs / mine


# ------------------------------------------------------------------------------------ the results table

def clock_columns(run: RunResult, cases: list[CaseResult], rows: TimedRows | None = None) -> list[str]:
    """The clock columns a shape's table adds: ``SM MHz`` when a row ran under the maximum clock, ``% cuBLAS
    @clk`` when a row's clock differs from its baseline row's by more than `CLOCK_TOLERANCE`. `rows`: the
    run's `TimedRows`, where the caller has them."""
    columns = []
    if any(under_maximum(case) for case in cases):
        columns.append("SM MHz")
    rows = rows or TimedRows(run)
    if any(equal_clock_pct(case, rows.baseline_case(case)) is not None for case in cases):
        columns.append("% cuBLAS @clk")
    return columns


def clock_cells(run: RunResult, case: CaseResult, columns: list[str], rows: TimedRows | None = None) -> list[str]:
    """`case`'s cells of `clock_columns`."""
    cells = []
    for column in columns:
        if column == "SM MHz":
            clock = median_clock(case)
            cells.append(f"{clock:.0f}" if clock is not None else "-")
        else:
            pct = equal_clock_pct(case, baseline_case(run, case, rows))
            cells.append(f"{pct:.1f}{EQUAL_CLOCK_MARK}" if pct is not None else "-")
    return cells


def clock_notes(run: RunResult, cases: list[CaseResult], rows: TimedRows | None = None) -> list[str]:
    """The note under a table with an equal-clock column: what the marked figure is, row by row."""
    lines = []
    rows = rows or TimedRows(run)
    for case in cases:
        baseline = rows.baseline_case(case)
        pct = equal_clock_pct(case, baseline)
        if pct is not None:
            against = baseline.kernel if baseline is not None else case.baseline_label
            lines.append(f"{EQUAL_CLOCK_MARK} {case.kernel}: {case.pct_cublas:.1f}% of {against} as "
                         f"measured ({median_clock(case):.0f} MHz against {vendor_clock(case, baseline):.0f} MHz), "
                         f"{pct:.1f}% with its time scaled to the same clock")
    return lines


# ------------------------------------------------------------------------------------ runs compared

def scaled_timing(timing: TimingSummary, factor: float) -> TimingSummary:
    """`timing` with every time multiplied by `factor` (a clock ratio), its clock fields left as measured."""
    times = ("median_ms", "mean_ms", "min_ms", "max_ms", "stdev_ms", "q1_ms", "q3_ms", "total_ms")
    return dataclasses.replace(timing, **{name: getattr(timing, name) * factor for name in times},
                               samples_ms=tuple(float(f"{value * factor:.4g}") for value in timing.samples_ms))


def target_clock(*runs: RunResult) -> float | None:
    """The one clock runs are compared at: the highest maximum SM clock any of their cases recorded, else the
    highest median clock."""
    maxima = [case.timing.sm_clock_reference_mhz for run in runs for case in run.cases
              if case.timing is not None and isinstance(case.timing.sm_clock_reference_mhz, (int, float))]
    clocks = [clock for run in runs for clock in map(median_clock, run.cases) if clock is not None]
    return max(maxima or clocks or [None], key=lambda value: value or 0)


def at_clock(run: RunResult, clock_mhz: float) -> tuple[RunResult, int]:
    """A copy of `run` whose timed cases have their times scaled to `clock_mhz` (t x f_case / f), and how many
    timed cases recorded no clock and are left as measured."""
    cases, unscaled = [], 0
    for case in run.cases:
        clock = median_clock(case)
        if case.timing is not None and clock is None:
            unscaled += 1
        if clock is not None:
            case = dataclasses.replace(case, timing=scaled_timing(case.timing, clock / clock_mhz))
        cases.append(case)
    return dataclasses.replace(run, cases=cases), unscaled


def clock_differences(comparisons, tolerance: float = CLOCK_TOLERANCE) -> list[str]:
    """A line for each compared case whose two runs' clocks differ by more than `tolerance` (escaped: `printable`)."""
    lines = []
    for comparison in comparisons:
        ratio = clock_ratio(comparison.new, comparison.old)
        if ratio is not None and abs(ratio - 1) > tolerance:
            where = f"{comparison.kernel} at {comparison.shape}" + (f" on {comparison.gpu}" if comparison.gpu else "")
            lines.append(printable(f"{where}: SM clock {median_clock(comparison.old):.0f} -> "
                                   f"{median_clock(comparison.new):.0f} MHz ({100 * (ratio - 1):+.1f}%): part of the "
                                   "change is the clock"))
    return lines
