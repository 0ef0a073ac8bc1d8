"""Pure statistics of timing samples: the summary every result carries, and the noise that stops sampling."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class TimingSummary:
    """Summary of one case's samples, in milliseconds.

    ``noise`` is the relative standard deviation (stdev / mean), the figure
    sampling stops on; ``rel_spread`` is the interquartile range over the
    median, a robust width used to call two results the same or different.
    """

    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    stdev_ms: float
    q1_ms: float
    q3_ms: float
    samples: int
    total_ms: float
    stop_reason: str = ""

    @property
    def noise(self) -> float:
        return self.stdev_ms / self.mean_ms if self.mean_ms > 0 else math.inf

    @property
    def rel_spread(self) -> float:
        return (self.q3_ms - self.q1_ms) / self.median_ms if self.median_ms > 0 else math.inf

    def as_dict(self) -> dict:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out.update(noise=self.noise, rel_spread=self.rel_spread)
        return out


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values (NumPy's default method)."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def summarize(samples_ms: Sequence[float], stop_reason: str = "") -> TimingSummary:
    """Summarise samples; raises ValueError on an empty list or a negative or non-finite time."""
    if not samples_ms:
        raise ValueError("no samples to summarise")
    if any(not math.isfinite(s) or s < 0 for s in samples_ms):
        raise ValueError("samples must be finite, non-negative times")
    ordered = sorted(samples_ms)
    count = len(ordered)
    mean = sum(ordered) / count
    variance = sum((s - mean) ** 2 for s in ordered) / (count - 1) if count > 1 else 0.0
    return TimingSummary(
        median_ms=quantile(ordered, 0.5), mean_ms=mean, min_ms=ordered[0], max_ms=ordered[-1],
        stdev_ms=math.sqrt(variance), q1_ms=quantile(ordered, 0.25), q3_ms=quantile(ordered, 0.75),
        samples=count, total_ms=sum(ordered), stop_reason=stop_reason,
    )


class RunningNoise:
    """Welford's running mean and variance, so the stop test costs O(1) per sample."""

    def __init__(self) -> None:
        self.count = 0
        self.mean = 0.0
        self._m2 = 0.0

    def add(self, value: float) -> None:
        self.count += 1
        delta = value - self.mean
        self.mean += delta / self.count
        self._m2 += delta * (value - self.mean)

    @property
    def relative_stdev(self) -> float:
        if self.count < 2 or self.mean <= 0:
            return math.inf
        return math.sqrt(self._m2 / (self.count - 1)) / self.mean


def gflops(flops: int, milliseconds: float) -> float:
    """GFLOP/s of `flops` floating-point operations done in `milliseconds`."""
    return flops / (milliseconds * 1e-3) / 1e9 if milliseconds > 0 else math.nan
