"""What several commands share: the output streams and format, spec loading, results reading, defaults."""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from rich.console import Console

from .. import output_files
from ..errors import UsageError
from ..report.lines import say

# Off a terminal (a pipe, a file, a CI log) tables are laid out for this width and text lines are not wrapped.
PIPE_WIDTH = 100
# A narrower $COLUMNS or terminal is taken as unknown (PIPE_WIDTH): tables there would be all ellipses.
MIN_WIDTH = 40
FORMATS = ("table", "markdown", "csv")


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich would exit 1 here; the CLI's funnel gives a closed pipe its own code (and silences stdout).
        raise BrokenPipeError

    def print(self, *objects, **options) -> None:
        """As rich prints, except that off a terminal a table too wide for the width is printed whole, unwrapped."""
        table_type = getattr(sys.modules.get("rich.table"), "Table", None)   # no table before rich.table is read
        needed = 0 if self.is_terminal or table_type is None else max(
            (_uncut_width(self, table) for table in objects if isinstance(table, table_type)), default=0)
        if needed <= self.width:
            return super().print(*objects, **options)
        given = self._width
        self.width = needed
        try:
            return super().print(*objects, **options)
        finally:
            self._width = given


class _ErrorConsole(Console):
    def on_broken_pipe(self) -> None:
        # A reader of stderr that went away ends nothing: the lines it would have read are dropped.
        self.quiet = True


def _uncut_width(console: Console, table) -> int:
    """The width at which `table` shows every value whole. rich's narrowing of a table too wide for its console
    does not keep each column's narrowest width (it can cut a single-word label): only the table's own does."""
    from rich.measure import Measurement   # rich is heavy: imported once a table is printed

    return Measurement.get(console, console.options.update_width(1 << 14), table).maximum


class _Stream:
    """The file a console writes to: this process's stdout or stderr (as rich finds it), its failures ruled.

    A stderr that is closed, or whose reader went away, loses its lines and
    ends nothing. On stdout a reader that went away is `BrokenPipeError` (the
    funnel's exit 141); any other failure to write is `OutputError` (exit 1),
    saying what failed. Characters the stream's encoding cannot hold are
    written as escapes (``\\u03bb``), not as a failure.
    """

    def __init__(self, name: str):
        self.name = name

    @property
    def stream(self):
        stream = getattr(sys, self.name)
        return getattr(stream, "rich_proxied_file", stream)

    def _failed(self, error: BaseException | None):
        if self.name == "stderr":
            return 0
        if isinstance(error, BrokenPipeError):
            raise error
        raise output_files.OutputError(f"stdout could not be written ({self._reason(error)}): the rest of the "
                                       "output is lost") from None

    def _reason(self, error: BaseException | None) -> str:
        if isinstance(error, OSError):
            return output_files.reason_of(error)
        stream = self.stream
        if stream is None or getattr(stream, "closed", False):
            return "it is closed"
        return f"{type(error).__name__}: {error}"

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except UnicodeEncodeError as error:
            return self._write_escaped(text, error.encoding)
        except (OSError, ValueError, AttributeError) as error:   # AttributeError: no stream at all (None)
            return self._failed(error)

    def _write_escaped(self, text: str, encoding: str) -> int:
        # A stream whose encoding cannot hold a character (an ASCII locale's stdout and a Greek kernel name) still
        # gets the rest of the output, and the escape still says which character it was.
        try:
            self.stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
        except (OSError, ValueError, AttributeError) as error:
            return self._failed(error)
        return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except (OSError, ValueError, AttributeError) as error:
            self._failed(error)

    def isatty(self) -> bool:
        try:
            return self.stream.isatty()
        except (OSError, ValueError, AttributeError):
            return False

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def console_width(stream) -> int | None:
    """The width to lay a console out for: None for rich's own (a terminal of sane width), else a number.

    $COLUMNS, or a terminal's own width, below `MIN_WIDTH` counts as unknown:
    `PIPE_WIDTH` then, as off a terminal.
    """
    columns = os.environ.get("COLUMNS", "")
    sane = read_whole_number(columns) is not None and int(columns) >= MIN_WIDTH
    if not stream.isatty():
        return int(columns) if sane else PIPE_WIDTH
    if sane:
        return None
    try:
        size = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        size = 0
    if size < MIN_WIDTH:
        return PIPE_WIDTH
    return size if columns else None


