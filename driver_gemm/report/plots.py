"""Pictures of results: GFLOP/s against size, % of cuBLAS per kernel and shape, and a roofline (a compute
roof per math kind the cases use, from `gemm.peaks`; bytes in each case's element types).

matplotlib is an optional extra (``pip install driver-gemm[plots]``).
A sweep gives dozens of configurations: only the `TOP_SERIES` fastest (by
their best GFLOP/s) get a colour, a legend entry and a row of the % of cuBLAS
panel; the others are drawn thin and grey, under one legend entry. Long
labels are shortened (``v8#3``) in the panel, and given in full in the legend.
"""

from __future__ import annotations

import logging
import math
import warnings
from pathlib import Path

from ..errors import FilePath, ToolMissingError, UsageError, path_argument
from ..gemm import peaks
from ..output_files import replacing
from ..results.read import MOST_GFLOPS, MOST_PCT
from ..results.records import RunResult
from ..results.text import printable, shortened
from ..status import BASELINE_LABELS, is_baseline_label
from .labels import short_labels
from .notes import least_bytes

CUBLAS = BASELINE_LABELS["fp32"]
CUBLAS_TF32 = BASELINE_LABELS["tf32"]
TOP_SERIES = 12


def bytes_moved(M: int, N: int, K: int, types: dict | None = None) -> int:
    """The fewest bytes a GEMM moves through DRAM: A and B read once, C written once, each in its element type
    (`types` as a case's ``operands.types``; None: float32)."""
    return peaks.bytes_moved(M, N, K, types)


def arithmetic_intensity(case) -> tuple[float, bool]:
    """A case's FLOP per DRAM byte: measured by Nsight Compute where it was profiled (True), else the
    fewest bytes the shape can move in the case's element types (False)."""
    measured = (case.profile or {}).get("arithmetic_intensity")
    if measured:
        return measured, True
    return case.flops / least_bytes(case), False


def roofs(runs: list[RunResult], device: dict) -> list[tuple[str, float]]:
    """(math, peak GFLOP/s at the maximum clock) of every math kind the runs' timed cases use, FP32 first, then
    by peak: the compute roofs of the roofline."""
    found = {}
    for run in runs:
        for case in run.cases:
            if case.gflops and case.ok and case.math not in found:
                found[case.math] = case.peak_gflops(device)
    return sorted(((math, peak) for math, peak in found.items() if peak),
                  key=lambda item: (item[0] != peaks.FP32, item[1]))


def gpus_of(runs: list[RunResult]) -> list[tuple[dict, list[RunResult]]]:
    """Each GPU the runs were measured on (``environment.device``), with its runs, in the order first met: GPUs
    with the same name and the same figures (peaks, bandwidth) are one, so two runs on one GPU draw one roofline."""
    found: dict[str, tuple[dict, list[RunResult]]] = {}
    for run in runs:
        device = run.environment.get("device")
        if isinstance(device, dict) and device:
            key = repr(sorted((name, repr(value)) for name, value in device.items()
                              if name in ("name", "sm_count", "clock_khz", "fp32_lanes_per_sm", "fp32_peak_gflops",
                                          "memory_bandwidth_gbs", "compute_capability")))
            found.setdefault(key, (device, []))[1].append(run)
    return list(found.values())


def series_of(runs: list[RunResult]):
    """Per kernel, its timed, passing cases; named by the kernel's short name where that is unambiguous."""
    labels_of: dict[str, set] = {}
    for run in runs:
        for case in run.cases:
            labels_of.setdefault(case.name, set()).add(case.kernel)
    series: dict[str, list] = {}
    for run in runs:
        for case in run.cases:
            if case.gflops and case.ok:
                name = case.name if len(labels_of[case.name]) == 1 else case.kernel
                series.setdefault(name, []).append(case)
    return series


# A shape's % of cuBLAS is written in its cell of the panel up to this many shapes; past it the cells are too narrow
# to hold a number, and drawing tens of thousands of them takes minutes. Past `MOST_SHAPE_TICKS` only every so
# many shapes is named under the panel.
MOST_ANNOTATED_SHAPES = 40
MOST_SHAPE_TICKS = 40
# The most of one text from a results file that a picture draws: far more than a label or a GPU's name holds, and far
# less than the 100,000 characters matplotlib would take minutes to lay out on a line no picture shows.
MOST_DRAWN_CHARS = 200


def drawn_text(text: str) -> str:
    """Text from a results file (a kernel's name, a GPU's) as a picture draws it: its control characters escaped
    (`printable`), as the tables show them (the fonts have no glyph for them, and matplotlib warns of each), cut to
    `MOST_DRAWN_CHARS`, and its dollar signs escaped, so that matplotlib draws them rather than reading the text
    between two as math."""
    return shortened(printable(text), MOST_DRAWN_CHARS).replace("$", r"\$")


