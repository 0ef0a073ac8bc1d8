"""Pictures of failures: an error map of C, so the pattern of a wrong kernel is seen at a glance.

matplotlib is an optional extra (``pip install driver-gemm[plots]``); without
it the map is skipped and the diagnosis says so.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

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


def save_error_map(verdict, case, directory: Path, tile=None) -> Path | str:
    """Write ``KERNEL_MxNxK.png`` in `directory`; return its path (or why it could not be made)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import ListedColormap
        from matplotlib.patches import Patch
    except ImportError:
        return "not drawn: matplotlib is not installed (pip install driver-gemm[plots])"
    categories, step = downsample(category_map(verdict.masks))
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9.-]+", "_", case.kernel).strip("_") + f"_{case.shape.label}.png"
    rows, cols = verdict.masks["unwritten"].shape
    figure, axes = plt.subplots(figsize=(8, 8 * min(2.0, max(0.25, rows / cols))), dpi=110)
    axes.imshow(categories, cmap=ListedColormap(_COLOURS), vmin=0, vmax=3, interpolation="nearest",
                extent=(0, cols, rows, 0), aspect="auto")
    if tile:   # block boundaries, where few enough to draw
        tile_rows, tile_cols = tile
        if rows // tile_rows <= 64:
            for y in range(tile_rows, rows, tile_rows):
                axes.axhline(y, color="#4a4a4a", linewidth=0.4)
        if cols // tile_cols <= 64:
            for x in range(tile_cols, cols, tile_cols):
                axes.axvline(x, color="#4a4a4a", linewidth=0.4)
    axes.set_xlabel("column of C" + (f" (cells of {step} x {step})" if step > 1 else ""))
    axes.set_ylabel("row of C")
    axes.set_title(f"{case.kernel} at {case.shape.label}: {verdict.unwritten} unwritten, {verdict.wrong} wrong, "
                   f"{verdict.nonfinite} non-finite of {verdict.elements}", fontsize=9)
    axes.legend(handles=[Patch(color=c, label=n) for c, n in zip(_COLOURS, _NAMES)], loc="upper left",
                bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    figure.tight_layout()
    figure.savefig(directory / name)
    plt.close(figure)
    return directory / name
