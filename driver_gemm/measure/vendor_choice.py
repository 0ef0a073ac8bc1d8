"""Which cuBLASLt algorithm a vendor row runs: the heuristic's first, or the fastest of its first N.

`BaselineChoice` is what a run asks for (``--baseline best:8`` or ``--baseline heuristic``);
`AlgorithmChoice` is what a row ran, as its results record it; `choose_candidate`,
`preselect_settings` and `final_settings` are the choice itself, kept pure so that they are tested
without a GPU.
CUTLASS's profiler (``--library-algo-mode=best``) and nvmath-python's ``Matmul.autotune`` also
time several of the heuristic's algorithms and keep the fastest: a "% of cuBLAS" measured against
the heuristic's first alone may be measured against a slower algorithm than the library has.
The method: docs/timing.md, "The vendor row".
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    # types only: the options that name a choice are made before any heavy module is imported
    from ..specfile.model import MeasureSettings

BEST, HEURISTIC = "best", "heuristic"
DEFAULT_CANDIDATES = 8          # as nvmath-python's Matmul plans by default (its algorithm limit)
MAX_CANDIDATES = 64

# The pre-selection, in two steps, each with the case's own sample pattern:
# - a screen: every candidate timed briefly, in heuristic order and then in reverse (two rounds), so that a clock
#   that falls or rises steadily over the screen (a power-bound GEMM heating the GPU) weighs on every candidate
#   alike: candidate i is timed at steps i and 2n - 1 - i, whose mean is the same for all;
# - a final: the screen's two fastest timed again for longer, A B B A, for the same reason. A short burst can favour
#   an algorithm that a sustained load slows (a power-bound clock settles over tenths of seconds), and the row is
#   measured in full under that load.
PRESELECT_WARMUP = 2
PRESELECT_MIN_SAMPLES = 5       # a screen round's; the two rounds together give the median of 10 or more
PRESELECT_MIN_TIME_S = 0.025
PRESELECT_TIMEOUT_S = 0.25
PRESELECT_MAX_PAUSE_MS = 100.0  # a resting pattern's rest, capped: 8 candidates x 3 samples x 5 s would be minutes
FINALISTS = 2
FINAL_MIN_SAMPLES = 10          # a final round's
FINAL_MIN_TIME_S = 0.1          # at most: a case measured for less takes its own
FINAL_TIMEOUT_S = 0.5
FINAL_ORDER = (0, 1, 1, 0)      # A B B A over the finalists, by screen rank


@dataclass(frozen=True)
class BaselineChoice:
    """How the cuBLASLt row picks its algorithm: ``best`` of the heuristic's first `candidates`, or the
    ``heuristic``'s first alone."""

    mode: str = BEST
    candidates: int = DEFAULT_CANDIDATES

    def __post_init__(self) -> None:
        if self.mode not in (BEST, HEURISTIC):
            raise ValueError(f"BaselineChoice.mode: {BEST!r} or {HEURISTIC!r}, not {self.mode!r}")
        if isinstance(self.candidates, bool) or not isinstance(self.candidates, int) or \
                not 1 <= self.candidates <= MAX_CANDIDATES:
            raise ValueError(f"BaselineChoice.candidates: 1 to {MAX_CANDIDATES}, not {self.candidates!r}")

    @classmethod
    def parse(cls, text: str) -> "BaselineChoice":
        """``best``, ``best:N`` or ``heuristic``; ValueError saying what is accepted otherwise."""
        mode, _, count = text.strip().partition(":")
        if mode == HEURISTIC and not count:
            return cls(HEURISTIC, 1)
        if mode == BEST:
            if not count:
                return cls(BEST)
            if count.isascii() and count.isdigit() and 1 <= int(count) <= MAX_CANDIDATES:
                return cls(BEST, int(count))
        raise ValueError(f"give best, best:N (N from 1 to {MAX_CANDIDATES}) or heuristic, not {text!r}")

    @property
    def requested(self) -> int:
        """How many algorithms to ask the heuristic for."""
        return 1 if self.mode == HEURISTIC else self.candidates

    @property
    def label(self) -> str:
        return HEURISTIC if self.mode == HEURISTIC else f"{BEST}:{self.candidates}"

    def as_json(self) -> dict[str, Any]:
        """What a results file's settings record (``settings.baseline_algorithm``)."""
        out: dict[str, Any] = {"choice": self.mode, "candidates": self.requested}
        if self.mode == BEST:
            out["preselect"] = {"rounds": 2, "warmup": PRESELECT_WARMUP, "min_samples": PRESELECT_MIN_SAMPLES,
                                "min_time_s": PRESELECT_MIN_TIME_S, "timeout_s": PRESELECT_TIMEOUT_S}
            out["final"] = {"finalists": FINALISTS, "order": "ABBA", "min_samples": FINAL_MIN_SAMPLES,
                            "min_time_s": FINAL_MIN_TIME_S, "timeout_s": FINAL_TIMEOUT_S}
        return out


