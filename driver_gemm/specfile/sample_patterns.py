"""How samples are taken: what runs between them, and so the duty cycle and the clock a power-bound GEMM runs at.

A `SamplePattern` is read from ``measure: {samples: ...}`` or ``run --samples``:

- ``flush``: an L2 flush (a write of twice the L2) before every sample, samples queued back to back
  behind the launch gate (nvbench's cold measurement; the default);
- ``flush-idle:MS``: the same, each sample after MS milliseconds in which the GPU has nothing to do;
- ``do-bench``: 256 MB of zeros written before every sample, queued back to back (Triton's ``do_bench``,
  whose ``cache.zero_()`` writes them);
- ``burst[:N[:MS]]``: N launches back to back on a warm L2 (no flush), timed together, each burst
  after MS milliseconds of rest (8 and 100 unless given): how many authors' own harnesses time.

Pure, and part of the spec (`measure.samples`): the sampler (`measure.timing.EventSampler`) acts on it. What each does to the clock: docs/timing.md.
"""

from __future__ import annotations

from dataclasses import dataclass

FLUSH, FLUSH_IDLE, DO_BENCH, BURST = "flush", "flush-idle", "do-bench", "burst"
PATTERNS = (FLUSH, FLUSH_IDLE, DO_BENCH, BURST)
DO_BENCH_FLUSH_BYTES = 256 << 20       # Triton's get_empty_cache_for_benchmark: 256 MB of int32, zeroed per sample
DEFAULT_BURST_LAUNCHES = 8
DEFAULT_BURST_REST_MS = 100.0
MAX_PAUSE_MS = 60_000.0
MAX_BURST_LAUNCHES = 1000
USAGE = "flush, flush-idle:MS, do-bench, burst, burst:N or burst:N:MS"


@dataclass(frozen=True)
class SamplePattern:
    """What runs between samples. kind: one of `PATTERNS`; pause_ms: the GPU's rest before each sample
    (flush-idle and burst); launches: launches timed together per sample (burst)."""

    kind: str = FLUSH
    pause_ms: float = 0.0
    launches: int = 1

    @classmethod
    def parse(cls, text: str) -> "SamplePattern":
        """`USAGE`'s forms; ValueError saying them otherwise."""
        if not isinstance(text, str):
            raise ValueError(f"give {USAGE}, not {text!r}")
        kind, *rest = text.strip().split(":")
        try:
            if kind in (FLUSH, DO_BENCH) and not rest:
                return cls(kind)
            if kind == FLUSH_IDLE and len(rest) == 1:
                return cls(kind, pause_ms=_milliseconds(rest[0]))
            if kind == BURST and len(rest) <= 2:
                launches = _count(rest[0]) if rest else DEFAULT_BURST_LAUNCHES
                pause = _milliseconds(rest[1]) if len(rest) == 2 else DEFAULT_BURST_REST_MS
                return cls(kind, pause_ms=pause, launches=launches)
        except ValueError as exc:
            raise ValueError(f"give {USAGE}: {exc} in {text!r}") from None
        raise ValueError(f"give {USAGE}, not {text!r}")

    @property
    def label(self) -> str:
        """The text `parse` reads back (the form settings record)."""
        if self.kind == FLUSH_IDLE:
            return f"{self.kind}:{self.pause_ms:g}"
        if self.kind == BURST:
            return f"{self.kind}:{self.launches}:{self.pause_ms:g}"
        return self.kind

    @property
    def one_by_one(self) -> bool:
        """Whether each sample is queued and waited for alone (the GPU rests between samples)."""
        return self.pause_ms > 0

    @property
    def writes_zeros(self) -> bool:
        """Whether the flush writes zeros (do-bench: Triton's ``cache.zero_()``) rather than a changing word."""
        return self.kind == DO_BENCH

    def flush_bytes(self, l2_flush_bytes: int, flush_l2: bool) -> int:
        """Bytes written before each sample: the L2 flush (unless ``flush_l2: false``), do_bench's 256 MB, or
        none for a warm burst."""
        if self.kind == DO_BENCH:
            return DO_BENCH_FLUSH_BYTES
        if self.kind == BURST or not flush_l2:
            return 0
        return l2_flush_bytes


def _milliseconds(text: str) -> float:
    try:
        if not text.isascii() or "_" in text:   # float() also takes full-width digits ('５') and '1_0'
            raise ValueError(text)
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of milliseconds") from None
    if not 0 < value <= MAX_PAUSE_MS:      # also refuses NaN
        raise ValueError(f"{text!r} ms is not above 0 and at most {MAX_PAUSE_MS:g}")
    return value


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_BURST_LAUNCHES:
        raise ValueError(f"{text!r} is not a count of launches from 1 to {MAX_BURST_LAUNCHES}")
    return int(text)
