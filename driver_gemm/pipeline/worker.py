"""Cases run in a child process, so that a kernel that faults or hangs cannot take the run down.

A fault (illegal address, trap, misaligned access) leaves CUDA unusable in
the whole process that hit it: every later call, even creating a new context,
returns the same error. So the parent never touches a context; a worker
process runs the cases and sends each result back as it finishes. When a
worker reports a fault, dies, or spends longer than the case timeout on one
case, the parent records that case (Status.ERROR or Status.TIMEOUT), ends the worker and
starts a new one on the cases that remain. Nothing finished is lost or run twice.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Callable


from ..results.records import CaseResult

from ..status import Status

# How long a new worker may take to start (import, create its context) before it counts as hung.
STARTUP_TIMEOUT_S = 120.0


def _worker_main(connection, spec, cases, compiled, device: int, options) -> None:
    """Child process: run `cases` in order, reporting ("start", i) and ("result", i, dict) for each."""
    from .runner import _Session, execute_case

    try:
        session = _Session(device, spec.baseline, options)
    except BaseException as exc:  # noqa: BLE001 - anything here must reach the parent as a message
        connection.send(("fatal", f"{type(exc).__name__}: {exc}"))
        return
    try:
        for case in cases:
            connection.send(("start", case.index))
            outcome = execute_case(session, spec, case, compiled)
            connection.send(("result", case.index, outcome.as_dict()))
            if session.device.poisoned:
                return  # the parent starts a fresh process for the rest
    finally:
        session.close()
        connection.close()


def run_isolated(spec, cases, compiled, device: int, options, finish: Callable[[CaseResult], None],
                 on_start: Callable | None = None) -> None:
    """Run `cases` in worker processes, calling `finish` with each result in order."""
    from .runner import _error_case

    context = multiprocessing.get_context("spawn")   # never fork a process that may hold CUDA state
    kernels = {case.kernel.label for case in cases if case.kernel is not None}
    runnable = {label: cubin for label, cubin in compiled.items() if label in kernels}
    remaining = list(cases)
    by_index = {case.index: case for case in cases}
    case_timeout = spec.measure.case_timeout_s
    while remaining:
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(target=_worker_main, args=(sender, spec, remaining, runnable, device, options), daemon=True)
        process.start()
        sender.close()
        current = None
        heard = False
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        try:
            while remaining:
                if not receiver.poll(max(0.0, deadline - time.monotonic())):
                    victim = current or remaining[0]
                    finish(_error_case(victim.kernel, victim.shape,
                                       f"no result after {case_timeout:g} s: the case was stopped "
                                       "(measure.case_timeout_s)", status=Status.TIMEOUT))
                    remaining.remove(victim)
                    break
                try:
                    message = receiver.recv()
                except EOFError:
                    process.join(5)
                    if current is not None:   # it died inside a case: a crash of the process itself
                        finish(_error_case(current.kernel, current.shape,
                                           f"the worker process died (exit code {process.exitcode}) "
                                           "while running this case"))
                        remaining.remove(current)
                    elif not heard:           # it died before saying anything: it cannot start at all
                        for case in remaining:
                            finish(_error_case(case.kernel, case.shape, "the worker process could not start "
                                               f"(exit code {process.exitcode})"))
                        remaining = []
                    break                     # else it stopped after a fault, as it should: start another
                heard = True
                kind = message[0]
                if kind == "start":
                    current = by_index[message[1]]
                    deadline = time.monotonic() + case_timeout
                    if on_start:
                        on_start(current)
                elif kind == "result":
                    case = by_index[message[1]]
                    finish(CaseResult.from_dict(message[2]))
                    remaining.remove(case)
                    current = None
                    deadline = time.monotonic() + case_timeout
                elif kind == "fatal":
                    for case in remaining:
                        finish(_error_case(case.kernel, case.shape, f"could not start on the GPU: {message[1]}",
                                           status=Status.ERROR))
                    remaining = []
        finally:
            receiver.close()
            if process.is_alive():
                process.kill()
            process.join()
