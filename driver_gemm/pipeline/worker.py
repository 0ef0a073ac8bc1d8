"""Cases run in a child process, so that a kernel that faults or hangs cannot take the run down.

A fault (illegal address, trap, misaligned access) leaves CUDA unusable in
the whole process that hit it: every later call, even creating a new context,
returns the same error. So the parent never touches a context; a worker
process runs the cases and sends each result back as it finishes. When a
worker reports a fault, dies, or spends longer than the case timeout on one
case, the parent records that case (Status.ERROR or Status.TIMEOUT), ends the
worker and starts a new one on the cases that remain. A worker that cannot
start (its session fails, or it is silent past `STARTUP_TIMEOUT_S`) is
reported as such on every remaining case, marked not run so that a resume
runs them. Nothing finished is lost or run twice.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Callable, Sequence

from ..results.records import CaseResult
from ..status import Status
from .cases import Case, new_record, not_run_record
from .funnel import execute_case
from .session import RunOptions, Session

# How long a new worker may take to start (import, create its context) before it counts as hung.
STARTUP_TIMEOUT_S = 120.0


def worker_main(connection, spec, cases: Sequence[Case], compiled, device: int, options: RunOptions,
                session_factory: Callable[..., Session] = Session) -> None:
    """Child process: make a session, say ("ready",), then run `cases` in order.

    For each case it sends ("start", index) and ("result", index, record as a
    dict); a session that cannot be made is reported as ("fatal", message).
    """
    try:
        session = session_factory(device, spec.baseline, options)
    except BaseException as exc:  # noqa: BLE001 - anything here must reach the parent as a message
        connection.send(("fatal", f"{type(exc).__name__}: {exc}"))
        connection.close()
        return
    try:
        connection.send(("ready",))
        for case in cases:
            connection.send(("start", case.index))
            outcome = execute_case(session, spec, case, compiled)
            connection.send(("result", case.index, outcome.as_dict()))
            if session.poisoned:
                return  # the parent starts a fresh process for the rest
    finally:
        session.close()
        connection.close()


def run_isolated(spec, cases: Sequence[Case], compiled, device: int, options: RunOptions,
                 finish: Callable[[CaseResult], None], on_start: Callable[[Case], None] | None = None, *,
                 worker_starts: list[float] | None = None, target: Callable = worker_main,
                 startup_timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    """Run `cases` in worker processes, calling `finish` with each result in order.

    The seconds from spawning each worker to its "ready" are appended to
    `worker_starts`. `target` is the child's entry point (`worker_main`, or a
    stand-in with its signature in tests).
    """
    context = multiprocessing.get_context("spawn")   # never fork a process that may hold CUDA state
    kernels = {case.kernel.label for case in cases if case.kernel is not None}
    runnable = {label: cubin for label, cubin in compiled.items() if label in kernels}
    remaining = list(cases)
    by_index = {case.index: case for case in cases}
    case_timeout = spec.measure.case_timeout_s

    def give_up(reason: str) -> None:
        nonlocal remaining
        for case in remaining:
            finish(not_run_record(case, f"the worker process did not start: {reason}"))
        remaining = []

    while remaining:
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(target=target, args=(sender, spec, remaining, runnable, device, options),
                                  daemon=True)
        spawned = time.monotonic()
        process.start()
        sender.close()
        current: Case | None = None
        ready = False
        deadline = spawned + startup_timeout_s
        try:
            while remaining:
                if not receiver.poll(max(0.0, deadline - time.monotonic())):
                    if not ready:
                        give_up(f"no word from it after {startup_timeout_s:g} s")
                        break
                    victim = current or remaining[0]
                    finish(new_record(victim, Status.TIMEOUT, f"no result after {case_timeout:g} s: the case was "
                                                              "stopped (measure.case_timeout_s)"))
                    remaining.remove(victim)
                    break
                try:
                    message = receiver.recv()
                except EOFError:
                    process.join(5)
                    if current is not None:   # it died inside a case: a crash of the process itself
                        finish(new_record(current, Status.ERROR, f"the worker process died (exit code "
                                                                 f"{process.exitcode}) while running this case"))
                        remaining.remove(current)
                    elif not ready:           # it died before it was ready: it cannot start at all
                        give_up(f"it exited with code {process.exitcode} before it was ready")
                    break                     # else it stopped after a fault, as it should: start another
                kind = message[0]
                if kind == "ready":
                    ready = True
                    if worker_starts is not None:
                        worker_starts.append(round(time.monotonic() - spawned, 3))
                    deadline = time.monotonic() + case_timeout
                elif kind == "start":
                    current = by_index[message[1]]
                    deadline = time.monotonic() + case_timeout
                    if on_start:
                        on_start(current)
                elif kind == "result":
                    finish(CaseResult.from_dict(message[2]))
                    remaining.remove(by_index[message[1]])
                    current = None
                    deadline = time.monotonic() + case_timeout
                elif kind == "fatal":
                    give_up(f"could not start on the GPU: {message[1]}")
        finally:
            receiver.close()
            if process.is_alive():
                process.kill()
            process.join()
