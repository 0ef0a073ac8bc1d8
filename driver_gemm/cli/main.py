"""The ``driver-gemm`` command line: its parser, its exit codes, and the one funnel every error goes through.

Each command lives in its own module (`run`, `plan`, `show`, `compare`,
`plot`, `tune`, `info`, `specs`) with two functions: ``add_parser(commands)`` and
``execute(args, out) -> int``. `main` parses, runs the command, and turns
whatever it raises into one line on stderr and the code `exit_code_for`
gives; only ``--debug`` shows a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from .. import output_files
from ..version import __version__
from ..errors import (CudaError, DriverGemmError, NoGpuError, SpecError, ToolMissingError,
                      UsageError)
from . import compare, info, plan, plot, run, show, specs, tune
from .common import Output, join_negative_values, stdout_closed
from . import log_output
from .exit_codes import (EXIT_BROKEN_PIPE, EXIT_CODES_HELP, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NO_GPU,  # noqa: F401
                         EXIT_OK, EXIT_USAGE)

EXIT_CODES_POINTER = "exit codes: see driver-gemm --help"
STDOUT_CLOSED = ("stdout is closed: what this command shows would be lost; send it to a file or to /dev/null "
                 "(>/dev/null) instead of closing it")

VERBOSE_HELP = "also print what the library logs as it works (-v: compiles; -vv: cache hits and more)"
QUIET_HELP = "print only errors from the library's log (run and tune: also no progress lines, with their -q)"

COMMANDS = {"run": run, "plan": plan, "show": show, "compare": compare, "plot": plot, "tune": tune, "info": info,
            "specs": specs}


def _tool_missing_errors() -> tuple[type, ...]:
    """Errors of optional layers that mean 'a tool or library is not installed' (exit 3)."""
    # lazy: the layers whose errors these are, imported only once a command has failed
    from ..measure.baseline import CublasUnavailable
    from ..measure.clocks import ClockError
    from ..runners.distribute import DaskUnavailable

    return ToolMissingError, NoGpuError, CublasUnavailable, DaskUnavailable, ClockError


def exit_code_for(error: BaseException) -> int:
    """The exit code for an exception that ended a command (the table in `EXIT_CODES_HELP`)."""
    # lazy: the layers whose errors these are, imported only once a command has failed
    from ..specfile.expr import ExpressionError

    if isinstance(error, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(error, BrokenPipeError):
        return EXIT_BROKEN_PIPE
    if isinstance(error, (SpecError, UsageError, ExpressionError)):
        return EXIT_USAGE
    if isinstance(error, _tool_missing_errors()):
        return EXIT_NO_GPU
    if isinstance(error, (CudaError, DriverGemmError)):
        return EXIT_FAILED
    return EXIT_FAILED


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # keep argparse's one-line form and its exit code, which is ours for usage too
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"driver-gemm: error: {message}\n")

    def _print_message(self, message, file=None):
        """argparse's every write (--help, --version, usage), flushed at once. argparse ignores a failed write,
        and the text waits in the buffer until the interpreter's exit drops it: --help into a full disk would
        exit 0 with nothing written. Here a failed write of stdout is one line on stderr and a code, as a
        command's own output is: 141 for a reader that went away, else 1."""
        if not message:
            return
        if file is None and sys.stdout is None:    # argparse's stdout, closed when the command started
            _say_on_stderr(f"driver-gemm: {STDOUT_CLOSED}")
            raise SystemExit(EXIT_USAGE)
        file = file or sys.stderr
        try:
            file.write(message)
            file.flush()
        except (OSError, ValueError, AttributeError) as error:    # ValueError: closed since
            if file is not sys.stdout:
                return                 # stderr lost: nothing is left to say it on
            _silence_stdout()          # what is left in its buffer goes nowhere, not into a second failure at exit
            if isinstance(error, BrokenPipeError):
                raise SystemExit(EXIT_BROKEN_PIPE) from None
            reason = output_files.reason_of(error) if isinstance(error, OSError) else "it is closed"
            _say_on_stderr(f"driver-gemm: stdout could not be written ({reason}): the rest of the output is lost")
            raise SystemExit(EXIT_FAILED) from None


