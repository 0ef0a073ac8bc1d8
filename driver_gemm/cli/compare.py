"""``driver-gemm compare OLD NEW``: match two runs' cases and judge each. No GPU needed."""

from __future__ import annotations

from pathlib import Path

from .common import Output, add_format_options, read_results_files
from ..errors import UsageError
from .exit_codes import EXIT_FAILED, EXIT_OK


def add_parser(commands, **common) -> None:
    compare = commands.add_parser("compare", help="match two runs' cases and judge each: SAME, FASTER, SLOWER, "
                                                  "BROKEN, FIXED; exit 1 on a regression", **common)
    compare.add_argument("old", type=Path, help="results of the reference run (.json or .jsonl)")
    compare.add_argument("new", type=Path, help="results of the run to judge")
    compare.add_argument("--threshold", type=float, default=0.0, metavar="PERCENT",
                         help="also call differences up to this many percent SAME (default 0: noise only)")
    compare.add_argument("--across-gpus", action="store_true", help="match cases whatever GPU ran them")
    compare.add_argument("--equal-clock", action="store_true",
                         help="compare times scaled to one SM clock (each case's time x its median clock / the "
                              "GPU's maximum): a change the clock alone explains reads SAME")
    add_format_options(compare)


def execute(args, out: Output) -> int:
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..report.comparison import compare_runs
    from ..report.formats import comparison_csv, comparison_markdown
    from ..report.tables import print_comparison

    if not 0 <= args.threshold < 1e6:   # also refuses NaN
        raise UsageError(f"a threshold is a percentage of at least 0, got {args.threshold}", field="--threshold")
    runs = read_results_files([args.old, args.new], out)
    for path, run in zip((args.old, args.new), runs):
        if not run.cases:
            raise UsageError("no cases in these results: nothing to compare", where=str(path))
    if args.equal_clock:
        runs = _at_equal_clock(runs, out)
    comparisons = compare_runs(*runs, threshold=args.threshold / 100, across_gpus=args.across_gpus)
    if out.format == "markdown":
        out.data(comparison_markdown(comparisons))
    elif out.format == "csv":
        out.data(comparison_csv(comparisons))
    else:
        print_comparison(comparisons, f"{args.old} -> {args.new}", out.console)
    _say_clock_differences(comparisons, args.equal_clock, out)
    return EXIT_FAILED if any(c.regression for c in comparisons) else EXIT_OK


def _at_equal_clock(runs, out: Output) -> list:
    """Both runs with their times scaled to one clock (`report.clock_figures.at_clock`); said on stderr."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..report.clock_figures import at_clock, target_clock

    clock = target_clock(*runs)
    if clock is None:
        raise UsageError("neither run recorded an SM clock (NVML was not installed)",
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
