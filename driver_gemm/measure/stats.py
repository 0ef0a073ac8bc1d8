"""Pure statistics of timing samples: the summary every result carries, the noise that stops sampling,
and the tests that tell two sets of samples apart.

Nothing here touches CUDA or NVML, so every rule the sampling loop follows
(when to stop, whether noise still falls) and every figure a comparison uses
(a rank test, a confidence interval of a ratio of medians) is tested on the CPU.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, Sequence

import numpy as np


class StopReason(str, Enum):
    """Why sampling stopped; recorded in every `TimingSummary`."""

    NOISE_THRESHOLD = "noise-threshold"   # min time reached and the relative noise is under max_noise
    NOISE_STABLE = "noise-stable"         # min time reached, noise above max_noise but no longer falling
    TIMEOUT = "timeout"                   # the wall-clock budget ran out first
    MAX_SAMPLES = "max-samples"           # the sample cap was reached first

    def __str__(self) -> str:
        return self.value


SAMPLE_DIGITS = 4   # significant digits kept of each raw sample: beyond the events' ~0.5 us resolution on the shortest kernels


def round_significant(value: float, digits: int = SAMPLE_DIGITS) -> float:
    """`value` rounded to `digits` significant digits (0 and non-finite values unchanged)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


@dataclass(frozen=True)
class TimingSummary:
    """Summary of one case's samples, in milliseconds per launch, with the raw samples and the clocks.

    ``noise`` is the relative standard deviation (stdev / mean), the figure
    sampling stops on; ``rel_spread`` is the interquartile range over the
    median, a robust width used to call two results the same or different.
    ``samples_ms`` keeps every sample (rounded to 4 significant digits) so that
    a later comparison can test the distributions, not just their medians.
    In graph mode a sample is one replay of ``launches_per_sample`` launches
    and every figure here is per launch. The clock fields are None where no
    clock was read (no NVML); ``throttled_fraction`` is the share of batches
    whose SM clock was under the throttle threshold (their samples were
    discarded, ``discarded_samples`` counts them). ``wall_s`` is the wall time
    sampling took, warm-up included.
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
    launches_per_sample: int = 1
    wall_s: float = 0.0
    samples_ms: tuple[float, ...] = field(default=(), repr=False)
    sm_clock_mhz: float | None = None           # median SM clock over the batches kept
    sm_clock_min_mhz: float | None = None       # lowest SM clock of any batch read
    sm_clock_reference_mhz: float | None = None  # the maximum SM clock the throttle threshold is a fraction of
    throttled_fraction: float | None = None
    throttle_reasons: tuple[str, ...] = ()
    discarded_samples: int = 0
    locked_sm_clock_mhz: int | None = None      # set only when clocks were locked for the run on request
    # The GPU's energy over the sampling window (NVML's counter read before and after it), the window's seconds
    # and every launch made in it (discarded samples' too); None without NVML's energy counter.
    energy_j: float | None = None
    energy_window_s: float | None = None
    energy_launches: int | None = None

    def __post_init__(self) -> None:
        # JSON gives lists back; tuples keep the summary hashable and equal to the one written.
        object.__setattr__(self, "samples_ms", tuple(self.samples_ms))
        object.__setattr__(self, "throttle_reasons", tuple(self.throttle_reasons))

    @property
    def noise(self) -> float:
        return self.stdev_ms / self.mean_ms if self.mean_ms > 0 else math.inf

    @property
    def rel_spread(self) -> float:
        return (self.q3_ms - self.q1_ms) / self.median_ms if self.median_ms > 0 else math.inf

    ENERGY_FIELDS = ("energy_j", "energy_window_s", "energy_launches")   # written only when read

    def as_dict(self) -> dict:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__
               if name not in self.ENERGY_FIELDS or getattr(self, name) is not None}
        out["samples_ms"] = list(self.samples_ms)
        out["throttle_reasons"] = list(self.throttle_reasons)
        out.update(noise=self.noise, rel_spread=self.rel_spread)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TimingSummary":
        """The summary `as_dict` wrote; derived figures (noise, rel_spread) and unknown keys are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values (NumPy's default method)."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def summarize(samples_ms: Sequence[float], stop_reason: str = "", *, keep_samples: bool = True,
              **extra: Any) -> TimingSummary:
    """Summarise samples; raises ValueError on an empty list or a negative or non-finite time.

    The raw samples are kept, rounded, unless `keep_samples` is False; `extra`
    sets the other fields of `TimingSummary` (clocks, wall time, launches per sample).
    """
    if not samples_ms:
        raise ValueError("no samples to summarise")
    if any(not math.isfinite(s) or s < 0 for s in samples_ms):
        raise ValueError("samples must be finite, non-negative times")
    ordered = sorted(samples_ms)
    count = len(ordered)
    mean = sum(ordered) / count
    variance = sum((s - mean) ** 2 for s in ordered) / (count - 1) if count > 1 else 0.0
    kept = tuple(round_significant(s) for s in samples_ms) if keep_samples else ()
    return TimingSummary(
        median_ms=quantile(ordered, 0.5), mean_ms=mean, min_ms=ordered[0], max_ms=ordered[-1],
        stdev_ms=math.sqrt(variance), q1_ms=quantile(ordered, 0.25), q3_ms=quantile(ordered, 0.75),
        samples=count, total_ms=sum(ordered), stop_reason=str(stop_reason), samples_ms=kept, **extra,
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


class NoiseHistory:
    """The relative noise after every sample, and whether it has stopped falling.

    A case whose samples are inherently noisier than ``max_noise`` would
    otherwise sample until the timeout. nvbench's stdrel criterion keeps the
    noise after each sample in a ring of 512 and, once the minimum time is
    reached, stops when the recent noise is flat. Here "flat" is the slope of a
    least-squares line through the window: the noise counts as stable when the
    line falls by less than `stable_drop` (5%) of the current noise across the
    window, judged only once the window holds `min_history` (64) values.
    """

    def __init__(self, window: int = 512, min_history: int = 64, stable_drop: float = 0.05):
        if window < 2 or min_history < 2 or min_history > window:
            raise ValueError(f"need 2 <= min_history <= window, got window={window}, min_history={min_history}")
        self.running = RunningNoise()
        self.history: deque[float] = deque(maxlen=window)
        self.min_history = min_history
        self.stable_drop = stable_drop

    def add(self, value: float) -> None:
        self.running.add(value)
        noise = self.running.relative_stdev
        if math.isfinite(noise):
            self.history.append(noise)

    @property
    def relative_stdev(self) -> float:
        return self.running.relative_stdev

    @property
    def count(self) -> int:
        return self.running.count

    def drop_across_window(self) -> float:
        """How much the fitted line of the recent noise falls from the window's first value to its last."""
        count = len(self.history)
        if count < 2:
            return math.inf
        mean_x = (count - 1) / 2
        mean_y = sum(self.history) / count
        covariance = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(self.history))
        spread = count * (count * count - 1) / 12          # sum of (x - mean_x)^2 over 0..count-1
        return -covariance / spread * (count - 1)

    def is_stable(self) -> bool:
        """True once the window is full enough and the noise no longer falls meaningfully."""
        if len(self.history) < self.min_history:
            return False
        current = self.history[-1]
        if current <= 0:
            return True
        return self.drop_across_window() < self.stable_drop * current


