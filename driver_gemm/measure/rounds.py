"""Time a kernel and its vendor row in interleaved rounds (``measure.rounds``), so that both meet the GPU in
the same state.

A power-bound GEMM's SM clock follows the GPU's recent power and temperature: a vendor row timed when a shape
begins and a kernel timed a minute later can differ by several percent for no reason of their own, and by as
much again between two starts of the same machine (docs/timing.md gives the figures). With N rounds, a kernel's time step measures its own launch and
its vendor row's launch alternately, N times each, in the order kernel, vendor | vendor, kernel | kernel,
vendor ... (a slow drift of the clock then weighs on both alike), each measurement with 1/N of the spec's
sampling budget (`round_settings`). The kernel's timing pools its samples over the rounds (`pooled`); its
% of the vendor is the median of the vendor's round medians over the median of its own (`RoundsOutcome`,
kept in the case's `results.records.InterleavedRecord`).
Pure apart from the two measuring callables it is given.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..specfile.model import MeasureSettings
from .stats import TimingSummary, summarize

KERNEL, VENDOR = "kernel", "vendor"
MIN_ROUND_SAMPLES = 3       # a round's median needs a few samples, however many rounds share the budget

Measurement = tuple[TimingSummary, list[float]]        # what `timing.measure` returns: summary, kept samples
Measure = Callable[[MeasureSettings], Measurement]


def round_settings(settings: MeasureSettings, rounds: int) -> MeasureSettings:
    """`settings` with the sampling budget (samples, GPU time, timeout) shared among `rounds` measurements."""
    share = max(rounds, 1)
    return dataclasses.replace(
        settings,
        min_samples=min(max(math.ceil(settings.min_samples / share), MIN_ROUND_SAMPLES), settings.max_samples),
        min_time_s=settings.min_time_s / share, timeout_s=settings.timeout_s / share)


def round_order(rounds: int) -> list[tuple[str, str]]:
    """Which side goes first in each round: kernel first in even rounds, the vendor first in odd ones."""
    return [(KERNEL, VENDOR) if index % 2 == 0 else (VENDOR, KERNEL) for index in range(rounds)]


@dataclass(frozen=True)
class RoundsOutcome:
    """Both sides' summaries, round by round, and the figures made of them."""

    kernel: tuple[TimingSummary, ...]
    vendor: tuple[TimingSummary, ...]
    kernel_samples: tuple[float, ...]

    @property
    def kernel_ms(self) -> float:
        """The median of the kernel's round medians."""
        return statistics.median(summary.median_ms for summary in self.kernel)

    @property
    def vendor_ms(self) -> float:
        """The median of the vendor's round medians: the 100% of the kernel's % of the vendor."""
        return statistics.median(summary.median_ms for summary in self.vendor)

    @property
    def vendor_clock_mhz(self) -> float | None:
        """The vendor's median SM clock over its rounds, where NVML read one."""
        return _median_clock(self.vendor)

    @property
    def kernel_timing(self) -> TimingSummary:
        """The kernel's samples of every round as one summary (`pooled`)."""
        return pooled(self.kernel, self.kernel_samples)


def interleave(measure_kernel: Measure, measure_vendor: Measure, settings: MeasureSettings,
               rounds: int) -> RoundsOutcome:
    """Measure both sides in `rounds` alternating rounds (`round_order`), each with `round_settings`."""
    share = round_settings(settings, rounds)
    sides = {KERNEL: measure_kernel, VENDOR: measure_vendor}
    summaries: dict[str, list[TimingSummary]] = {KERNEL: [], VENDOR: []}
    kernel_samples: list[float] = []
    for order in round_order(rounds):
        for side in order:
            summary, samples = sides[side](share)
            summaries[side].append(summary)
            if side == KERNEL:
                kernel_samples.extend(samples)
    return RoundsOutcome(tuple(summaries[KERNEL]), tuple(summaries[VENDOR]), tuple(kernel_samples))


def pooled(summaries: Sequence[TimingSummary], samples: Sequence[float]) -> TimingSummary:
    """One summary of the rounds' `samples` (all of them, in the order taken): wall time, discarded samples,
    energy and launches summed over the rounds, the clock the median of their clocks and the lowest clock the
    lowest, the throttled fraction their mean, the stop reason the last round's."""
    first, last = summaries[0], summaries[-1]
    clocks: dict[str, Any] = {
        "sm_clock_mhz": _median_clock(summaries),
        "sm_clock_min_mhz": min((s.sm_clock_min_mhz for s in summaries if s.sm_clock_min_mhz is not None),
                                default=None),
        "sm_clock_reference_mhz": next((s.sm_clock_reference_mhz for s in summaries
                                        if s.sm_clock_reference_mhz is not None), None),
        "throttled_fraction": _mean([s.throttled_fraction for s in summaries]),
        "throttle_reasons": tuple(dict.fromkeys(reason for s in summaries for reason in s.throttle_reasons)),
        "locked_sm_clock_mhz": first.locked_sm_clock_mhz,
    }
    energy: dict[str, Any] = {}
    if all(s.energy_j is not None for s in summaries):
        energy = {"energy_j": sum(s.energy_j for s in summaries),
                  "energy_window_s": sum(s.energy_window_s or 0.0 for s in summaries),
                  "energy_launches": sum(s.energy_launches or 0 for s in summaries)}
    return summarize(list(samples), last.stop_reason, launches_per_sample=first.launches_per_sample,
                     wall_s=sum(s.wall_s for s in summaries),
                     discarded_samples=sum(s.discarded_samples for s in summaries), **clocks, **energy)


def _median_clock(summaries: Sequence[TimingSummary]) -> float | None:
    clocks = [s.sm_clock_mhz for s in summaries if s.sm_clock_mhz is not None]
    return float(statistics.median(clocks)) if clocks else None


def _mean(values: Sequence[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return sum(known) / len(known) if known else None
