"""Search strategies for a sweep: which configurations to measure, how well, and when to stop.

Every strategy works through one callback, ``evaluate(configuration, shape, fidelity) -> median ms
| None`` (fidelity `FULL` is the full cold measurement, less a short warm screen; None: unusable),
so none touches a GPU and tests replay recorded results (`RecordedSweep`). Only a full-fidelity
number can win. A `Budget` bounds a search by seconds and/or configurations; random choices come
from the seed. `Exhaustive`, `RandomSampling`, `SuccessiveHalving` and `OptunaTPE` (optuna imported
only there) are described in docs/tuning.md.
"""

from __future__ import annotations

import math
import numbers
import random
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from ..errors import DriverGemmError, ToolMissingError, WrongArgumentType
from ..specfile.model import Shape

FULL = 1.0


@dataclass(frozen=True)
class Configuration:
    """One point of a sweep: the kernel's label (its parameters included) and its template parameters."""

    label: str
    params: Mapping[str, int | str] = field(default_factory=dict, compare=False, hash=False)


Evaluate = Callable[[Configuration, Shape, float], "float | None"]


@dataclass(frozen=True)
class Budget:
    """How much a search may spend: wall seconds of `clock`, distinct configurations launched, or both."""

    seconds: float | None = None
    configurations: int | None = None
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self):
        # The kinds first, as a function of the library says what it takes (errors.py): a comparison of text
        # with a number would otherwise fail inside with Python's own TypeError, and 1.5 configurations pass.
        if self.seconds is not None:
            if isinstance(self.seconds, bool) or not isinstance(self.seconds, numbers.Real):
                raise WrongArgumentType(f"Budget: seconds is a number of seconds (parse_budget reads text such as "
                                        f"'5m'), got {self.seconds!r} ({type(self.seconds).__name__})")
            if not isinstance(self.seconds, (int, float)):   # NumPy's: a plain float, as the results file writes
                object.__setattr__(self, "seconds", float(self.seconds))
        if self.configurations is not None:
            if isinstance(self.configurations, bool) or not isinstance(self.configurations, numbers.Integral):
                raise WrongArgumentType(f"Budget: configurations is a whole number of configurations, got "
                                        f"{self.configurations!r} ({type(self.configurations).__name__})")
            object.__setattr__(self, "configurations", int(self.configurations))    # NumPy's too
        if not callable(self.clock):
            raise WrongArgumentType(f"Budget: clock is a function returning seconds (time.monotonic), "
                                    f"got {type(self.clock).__name__}")
        if self.seconds is not None and not self.seconds > 0:   # also NaN
            raise BudgetError(f"a budget of {self.seconds} s leaves nothing to measure")
        if self.configurations is not None and self.configurations < 1:
            raise BudgetError(f"a budget of {self.configurations} configurations leaves nothing to measure")


class BudgetError(DriverGemmError, ValueError):
    """A budget that cannot be met or read (``--budget 0``, ``--budget soon``), or a strategy no search has: a
    value no caller means, so a `ValueError` too, as Python's own would be."""


def parse_budget(text: str, clock: Callable[[], float] = time.monotonic) -> Budget:
    """``300s``, ``5m``, ``1.5h``, ``40`` (configurations) or ``300s,40`` (both) as a `Budget`."""
    seconds = configurations = None
    expected = (f"--budget {text!r}: expected seconds like 300s, 5m or 1h, a number of configurations like 40, "
                "or both: 300s,40")
    for part in (p.strip().lower() for p in str(text).split(",")):
        units = {"s": 1.0, "m": 60.0, "h": 3600.0}
        if not part:      # '5,' or ',40': an empty part is no second count, whatever it would parse as
            raise BudgetError(f"--budget {text!r}: a part on one side of the comma is empty; give a time, a count, "
                              "or both: 300s,40")
        try:
            if part and part[-1] in units:
                if seconds is not None:
                    raise BudgetError(f"--budget {text!r}: two time limits; give one, and one count at most")
                seconds = float(part[:-1]) * units[part[-1]]
                if not math.isfinite(seconds):
                    raise ValueError(part)
            else:
                if configurations is not None:
                    raise BudgetError(f"--budget {text!r}: two configuration counts; give one, and one time at most")
                configurations = int(part)
        except BudgetError:
            raise
        except ValueError:   # float() or int() could not read the part
            raise BudgetError(expected) from None
    return Budget(seconds, configurations, clock)