@dataclass(frozen=True)
class RankTest:
    """Mann-Whitney U of samples `a` against `b` (normal approximation with tie and continuity correction).

    ``u`` is U of `a`; ``p_value`` is two-sided; ``probability_a_slower`` is
    U / (n_a n_b), the chance that a sample of `a` exceeds one of `b` (ties
    count half): 0.5 means neither is faster, 1.0 that every `a` is slower.
    """

    u: float
    z: float
    p_value: float
    probability_a_slower: float


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> RankTest:
    """Test whether samples `a` and `b` come from the same distribution, without assuming a shape.

    Timing samples are skewed (a floor and a long tail of slow outliers), so a
    rank test says more than a t-test. With thousands of samples a tiny real
    difference is "significant": read ``probability_a_slower`` and the ratio of
    medians (`median_ratio_interval`) for how large it is.
    """
    n_a, n_b = len(a), len(b)
    if n_a == 0 or n_b == 0:
        raise ValueError("a rank test needs samples on both sides")
    values = np.concatenate([np.asarray(a, dtype=float), np.asarray(b, dtype=float)])
    if not np.all(np.isfinite(values)):
        raise ValueError("samples must be finite")
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    # Average ranks of ties: every value of a run of equal values gets the mean of the run's ranks.
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    lengths = np.diff(np.concatenate([starts, [len(ordered)]]))
    average_rank = starts + (lengths + 1) / 2
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(average_rank, lengths)
    u = float(ranks[:n_a].sum() - n_a * (n_a + 1) / 2)
    total = n_a + n_b
    tie_term = float(np.sum(lengths.astype(float) ** 3 - lengths)) / (total * (total - 1))
    variance = n_a * n_b / 12 * ((total + 1) - tie_term)
    mean_u = n_a * n_b / 2
    if variance <= 0:
        z, p_value = 0.0, 1.0
    else:
        deviation = max(abs(u - mean_u) - 0.5, 0.0)
        z = math.copysign(deviation / math.sqrt(variance), u - mean_u)
        p_value = min(1.0, math.erfc(abs(z) / math.sqrt(2)))
    return RankTest(u=u, z=z, p_value=p_value, probability_a_slower=u / (n_a * n_b))


