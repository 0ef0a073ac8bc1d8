"""Pictures of failures: an error map of C, so the pattern of a wrong kernel is seen at a glance.

matplotlib is an optional extra (``pip install driver-gemm[plots]``); without
it the map is skipped and the diagnosis says so.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..output_files import OutputError, replacing

# Categories drawn in the map, in this order of precedence.
RIGHT, WRONG, NONFINITE, UNWRITTEN = 0, 1, 2, 3
_COLOURS = ["#d9f0d3", "#d7301f", "#7a0177", "#000000"]
_NAMES = ["right", "wrong", "NaN/inf written", "unwritten"]
MAX_PIXELS = 1024   # larger matrices are shown in cells, each coloured by the worst element in it


def category_map(masks: dict) -> np.ndarray:
    """One small integer per element of C: right, wrong, non-finite or unwritten."""
    categories = np.zeros(masks["unwritten"].shape, dtype=np.uint8)
    categories[masks["wrong"]] = WRONG
    categories[masks["nonfinite"]] = NONFINITE
    categories[masks["unwritten"]] = UNWRITTEN
    return categories


def downsample(categories: np.ndarray, limit: int = MAX_PIXELS) -> tuple[np.ndarray, int]:
    """Shrink to at most `limit` cells a side; a cell takes the worst category of the elements it covers."""
    step = max(1, -(-max(categories.shape) // limit))
    if step == 1:
        return categories, 1
    rows = -(-categories.shape[0] // step) * step
    cols = -(-categories.shape[1] // step) * step
    padded = np.zeros((rows, cols), dtype=categories.dtype)
    padded[:categories.shape[0], :categories.shape[1]] = categories
    return padded.reshape(rows // step, step, cols // step, step).max(axis=(1, 3)), step


def _widen(marks: np.ndarray, minimum_fraction: float = 0.006) -> np.ndarray:
    """Spread each mark over a few cells so that one bad row or column of thousands stays visible."""
    reach = int(len(marks) * minimum_fraction)
    if reach < 1:
        return marks
    padded = np.pad(marks, reach)
    return np.max([padded[i:i + len(marks)] for i in range(2 * reach + 1)], axis=0)


def save_error_map(verdict, case, directory: Path, tile=None, summary: str = "") -> Path | str:
    """Write ``KERNEL_MxNxK.png`` in `directory`; return its path (or why it could not be made).

    The map shows every element's category; the strips above and to the right
    show, per column and per row, the worst category in it, widened so that a
    single bad row or column of a large matrix can still be seen.
    """
    try:
        # matplotlib: optional, only when an error map is drawn
        import matplotlib
        matplotlib.use("Agg")
        # matplotlib: optional, only when an error map is drawn
        import matplotlib.pyplot as plt
        from matplotlib.colors import ListedColormap
        from matplotlib.patches import Patch
    except ImportError:
        return "not drawn: matplotlib is not installed (pip install driver-gemm[plots])"
    full = category_map(verdict.masks)
    categories, step = downsample(full)
    directory = Path(directory)
    name = re.sub(r"[^A-Za-z0-9.-]+", "_", case.kernel).strip("_") + f"_{case.shape.label}.png"
    rows, cols = full.shape
    colours = ListedColormap(_COLOURS)
    figure = plt.figure(figsize=(9, 7.5), dpi=110)
    grid = figure.add_gridspec(2, 2, width_ratios=(30, 1), height_ratios=(1, 30), wspace=0.02, hspace=0.02)
    main = figure.add_subplot(grid[1, 0])
    top = figure.add_subplot(grid[0, 0], sharex=main)
    side = figure.add_subplot(grid[1, 1], sharey=main)
    main.imshow(categories, cmap=colours, vmin=0, vmax=3, interpolation="nearest", extent=(0, cols, rows, 0),
                aspect="auto")
    top.imshow(_widen(full.max(axis=0))[None, :], cmap=colours, vmin=0, vmax=3, interpolation="nearest",
               extent=(0, cols, 1, 0), aspect="auto")
    side.imshow(_widen(full.max(axis=1))[:, None], cmap=colours, vmin=0, vmax=3, interpolation="nearest",
                extent=(0, 1, rows, 0), aspect="auto")
    for strip in (top, side):
        strip.set_xticks([]) if strip is side else strip.set_yticks([])
        strip.tick_params(labelbottom=False, labelleft=False)
    if tile:   # block boundaries, where few enough to draw
        tile_rows, tile_cols = tile
        if rows // tile_rows <= 64:
            for y in range(tile_rows, rows, tile_rows):
                main.axhline(y, color="#4a4a4a", linewidth=0.4)
        if cols // tile_cols <= 64:
            for x in range(tile_cols, cols, tile_cols):
                main.axvline(x, color="#4a4a4a", linewidth=0.4)
    main.set_xlabel("column of C" + (f" (cells of {step} x {step})" if step > 1 else "")
                    + ("; lines: block tiles" if tile else ""))
    main.set_ylabel("row of C")
    title = (f"{case.kernel} at {case.shape.label}: {verdict.unwritten} unwritten, {verdict.wrong} wrong, "
             f"{verdict.nonfinite} non-finite of {verdict.elements}")
    top.set_title(title + (f"\n{summary}" if summary else ""), fontsize=8)
    figure.legend(handles=[Patch(color=c, label=n) for c, n in zip(_COLOURS, _NAMES)], loc="lower center",
                  ncol=4, fontsize=8, frameon=False)
    figure.subplots_adjust(left=0.08, right=0.97, top=0.92, bottom=0.1)
    try:
        with replacing(directory / name, binary=True) as picture:
            figure.savefig(picture, format="png")
    except OutputError as error:   # the case keeps its verdict; the map's absence is said in its place
        return f"not written: {error}"
    finally:
        plt.close(figure)
    return directory / name
