"""Where a command's wall time goes: named moments, in seconds since its process started.

``driver-gemm run`` marks the moments that divide a run: the GPUs' worker
processes spawned (before the specs are read), the specs read, the workers
told to begin, the driver's answer, the tasks dealt (several GPUs), the
workers' sessions made (by the worker's clock) and their being heard to be
ready, each GPU's first and last case and the moment it had no task left,
its worker told to stop, the results about to be written. They go into the
results under ``settings["timeline_s"]``, so that what a run spends before
its first case and after its last (the part a second GPU cannot halve) is
read from the run itself rather than guessed from totals. The moments after
the file is written (the results written, the tables shown, the workers let
go) are kept too, for a caller that reads `marks` at the command's exit
(``scripts/two_gpus.py`` does).

The origin is the process's own start as the kernel records it (Linux's
``/proc/self/stat``), so the interpreter's start and the imports count;
where that cannot be read, the moment this module was imported.
"""

from __future__ import annotations

import os
import time


def _process_age_s() -> float:
    """Seconds since this process started (0.0 where the kernel does not say)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            # The command name (field 2) may hold spaces and ')': the fields after its last ')' are fixed.
            fields = stat.read().rsplit(")", 1)[1].split()
        started_s = int(fields[19]) / os.sysconf("SC_CLK_TCK")        # field 22, starttime: ticks after boot
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started_s)
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


_ORIGIN = time.monotonic() - _process_age_s()
_MARKS: dict[str, float] = {}


def since_start(at: float | None = None) -> float:
    """Seconds from the process's start to `at` (a `time.monotonic()` reading; default now)."""
    return (time.monotonic() if at is None else at) - _ORIGIN


def mark(moment: str, *, first: bool = False, at: float | None = None) -> None:
    """Note `moment` now (or at `at`, a `time.monotonic()` reading); with `first`, only if not noted yet.

    A moment noted again moves (e.g. a GPU's last case); safe from any
    thread, since each note is one dictionary assignment.
    """
    if first and moment in _MARKS:
        return
    _MARKS[moment] = since_start(at)


def marks() -> dict[str, float]:
    """Every moment noted so far, in the order they happened, in seconds (to the millisecond)."""
    noted = dict(_MARKS)            # a copy: another thread may note a moment meanwhile
    return {moment: round(seconds, 3) for moment, seconds in sorted(noted.items(), key=lambda item: item[1])}


def forget() -> None:
    """Drop every moment (a test's, or a library caller's between two runs)."""
    _MARKS.clear()
