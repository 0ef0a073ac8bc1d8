"""Compilers run in processes of their own: bounded in time and memory, stopped at once, leaving nothing behind.

NVRTC compiles in a child Python process (`compile_child`) whose address space is capped (``RLIMIT_AS``) and
whose run is timed; nvcc runs as it is, in a session of its own with its temporary files in a folder of ours. Each
child leads its own process group, so a Ctrl-C at the terminal reaches only this process, which then kills the
groups of the compiles the interrupted call started (nvcc's gcc and cc1plus with them; `StopScope`) before the
interrupt goes on: one Ctrl-C stops a compile however long NVRTC would have taken, while compiles that other threads
started for calls of their own go on. A SIGTERM while a compile runs ends it the same way. The
bounds are `compile_bounds`: ``DRIVER_GEMM_COMPILE_TIMEOUT_S`` (default 600 s, 0 for no time limit, at most
`MAX_TIMEOUT_S`) and ``DRIVER_GEMM_COMPILE_MEMORY_MB`` (default 16384 MiB, 0 for no cap, at least `MIN_MEMORY_MB`
and at most `MAX_MEMORY_MB`).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from ..errors import CompileError, DriverGemmError, UsageError

TIMEOUT_VARIABLE = "DRIVER_GEMM_COMPILE_TIMEOUT_S"
MEMORY_VARIABLE = "DRIVER_GEMM_COMPILE_MEMORY_MB"
DEFAULT_TIMEOUT_S = 600
DEFAULT_MEMORY_MB = 16384
# 64 PiB: the largest address space Linux gives a process (5-level page tables); a larger cap could never be
# reached, and RLIMIT_AS cannot even hold one past 2**63 bytes.
MAX_MEMORY_MB = 1 << 36
# Below about this, the compile's child process fails before NVRTC reads the source (Python's own start, NVRTC's
# library mapped, ptxas's working memory for the smallest kernel), each in words that do not name the cap.
MIN_MEMORY_MB = 256
# About 24.8 days: the wait for a compile ends in poll(2), whose timeout is a C int of milliseconds; a longer one
# raises OverflowError. 0 is the way to ask for no limit at all.
MAX_TIMEOUT_S = (2**31 - 1) // 1000
PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])   # the folder the child imports driver_gemm from


@dataclass(frozen=True)
class Bounds:
    """How long one compile may run (infinity: no time limit), and how much address space NVRTC's process may
    have (None: no cap)."""

    seconds: float
    memory_bytes: int | None

    def describe(self) -> str:
        memory = f"{self.memory_bytes >> 20} MiB" if self.memory_bytes else "no memory cap"
        return f"{self.seconds:g} s, {memory}" if math.isfinite(self.seconds) else f"no time limit, {memory}"


def compile_bounds() -> Bounds:
    """The bounds from the environment; a `UsageError` naming the variable for a value that is no bound."""
    values = {}
    for name, default in ((TIMEOUT_VARIABLE, DEFAULT_TIMEOUT_S), (MEMORY_VARIABLE, DEFAULT_MEMORY_MB)):
        text = os.environ.get(name, "").strip()
        try:
            if not text.isascii() or "_" in text:   # float() also takes full-width digits and 1_000
                raise ValueError(text)
            values[name] = float(text) if text else float(default)
        except ValueError:
            raise UsageError(f"must be a number in ASCII digits (600, 0.5), got {text!r}", field=name) from None
        if not values[name] >= 0 or values[name] == float("inf"):
            raise UsageError(f"must be a finite number of at least 0, got {text!r}", field=name)
    if values[TIMEOUT_VARIABLE] > MAX_TIMEOUT_S:
        raise UsageError(f"must be at most {MAX_TIMEOUT_S} s (about 24 days, the longest wait the operating system "
                         f"takes; 0 for no time limit), got {os.environ[TIMEOUT_VARIABLE].strip()!r}",
                         field=TIMEOUT_VARIABLE)
    if 0 < values[MEMORY_VARIABLE] < MIN_MEMORY_MB:
        raise UsageError(f"must be at least {MIN_MEMORY_MB} MiB (what the compile's own process and NVRTC need "
                         f"before any source is read; 0 for no cap), got {os.environ[MEMORY_VARIABLE].strip()!r}",
                         field=MEMORY_VARIABLE)
    if values[MEMORY_VARIABLE] > MAX_MEMORY_MB:
        raise UsageError(f"must be at most {MAX_MEMORY_MB} MiB (64 PiB, more than any process can address; 0 for no "
                         f"cap), got {os.environ[MEMORY_VARIABLE].strip()!r}", field=MEMORY_VARIABLE)
    seconds = values[TIMEOUT_VARIABLE] or math.inf      # 0: no time limit, as 0 MiB is no memory cap
    memory = int(values[MEMORY_VARIABLE] * 2**20)
    return Bounds(seconds, memory or None)


class ChildStopped(DriverGemmError):
    """A child process ended by a bound: `reason` is ``"time"`` or ``"memory"``, or ``"stopped"`` (an interrupt)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class StopScope:
    """The compiles one call started (`compile_spec`'s, on the threads of its pool), so that an interrupt of that call
    stops them, and only them: the threads of other calls, in this process, go on compiling.

    `stop` kills the process group of every compile of the scope still running and refuses new ones in it; a child
    it killed is `ChildStopped("stopped")`, not a crash. A scope entered (`stop_scope`) inside another one belongs
    to it: stopping the outer one stops the inner one's compiles too. Nothing of a scope outlives its call, so a
    stop never fails a later compile.
    """

    def __init__(self, parent: StopScope | None = None):
        self.parent = parent
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._children: set[subprocess.Popen] = set()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set() or (self.parent is not None and self.parent.stopped)

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            children = list(self._children)
        for child in children:
            _kill_group(child)

    def _chain(self) -> list[StopScope]:
        scopes: list[StopScope] = []
        scope: StopScope | None = self
        while scope is not None:
            scopes.append(scope)
            scope = scope.parent
        return scopes

    def _add(self, child: subprocess.Popen) -> None:
        for scope in self._chain():     # an outer scope's stop reaches its inner scopes' children too
            with scope._lock:
                scope._children.add(child)

    def _discard(self, child: subprocess.Popen) -> None:
        for scope in self._chain():
            with scope._lock:
                scope._children.discard(child)