def _say_on_stderr(line: str) -> None:
    """One line on stderr, where there is one to write to."""
    try:
        if sys.stderr is not None:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
    except (OSError, ValueError):
        pass


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: one sub-command per module of `COMMANDS`; the exit codes once, in the epilog of
    ``driver-gemm --help`` (each sub-command's help points there)."""
    parser = _Parser(prog="driver-gemm", description="Compile, launch, check and time CUDA GEMM kernels "
                                                     "from YAML specs, through NVRTC and the CUDA driver API.",
                     epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"driver-gemm {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    parser.add_argument("--verbose", "-v", action="count", default=0, help=VERBOSE_HELP)
    parser.add_argument("--quiet", "-q", dest="log_quiet", action="store_true", help=QUIET_HELP)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an internal error")
    common.add_argument("--verbose", "-v", action="count", default=argparse.SUPPRESS, help=VERBOSE_HELP)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in COMMANDS.values():
        module.add_parser(commands, parents=[common], epilog=EXIT_CODES_POINTER)
    return parser


def _silence_stdout() -> None:
    """After a broken pipe: send what is left of stdout to /dev/null, so that exiting prints nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _claim_closed_descriptors() -> None:
    """Descriptors 0, 1 and 2 that are closed opened on /dev/null; a closed stdout or stderr is then None to Python.

    Otherwise the first file the command opens (a results file, a cache
    entry) would take the number and receive whatever is written to that
    stream, by this process's libraries or by the worker processes that
    inherit it. Python itself makes a stream None when the process starts
    with it closed; one closed later is made so here, so that `main` sees
    both alike.
    """
    for descriptor, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(descriptor)
            continue
        except OSError:
            pass
        try:
            null = os.open(os.devnull, os.O_RDWR)
            if null != descriptor:
                os.dup2(null, descriptor)
                os.close(null)
        except OSError:
            continue
        setattr(sys, name, None)


def console() -> None:
    """The ``driver-gemm`` executable: `main`, its output flushed, then an exit without the interpreter's teardown.

    By the time `main` returns, everything the command writes is written
    and closed (results, case logs, the compile cache) and every GPU worker
    was told to stop or was killed: what the interpreter's teardown would
    add is freeing modules and arrays the OS frees at once, and waiting for
    workers that close their sessions on their own.
    """
    _claim_closed_descriptors()
    try:
        code = main()
    except KeyboardInterrupt:   # before the command's funnel (parsing the command line): said as it would say it
        try:
            if sys.stderr is not None:
                sys.stderr.write("driver-gemm: interrupted\n")
        except (OSError, ValueError):   # stderr gone: the exit code still says it
            pass
        code = EXIT_INTERRUPTED
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:       # None: closed when the command started
                stream.flush()
        except (OSError, ValueError):    # a reader that went away (141 already says so), or a closed stream
            pass
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """Run ``driver-gemm`` with `argv` (default: the process's arguments) and return its exit code."""
    args = build_parser().parse_args(join_negative_values(sys.argv[1:] if argv is None else list(argv)))
    out = Output.for_terminal(getattr(args, "format", "table"))
    quiet = args.log_quiet or getattr(args, "quiet", False)    # run's and tune's -q: no progress, no log lines
    with log_output.logs_on(out.errors, log_output.level_of(args.verbose, quiet)):
        return _execute(args, out)


def _execute(args, out: Output) -> int:
    if stdout_closed():     # refused before any work: what the command shows would be lost
        out.error(STDOUT_CLOSED)
        return EXIT_USAGE
    try:
        return COMMANDS[args.command].execute(args, out)
    except BaseException as error:   # the one funnel: every ending of a command is a line and a code
        if isinstance(error, SystemExit):
            raise
        code = exit_code_for(error)
        if code == EXIT_BROKEN_PIPE:
            _silence_stdout()
        elif code == EXIT_INTERRUPTED:
            out.error("interrupted")
        elif isinstance(error, DriverGemmError) or code != EXIT_FAILED:
            out.error(str(error))
        else:
            out.error(f"internal error: {type(error).__name__}: {error} "
                      "(please report it; rerun with --debug for the traceback)")
        if args.debug and code not in (EXIT_BROKEN_PIPE, EXIT_INTERRUPTED) and sys.stderr is not None:
            traceback.print_exception(error, file=sys.stderr)
        return code
