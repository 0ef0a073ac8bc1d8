"""Which cuBLASLt algorithm a vendor row runs: the heuristic's first, or the fastest of its first N.

`BaselineChoice` is what a run asks for (``--baseline best:8`` or ``--baseline heuristic``);
`AlgorithmChoice` is what a row ran, as its results record it; `pick_fastest` and
`preselect_settings` are the choice itself, kept pure so that they are tested without a GPU.
CUTLASS's profiler (``--library-algo-mode=best``) and nvmath-python's ``Matmul.autotune`` also
time several of the heuristic's algorithms and keep the fastest: a "% of cuBLAS" measured against
the heuristic's first alone may be measured against a slower algorithm than the library has.
The method: docs/timing.md, "The vendor row".
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    # types only: the options that name a choice are made before any heavy module is imported
    from ..specfile.model import MeasureSettings

BEST, HEURISTIC = "best", "heuristic"
DEFAULT_CANDIDATES = 8          # as nvmath-python's Matmul plans by default (its algorithm limit)
MAX_CANDIDATES = 64

# The pre-selection: each candidate timed briefly, by the case's own sample pattern, before the winner is
# measured in full. Enough samples for a median that tells algorithms a few percent apart.
PRESELECT_WARMUP = 2
PRESELECT_MIN_SAMPLES = 10
PRESELECT_MIN_TIME_S = 0.05
PRESELECT_TIMEOUT_S = 0.5
PRESELECT_MAX_PAUSE_MS = 100.0  # a resting pattern's rest, capped: 8 candidates x 3 samples x 5 s would be minutes


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
            out["preselect"] = {"warmup": PRESELECT_WARMUP, "min_samples": PRESELECT_MIN_SAMPLES,
                                "min_time_s": PRESELECT_MIN_TIME_S, "timeout_s": PRESELECT_TIMEOUT_S}
        return out


@dataclass(frozen=True)
class AlgorithmChoice:
    """The cuBLASLt algorithm a vendor row ran, read through cublasLtMatmulAlgoConfigGetAttribute.

    rank: its place in the heuristic's list (1 is the heuristic's first).
    candidates: how many the heuristic offered and were tried. choice: the
    run's `BaselineChoice` mode. preselect_ms: each candidate's median in the
    pre-selection, in heuristic order (None where it could not run).
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
    other: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "preselect_ms", tuple(self.preselect_ms))

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "other"}
        out["preselect_ms"] = list(self.preselect_ms)
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
    """The index of the shortest median; a tie keeps the heuristic's earlier one; None (a candidate that
    could not run) is passed over. ValueError when no candidate ran."""
    ran = [(value, index) for index, value in enumerate(medians)
           if value is not None and math.isfinite(value) and value > 0]
    if not ran:
        raise ValueError("no candidate algorithm could be timed")
    return min(ran)[1]


def preselect_settings(settings: MeasureSettings) -> MeasureSettings:
    """The case's measure settings shortened for the pre-selection: the same sample pattern, flush and mode,
    fewer samples and less time; a pattern's rest before each sample at most `PRESELECT_MAX_PAUSE_MS`."""
    pattern = settings.pattern
    samples = settings.samples
    if pattern.pause_ms > PRESELECT_MAX_PAUSE_MS:
        samples = dataclasses.replace(pattern, pause_ms=PRESELECT_MAX_PAUSE_MS).label
    return dataclasses.replace(settings, warmup=min(settings.warmup, PRESELECT_WARMUP) or 1,
                               min_samples=min(settings.min_samples, PRESELECT_MIN_SAMPLES),
                               min_time_s=min(settings.min_time_s, PRESELECT_MIN_TIME_S),
                               timeout_s=min(settings.timeout_s, PRESELECT_TIMEOUT_S), samples=samples)


def choose_candidate(candidates: Sequence[Any], time_one, choice: BaselineChoice,
                     refused: tuple[type[BaseException], ...] = ()):
    """The candidate a vendor row runs, its `algorithm` completed with how it was chosen.

    `candidates` are the heuristic's (each with a ``launch`` and an
    ``algorithm``: an `AlgorithmChoice`), in its order; `time_one(launch)`
    gives a launch's median in ms by the pre-selection's timing. With one
    candidate, or the ``heuristic`` choice, the first is kept untimed. A
    candidate whose launch raises one of `refused` (the library refusing the
    algorithm) is passed over; when every one is, the first one's error is
    raised again.
    """
    if choice.mode == HEURISTIC or len(candidates) == 1:
        first = candidates[0]
        return dataclasses.replace(first, algorithm=dataclasses.replace(
            first.algorithm, choice=choice.mode, candidates=1))
    medians: list[float | None] = []
    errors: list[BaseException] = []
    for candidate in candidates:
        try:
            medians.append(time_one(candidate.launch))
        except refused as exc:
            medians.append(None)
            errors.append(exc)
    try:
        index = pick_fastest(medians)
    except ValueError:
        raise errors[0] from None
    winner = candidates[index]
    rounded = tuple(None if value is None else float(f"{value:.4g}") for value in medians)
    return dataclasses.replace(winner, algorithm=dataclasses.replace(
        winner.algorithm, choice=BEST, candidates=len(candidates), preselect_ms=rounded))
