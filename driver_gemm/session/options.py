"""How a run goes beyond its spec (`RunOptions`) and where its cases run (`Placement`), in a module of its own:
the command line hands the options to the GPUs' worker processes before it has imported anything that runs a
case."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..measure.vendor_choice import BaselineChoice

TIMERS = ("events", "cupti")


@dataclass(frozen=True)
class RunOptions:
    """How a run goes beyond its spec: whether cases are timed, where failure pictures go, how the cuBLASLt rows
    pick their algorithm and what times a sample."""

    time: bool = True                 # False: verify only (one checked launch per case)
    artifacts: Path | None = None     # an error map of C is saved here for every failing case
    baseline_choice: BaselineChoice = BaselineChoice()   # ``run --baseline``: best of N, or the heuristic's first
    timer: str = "events"             # ``run --timer``: CUDA events, or kernel durations from CUPTI

    def __post_init__(self) -> None:
        if not isinstance(self.time, bool):
            raise ValueError(f"RunOptions.time: True or False, not {self.time!r}")
        if self.artifacts is not None and not isinstance(self.artifacts, Path):
            raise ValueError(f"RunOptions.artifacts: a pathlib.Path or None, not {self.artifacts!r}")
        if not isinstance(self.baseline_choice, BaselineChoice):
            raise ValueError(f"RunOptions.baseline_choice: a BaselineChoice, not {self.baseline_choice!r}")
        if self.timer not in TIMERS:
            raise ValueError(f"RunOptions.timer: one of {', '.join(TIMERS)}, not {self.timer!r}")


@dataclass(frozen=True)
class Placement:
    """Where a run on one GPU runs its cases.

    device: the GPU's ordinal. isolate: in a worker process, replaced after a
    kernel fault or a hang (True), or in this process, where a fault ends the
    run (False). context, stream: a CUDA context (a raw handle; None: the
    GPU's primary context, torch's and CuPy's) and a stream the caller already
    has (any object with ``__cuda_stream__``, a torch or CuPy stream, or a raw
    handle), used and never destroyed; in-process only. gpu_worker: a worker process the caller keeps between
    runs (isolated only), used and left open.
    """

    device: int = 0
    isolate: bool = False
    context: Any = None
    stream: Any = None
    gpu_worker: Any = None            # a runners.worker.GpuWorker (a higher layer, so not imported here)

    def __post_init__(self) -> None:
        if isinstance(self.device, bool) or not isinstance(self.device, int) or self.device < 0:
            raise ValueError(f"Placement.device: a GPU ordinal (0 or more), not {self.device!r}")
        # As RunOptions.time: a truthy string ("no") would otherwise isolate the run.
        if not isinstance(self.isolate, bool):
            raise ValueError(f"Placement.isolate: True or False, not {self.isolate!r}")
        if self.isolate and (self.context is not None or self.stream is not None):
            field = "context" if self.context is not None else "stream"
            raise ValueError(f"Placement.{field}: a caller's context or stream can only be used in-process "
                             "(isolate=False)")
        if self.gpu_worker is not None and not self.isolate:
            raise ValueError("Placement.gpu_worker: a worker process runs cases isolated (isolate=True)")
