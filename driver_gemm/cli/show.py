"""``driver-gemm show RESULTS...``: a recorded run's tables again, in the terminal, as Markdown or as CSV."""

from __future__ import annotations

from .common import Output, add_format_options, read_results_files, results_argument, say
from .plot import check_picture, sampled_cases_of
from .exit_codes import EXIT_FAILED, EXIT_OK
from .run import show_run
from ..errors import UsageError
from ..results.text import printable


def add_parser(commands, **common) -> None:
    show = commands.add_parser("show", help="print the tables of recorded results (.json or .jsonl), as `run` "
                                            "does; --markdown gives the README's tables; no GPU needed", **common)
    show.add_argument("results", nargs="+", type=results_argument, help="results (.json or .jsonl)")
    show.add_argument("--plot", metavar="FILE",     # text: `plot.check_picture` reads a trailing separator
                      help="also draw each case's raw samples: their distribution, and the samples in the order "
                           "taken beside the SM clock (.png or .svg; needs the plots extra)")
    add_format_options(show)


def execute(args, out: Output) -> int:
    picture = None
    if args.plot is not None:   # refused before anything is read
        picture = check_picture(args.plot, "--plot", [("a results file", path) for path in args.results])
    runs = read_results_files(args.results, out)
    for path, run in zip(args.results, runs):
        if not run.cases:   # said, not an empty table and a bare exit code
            raise UsageError("no cases in these results: nothing to show", where=str(path))
    if len(runs) == 1:
        show_run(runs[0], out)
    elif out.format == "csv":       # one table, each row naming its file
        # lazy: every command imports this module, and `run` reads the report modules after its workers are spawned
        from ..report.formats import runs_csv

        out.data(runs_csv([(str(path), run) for path, run in zip(args.results, runs)]))
    else:
        for index, (path, run) in enumerate(zip(args.results, runs)):    # each file's tables under its name
            if out.format == "markdown":     # a blank line first: a line straight after a table is one of its rows
                out.data(f"{'' if index == 0 else chr(10)}{_code_span(printable(str(path)))}\n\n")
            else:
                say(out.console, printable(str(path)), "bold")
            show_run(run, out)
    if picture is not None:
        # matplotlib, behind report.figures: only when a picture is asked for
        from ..report.figures import samples_figure
        from ..report.plots import save

        out.note(f"plot: {save(samples_figure(sampled_cases_of(args.results, runs, out, '--plot')), picture)}", None)
    return EXIT_OK if all(run.ok for run in runs) else EXIT_FAILED


def _code_span(text: str) -> str:
    """`text` as Markdown code, which shows it as it is (a file's name may hold ``*`` or ``_``): fenced by two
    backticks and spaces where it holds one."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"
