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
    comparisons = compare_runs(*runs, threshold=args.threshold / 100, across_gpus=args.across_gpus)
    if out.format == "markdown":
        out.data(comparison_markdown(comparisons))
    elif out.format == "csv":
        out.data(comparison_csv(comparisons))
    else:
        print_comparison(comparisons, f"{args.old} -> {args.new}", out.console)
    return EXIT_FAILED if any(c.regression for c in comparisons) else EXIT_OK