@dataclass(frozen=True)
class Trial:
    """One call of the evaluation callback and what it cost."""

    configuration: Configuration
    shape: Shape
    fidelity: float
    median_ms: float | None
    seconds: float


@dataclass
class SearchResult:
    """What a search found for one kernel family on one shape."""

    strategy: str
    shape: Shape
    best: Configuration | None
    best_ms: float | None
    trials: list[Trial]
    seconds: float
    stopped_by: str = "done"       # done | seconds | configurations

    @property
    def configurations_tried(self) -> int:
        return len({t.configuration for t in self.trials})

    @property
    def full_measurements(self) -> list[Trial]:
        return [t for t in self.trials if t.fidelity >= FULL and t.median_ms is not None]


class _BudgetSpent(Exception):
    def __init__(self, reason: str):
        self.reason = reason


class _Meter:
    """The evaluation callback behind the budget: records each trial and refuses one the budget cannot pay."""

    def __init__(self, evaluate: Evaluate, shape: Shape, budget: Budget):
        self.evaluate = evaluate
        self.shape = shape
        self.budget = budget
        self.started = budget.clock()
        self.trials: list[Trial] = []
        self.launched: set[Configuration] = set()

    def elapsed(self) -> float:
        return self.budget.clock() - self.started

    def seconds_left(self) -> float:
        return math.inf if self.budget.seconds is None else self.budget.seconds - self.elapsed()

    def __call__(self, configuration: Configuration, fidelity: float) -> float | None:
        if self.budget.seconds is not None and self.elapsed() >= self.budget.seconds:
            raise _BudgetSpent("seconds")
        if (self.budget.configurations is not None and configuration not in self.launched
                and len(self.launched) >= self.budget.configurations):
            raise _BudgetSpent("configurations")
        self.launched.add(configuration)
        before = self.budget.clock()
        median_ms = self.evaluate(configuration, self.shape, fidelity)
        self.trials.append(Trial(configuration, self.shape, fidelity, median_ms, self.budget.clock() - before))
        return median_ms

    def result(self, strategy: str, stopped_by: str = "done") -> SearchResult:
        if stopped_by == "done" and self.budget.seconds is not None and self.elapsed() > self.budget.seconds:
            stopped_by = "seconds"      # its last measurement ran past the limit: "done" would say it kept to it
        full = [t for t in self.trials if t.fidelity >= FULL and t.median_ms is not None]
        best = min(full, key=lambda t: t.median_ms, default=None)
        return SearchResult(strategy, self.shape, best.configuration if best else None,
                            best.median_ms if best else None, self.trials, self.elapsed(), stopped_by)


class Strategy(ABC):
    """A way to choose which configurations of a sweep to measure; see the module's docstring."""

    name = "strategy"

    def search(self, space: Sequence[Configuration], shape: Shape, evaluate: Evaluate,
               budget: Budget = Budget()) -> SearchResult:
        """Search `space` on `shape` through `evaluate`, within `budget`; the best full measurement wins."""
        meter = _Meter(evaluate, shape, budget)
        try:
            self._search(list(space), meter)
        except _BudgetSpent as spent:
            return meter.result(self.name, spent.reason)
        return meter.result(self.name)

    @abstractmethod
    def _search(self, space: list[Configuration], measure: _Meter) -> None:
        """Call `measure(configuration, fidelity)` as the strategy sees fit."""


class Exhaustive(Strategy):
    """Every configuration at full fidelity, in the sweep's order (what ``tune`` always did)."""

    name = "exhaustive"

    def _search(self, space, measure):
        for configuration in space:
            measure(configuration, FULL)


class RandomSampling(Strategy):
    """Configurations in a seeded random order, each fully measured, until the budget is spent."""

    name = "random"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def _search(self, space, measure):
        random.Random(self.seed).shuffle(space)
        for configuration in space:
            measure(configuration, FULL)


