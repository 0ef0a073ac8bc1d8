"""How a run goes beyond its spec, in a module of its own: the command line hands it to the GPUs' worker
processes before it has imported anything that runs a case."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunOptions:
    """How a run goes beyond its spec: whether cases are timed, and where failure pictures go."""

    time: bool = True                 # False: verify only (one checked launch per case)
    artifacts: Path | None = None     # an error map of C is saved here for every failing case
