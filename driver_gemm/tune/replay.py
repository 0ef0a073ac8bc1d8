"""Strategies replayed on a recorded sweep: the evaluation callback without a GPU, and its cost in seconds.

A recorded exhaustive sweep knows every configuration's full cold measurement, so it can stand in
for the GPU: a full evaluation returns the recorded median, a screen returns it perturbed as a short
warm measurement would be (seeded), a configuration that did not pass None. A simulated clock adds
what each evaluation would cost (`CostModel`), so strategies' budgets and costs compare with the
exhaustive one's on the same terms (`compare_strategies`).
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field

from ..measure.timing import MAX_BATCH
from .evaluate import screen_samples_cap
from ..results.records import CaseResult, RunResult
from ..specfile.model import Shape
from .strategies import FULL, Budget, Configuration, Strategy, search_all


@dataclass(frozen=True)
class EvaluationCosts:
    """What an evaluation costs in wall seconds, and how far a screen's number strays from the full one.

    - once per shape: inputs, the float64 reference and the cuBLAS row (`reference_s` plus
      `reference_ns_per_element` for each of the M x N elements of C), shared by every configuration;
    - once per (configuration, shape): loading the module and binding the launch (`setup_s`);
    - once per (configuration, shape), before its first full measurement only (screens are not
      verified): verification, an upload of A and B, a checked launch, a download of C and a float64
      comparison on the host (`verify_ns_per_element` for each element of C);
    - a full measurement: `warmup` launches, then the recorded GPU time of its samples plus
      `per_sample_s` (L2 flush, gate) each;
    - a screen at fidelity f: `screen_overhead_s` (events, gate), one warm-up launch, then f of the
      recorded GPU time, at least `screen_min_samples` launches, no flush; the batch queued while
      the last one ran (`screen_batch_s` of launches, one at least, `MAX_BATCH` at most) is paid too,
      up to the screen's cap (`tune.evaluate.screen_samples_cap`).

    A screen's median is the recorded one times (1 + b + e): b a per-configuration warm-versus-cold
    offset drawn once in [-`screen_bias`, +`screen_bias`], e a normal draw with the standard error
    of a median of the screen's samples (the recorded interquartile range / 1.349 as their spread).
    The per-shape and verification defaults are set so that a replayed exhaustive search costs what
    recorded ones took (`scripts/tune_strategies.py --predict` replays one); the screen and setup costs
    are estimates (docs/tuning.md).
    """

    reference_s: float = 0.38
    reference_ns_per_element: float = 10.0
    verify_ns_per_element: float = 28.0
    setup_s: float = 0.02
    warmup: int = 3
    per_sample_s: float = 60e-6
    screen_overhead_s: float = 0.01
    screen_min_samples: int = 3
    screen_batch_s: float = 0.02
    screen_bias: float = 0.01


class SimulatedClock:
    """A clock that moves only when told to: the seconds a replayed search would have taken."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class RecordedSweep:
    """The evaluation callback over a recorded sweep, charging its `EvaluationCosts` to a `SimulatedClock`."""

    run: RunResult
    cost: EvaluationCosts = field(default_factory=EvaluationCosts)
    seed: int = 0
    clock: SimulatedClock = field(default_factory=SimulatedClock)

    def __post_init__(self):
        self.cases: dict[tuple[str, str], CaseResult] = {
            (c.kernel, c.shape.label): c for c in self.run.cases if not c.is_baseline}
        self._shapes_ready: set[str] = set()
        self._set_up: set[tuple[str, str]] = set()
        self._verified: set[tuple[str, str]] = set()

    def spaces(self) -> list[tuple[list[Configuration], Shape, str]]:
        """Per kernel name and shape, the configurations that were not refused before launching."""
        groups: dict[tuple[str, str], tuple[list[Configuration], Shape, str]] = {}
        for case in self.cases.values():
            if case.status == "INVALID":
                continue
            entry = groups.setdefault((case.name, case.shape.label), ([], case.shape, case.name))
            entry[0].append(Configuration(case.kernel, dict(case.params)))
        return list(groups.values())

    def recorded_best(self, name: str, shape: Shape) -> CaseResult | None:
        """The fastest passing configuration the exhaustive sweep found for `name` on `shape`."""
        timed = [c for c in self.cases.values() if c.name == name and c.shape == shape and c.ok and c.timing]
        return min(timed, key=lambda c: c.timing.median_ms, default=None)

    def exhaustive_seconds(self, name: str, shape: Shape) -> float:
        """What measuring every launched configuration fully costs under the same model."""
        total = self._reference_s(shape)
        for case in self.cases.values():
            if case.name == name and case.shape == shape and case.status != "INVALID":
                total += self.cost.setup_s + self._verify_s(shape)
                if case.ok and case.timing:
                    total += self._full_s(case)
        return total

    def __call__(self, configuration: Configuration, shape: Shape, fidelity: float) -> float | None:
        key = (configuration.label, shape.label)
        case = self.cases.get(key)
        if shape.label not in self._shapes_ready:
            self._shapes_ready.add(shape.label)
            self.clock.advance(self._reference_s(shape))
        if key not in self._set_up:
            self._set_up.add(key)
            self.clock.advance(self.cost.setup_s)
        if case is None or not case.ok or case.timing is None:
            if fidelity >= FULL and key not in self._verified:
                self._verified.add(key)
                self.clock.advance(self._verify_s(shape))
            return None
        timing = case.timing
        if fidelity >= FULL:
            if key not in self._verified:
                self._verified.add(key)
                self.clock.advance(self._verify_s(shape))
            self.clock.advance(self._full_s(case))
            return timing.median_ms
        samples = max(self.cost.screen_min_samples, round(fidelity * timing.samples))
        self.clock.advance(self._screen_s(timing, fidelity, samples))
        spread = max((timing.q3_ms - timing.q1_ms) / 1.349, 1e-3 * timing.median_ms) / timing.median_ms
        bias = self._draw("bias", configuration.label, shape.label).uniform(-1.0, 1.0) * self.cost.screen_bias
        error = self._draw("error", configuration.label, shape.label, fidelity).gauss(0.0, 1.0)
        return timing.median_ms * (1.0 + bias + error * 1.2533 * spread / samples ** 0.5)

    def _reference_s(self, shape: Shape) -> float:
        return self.cost.reference_s + shape.M * shape.N * self.cost.reference_ns_per_element * 1e-9

    def _screen_s(self, timing, fidelity: float, samples: int) -> float:
        needed = max(samples, math.ceil(fidelity * timing.total_ms / timing.median_ms))
        # the batch queued while the last was read: about screen_batch_s of launches, one at least and
        # MAX_BATCH at most (measure.timing sizes its batches so), unless the screen's cap stops it
        ahead = min(MAX_BATCH, max(1, round(self.cost.screen_batch_s * 1e3 / timing.median_ms)))
        taken = min(screen_samples_cap(fidelity), needed + ahead)
        return self.cost.screen_overhead_s + (1 + taken) * timing.median_ms / 1e3

    def _verify_s(self, shape: Shape) -> float:
        return shape.M * shape.N * self.cost.verify_ns_per_element * 1e-9

    def _full_s(self, case: CaseResult) -> float:
        timing = case.timing
        return (self.cost.warmup * timing.median_ms + timing.total_ms) / 1e3 + timing.samples * self.cost.per_sample_s

    def _draw(self, *what) -> random.Random:
        digest = hashlib.sha256(repr((self.seed, *what)).encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "little"))