@dataclass(frozen=True)
class RatioInterval:
    """A ratio of medians (new / old) with its bootstrap confidence interval."""

    ratio: float
    low: float
    high: float
    confidence: float

    def excludes(self, value: float = 1.0) -> bool:
        """True when `value` (by default 1: no change) lies outside the interval."""
        return value < self.low or value > self.high


def median_ratio_interval(old: Sequence[float], new: Sequence[float], confidence: float = 0.95,
                          resamples: int = 2000, seed: int = 0) -> RatioInterval:
    """median(new) / median(old) and a percentile-bootstrap interval for it.

    Each resample draws both sets again with replacement, so the interval
    carries the uncertainty of both medians; the fixed `seed` makes the result
    reproducible. A change is real at this confidence when the interval
    excludes 1.0 (`RatioInterval.excludes`).
    """
    old_values = np.asarray(old, dtype=float)
    new_values = np.asarray(new, dtype=float)
    if old_values.size == 0 or new_values.size == 0:
        raise ValueError("a ratio of medians needs samples on both sides")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    old_median = float(np.median(old_values))
    if old_median <= 0:
        raise ValueError("the old median must be positive")
    rng = np.random.default_rng(seed)
    ratios = np.empty(resamples)
    chunk = max(1, 2_000_000 // max(old_values.size, new_values.size))   # bound the memory of one draw
    for first in range(0, resamples, chunk):
        count = min(chunk, resamples - first)
        old_medians = np.median(rng.choice(old_values, size=(count, old_values.size)), axis=1)
        new_medians = np.median(rng.choice(new_values, size=(count, new_values.size)), axis=1)
        ratios[first:first + count] = new_medians / old_medians
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return RatioInterval(ratio=float(np.median(new_values)) / old_median, low=float(low), high=float(high),
                         confidence=confidence)


def gflops(flops: int, milliseconds: float) -> float:
    """GFLOP/s of `flops` floating-point operations done in `milliseconds`."""
    return flops / (milliseconds * 1e-3) / 1e9 if milliseconds > 0 else math.nan