@dataclass(frozen=True)
class AlgorithmChoice:
    """The cuBLASLt algorithm a vendor row ran, read through cublasLtMatmulAlgoConfigGetAttribute.

    rank: its place in the heuristic's list (1 is the heuristic's first).
    candidates: how many the heuristic offered and were tried. choice: the
    run's `BaselineChoice` mode. preselect_ms: each candidate's median in the
    pre-selection's screen, in heuristic order (None where it could not run);
    final_ms: the finalists' medians in its final, None for the others.
    """

    rank: int
    algo_id: int | None = None
    tile: str | None = None               # e.g. 256x128 (cublasLtMatmulTile_t)
    stages: str | None = None             # e.g. 64x4 (cublasLtMatmulStages_t)
    split_k: int | None = None            # 1: no split
    reduction: str | None = None          # the split-K reduction scheme (cublasLtReductionScheme_t)
    swizzle: int | None = None            # CTA swizzling
    cluster: str | None = None            # e.g. 2x1x1 (cublasLtClusterShape_t)
    workspace_bytes: int | None = None
    waves: float | None = None
    candidates: int = 1
    choice: str = HEURISTIC
    preselect_ms: tuple[float | None, ...] = ()
    final_ms: tuple[float | None, ...] = ()
    other: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "preselect_ms", tuple(self.preselect_ms))
        object.__setattr__(self, "final_ms", tuple(self.final_ms))

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "other"}
        out["preselect_ms"] = list(self.preselect_ms)
        out["final_ms"] = list(self.final_ms)
        return {**out, **self.other}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "AlgorithmChoice | None":
        if data is None:
            return None
        names = {f.name for f in dataclasses.fields(cls)} - {"other"}
        return cls(**{k: v for k, v in data.items() if k in names},
                   other={k: v for k, v in data.items() if k not in names})

    def describe(self) -> str:
        """In words, e.g. ``best of 8: heuristic #3, algo 66, tile 256x128, stages 64x4, split-K 1``."""
        head = f"best of {self.candidates}: heuristic #{self.rank}" if self.choice == BEST \
            else f"heuristic #{self.rank}"
        parts = [head]
        for name, value in (("algo", self.algo_id), ("tile", self.tile), ("stages", self.stages),
                            ("split-K", self.split_k), ("cluster", self.cluster)):
            if value is not None:
                parts.append(f"{name} {value}")
        return ", ".join(parts)


def enum_suffix(name: str | None, prefix: str) -> str | None:
    """``TILE_256x128`` as ``256x128``; ``..._UNDEFINED`` and unknown values as None."""
    if name is None or name.endswith("UNDEFINED") or name.endswith("AUTO"):
        return None
    return name[len(prefix):] if name.startswith(prefix) else name


def pick_fastest(medians: Sequence[float | None]) -> int:
    """The index of the shortest median; a tie keeps the earlier one; None (a candidate that could not run) is
    passed over. ValueError when no candidate ran."""
    return ranked(medians)[0]


def ranked(medians: Sequence[float | None]) -> list[int]:
    """The indices of the medians that ran, shortest first, a tie in the earlier one's favour; ValueError when
    none ran."""
    ran = [(value, index) for index, value in enumerate(medians)
           if value is not None and math.isfinite(value) and value > 0]
    if not ran:
        raise ValueError("no candidate algorithm could be timed")
    return [index for _, index in sorted(ran)]


