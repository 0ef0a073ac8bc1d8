"""``driver-gemm plot RESULTS... -o FILE``: GFLOP/s against size, % of cuBLAS, and a roofline. No GPU needed."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from .common import Output, check_output_file, read_results_files, refuse_aliases
from .exit_codes import EXIT_OK


def add_parser(commands, **common) -> None:
    plot = commands.add_parser("plot", help="GFLOP/s against size, %% of cuBLAS per kernel and shape, and a "
                                            "roofline, from results files", **common)
    plot.add_argument("results", nargs="+", type=Path, help="results (.json or .jsonl)")
    plot.add_argument("-o", "--output", type=Path, required=True, help="picture to write (.png or .svg)")


def execute(args, out: Output) -> int:
    # matplotlib, behind report.plots: only when the command runs
    from ..report.plots import plot_results, require_matplotlib, series_of

    if args.output.suffix.lower() not in (".png", ".svg"):
        raise UsageError("the picture is .png or .svg", field="--output")
    check_output_file(args.output, "--output")
    refuse_aliases([("--output", args.output)], [("a results file", path) for path in args.results])
    runs = read_results_files(args.results, out)   # every input checked before anything is drawn or written
    if not series_of(runs):
        raise UsageError("no timed, passing case to plot", where=", ".join(map(str, args.results)))
    require_matplotlib()
    out.note(f"plot: {plot_results(runs, args.output)}", None)
    return EXIT_OK