def stdout_closed() -> bool:
    """True when this process has no stdout to write to (started with it closed, or closed since)."""
    stream = sys.stdout
    if stream is None or getattr(stream, "closed", False):
        return True
    try:
        descriptor = stream.fileno()
    except (OSError, ValueError, AttributeError):   # no descriptor (a test's capture): open
        return False
    try:
        os.fstat(descriptor)
    except OSError:
        return True
    return False


@dataclass
class Output:
    """Where a command writes: `console` (stdout: tables or the chosen format) and `errors` (stderr)."""

    console: Console
    errors: Console
    format: str = "table"

    @classmethod
    def for_terminal(cls, format: str = "table") -> "Output":
        """Consoles for this process's stdout and stderr, of the width `console_width` gives each."""
        stdout, stderr = _Stream("stdout"), _Stream("stderr")
        # (ignored below) rich uses only write, flush, isatty and fileno of its file; its stubs ask for IO[str]
        return cls(_Console(file=stdout, width=console_width(stdout)),  # type: ignore[arg-type]
                   _ErrorConsole(file=stderr, soft_wrap=True, width=console_width(stderr)),  # type: ignore[arg-type]
                   format or "table")

    @property
    def plain(self) -> bool:
        """Markdown or CSV on stdout: every other line goes to stderr, so that stdout is only the data."""
        return self.format != "table"

    def data(self, text: str) -> None:
        """Markdown or CSV, written as is, line by line (a reader that stops early is noticed at the next line)."""
        file = self.console.file
        for line in text.splitlines(keepends=True):
            file.write(line)
        file.flush()

    def note(self, text: str, style: str | None = "dim") -> None:
        """A line about the output (where results went, what was skipped): stdout, or stderr beside data."""
        say(self.errors if self.plain else self.console, text, style)

    def error(self, text: str) -> None:
        """One line on stderr, prefixed with the program's name."""
        say(self.errors, f"driver-gemm: {text}")


def add_format_options(parser):
    """``--markdown`` and ``--csv``: the command's tables in that form on stdout instead of terminal tables; the
    group, for a command to add a form of its own (``compare --json``)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--markdown", dest="format", action="store_const", const="markdown", default="table",
                       help="print the tables as Markdown (the README's tables are made this way)")
    group.add_argument("--csv", dest="format", action="store_const", const="csv",
                       help="print one CSV row per case, every figure unrounded")
    return group


# A whole number as a C program or a shell reads one: ASCII digits, a leading minus. Python's int() also takes
# full-width or other Unicode digits ('１２'), underscores ('1_0'), a plus sign and surrounding spaces.
_WHOLE_NUMBER = re.compile(r"-?[0-9]+")


def read_whole_number(text: str) -> int | None:
    """`text` as a whole number when it is written with the digits 0-9 (and perhaps a leading minus), else None."""
    return int(text) if _WHOLE_NUMBER.fullmatch(text) else None


def whole_number(text: str) -> int:
    """An option's ``type``: a whole number written with the digits 0-9 (`read_whole_number`)."""
    number = read_whole_number(text)
    if number is None:
        raise argparse.ArgumentTypeError(f"a whole number is written with the digits 0-9, got {text!r}")
    return number


# A change of a million percent is a time ten thousand times another's: a threshold past it calls every change SAME.
MAX_THRESHOLD_PCT = 1e6


def decimal_number(text: str) -> float:
    """An option's ``type``: a number written in ASCII (12, 2.5, 1e3; nan and inf are left to the option's own range
    check), where float() would also take full-width digits ('５') and underscores ('1_0')."""
    try:
        if not text.isascii() or "_" in text:
            raise ValueError(text)
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number is written with the digits 0-9 (12, 2.5, 1e3), got {text!r}"
                                         ) from None


def env_device() -> int:
    """The GPU ordinal in $DRIVER_GEMM_DEVICE, 0 when unset or empty (as the other variables and the pytest
    plugin read an empty value)."""
    text = os.environ.get("DRIVER_GEMM_DEVICE", "")
    if not text.strip():
        return 0
    ordinal = read_whole_number(text.strip())
    if ordinal is None:
        raise UsageError(f"must be a GPU ordinal, got {text!r}", field="DRIVER_GEMM_DEVICE",
                         hint="a whole number written with the digits 0-9: 0, 1, ...")
    return check_ordinal(ordinal, "DRIVER_GEMM_DEVICE")