# The scope of the call this code runs for. A context variable, not a global: each call (and each thread a pool
# runs its work on, given the caller's context: `in_scope`) sees its own, so one call's stop reaches no other's.
_scope: contextvars.ContextVar[StopScope | None] = contextvars.ContextVar("driver_gemm_stop_scope", default=None)


@contextlib.contextmanager
def stop_scope():
    """A new `StopScope` for the block (inside the current one, if any), current in this thread while it runs."""
    scope = StopScope(_scope.get())
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


def in_scope(function):
    """`function` to run on another thread (a pool's) within the caller's scope: a thread does not inherit the
    context of the thread that hands it work. Each call runs in a copy of the context, since one context cannot be
    entered by two threads at once."""
    context = contextvars.copy_context()

    def run(*args, **kwargs):
        return context.copy().run(function, *args, **kwargs)
    return run


def _kill_group(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        child.kill()
    except ProcessLookupError:
        pass


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def terminated_as_interrupt():
    """Within the block (in the main thread), SIGTERM raises KeyboardInterrupt, so that the compiles' children are
    killed and their files removed as on Ctrl-C; a handler someone else installed is left alone."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run_bounded(command: list[str], request: bytes | None, seconds: float, *, env: dict | None = None,
                cwd: str | None = None) -> subprocess.CompletedProcess:
    """`command` in a session of its own, fed `request` on stdin, its stdout and stderr collected as bytes.

    Raises `ChildStopped("time")` past `seconds` (infinity: never), and re-raises an interrupt
    (KeyboardInterrupt, or a SIGTERM in the main thread) after killing the child's whole process group; either
    way nothing of it is left running. Raises `ChildStopped("stopped")` when the current `StopScope` is stopped
    (before the child starts, or while it runs: killed by the stop). A child that cannot be started at all (its
    program missing or not
    executable, no memory or processes left) is a `CompileError` naming the program: every caller runs a
    compiler or a compiler's check, and records a `CompileError` as the kernel's failure to build.
    """
    scope = _scope.get()
    if scope is not None and scope.stopped:
        raise ChildStopped("stopped")
    with terminated_as_interrupt():
        try:
            child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True, env=env, cwd=cwd)
        except OSError as error:   # a Python child is named by its module: `python` alone says too little
            program = " ".join(command[:3]) if command[1:2] == ["-m"] else command[0]
            raise CompileError(f"could not start {program}: {error.strerror or error}") from None
        if scope is not None:
            scope._add(child)
        try:
            if scope is not None and scope.stopped:     # stopped while it started: `stop` did not see it
                raise ChildStopped("stopped")
            stdout, stderr = child.communicate(request, timeout=seconds if math.isfinite(seconds) else None)
        except subprocess.TimeoutExpired:
            _kill_group(child)
            child.communicate()
            raise ChildStopped("time") from None
        except BaseException:
            _kill_group(child)
            child.communicate()
            raise
        finally:
            _kill_group(child)     # whatever it started and left behind goes with it
            if scope is not None:
                scope._discard(child)
    if scope is not None and scope.stopped:
        # Killed by the scope's stop (SIGKILL, as a cap on memory would end it), or done as the stop came: either
        # way the call is being stopped, and the child's end is no result of its own.
        raise ChildStopped("stopped")
    return subprocess.CompletedProcess(command, child.returncode, stdout, stderr)


def python_child(module: str, *arguments: str) -> tuple[list[str], dict]:
    """The command and environment of a child Python process running `module`, importing this same package."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_PARENT, *filter(None, [env.get("PYTHONPATH")])])
    return [sys.executable, "-m", module, *arguments], env
