"""What several commands share: the output streams and format, spec loading, results reading, defaults."""

from __future__ import annotations

import datetime as _dt
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from ..errors import UsageError
from ..report.lines import say

# Off a terminal (a pipe, a file, a CI log) tables are laid out for this width and text lines are not wrapped.
PIPE_WIDTH = 100
FORMATS = ("table", "markdown", "csv")


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich would exit 1 here; the CLI's funnel gives a closed pipe its own code (and silences stdout).
        raise BrokenPipeError


@dataclass
class Output:
    """Where a command writes: `console` (stdout: tables or the chosen format) and `errors` (stderr)."""

    console: Console
    errors: Console
    format: str = "table"

    @classmethod
    def for_terminal(cls, format: str = "table") -> "Output":
        """Consoles for this process: rich's own width on a terminal, `PIPE_WIDTH` (or $COLUMNS) elsewhere."""
        width = None if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit() else PIPE_WIDTH
        return cls(_Console(width=width), Console(stderr=True, soft_wrap=True), format or "table")

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


def add_format_options(parser) -> None:
    """``--markdown`` and ``--csv``: the command's tables in that form on stdout instead of terminal tables."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--markdown", dest="format", action="store_const", const="markdown", default="table",
                       help="print the tables as Markdown (the README's tables are made this way)")
    group.add_argument("--csv", dest="format", action="store_const", const="csv",
                       help="print one CSV row per case, every figure unrounded")


def env_device() -> int:
    """The GPU ordinal in $DRIVER_GEMM_DEVICE, 0 when unset."""
    text = os.environ.get("DRIVER_GEMM_DEVICE", "0")
    try:
        ordinal = int(text)
    except ValueError:
        raise UsageError(f"must be a GPU ordinal, got {text!r}", field="DRIVER_GEMM_DEVICE") from None
    return check_ordinal(ordinal, "DRIVER_GEMM_DEVICE")


def check_ordinal(ordinal: int, option: str) -> int:
    """A GPU ordinal from the command line: 0 or more (whether that GPU exists is the driver's to say)."""
    if not 0 <= ordinal < 1 << 31:
        raise UsageError(f"a GPU ordinal is 0, 1, ... ; got {ordinal}", field=option)
    return ordinal


def check_output_file(path: Path | None, option: str) -> None:
    """Refuse, before any work, a file to write that could never be written where it is named.

    An existing folder or device, or a path under something that is not a
    folder, would otherwise fail only when the results are ready, and lose them.
    """
    if path is None:
        return
    if path.is_dir():
        raise UsageError("is a folder: give the name of a file to write", where=str(path), field=option)
    if path.exists() and not path.is_file():
        raise UsageError("is not a regular file: give the name of a file to write", where=str(path), field=option)
    _check_writable_folder(path.parent, path, option)


def check_output_folder(path: Path | None, option: str) -> None:
    """As `check_output_file`, for a folder the command fills (created when missing)."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise UsageError("is a file, not a folder", where=str(path), field=option)
    _check_writable_folder(path, path, option)


def _check_writable_folder(folder: Path, named: Path, option: str) -> None:
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{existing} is not a folder, so nothing can be written under it", where=str(named),
                         field=option)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write in {existing} (permission denied)", where=str(named), field=option)


def add_source_option(parser) -> None:
    """``--allow-outside-sources``: kernel sources may leave the spec's project (the user's explicit leave)."""
    parser.add_argument("--allow-outside-sources", action="store_true",
                        help="let a spec's kernel sources be absolute paths or lie outside the spec's project "
                             "(its folder tree up to the nearest .git or pyproject.toml)")


def load_specs(paths: list[Path], kernels: list[str], shapes: list[str], allow_outside_sources: bool = False):
    """The specs named (default: the seed spec), each narrowed to the selected kernels and shapes."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..specfile import DEFAULT_SPEC, load_spec

    return [load_spec(path, allow_outside_sources=allow_outside_sources).select(kernels, shapes)
            for path in (paths or [DEFAULT_SPEC])]


def default_json(name: str) -> Path:
    """``results/NAME-TIMESTAMP.json`` (`name` a spec's `file_stem`: no path can leave results/)."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"{name}-{stamp}.json"


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
