"""``driver-gemm compare OLD NEW``: match two runs' cases and judge each. No GPU needed."""

from __future__ import annotations

from pathlib import Path

from .common import (MAX_THRESHOLD_PCT, Output, add_format_options, decimal_number, read_results_files,
                     results_argument)
from .plot import check_picture
from ..errors import UsageError
from ..results.text import printable
from .exit_codes import EXIT_FAILED, EXIT_OK



def add_parser(commands, **common) -> None:
    compare = commands.add_parser("compare", help="match two runs' cases and judge each: SAME, FASTER, SLOWER, "
                                                  "BROKEN, FIXED; exit 1 on a regression", **common)
    compare.add_argument("old", type=results_argument, help="results of the reference run (.json or .jsonl)")
    compare.add_argument("new", type=results_argument, help="results of the run to judge")
    compare.add_argument("--threshold", type=decimal_number, default=0.0, metavar="PERCENT",
                         help="also call differences up to this many percent SAME (default 0: noise only)")
    compare.add_argument("--across-gpus", action="store_true", help="match cases whatever GPU ran them")
    compare.add_argument("--equal-clock", action="store_true",
                         help="compare times scaled to one SM clock (each case's time x its median clock / the "
                              "GPU's maximum): a change the clock alone explains reads SAME")
    compare.add_argument("--plot", metavar="FILE",     # text: `plot.check_picture` reads a trailing separator
                         help="also draw the change of each case with its noise band, coloured FASTER, SLOWER or "
                              "SAME (.png or .svg; needs the plots extra)")
    add_format_options(compare).add_argument(
        "--json", dest="format", action="store_const", const="json",
        help="print the comparison as one JSON object (cases, verdicts, counts, what differs between the runs)")


def execute(args, out: Output) -> int:
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..report.comparison import GONE, NEW, compare_runs
    from ..report.formats import comparison_csv, comparison_json, comparison_markdown
    from ..report.tables import print_comparison
    from ..results.provenance import provenance_differences

    if not 0 <= args.threshold < MAX_THRESHOLD_PCT:   # also refuses NaN
        raise UsageError(f"a threshold is a percentage from 0 to below {MAX_THRESHOLD_PCT:,.0f}, got "
                         f"{args.threshold:g}", field="--threshold")
    picture = _check_plot(args)
    runs = read_results_files([args.old, args.new], out)
    for path, run in zip((args.old, args.new), runs):
        if not run.cases:
            raise UsageError("no cases in these results: nothing to compare", where=str(path))
    if args.equal_clock:
        runs = _at_equal_clock(runs, f"{args.old}, {args.new}", out)
    comparisons = compare_runs(*runs, threshold=args.threshold / 100, across_gpus=args.across_gpus)
    warnings, notes = provenance_differences(*((run.provenance, run.environment) for run in runs))
    if runs[0].spec != runs[1].spec:   # cases match by kernel and shape whatever spec ran them: say so
        warnings = [printable(f"spec: {runs[0].spec} -> {runs[1].spec}"), *warnings]   # names a spec could have
    if all(comparison.verdict in (NEW, GONE) for comparison in comparisons):
        notes = [*notes, "no case of one run is a case of the other (each is NEW or GONE): nothing was compared"]
    if out.format == "markdown":
        out.data(comparison_markdown(comparisons) + "".join(f"\n> {line}\n" for line in (
            *(f"warning: the runs differ in {text}" for text in warnings), *(f"note: {text}" for text in notes))))
    elif out.format == "csv":
        out.data(comparison_csv(comparisons))
    elif out.format == "json":
        out.data(comparison_json(comparisons, old=str(args.old), new=str(args.new), threshold=args.threshold / 100,
                                 warnings=warnings, notes=notes))
    else:
        print_comparison(comparisons, f"{args.old} -> {args.new}", out.console)
    for text in warnings:
        out.note(f"warning: the runs differ in {text}", "yellow")
    for text in notes:
        out.note(f"note: {text}")
    for comparison in comparisons:
        if comparison.params_changed:
            before, after = comparison.params_changed
            out.note(printable(f"{comparison.kernel} at {comparison.shape}: its dispatch picked another "
                               f"configuration: {before} -> {after}"))
        if comparison.product_changed:
            out.note(printable(f"{comparison.kernel} at {comparison.shape}: the runs computed other products "
                               f"({comparison.product_changed}): its times are not of the same work"), "yellow")
    if picture is not None:
        # matplotlib, behind report.figures: only when a picture is asked for
        from ..report.figures import comparison_figure
        from ..report.plots import save

        out.note(f"plot: {save(comparison_figure(comparisons, f'{args.old.name} -> {args.new.name}'), picture)}",
                 None)
    _say_clock_differences(comparisons, args.equal_clock, out)
    return EXIT_FAILED if any(c.regression for c in comparisons) else EXIT_OK


def _check_plot(args) -> Path | None:
    """The picture to write, refused before anything is read (`plot.check_picture`); None when none is asked for."""
    if args.plot is None:
        return None
    return check_picture(args.plot, "--plot", [("the old results", args.old), ("the new results", args.new)])


def _at_equal_clock(runs, files: str, out: Output) -> list:
    """Both runs (of `files`, which a refusal names) with their times scaled to one clock
    (`report.clock_figures.at_clock`); said on stderr."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..report.clock_figures import at_clock, target_clock

    clock = target_clock(*runs)
    if clock is None:
        raise UsageError("neither run recorded an SM clock (NVML was not installed)", where=files,
                         field="--equal-clock")
    scaled = [at_clock(run, clock) for run in runs]
    unscaled = sum(count for _, count in scaled)
    out.note(f"times scaled to {clock:.0f} MHz (each case's time x its median SM clock / {clock:.0f})"
             + (f"; {unscaled} timed case(s) without a clock left as measured" if unscaled else ""))
    return [run for run, _ in scaled]


def _say_clock_differences(comparisons, equal_clock: bool, out: Output) -> None:
    """A line on stderr for each case whose runs' clocks differ by more than 2%."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..report.clock_figures import clock_differences

    lines = clock_differences(comparisons)
    for line in lines:
        out.note(line.replace("part of the change is the clock", "compared at one clock") if equal_clock else line,
                 "yellow")
