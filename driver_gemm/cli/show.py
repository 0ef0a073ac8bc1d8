"""``driver-gemm show RESULTS...``: a recorded run's tables again, in the terminal, as Markdown or as CSV."""

from __future__ import annotations

from .common import Output, add_format_options, read_results_files, results_argument
from .plot import check_picture, sampled_cases_of
from .exit_codes import EXIT_FAILED, EXIT_OK
from .run import show_run
from ..errors import UsageError


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
    for run in runs:
        show_run(run, out)
    if picture is not None:
        # matplotlib, behind report.figures: only when a picture is asked for
        from ..report.figures import samples_figure
        from ..report.plots import save

        out.note(f"plot: {save(samples_figure(sampled_cases_of(args.results, runs, out, '--plot')), picture)}", None)
    return EXIT_OK if all(run.ok for run in runs) else EXIT_FAILED
