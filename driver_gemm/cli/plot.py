"""``driver-gemm plot RESULTS... -o FILE``: GFLOP/s against size, % of cuBLAS, and a roofline. No GPU needed."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from ..output_files import output_path
from .common import Output, check_output_file, read_results_files, refuse_aliases, results_argument
from .exit_codes import EXIT_OK


def add_parser(commands, **common) -> None:
    plot = commands.add_parser("plot", help="GFLOP/s against size, %% of cuBLAS per kernel and shape, and a "
                                            "roofline, from results files", **common)
    plot.add_argument("results", nargs="+", type=results_argument, help="results (.json or .jsonl)")
    # Read as text: a Path drops the separator of "out.png/", which names a folder (`check_picture` refuses it).
    plot.add_argument("-o", "--output", required=True, help="picture to write (.png or .svg)")
    kind = plot.add_mutually_exclusive_group()
    kind.add_argument("--samples", action="store_true",
                      help="draw each case's raw samples instead: their distribution, and the samples in the order "
                           "taken beside the SM clock of the sampling window")
    kind.add_argument("--tune", action="store_true",
                      help="draw a tune's search instead: each configuration's time in evaluation order and the "
                           "best so far, per kernel and shape")


def check_picture(given: str | Path, option: str, inputs) -> Path:
    """A picture to write, as given on the command line, refused before any work: a folder's name (``out/``), not
    .png or .svg, not writable there, one of `inputs`, or matplotlib missing. Its path back."""
    # matplotlib, behind report.plots: only when a command draws
    from ..report.plots import require_matplotlib

    path = output_path(given, option, "plot.png")
    if path.suffix.lower() not in (".png", ".svg"):
        raise UsageError("the picture is .png or .svg", field=option)
    check_output_file(path, option)
    refuse_aliases([(option, path)], inputs)
    require_matplotlib()
    return path


def _is_tune(run) -> bool:
    """Whether `run` is a tune's results: its settings say the search's strategy and budget; results written
    before they did are told by a search's mark, one kernel measured in several configurations at a shape."""
    # lazy, as the rest of the report: only when the command runs
    from ..report.figures import tune_groups

    return run.settings.tune is not None or any(len(cases) > 1 for cases in tune_groups(run).values())


def sampled_cases_of(paths: list[Path], runs: list, out: Output, option: str) -> list:
    """The cases with raw samples of every run read from `paths`, in order: a `UsageError` naming the files where
    none has any, a note naming those without any where others have some."""
    # lazy, as the rest of the report: only when the command runs
    from ..report.figures import sampled_cases

    per_file = [sampled_cases([run]) for run in runs]
    bare = [str(path) for path, cases in zip(paths, per_file) if not cases]
    if len(bare) == len(per_file):
        files = "these files" if len(bare) > 1 else "this file"
        raise UsageError(f"no case with raw samples to draw: none in {files} has timing.samples_ms",
                         where=", ".join(bare), field=option, hint="a run keeps the samples of every case it times")
    if bare:
        out.note(f"note: {', '.join(bare)}: no case with raw samples (timing.samples_ms): {option} draws the other "
                 f"file{'s' if len(per_file) - len(bare) > 1 else ''}", "yellow")
    return [case for cases in per_file for case in cases]


def execute(args, out: Output) -> int:
    # matplotlib, behind report.plots: only when the command runs
    from ..report.plots import plot_results, require_matplotlib, series_of

    output = check_picture(args.output, "--output", [("a results file", path) for path in args.results])
    runs = read_results_files(args.results, out)   # every input checked before anything is drawn or written
    if args.samples or args.tune:
        # matplotlib: only when the command runs
        from ..report.figures import samples_figure, tune_figure
        from ..report.plots import save

        if args.tune and len(runs) != 1:
            raise UsageError("--tune draws one tune's results: give one file", field="--tune")
        if args.tune and not _is_tune(runs[0]):
            raise UsageError("these are not a tune's results (no tune settings, and no kernel measured in more "
                             "than one configuration at a shape): --tune draws what `driver-gemm tune` wrote; plot "
                             "a run without --tune", where=str(args.results[0]), field="--tune")
        figure = (tune_figure(runs[0], where=str(args.results[0])) if args.tune
                  else samples_figure(sampled_cases_of(args.results, runs, out, "--samples")))
        out.note(f"plot: {save(figure, output)}", None)
        return EXIT_OK
    if not series_of(runs):
        raise UsageError("no timed, passing case to plot", where=", ".join(map(str, args.results)))
    require_matplotlib()
    out.note(f"plot: {plot_results(runs, output)}", None)
    return EXIT_OK