def check_environment() -> None:
    """The variables of the compile bounds and the caches, checked when a command that compiles starts: a value
    that is no setting is exit 2 whether or not the cache already holds every kernel, where it would otherwise be
    read only once something is compiled."""
    # lazy: only the commands that compile need them (both are light: no NumPy, no CUDA)
    from ..cuda import bounded, cache

    bounded.compile_bounds()
    cache.enabled()


def check_arch_option(text: str | None) -> None:
    """``--arch`` refused before any work unless it names an architecture a spec's ``arch:`` may name: the same
    rule (`driver_gemm.specfile.archs.arch_problem`), so that NVRTC is never asked for a target it cannot build."""
    if text is None:
        return
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..specfile.archs import arch_problem

    problem = arch_problem(text)
    if problem is not None:
        # lazy: NVRTC is asked only for a refusal, whose hint names the architectures plan --arch plans for
        from ..planning.spec_plan import PLANNABLE_AS, plannable_archs

        problem = arch_problem(text, plannable_archs(), PLANNABLE_AS) or problem
        raise UsageError(problem[0], field="--arch", hint=problem[1])


def check_ordinal(ordinal: int, option: str) -> int:
    """A GPU ordinal from the command line: 0 or more (whether that GPU exists is the driver's to say)."""
    if not 0 <= ordinal < 1 << 31:
        raise UsageError(f"a GPU ordinal is 0, 1, ... ; got {ordinal}", field=option)
    return ordinal


def check_output_file(path: Path | None, option: str) -> None:
    """Refuse, before any work, a file to write that could never be written where it is named.

    An existing folder or device, a read-only file, a dangling link or a loop,
    or a path under something that is not a folder, would otherwise fail only
    when the results are ready, and lose them (see `driver_gemm.output_files`).
    """
    output_files.check_output(path, option)


def check_output_folder(path: Path | None, option: str) -> None:
    """As `check_output_file`, for a folder the command fills (created when missing)."""
    output_files.check_output_folder(path, option)


def refuse_aliases(outputs, inputs=()) -> None:
    """Refuse an output that is one of the command's inputs or another output (`output_files.refuse_aliases`)."""
    output_files.refuse_aliases(outputs, inputs)


def spec_inputs(spec) -> list[tuple[str, Path]]:
    """The files a spec makes a command read (`planning.spec_files.spec_inputs`), as `refuse_aliases` takes them."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..planning.spec_files import spec_inputs as inputs_of

    return inputs_of(spec)


def add_source_option(parser) -> None:
    """``--allow-outside-sources``: kernel sources may leave the spec's project (the user's explicit leave)."""
    parser.add_argument("--allow-outside-sources", action="store_true",
                        help="let a spec's kernel sources be absolute paths or lie outside the spec's project "
                             "(its folder tree up to the nearest folder holding .git, pyproject.toml, setup.py "
                             "or setup.cfg)")


def spec_argument(text: str) -> Path:
    """A SPEC argument as a path; an empty one is refused by name (as a path it would be ".", the current
    folder, and be reported as a folder that is no spec)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the spec argument is empty: name a spec file or a shipped spec "
                                         "(driver-gemm specs lists them)")
    return Path(text)