class SuccessiveHalving(Strategy):
    """Screen everything briefly, then give longer measurements to the best 1/`eta`, up to a full one.

    Rung r measures its configurations at fidelity ``min_fidelity * eta**r``
    (the last rung at `FULL`) and passes the fastest ``ceil(n / eta)`` on; a
    configuration that returns None drops out. Screens are cheap warm
    measurements that skip verification, so only the last rung pays for it:
    a finalist that fails there is replaced by the next of the ranking. With
    a configuration budget smaller than the space, a seeded random subset is
    screened. With 54 configurations, eta 3 and min_fidelity 1/27: 54 short
    screens, 18 and 6 longer ones, and two verified full measurements.
    """

    name = "halving"

    def __init__(self, eta: int = 3, min_fidelity: float = 1 / 27, seed: int = 0, finalists: int = 2):
        if eta < 2:
            raise BudgetError(f"successive halving needs eta >= 2 (got {eta})")
        if not 0 < min_fidelity <= FULL:
            raise BudgetError(f"min_fidelity must be in (0, 1] (got {min_fidelity})")
        self.eta = eta
        self.min_fidelity = min_fidelity
        self.seed = seed
        self.finalists = max(1, finalists)

    def fidelities(self) -> list[float]:
        """The fidelity of each rung, lowest first, ending at `FULL`."""
        rungs = max(0, round(math.log(FULL / self.min_fidelity, self.eta)))
        return [min(FULL, self.min_fidelity * self.eta ** r) for r in range(rungs)] + [FULL]

    def _search(self, space, measure):
        random.Random(self.seed).shuffle(space)
        if measure.budget.configurations is not None:
            space = space[:measure.budget.configurations]
        # `ranking` holds every configuration still usable, the furthest-screened first: the finals walk it past
        # the last rung's survivors when those all prove wrong, since a wrong kernel is often a fast one.
        ranking, wanted = space, len(space)
        fidelities = self.fidelities()
        for rung, fidelity in enumerate(fidelities):
            last = rung == len(fidelities) - 1
            if not last and wanted <= self.finalists:
                fidelity, last = FULL, True
            if last:
                self._finals(ranking, wanted, measure)
                return
            timed, dropped = [], set()
            for index, configuration in enumerate(ranking[:wanted]):
                if timed and measure.seconds_left() < self._reserve(measure, min(timed)[2]):
                    # the rest of the budget goes to full measurements of the best so far
                    timed.sort()
                    self._finals([c for _, _, c in timed] + ranking[index:], self.finalists, measure)
                    return
                if (ms := measure(configuration, fidelity)) is not None:
                    timed.append((ms, index, configuration))
                else:
                    dropped.add(configuration)
            timed.sort()
            ranking = [c for _, _, c in timed] + [c for c in ranking[wanted:] if c not in dropped]
            wanted = min(len(timed), max(self.finalists, math.ceil(len(timed) / self.eta)))

    @staticmethod
    def _finals(ranked: list[Configuration], wanted: int, measure: _Meter) -> None:
        """Full measurements down `ranked` until `wanted` of them succeed (or the ranking ends).

        Screens are not verified (see `tune.evaluate`): a finalist whose
        full measurement is None (its output was wrong, it faulted) drops out
        and the next in the ranking is measured in its place. One measured in
        full already (the leader `_reserve` timed) counts as it came out, and
        is not measured again: that would spend the budget twice on one row.
        """
        done = {t.configuration: t.median_ms for t in measure.trials if t.fidelity >= FULL}
        succeeded = 0
        for configuration in ranked:
            if succeeded >= wanted:
                return
            if configuration not in done:
                # a full measurement the seconds left cannot pay is not begun: it would end past the budget
                costs = [t.seconds for t in measure.trials if t.fidelity >= FULL]
                if costs and measure.seconds_left() < max(costs):
                    raise _BudgetSpent("seconds")
            ms = done[configuration] if configuration in done else measure(configuration, FULL)
            if ms is not None:
                succeeded += 1

    def _reserve(self, measure: _Meter, leader: Configuration) -> float:
        """Seconds to keep for the finalists' full measurements (zero without a limit in seconds).

        What a full measurement costs is learnt by making one, of the leader so far, the first time
        the question is asked: screens cannot say it (their fixed costs do not scale with fidelity).
        That measurement counts like any other, so the leader is already a finalist.
        """
        if measure.budget.seconds is None:
            return 0.0
        full = [t.seconds for t in measure.trials if t.fidelity >= FULL]
        if not full:
            measure(leader, FULL)
            full = [t.seconds for t in measure.trials if t.fidelity >= FULL]
        return self.finalists * max(full)