def _check_plottable(series: dict[str, list]) -> None:
    """Refuse (`UsageError`) a case whose GFLOP/s or % of cuBLAS no GPU reaches, naming the case and the value: for
    runs made in code (a file holding one is refused as it is read, naming the file and the field)."""
    for cases in series.values():
        for case in cases:
            for name, value, most in (("gflops", case.gflops, MOST_GFLOPS), ("pct_cublas", case.pct_cublas, MOST_PCT)):
                if value is not None and not -most <= value <= most:
                    raise UsageError(f"case {printable(case.kernel)} at {case.shape.label}: {name} = {value:g} is "
                                     f"no figure a GPU reaches (at most {most:g}): these results were not written by "
                                     "a run as they are", field=name)


def top_series(series: dict[str, list], count: int = TOP_SERIES) -> tuple[list[str], list[str]]:
    """The baselines and the `count` fastest other series (by best GFLOP/s), and the rest, both in order."""
    baselines = [k for k in series if is_baseline_label(k)]
    ranked = sorted((k for k in series if k not in baselines), key=lambda k: -max(c.gflops for c in series[k]))
    return baselines + ranked[:count], ranked[count:]


def require_matplotlib():
    """`matplotlib.pyplot` on the Agg backend; `ToolMissingError` when matplotlib is not installed."""
    try:
        # matplotlib: optional, only when a picture is drawn
        import matplotlib
        matplotlib.use("Agg")
        # matplotlib: optional, only when a picture is drawn
        import matplotlib.pyplot as plt
    except ImportError:
        raise ToolMissingError("plots need matplotlib, which is not installed: "
                               "pip install 'driver-gemm[plots]'") from None
    # Where a font family the labels ask for is missing, matplotlib falls back to another and logs a warning for
    # every piece of text: a picture drawn is no cause for twenty lines on stderr. A character no font has (a name
    # in a script the fonts lack) is drawn as a box, and its warning, a Python source line on stderr, is left out too.
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from", category=UserWarning)
    return plt


