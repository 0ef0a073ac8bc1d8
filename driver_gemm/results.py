"""The records a run produces: one `CaseResult` per kernel and shape, gathered in a `RunResult`.

They are plain data that convert to and from JSON, so results can be written
as they land, reloaded, and compared across runs.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .spec import Shape
from .stats import TimingSummary

PASS, FAIL, ERROR, INVALID, REF, TIMEOUT = "PASS", "FAIL", "ERROR", "INVALID", "REF", "TIMEOUT"
OK_STATUSES = (PASS, REF)


@dataclass
class CaseResult:
    """Everything known about one kernel on one shape."""

    kernel: str                      # readable id, e.g. v4[BM=64,BN=64,BK=16,TM=4,TN=4]
    name: str
    shape: Shape
    status: str
    params: dict = field(default_factory=dict)
    instance: str | None = None
    source: str | None = None
    message: str = ""
    seed: int | None = None
    launch: dict | None = None
    resources: dict | None = None
    attributes: dict | None = None
    occupancy: dict | None = None
    verification: dict | None = None
    timing: TimingSummary | None = None
    gflops: float | None = None
    pct_cublas: float | None = None
    pct_peak: float | None = None
    problems: list = field(default_factory=list)
    diagnosis: dict | None = None
    sanitizer: dict | None = None    # compute-sanitizer's findings, when the case ran under it
    device: dict | None = None       # name and UUID of the GPU that ran it

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES

    @property
    def median_ms(self) -> float | None:
        return self.timing.median_ms if self.timing else None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["shape"] = {"M": self.shape.M, "N": self.shape.N, "K": self.shape.K, "label": self.shape.label}
        out["timing"] = self.timing.as_dict() if self.timing else None
        return _finite(out)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CaseResult":
        data = dict(data)
        shape = data.pop("shape")
        timing = data.pop("timing", None)
        if timing:
            timing = TimingSummary(**{k: v for k, v in timing.items() if k in TimingSummary.__dataclass_fields__})
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(shape=Shape(shape["M"], shape["N"], shape["K"]), timing=timing, **known)


@dataclass
class RunResult:
    """A whole run: where and how it ran, and its cases in the order they finished."""

    spec: str
    spec_path: str | None
    environment: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    cases: list[CaseResult] = field(default_factory=list)
    started: str = ""
    finished: str = ""
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return bool(self.cases) and all(case.ok for case in self.cases)

    def as_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "spec_path": self.spec_path, "started": self.started, "finished": self.finished,
                "interrupted": self.interrupted, "environment": self.environment, "settings": self.settings,
                "cases": [case.as_dict() for case in self.cases]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunResult":
        return cls(spec=data["spec"], spec_path=data.get("spec_path"), environment=data.get("environment", {}),
                   settings=data.get("settings", {}), cases=[CaseResult.from_dict(c) for c in data.get("cases", [])],
                   started=data.get("started", ""), finished=data.get("finished", ""),
                   interrupted=data.get("interrupted", False))

    def write_json(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(path.suffix + ".tmp")
        temporary.write_text(json.dumps(self.as_dict(), indent=1) + "\n")
        temporary.replace(path)
        return path

    @classmethod
    def read_json(cls, path: str | Path) -> "RunResult":
        return cls.from_dict(json.loads(Path(path).read_text()))


def _finite(value):
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