def preselect_settings(settings: MeasureSettings) -> MeasureSettings:
    """The case's measure settings shortened for a round of the pre-selection's screen: the same sample pattern,
    flush and mode, fewer samples and less time; a pattern's rest before each sample at most
    `PRESELECT_MAX_PAUSE_MS`."""
    return _shortened(settings, PRESELECT_MIN_SAMPLES, PRESELECT_MIN_TIME_S, PRESELECT_TIMEOUT_S)


def final_settings(settings: MeasureSettings) -> MeasureSettings:
    """The same for a round of the final: longer than the screen's, at most the case's own."""
    return _shortened(settings, FINAL_MIN_SAMPLES, FINAL_MIN_TIME_S, FINAL_TIMEOUT_S)


def _shortened(settings: MeasureSettings, min_samples: int, min_time_s: float, timeout_s: float) -> MeasureSettings:
    pattern = settings.pattern
    samples = settings.samples
    if pattern.pause_ms > PRESELECT_MAX_PAUSE_MS:
        samples = dataclasses.replace(pattern, pause_ms=PRESELECT_MAX_PAUSE_MS).label
    return dataclasses.replace(settings, warmup=min(settings.warmup, PRESELECT_WARMUP) or 1,
                               min_samples=min(settings.min_samples, min_samples),
                               min_time_s=min(settings.min_time_s, min_time_s),
                               timeout_s=min(settings.timeout_s, timeout_s), samples=samples)


def choose_candidate(candidates: Sequence[Any], time_screen, choice: BaselineChoice,
                     refused: tuple[type[BaseException], ...] = (), time_final=None):
    """The candidate a vendor row runs, its `algorithm` completed with how it was chosen.

    `candidates` are the heuristic's (each with a ``launch`` and an
    ``algorithm``: an `AlgorithmChoice`), in its order; `time_screen(launch)`
    and `time_final(launch)` give a launch's median in ms by a round of the
    pre-selection's screen and of its final (the screen's timing where no
    final timing is given). With one candidate, or the ``heuristic`` choice,
    the first is kept untimed. A candidate whose launch raises one of
    `refused` (the library refusing the algorithm) is passed over; when every
    one is, the first one's error is raised again. A tie keeps the
    heuristic's earlier candidate in the screen, the screen's faster in the
    final.
    """
    if choice.mode == HEURISTIC or len(candidates) == 1:
        first = candidates[0]
        return dataclasses.replace(first, algorithm=dataclasses.replace(
            first.algorithm, choice=choice.mode, candidates=1))
    screen: list[list[float] | None] = [[] for _ in candidates]
    errors: list[BaseException] = []
    order = list(range(len(candidates)))
    for index in order + order[::-1]:
        rounds = screen[index]
        if rounds is None:
            continue
        try:
            rounds.append(time_screen(candidates[index].launch))
        except refused as exc:
            screen[index] = None
            errors.append(exc)
    medians = [None if rounds is None else statistics.median(rounds) for rounds in screen]
    try:
        ranking = ranked(medians)
    except ValueError:
        raise errors[0] from None
    finalists = ranking[:FINALISTS]
    final: list[float | None] = [None] * len(candidates)
    if len(finalists) > 1:
        final_rounds: dict[int, list[float]] = {index: [] for index in finalists}
        for place in FINAL_ORDER:
            index = finalists[place]
            final_rounds[index].append((time_final or time_screen)(candidates[index].launch))
        for index, rounds in final_rounds.items():
            final[index] = statistics.median(rounds)
        winner_index = finalists[pick_fastest([final[index] for index in finalists])]
    else:
        winner_index = finalists[0]
    winner = candidates[winner_index]
    return dataclasses.replace(winner, algorithm=dataclasses.replace(
        winner.algorithm, choice=BEST, candidates=len(candidates), preselect_ms=_rounded(medians),
        final_ms=_rounded(final)))


def _rounded(values: Sequence[float | None]) -> tuple[float | None, ...]:
    return tuple(None if value is None else float(f"{value:.4g}") for value in values)
