"""Cases run in a child process, so that a kernel that faults or hangs cannot take the run down.

A fault leaves CUDA unusable in the whole process that hit it, so the parent never touches a
context: a `GpuWorker` owns a child process on one GPU that makes its session once and runs every
batch it is sent. When the child faults, dies or overruns the case timeout, the parent records that
case (ERROR or TIMEOUT) and a new child takes the rest; nothing finished is lost or run twice.
More on faults: docs/debugging.md.
"""

from __future__ import annotations

import functools
import multiprocessing
import time
from typing import TYPE_CHECKING, Callable, Sequence

from .. import timeline
from ..session.options import RunOptions
from ..status import Status

if TYPE_CHECKING:
    # for annotations only
    from ..results.records import CaseResult
    from ..planning.cases import Case
    from ..session.state import Session

# This module is imported by the command before it reads its specs, to spawn the workers as early as it can: what
# a worker needs to run cases (the session, the funnel, NumPy and the driver's bindings) is imported in `serve`,
# in the child, and what the parent needs to follow a batch, in `GpuWorker.run`.

# How long a new worker may take to start (import, create its context) before it counts as hung.
STARTUP_TIMEOUT_S = 120.0


def serve(connection, device: int, options: RunOptions, want_cublas: bool | None,
          session_factory: Callable[..., Session] | None = None, execute: Callable | None = None) -> None:
    """Child process: `_serve`, ended quietly by an interrupt. Ctrl-C (or a `timeout -s INT`) reaches the whole
    process group: the parent keeps the results and says so; the child closes its session and leaves, with no
    traceback of its own. A parent that is gone (its end of the pipe closed: it raised, such as NoGpuError, and
    closed the worker) ends it quietly too: there is nobody to tell, and the parent reports its own error."""
    try:
        _serve(connection, device, options, want_cublas, session_factory, execute)
    except (KeyboardInterrupt, BrokenPipeError, ConnectionResetError):
        pass


def _serve(connection, device: int, options: RunOptions, want_cublas: bool | None,
           session_factory: Callable[..., Session] | None = None, execute: Callable | None = None) -> None:
    """Make a session, say ("ready",), then run each batch it is sent until told to stop.

    The real session's GPU is opened (cuInit, its context) on a thread of
    its own before the modules a session needs are imported: the driver's
    start hides behind the imports'. With `want_cublas` None the child
    was spawned before the command knew its specs: it then waits for
    ("session", want_cublas) before it makes the rest of its session (the
    parent's end of the pipe closing first ends it quietly, its device
    closed).

    A batch is ("run", spec, cases, compiled); for each case it sends
    ("start", index) and ("result", index, record as a dict, whether it now
    exits), and ("done",) after the last. ("stop",), or the parent going away, ends it. A session
    that cannot be made is reported as ("fatal", message). After a case that
    leaves CUDA unusable it exits: the parent starts a fresh process.
    The "ready" message carries when this function was entered and when the
    session was made (the machine's monotonic clock, which the parent
    shares) and the session's `start_steps`, so the parent can say where
    the start-up went.
    """
    opening = None
    if session_factory is None:         # (a stand-in session, in tests, opens no GPU)
        # the child's heavy imports (NumPy, CUDA), behind its start: the parent spawns it first
        from ..cuda.device import OpeningDevice

        # A context of its own, not the primary one: the worker is a process of ours that nothing shares, and
        # its context's flags and lifetime are then exactly ours (docs/embedding.md, "Which context").
        opening = OpeningDevice(device, own_context=True)
    # the child's heavy imports (NumPy, CUDA), behind its start: the parent spawns it first
    from ..session.execute import execute_case
    from ..session.state import Session

    session_factory = session_factory or functools.partial(Session, opening=opening)
    execute = execute or execute_case
    entered = time.monotonic()          # the interpreter has started and imported what a session needs
    waited = None
    if want_cublas is None:
        try:
            message = connection.recv()
        except EOFError:
            message = ("gone",)
        if message[0] != "session":
            if opening is not None:
                opening.close()
            return
        want_cublas, waited = bool(message[1]), round(time.monotonic() - entered, 3)
    try:
        session = session_factory(device, want_cublas, options)
    except BaseException as exc:  # noqa: BLE001 - anything here must reach the parent as a message
        connection.send(("fatal", f"{type(exc).__name__}: {exc}"))
        connection.close()
        return
    try:
        steps = {} if waited is None else {"waiting_for_the_specs_s": waited}
        connection.send(("ready", {"entered": entered, "made": time.monotonic(),
                                   "steps": {**steps, **getattr(session, "start_steps", {})}}))
        while True:
            try:
                message = connection.recv()
            except EOFError:
                return
            if message[0] != "run":
                return
            _, spec, cases, compiled = message
            for case in cases:
                connection.send(("start", case.index))
                outcome = execute(session, spec, case, compiled)
                connection.send(("result", case.index, outcome.as_dict(), session.poisoned))
                if session.poisoned:
                    return
            connection.send(("done",))
    finally:
        session.close()
        connection.close()


