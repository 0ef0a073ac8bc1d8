"""How a run goes beyond its spec (`RunOptions`) and where its cases run (`Placement`), in a module of its own:
the command line hands the options to the GPUs' worker processes before it has imported anything that runs a
case."""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ArgumentError, WrongArgumentType, WrongArgumentValue, flag_argument
from ..measure.vendor_choice import BaselineChoice

TIMERS = ("events", "cupti")


def _flag(owner: str, name: str, value: object) -> bool:
    """True or False (NumPy's too, as `flag_argument` takes), else `WrongArgumentType` naming the field as
    ``Class.field``, as the other fields' errors do."""
    try:
        return flag_argument(owner, name, value)
    except WrongArgumentType:
        raise WrongArgumentType(f"{owner}.{name}: True or False, not {value!r:.60}") from None


@dataclass(frozen=True)
class RunOptions:
    """How a run goes beyond its spec: whether cases are timed, where failure pictures go, how the cuBLASLt rows
    pick their algorithm and what times a sample."""

    time: bool = True                 # False: verify only (one checked launch per case)
    artifacts: Path | None = None     # an error map of C is saved here for every failing case (a str is taken too)
    baseline_choice: BaselineChoice = BaselineChoice()   # ``run --baseline``: best of N, or the heuristic's first
    timer: str = "events"             # ``run --timer``: CUDA events, or kernel durations from CUPTI

    def __post_init__(self) -> None:
        # A truthy string ("no") would otherwise time the run; NumPy's bool is taken as Python's.
        object.__setattr__(self, "time", _flag("RunOptions", "time", self.time))
        if self.artifacts is not None:
            if not isinstance(self.artifacts, (str, os.PathLike)) or isinstance(os.fspath(self.artifacts), bytes):
                raise WrongArgumentType(f"RunOptions.artifacts: a folder's path (a str or a pathlib.Path) or None, "
                                        f"not {self.artifacts!r:.60}")
            if "\x00" in os.fspath(self.artifacts) or not os.fspath(self.artifacts):
                raise WrongArgumentValue(f"RunOptions.artifacts: a folder's path, not {self.artifacts!r:.60}")
            object.__setattr__(self, "artifacts", Path(self.artifacts))   # what the code after reads
        if not isinstance(self.baseline_choice, BaselineChoice):
            raise WrongArgumentType(f"RunOptions.baseline_choice: a BaselineChoice (BaselineChoice.parse('best:4')), "
                                    f"not {self.baseline_choice!r:.40}")
        if not isinstance(self.timer, str):
            raise WrongArgumentType(f"RunOptions.timer: one of {', '.join(TIMERS)}, not {self.timer!r:.40}")
        if self.timer not in TIMERS:
            raise WrongArgumentValue(f"RunOptions.timer: one of {', '.join(TIMERS)}, not {self.timer!r:.40}")


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
        # numbers.Integral: NumPy's whole numbers too, taken as Python's (and stored as an int)
        if isinstance(self.device, bool) or not isinstance(self.device, numbers.Integral):
            raise WrongArgumentType(f"Placement.device: a GPU ordinal (a whole number), not {self.device!r:.40} "
                                    f"({type(self.device).__name__})")
        if self.device < 0:
            raise WrongArgumentValue(f"Placement.device: a GPU ordinal (0 or more), not {self.device!r}")
        object.__setattr__(self, "device", int(self.device))
        # As RunOptions.time: a truthy string ("no") would otherwise isolate the run.
        object.__setattr__(self, "isolate", _flag("Placement", "isolate", self.isolate))
        if self.isolate and (self.context is not None or self.stream is not None):
            field = "context" if self.context is not None else "stream"
            raise WrongArgumentValue(f"Placement.{field}: a caller's context or stream can only be used in-process "
                                     "(isolate=False)")
        if self.gpu_worker is not None and not self.isolate:
            raise WrongArgumentValue("Placement.gpu_worker: a worker process runs cases isolated (isolate=True)")
        if self.stream is not None:
            # Read now, as the run would read it: a float or a text taken as a handle would run on another stream.
            from ..cuda.interop import stream_handle   # NumPy: not imported where no stream is given (the CLI)

            try:
                stream_handle(self.stream)
            except ArgumentError as exc:
                raise ArgumentError(exc.message, where="Placement", field="stream") from None
        if self.context is not None:
            from ..cuda.device import context_argument   # as for the stream

            context_argument("Placement", self.context)
