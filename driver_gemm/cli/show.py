"""``driver-gemm show RESULTS...``: a recorded run's tables again, in the terminal, as Markdown or as CSV."""

from __future__ import annotations

from pathlib import Path

from .common import Output, add_format_options, read_results_files
from .exit_codes import EXIT_FAILED, EXIT_OK
from .run import show_run
from ..errors import UsageError


def add_parser(commands, **common) -> None:
    show = commands.add_parser("show", help="print the tables of recorded results (.json or .jsonl), as `run` "
                                            "does; --markdown gives the README's tables; no GPU needed", **common)
    show.add_argument("results", nargs="+", type=Path, help="results (.json or .jsonl)")
    add_format_options(show)


def execute(args, out: Output) -> int:
    runs = read_results_files(args.results, out)
    for path, run in zip(args.results, runs):
        if not run.cases:   # said, not an empty table and a bare exit code
            raise UsageError("no cases in these results: nothing to show", where=str(path))
    for run in runs:
        show_run(run, out)
    return EXIT_OK if all(run.ok for run in runs) else EXIT_FAILED
