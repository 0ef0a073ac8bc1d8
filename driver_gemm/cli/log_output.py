"""The library's `logging` messages on the command line: each record one line on stderr, as the commands write.

The package logs under ``driver_gemm.<module>`` and installs no handler but a
`NullHandler`; a command puts this one on the package's logger for as long as
it runs, at the level its options ask for: WARNING by default, ``-v`` INFO,
``-vv`` DEBUG, ``-q`` ERROR only.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator

from rich.console import Console

from ..report.lines import say

PACKAGE_LOGGER = "driver_gemm"
_STYLES = {logging.WARNING: "yellow", logging.ERROR: "red", logging.CRITICAL: "red"}


class ConsoleHandler(logging.Handler):
    """Writes a record as ``driver-gemm: MESSAGE`` on a command's error console (a warning as ``driver-gemm: warning:
    MESSAGE``, in yellow)."""

    def __init__(self, console: Console, level: int = logging.NOTSET):
        super().__init__(level)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            kind = "warning: " if record.levelno == logging.WARNING else ""    # as plan's and compare's are marked
            say(self.console, f"driver-gemm: {kind}{record.getMessage()}", _STYLES.get(record.levelno))
        except Exception:   # noqa: BLE001 - logging's rule: a handler that fails reports it and goes on
            self.handleError(record)


def level_of(verbose: int = 0, quiet: bool = False) -> int:
    """The level a command's ``-q`` and ``-v`` (counted) ask for."""
    if quiet:
        return logging.ERROR
    return logging.DEBUG if verbose >= 2 else logging.INFO if verbose == 1 else logging.WARNING


@contextlib.contextmanager
def logs_on(console: Console, level: int) -> Iterator[ConsoleHandler]:
    """The package's log records at `level` and above on `console` while the block runs; as it was after."""
    logger = logging.getLogger(PACKAGE_LOGGER)
    handler = ConsoleHandler(console)
    saved = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved)