@dataclass(frozen=True)
class StrategyRow:
    """One line of the strategy table: a strategy on one kernel family and shape, against the exhaustive sweep."""

    strategy: str
    kernel: str
    shape: str
    best: str | None
    best_ms: float | None
    recorded_best: str | None
    recorded_best_ms: float | None
    seconds: float
    exhaustive_seconds: float
    configurations: int

    @property
    def slower_than_best(self) -> float | None:
        """best found / recorded best - 1 (0.0 when the strategy found the recorded best)."""
        if self.best_ms is None or not self.recorded_best_ms:
            return None
        return self.best_ms / self.recorded_best_ms - 1

    @property
    def cost_fraction(self) -> float:
        return self.seconds / self.exhaustive_seconds if self.exhaustive_seconds else 0.0


def compare_strategies(run: RunResult, strategies: list[Strategy], budget: Budget | None = None,
                       cost: EvaluationCosts = EvaluationCosts(), seed: int = 0) -> list[StrategyRow]:
    """Replay each strategy on the recorded sweep `run`, per kernel family and shape, with a fresh clock each."""
    rows = []
    for strategy in strategies:
        sweep = RecordedSweep(run, cost, seed)
        spaces = sweep.spaces()
        shared = Budget(budget.seconds, budget.configurations, sweep.clock) if budget else Budget(clock=sweep.clock)
        results = search_all([(space, shape) for space, shape, _ in spaces], strategy, sweep, shared)
        for (space, shape, name), result in zip(spaces, results):
            recorded = sweep.recorded_best(name, shape)
            rows.append(StrategyRow(strategy.name, name, shape.label,
                                    result.best.label if result.best else None, result.best_ms,
                                    recorded.kernel if recorded else None,
                                    recorded.timing.median_ms if recorded else None,
                                    result.seconds, sweep.exhaustive_seconds(name, shape),
                                    result.configurations_tried))
    return rows