class OptunaTPE(Strategy):
    """Optuna's TPE sampler over the template parameters, each fully measured (for large spaces).

    Each parameter is a categorical choice of the values the space gives it;
    a suggested combination that is not in the space (the constraints refused
    it) is told to Optuna as pruned and costs nothing, one measured before is
    told its known time. optuna is imported only when this strategy is made.
    """

    name = "tpe"

    def __init__(self, seed: int = 0, startup_trials: int = 8):
        try:
            # optuna: optional
            import optuna
        except ImportError:
            raise ToolMissingError("the tpe strategy needs optuna: pip install 'driver-gemm[tune]' "
                                   "(or pip install optuna), or choose --strategy halving") from None
        self._optuna = optuna
        self.seed = seed
        self.startup_trials = startup_trials

    def _search(self, space, measure):
        optuna = self._optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        by_params = {_params_key(c.params): c for c in space}
        names = list(dict.fromkeys(name for c in space for name in c.params))
        choices = {name: sorted({c.params[name] for c in space if name in c.params}) for name in names}
        sampler = optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=self.startup_trials)
        study = optuna.create_study(direction="minimize", sampler=sampler)
        known: dict[Configuration, float | None] = {}
        misses = 0
        while len(known) < len(space) and misses < 50 * len(space):
            trial = study.ask()
            params = {name: trial.suggest_categorical(name, choices[name]) for name in names}
            configuration = by_params.get(_params_key(params))
            if configuration is None:
                misses += 1
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                continue
            if configuration not in known:
                known[configuration] = measure(configuration, FULL)
            else:
                misses += 1
            value = known[configuration]
            if value is None:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(trial, value)


def _params_key(params: Mapping[str, int | str]) -> tuple:
    return tuple(sorted(params.items()))


STRATEGIES = {"exhaustive": Exhaustive, "random": RandomSampling, "halving": SuccessiveHalving, "tpe": OptunaTPE}


def make_strategy(name: str, seed: int = 0) -> Strategy:
    """The strategy called `name` (``exhaustive``, ``random``, ``halving``, ``tpe``), seeded where it draws."""
    if not isinstance(name, str):
        raise WrongArgumentType(f"make_strategy: name is a strategy's name ({', '.join(STRATEGIES)}), got "
                                f"{name!r:.40} ({type(name).__name__})")
    try:
        kind = STRATEGIES[name]
    except KeyError:
        raise BudgetError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}") from None
    return kind() if kind is Exhaustive else kind(seed=seed)


def search_all(groups: Iterable[tuple[Sequence[Configuration], Shape]], strategy: Strategy, evaluate: Evaluate,
               budget: Budget = Budget()) -> list[SearchResult]:
    """Search each (space, shape) group in turn, sharing `budget`: each gets an equal part of what is left.

    The seconds are shared out as the search goes (a group that finishes
    early leaves its rest to the next); a configuration budget is split the
    same way, at least one configuration per group.
    """
    groups = list(groups)
    started = budget.clock()
    results = []
    configurations_left = budget.configurations
    for position, (space, shape) in enumerate(groups):
        remaining_groups = len(groups) - position
        seconds = None
        if budget.seconds is not None:
            left = budget.seconds - (budget.clock() - started)
            if left <= 0:
                results.append(SearchResult(strategy.name, shape, None, None, [], 0.0, "seconds"))
                continue
            seconds = left / remaining_groups
        share = None
        if configurations_left is not None:
            share = max(1, configurations_left // remaining_groups)
        result = strategy.search(space, shape, evaluate, Budget(seconds, share, budget.clock))
        if configurations_left is not None:
            configurations_left = max(1, configurations_left - result.configurations_tried)
        results.append(result)
    return results
