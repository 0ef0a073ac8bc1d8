"""A run's settings (`RunSettings`): how it was made, as its results file records it under ``settings``.

One dataclass, built when the run begins and filled by the parts that drive
it (the command line, one GPU's runner, the runners on several GPUs, a
search); every field is optional because each kind of run fills its own.
On disk it is the JSON object it always was: `to_json` writes the fields that
are set under their own names, `from_json` reads them back, and keys that a
later version may add are kept as read (`other`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunSettings:
    """How a run was made. None means "not part of this kind of run", and is left out of the file.

    measure, verify, scalars: the spec's settings the run used (as the spec's
    dataclasses write them). isolate: whether cases ran in worker processes.
    locked_sm_clock_mhz: the SM clock locked for the run, by GPU ordinal
    (``run --lock-clocks``). timeline_s: the moments of the command, in
    seconds from its start. worker_start_s, worker_start_steps: the seconds
    each worker process took to start, and where they went (a run on one
    GPU). tasks, gpu_workers, estimates: a run on several GPUs (each task's
    line, each GPU's worker, how many cases were priced from memory). tune:
    a search's strategy, budget, screens, cache and work. sanitize: the
    compute-sanitizer tool of ``run --sanitize``. baseline_algorithm: how
    the cuBLASLt rows chose their algorithm (``run --baseline``). timer: what
    timed the samples (``run --timer``: events or cupti).
    """

    measure: dict | None = None
    verify: dict | None = None
    scalars: dict | None = None
    isolate: bool | None = None
    locked_sm_clock_mhz: dict[str, int] | None = None
    timeline_s: dict[str, float] | None = None
    worker_start_s: list[float] | None = None
    worker_start_steps: list[dict] | None = None
    tasks: list[dict] | None = None
    gpu_workers: list[dict] | None = None
    estimates: dict | None = None
    tune: dict | None = None
    sanitize: str | None = None
    baseline_algorithm: dict | None = None
    timer: str | None = None
    other: dict[str, Any] = field(default_factory=dict)   # keys this version does not know, kept as read

    def to_json(self) -> dict[str, Any]:
        """The ``settings`` object of a results file: the fields that are set, then `other`."""
        return set_fields_json(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RunSettings":
        """The settings of a results file (`to_json`'s form); an unknown key goes to `other`."""
        if not isinstance(data, dict):
            raise ValueError(f"RunSettings: the settings are a JSON object, not {type(data).__name__}")
        return from_known_fields(cls, data)


def set_fields_json(record) -> dict[str, Any]:
    """A record's JSON object: its fields that are set (not None), then the keys kept in its `other`."""
    out = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)
           if f.name != "other" and getattr(record, f.name) is not None}
    return {**out, **record.other}


def from_known_fields(cls, data: dict[str, Any]):
    """`cls` from a JSON object `set_fields_json` wrote: its own fields by name, any other key into `other`."""
    known = {f.name for f in dataclasses.fields(cls)} - {"other"}
    return cls(**{key: value for key, value in data.items() if key in known},
               other={key: value for key, value in data.items() if key not in known})
