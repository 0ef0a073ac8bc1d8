"""Where a command's wall time goes: named moments, in seconds since its process started.

``driver-gemm run`` marks the moments that divide a run (workers spawned, specs read, tasks dealt,
each GPU's first and last case, results written, ...) into ``settings.timeline_s``, so that
what a run spends outside its cases is read from the run itself rather than guessed from totals.
The origin is the process's start as Linux records it (``/proc/self/stat``), else this module's import.
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
