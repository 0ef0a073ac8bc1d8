"""Cases run one after another in this process, on one GPU."""

from __future__ import annotations

from typing import Callable, Sequence

from ..planning.cases import Case, not_run_record
from ..results.records import CaseResult
from ..session import steps as case_steps
from ..session.execute import StepsFor, execute_case
from ..session.options import Placement, RunOptions
from ..session.state import Session
from ..specfile.model import Spec


def run_in_process(spec: Spec, cases: Sequence[Case], compiled, options: RunOptions, placement: Placement,
                   finish: Callable[[CaseResult], None], on_start: Callable[[Case], None] | None = None, *,
                   session_factory: Callable[..., Session] = Session,
                   steps_for: StepsFor = case_steps.steps_for) -> None:
    """Run `cases` in this process; after a fault that poisons CUDA, the rest are recorded as not run.

    `session_factory` and `steps_for` make the session and each case's steps
    (the real ones by default; a test passes stand-ins).
    """
    session = session_factory(placement.device, spec.baseline, options, context=placement.context,
                              stream=placement.stream)
    try:
        for position, case in enumerate(cases):
            if on_start:
                on_start(case)
            finish(execute_case(session, spec, case, compiled, steps_for))
            if session.device.poisoned:
                for rest in cases[position + 1:]:
                    finish(not_run_record(rest, f"CUDA is unusable in this process after {case.label} at "
                                                f"{case.shape.label} faulted (run isolated to go on past faults)"))
                return
    finally:
        session.close()