def start_steps(ready: tuple, spawned: float) -> dict[str, float]:
    """Where a child's start-up went, from its "ready" message: the interpreter and imports, then the session's parts."""
    if len(ready) < 2 or not isinstance(ready[1], dict):
        return {}                       # a stand-in child that says only "ready"
    report = ready[1]
    steps = {}
    if isinstance(report.get("entered"), (int, float)):
        steps["interpreter_and_imports_s"] = round(max(0.0, report["entered"] - spawned), 3)
    steps.update({name: seconds for name, seconds in (report.get("steps") or {}).items()
                  if isinstance(seconds, (int, float))})
    return steps


class GpuWorker:
    """The child process that runs cases on GPU `device`, kept between batches and replaced after a crash.

    `start` spawns it without waiting (its start-up overlaps the caller's planning); `run` waits where
    needed. Each process's seconds from spawn to "ready" go to `starts`, and where they went to
    `start_steps`. `target` is the child's entry point (`serve`, or a stand-in in tests); `child_args`
    follow the device, options and cuBLAS wish. With `want_cublas` None the child is spawned before the
    specs are known and makes no session until `begin`; `cancel` ends a child nothing will run on.
    """

    def __init__(self, device: int, options: RunOptions = RunOptions(), *, want_cublas: bool | None = True,
                 target: Callable = serve, child_args: tuple = (),
                 startup_timeout_s: float = STARTUP_TIMEOUT_S):
        self.device = device
        self.options = options
        self.want_cublas = want_cublas
        self.target = target
        self.child_args = child_args
        self.startup_timeout_s = startup_timeout_s
        self.starts: list[float] = []
        self.start_steps: list[dict[str, float]] = []
        self._reported = (0, 0)             # (starts, processes) already in an earlier run's report
        self.processes_started = 0
        self.broken: str | None = None      # why a process could not start: later batches are given up at once
        self.cancelled = False              # `cancel` was called: no record is made up and no process started
        self._context = multiprocessing.get_context("spawn")   # never fork a process that may hold CUDA state
        self._process: multiprocessing.process.BaseProcess | None = None
        self._connection: multiprocessing.connection.Connection | None = None
        self._spawned = 0.0
        self._ready = False
        self._stopping = False              # "stop" sent (`release`): the child is on its way out

    def start(self) -> None:
        """Spawn the child if none is running (returns at once; it says "ready" when its session is made)."""
        if self._process is not None or self.broken is not None or self.cancelled:
            return
        parent_end, child_end = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=self.target, args=(child_end, self.device, self.options, self.want_cublas, *self.child_args),
            daemon=True)
        self._spawned = time.monotonic()
        timeline.mark(f"{self.name} spawned", first=True, at=self._spawned)
        process.start()
        child_end.close()
        self._connection, self._ready = parent_end, False
        self._process = process             # only once started: `cancel` may kill it from another thread
        self.processes_started += 1

    def begin(self, want_cublas: bool) -> None:
        """Let a child spawned before its specs were known make its session, with cuBLAS or without.

        Every later child of this worker (one replacing a crashed one) is
        spawned with the same wish and makes its session at once.
        """
        waiting = self.want_cublas is None
        self.want_cublas = want_cublas
        if waiting and self._process is not None:
            timeline.mark(f"{self.name} told to begin", first=True)
            try:
                self._connection.send(("session", want_cublas))
            except (BrokenPipeError, OSError):
                pass                          # it is gone: waiting for its "ready" says so

    def cancel(self) -> None:
        """From another thread: stop now. The child is killed and `run` returns without a record for what it cut short.

        What the child finished before is still passed to `finish`; no new
        process is started after this.
        """
        self.cancelled = True
        process = self._process
        if process is not None:
            process.kill()                  # a process already ended and reaped is left alone

    def _end(self) -> int | None:
        """End the child (it is past use), and return its exit code."""
        process, connection = self._process, self._connection
        self._process = self._connection = None
        self._ready = self._stopping = False
        if process is None:
            return None
        connection.close()
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()
        return process.exitcode

    def wait_ready(self) -> str | None:
        """Start the child if needed and wait for it; None when it is ready, else why it cannot start."""
        return self._await_ready()

    def _await_ready(self) -> str | None:
        """Wait for the child's "ready"; None when it is, else why it cannot start (and it is ended)."""
        assert self.want_cublas is not None, f"{self.name}: `begin` was not called: its child waits for its specs"
        if self._stopping:                  # released, then given more work: that child is leaving, start another
            self._end()
        self.start()
        if self.cancelled:
            return "it was cancelled"
        if self.broken is not None:
            return self.broken
        if self._ready:
            return None
        deadline = self._spawned + self.startup_timeout_s
        reason = None
        try:
            if not self._connection.poll(max(0.0, deadline - time.monotonic())):
                reason = f"no word from it after {self.startup_timeout_s:g} s"
            else:
                message = self._connection.recv()
                if message[0] == "ready":
                    self._ready = True
                    made = _session_made_at(message)
                    if made is not None:      # by the child's clock: this thread may hear of it later
                        timeline.mark(f"{self.name} session made", first=True, at=made)
                    timeline.mark(f"{self.name} ready", first=True)
                    self.starts.append(round(time.monotonic() - self._spawned, 3))
                    self.start_steps.append(start_steps(message, self._spawned))
                    return None
                reason = (f"could not start on the GPU: {message[1]}" if message[0] == "fatal"
                          else f"it said {message[0]!r} before it was ready")
        except EOFError:
            self._process.join(5)
            reason = f"it exited with code {self._process.exitcode} before it was ready"
        self._end()
        self.broken = reason
        return reason

    def run(self, spec, cases: Sequence[Case], compiled, finish: Callable[[CaseResult], None],
            on_start: Callable[[Case], None] | None = None) -> None:
        """Run `cases` (a batch) on the child, calling `finish` with each result in order; every case ends as a record."""
        # lazy: the parent imports this module before anything heavy, to spawn its workers early
        from ..results.records import CaseResult
        from ..planning.cases import new_record, not_run_record, timeout_record

        kernels = {case.kernel.label for case in cases if case.kernel is not None}
        runnable = {label: cubin for label, cubin in compiled.items() if label in kernels}
        remaining = list(cases)
        by_index = {case.index: case for case in cases}
        case_timeout = spec.measure.case_timeout_s
        while remaining and not self.cancelled:
            reason = self._await_ready()
            if self.cancelled:
                self._end()
                return
            if reason is not None:
                for case in remaining:
                    finish(not_run_record(case, f"the worker process did not start: {reason}"))
                return
            current: Case | None = None
            progressed = False
            try:
                self._connection.send(("run", spec, remaining, runnable))
            except (BrokenPipeError, EOFError, OSError):
                pass                          # it is gone: the receive below sees the end of the pipe
            deadline = time.monotonic() + case_timeout
            while True:                       # until its "done" (after the last result) or its end
                if not self._connection.poll(max(0.0, deadline - time.monotonic())):
                    if self.cancelled:
                        self._end()
                        return
                    if not remaining:         # every result is in but no "done": it is past use
                        self._end()
                        break
                    victim = current or remaining[0]
                    finish(timeout_record(victim, case_timeout))
                    remaining.remove(victim)
                    self._end()
                    break
                try:
                    message = self._connection.recv()
                except EOFError:
                    code = self._end()
                    if self.cancelled:        # killed by `cancel`: nothing it cut short is a result
                        return
                    if current is not None:   # it died inside a case: a crash of the process itself
                        finish(new_record(current, Status.ERROR, f"the worker process died (exit code {code}) "
                                                                 "while running this case"))
                        remaining.remove(current)
                    elif not progressed:      # it died before its first case: it cannot run this batch at all
                        for case in remaining:
                            finish(not_run_record(case, f"the worker process ended (exit code {code}) "
                                                        "before it ran a case"))
                        remaining = []
                    break
                kind = message[0]
                if kind == "start":
                    current = by_index[message[1]]
                    timeline.mark(f"{self.name} first case", first=True)
                    deadline = time.monotonic() + case_timeout
                    if on_start:
                        on_start(current)
                elif kind == "result":
                    timeline.mark(f"{self.name} last case")
                    finish(CaseResult.from_dict(message[2]))
                    remaining.remove(by_index[message[1]])
                    current, progressed = None, True
                    deadline = time.monotonic() + case_timeout
                    if self.cancelled:        # (in case it started as `cancel` looked for it)
                        self._end()
                        return
                    if message[3]:            # CUDA is unusable there: it exits, the rest go to a new one
                        self._end()
                        break
                elif kind == "done":
                    break

    def starts_to_report(self) -> dict:
        """What this worker started since the last call: its processes, their start-up seconds and where they went.

        A worker kept for several runs (the specs of one command) reports each
        process in the run it served first, including one spawned before that
        run began.
        """
        starts, processes = self._reported
        self._reported = (len(self.starts), self.processes_started)
        return {"processes": self.processes_started - processes, "worker_start_s": self.starts[starts:],
                "start_steps": self.start_steps[starts:]}

    @property
    def name(self) -> str:
        """What the run's timeline calls this worker's moments (as `local_gpus` names its GPU's thread)."""
        return f"gpu-{self.device}"

    def release(self) -> None:
        """Tell the child to stop now, without waiting for it: its session's teardown and its exit then
        overlap what the caller still does (other GPUs' cases, writing the results); `close` waits for it."""
        if self._process is not None and self._ready and not self._stopping:
            self._stopping = True
            timeline.mark(f"{self.name} told to stop", first=True)
            try:
                self._connection.send(("stop",))
            except (BrokenPipeError, OSError):
                pass

    def close(self, wait: bool = True) -> None:
        """Tell the child to stop (it closes its session) and wait for it; killed if it does not go.

        Without `wait`, a child already told to stop (`release`, once its work
        was done) is left to close its session and exit on its own: a command
        that has written its results need not wait for its workers' teardown.
        Any other child (not ready yet, or cut short mid-batch) is ended as
        with `wait`.
        """
        if not wait and self._stopping:
            return
        self.release()
        self._end()

    def __enter__(self) -> "GpuWorker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _session_made_at(message) -> float | None:
    """When the child's session was made (the machine's monotonic clock), from its "ready" message."""
    try:
        return float(message[1]["made"])
    except (IndexError, KeyError, TypeError, ValueError):
        return None


def run_isolated(spec, cases: Sequence[Case], compiled, device: int, options: RunOptions,
                 finish: Callable[[CaseResult], None], on_start: Callable[[Case], None] | None = None, *,
                 worker_starts: list[float] | None = None, target: Callable = serve,
                 startup_timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    """Run `cases` in worker processes of one `GpuWorker`, calling `finish` with each result in order.

    The seconds from spawning each worker to its "ready" are appended to
    `worker_starts`. `target` is the child's entry point (`serve`, or a
    stand-in with its signature in tests).
    """
    with GpuWorker(device, options, want_cublas=spec.baseline, target=target,
                   startup_timeout_s=startup_timeout_s) as worker:
        worker.run(spec, cases, compiled, finish, on_start)
    if worker_starts is not None:
        worker_starts.extend(worker.starts)