def results_argument(text: str) -> Path:
    """A RESULTS argument as a path; an empty one is refused by name (as a path it would be ".", the current
    folder, and be reported as a folder that is no results file)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"an empty path ({text!r}) names no results file: give the path of one "
                                         "(.json, .jsonl, or either .gz)")
    return Path(text)


SPEC_HELP = ("a spec file, or the name of a shipped spec (fast, or fast.yaml; `driver-gemm specs` lists them); "
             "a file of that name here wins, named exactly as given: ./fast.yaml is read for fast.yaml, not "
             "for fast")


def resolve_spec(path: Path) -> Path:
    """The file a command's SPEC argument names: an existing path as given, else the shipped spec of that bare name.

    The rule is the library's (`driver_gemm.specfile.shipped.resolve_spec`): a path that exists always wins, so a
    local ``fast.yaml`` is read before the shipped one; a bare name that is neither is refused with the shipped
    specs listed.
    """
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..specfile.shipped import resolve_spec as resolve

    return resolve(path)


# Options whose value may begin with a minus ('--shape -1x5x5'): argparse takes such a word for an option and says
# the option has no value, so the word is joined to its option ('--shape=-1x5x5'), which argparse reads as that value.
_MAY_TAKE_A_MINUS = ("--shape", "-s")
_STARTS_NEGATIVE = re.compile(r"-[0-9]")
# A shape of three whole numbers, signed: one below 1 is said as such, not as no shape at all.
_SIGNED_SHAPE = re.compile(r"\s*(-?[0-9]+)\s*[xX*,]\s*(-?[0-9]+)\s*[xX*,]\s*(-?[0-9]+)\s*")


def join_negative_values(argv: list[str]) -> list[str]:
    """`argv` with each value that begins with a minus joined to its option (`_MAY_TAKE_A_MINUS`), so that a
    negative shape reaches the shape's own check; what follows ``--`` is left as it is."""
    joined: list[str] = []
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            return [*joined, *argv[index:]]
        following = argv[index + 1] if index + 1 < len(argv) else ""
        if word in _MAY_TAKE_A_MINUS and _STARTS_NEGATIVE.match(following):
            joined.append(f"{word}={following}" if word.startswith("--") else word + following)
            index += 2
        else:
            joined.append(word)
            index += 1
    return joined


def check_shape_options(shapes: list[str]) -> None:
    """Refuse a ``--shape`` of whole numbers one of which is below 1, with the rule it breaks."""
    for text in shapes:
        found = _SIGNED_SHAPE.fullmatch(text)
        if found is not None and min(int(part) for part in found.groups()) < 1:
            raise UsageError(f"shape {text!r} has a dimension below 1: M, N and K are at least 1", field="--shape")


def load_specs(paths: list[Path], kernels: list[str], shapes: list[str], allow_outside_sources: bool = False):
    """The specs named (default: the seed spec), each narrowed to the selected kernels and shapes.

    Each of `paths` is a file or a shipped spec's name (`resolve_spec`).
    """
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..specfile import DEFAULT_SPEC, load_spec

    check_shape_options(shapes)
    return [load_spec(resolve_spec(path), allow_outside_sources=allow_outside_sources)
            .select(kernels, shapes, fields=("--kernel", "--shape")) for path in (paths or [DEFAULT_SPEC])]


# Runs of one spec name that may start in one second without --json: each takes the next free default name.
MAX_SAME_SECOND_RUNS = 1000


def default_json(name: str) -> Path:
    """``results/NAME-TIMESTAMP.json`` (`name` a spec's `file_stem`: no path can leave results/)."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"{name}-{stamp}.json"


@contextlib.contextmanager
def claimed_default_json(name: str) -> Iterator[Path]:
    """`default_json`'s path, taken for this run alone for as long as the block runs.

    Two runs that start in the same second (two specs of one name in one
    command, or two commands at once) would otherwise write one file and one
    case log. The name is taken by creating it, empty, with ``O_EXCL``; where
    another run took it, or a case log of that name is there, the next of
    ``NAME-TIMESTAMP-2.json``, ``-3``... is. The run replaces the empty file
    with its results; where it writes none, the file is removed at the end.
    """
    first = default_json(name)
    for count in range(1, MAX_SAME_SECOND_RUNS + 1):
        path = first if count == 1 else first.with_name(f"{first.stem}-{count}{first.suffix}")
        if os.path.lexists(path.with_suffix(".jsonl")):
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666))
        except FileExistsError:
            continue
        except OSError as error:
            raise output_files.OutputError(f"{path}: not written ({output_files.reason_of(error)})") from None
        break
    else:
        raise output_files.OutputError(f"{first}: not written: it and the next {MAX_SAME_SECOND_RUNS - 1} names "
                                       "are taken: give --json")
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            if path.stat().st_size == 0:
                path.unlink()


def read_results_files(paths: list[Path], out: Output) -> list:
    """Each results file, checked (see `driver_gemm.results.read`); what reading skipped is said on stderr."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..results.read import read_results

    runs = []
    for path in paths:
        loaded = read_results(path)
        for note in loaded.notes:
            say(out.errors, f"driver-gemm: {note}", "yellow")
        runs.append(loaded.run)
    return runs