def plot_results(runs: list[RunResult], output: FilePath) -> Path:
    """Draw the three panels into `output` (.png or .svg) and return its path."""
    output = path_argument("plot_results", "output", output)
    plt = require_matplotlib()
    series = series_of(runs)
    if not series:
        raise UsageError("no timed, passing case to plot in these results")
    _check_plottable(series)
    gpus = gpus_of(runs)
    figure, (speed, share, roof) = plt.subplots(1, 3, figsize=(18, 6.5), dpi=100)
    colours = plt.get_cmap("tab20")
    kernels, rest = top_series(series)
    names = short_labels(kernels, max_width=20)
    for index, kernel in enumerate(rest):
        cases = sorted(series[kernel], key=lambda c: c.shape.flops)
        speed.plot([(c.shape.M * c.shape.N * c.shape.K) ** (1 / 3) for c in cases], [c.gflops for c in cases],
                   color="lightgrey", linewidth=0.8, zorder=1,
                   label=f"{len(rest)} slower configurations" if index == 0 else None)
    measured_any = False
    for index, kernel in enumerate(kernels):
        cases = sorted(series[kernel], key=lambda c: c.shape.flops)
        sizes = [(c.shape.M * c.shape.N * c.shape.K) ** (1 / 3) for c in cases]
        baseline_colour = {CUBLAS: "black", CUBLAS_TF32: "dimgray"}.get(
            kernel, "gray" if is_baseline_label(kernel) else None)
        style = dict(color=baseline_colour, linestyle="--", linewidth=2) if baseline_colour else \
            dict(color=colours(index % 20), marker="o", markersize=4)
        label = drawn_text(kernel if names[kernel] == kernel else f"{names[kernel]}: {kernel}")
        speed.plot(sizes, [c.gflops for c in cases], label=label, **style)
        intensity = [arithmetic_intensity(c) for c in cases]
        roof.scatter([x for x, _ in intensity], [c.gflops for c in cases], s=18, label=label,
                     color=baseline_colour or colours(index % 20),
                     marker="o" if not any(m for _, m in intensity) else "D")
        measured_any = measured_any or any(m for _, m in intensity)
    speed.set_xscale("log", base=2)
    speed.set_xlabel("size (M N K)^(1/3)")
    speed.set_ylabel("GFLOP/s")
    speed.set_title("throughput against size")
    speed.grid(True, alpha=0.3)

    shapes = sorted({c.shape for k in kernels for c in series[k]}, key=lambda s: s.flops)
    others = [k for k in kernels if not is_baseline_label(k)]   # each against its own baseline row
    column_of = {shape: column for column, shape in enumerate(shapes)}
    grid = [[math.nan] * len(shapes) for _ in others]
    for row, kernel in enumerate(others):
        for case in series[kernel]:
            if case.pct_cublas:
                grid[row][column_of[case.shape]] = case.pct_cublas
    if others:
        image = share.imshow(grid, cmap="viridis", vmin=0, vmax=max(100, max((v for r in grid for v in r
                                                                              if not math.isnan(v)), default=100)),
                             aspect="auto")
        for row in range(len(others) if len(shapes) <= MOST_ANNOTATED_SHAPES else 0):
            for column in range(len(shapes)):
                value = grid[row][column]
                if not math.isnan(value):
                    share.text(column, row, f"{value:.0f}", ha="center", va="center", fontsize=7,
                               color="white" if value < 60 else "black")
        step = -(-len(shapes) // MOST_SHAPE_TICKS)
        share.set_xticks(range(0, len(shapes), step), [s.label for s in shapes[::step]], rotation=45, ha="right",
                         fontsize=7)
        share.set_yticks(range(len(others)), [drawn_text(names[k]) for k in others], fontsize=7)
        share.set_title("% of cuBLAS SGEMM"
                        + (f" ({len(others)} fastest of {len(others) + len(rest)})" if rest else ""))
        figure.colorbar(image, ax=share, fraction=0.046, pad=0.04)
    else:   # baseline rows only (run -k cublas): nothing to put as a % of them
        share.text(0.5, 0.5, "no kernel case: only baseline rows", ha="center", va="center",
                   transform=share.transAxes)
        share.set_axis_off()

    roof.set_xscale("log")
    roof.set_yscale("log")
    low, high = roof.get_xlim()
    high *= 1.5   # room for the markers of the most intense shape
    roof.set_xlim(low, high)
    # Each GPU's roofs, from its own peaks and bandwidth, for the cases of its own runs; named by GPU where the
    # runs are of several (one GPU's roofs under another's points would misplace them).
    compute_roofs = [(device, math_name, peak) for device, on_it in gpus if device.get("memory_bandwidth_gbs")
                     for math_name, peak in roofs(on_it, device)]
    if compute_roofs:   # show each ridge, where the memory roof meets a compute roof
        low = min([low] + [peak / device["memory_bandwidth_gbs"] / 4 for device, _, peak in compute_roofs])
        xs = [low * (high / low) ** (i / 60) for i in range(61)]
        for index, (device, math_name, peak) in enumerate(compute_roofs):
            bandwidth = device["memory_bandwidth_gbs"]
            gpu = f"{drawn_text(str(device.get('name') or '?'))}: " if len(gpus) > 1 else ""
            roof.plot(xs, [min(peak, x * bandwidth) for x in xs], color="grey", linewidth=1.5,
                      linestyle=("-", "--", "-.", ":")[index % 4],
                      label=f"roof: {gpu}{peak / 1e3:.1f} TFLOP/s {math_name.upper()} dense, "
                            f"{bandwidth / 1e3:.1f} TB/s DRAM (theoretical)")
        roof.set_xlim(low, high)
    roof.set_xlabel("arithmetic intensity, FLOP per DRAM byte" + (
        " (diamonds: measured by Nsight Compute; dots: A, B read and C written once, in their types)"
        if measured_any else " (A, B read and C written once, in their types)"))
    roof.set_ylabel("GFLOP/s")
    gpu_names = list(dict.fromkeys(str(device["name"]) for device, _ in gpus if device.get("name")))
    roof.set_title("roofline" + (f" ({drawn_text(', '.join(gpu_names))})" if gpu_names else ""))
    roof.grid(True, which="both", alpha=0.2)
    handles, labels = roof.get_legend_handles_labels()
    grey_handles, grey_labels = speed.get_legend_handles_labels()
    if rest:
        handles.append(grey_handles[0])
        labels.append(grey_labels[0])
    # About 250 characters of 8-point text fit across the 18-inch figure: as many columns as the longest
    # label allows, each with room for its marker.
    columns = max(1, min(6, len(labels), 250 // (max(map(len, labels)) + 8)))
    rows = -(-len(labels) // columns)
    figure.legend(handles, labels, loc="lower center", ncol=columns, fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, min(0.45, 0.03 + 0.028 * rows), 1, 1))
    return save(figure, output)


def save(figure, output: str | Path) -> Path:
    """Write `figure` to `output` (.png or .svg, by its suffix) through `output_files`, and close it."""
    plt = require_matplotlib()
    output = Path(output)
    try:
        with replacing(output, binary=True) as picture:
            figure.savefig(picture, format=output.suffix.lstrip(".").lower() or "png")
    finally:
        plt.close(figure)
    return output
