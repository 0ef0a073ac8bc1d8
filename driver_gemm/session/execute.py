"""The per-case error funnel: a case's steps run in order, and whatever goes wrong becomes that case's record.

Both the in-process runner and the worker process call `execute_case`, so a
case ends the same way wherever it runs.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from ..cuda import nvtx as ranges
from ..errors import CudaError, DriverGemmError
from ..results.records import CaseResult
from ..specfile.model import Spec
from ..status import Status
from . import steps as case_steps
from ..planning.cases import Case, new_record
from .state import Session

StepsFor = Callable[[Case], Sequence[tuple[str, case_steps.Step]]]


def execute_case(session: Session, spec: Spec, case: Case, compiled,
                 steps_for: StepsFor = case_steps.steps_for) -> CaseResult:
    """One case, whatever happens to it: its steps in order, each timed, through the error funnel.

    Any exception a step raises ends the case as ERROR with the exception's
    message (a `DriverGemmError` as it reads, anything else prefixed with its
    type); a CUDA error that poisons the context also marks the session's
    device, so the caller stops using this process. Seconds per step go to
    the record's ``phases``.
    """
    label = None if case.kernel is None else case.kernel.label
    run = case_steps.start(case, session, spec, compiled.get(label) if label else None)
    phases: dict[str, float] = {}
    try:
        with ranges.annotate(f"{case.label} {case.shape.label}", color="blue"):
            for name, step in steps_for(case):
                began = time.perf_counter()
                try:
                    step(run)
                finally:
                    phases[name] = time.perf_counter() - began
                if run.stopped:
                    break
        record = run.record
    except CudaError as exc:
        session.device.mark_poisoned(exc)
        message = str(exc)
        if session.device.poisoned:
            message += " (this fault leaves CUDA unusable in the process that ran it)"
        record = new_record(case, Status.ERROR, message)
    except Exception as exc:  # noqa: BLE001 - the funnel: whatever goes wrong in a case is that case's ERROR
        message = str(exc) if isinstance(exc, DriverGemmError) else f"{type(exc).__name__}: {exc}"
        record = new_record(case, Status.ERROR, message)
    record.phases = phases
    return record
