"""``python -m driver_gemm``, and the ``driver-gemm`` script (pyproject.toml names `console`).

The command line's modules are imported inside `console`, under its handler, not at the top: an interrupt (Ctrl-C)
while they load, in the first fraction of a second, is then said as any later one is, ``driver-gemm: interrupted``
and exit 130, not as a traceback of the imports. This module itself imports only what the interpreter has already
loaded, so that the window before the handler is as short as it can be.
"""

import os
import sys

# cli.exit_codes.EXIT_INTERRUPTED, written here: importing it is part of what an interrupt may cut short.
EXIT_INTERRUPTED = 130


def console() -> None:
    try:
        # Imported under the handler: these imports are most of the start-up an interrupt may land in.
        from .cli.main import console as command_line
        command_line()      # it ends the process itself (os._exit), the command's interrupts said by its funnel
    except KeyboardInterrupt:
        try:
            if sys.stderr is not None:
                sys.stderr.write("driver-gemm: interrupted\n")
                sys.stderr.flush()
        except (OSError, ValueError):   # stderr closed or gone: the exit code still says it
            pass
        os._exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    console()
