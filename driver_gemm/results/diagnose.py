"""Where a wrong kernel goes wrong: the failed elements of C summarised in words, blocks and threads.

Pure NumPy over the verdict's masks. Rows or columns that are bad from end to
end are named as ranges; the rest is described by its bounding box. With a
declared output tile (``tile: [rows, cols]``, columns on grid x and rows on
grid y) each failed element is traced to the block that should have written
it, and, when the block divides its tile evenly, to the thread under the
usual blocked mapping (each thread owning a contiguous sub-tile).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from ..measure.verify import Verdict

MAX_MISMATCHES = 10


def ranges_text(indices: Iterable[int]) -> str:
    """``[1, 2, 3, 7, 9, 10]`` to ``"1-3, 7, 9-10"``."""
    parts: list[str] = []
    values = sorted(int(i) for i in indices)
    start = previous = None
    for value in values:
        if start is None:
            start = previous = value
        elif value == previous + 1:
            previous = value
        else:
            parts.append(f"{start}-{previous}" if previous != start else f"{start}")
            start = previous = value
    if start is not None:
        parts.append(f"{start}-{previous}" if previous != start else f"{start}")
    return ", ".join(parts)


def _counted(count: int, state: str) -> str:
    return " ".join((str(count), "element" if count == 1 else "elements", state))


def describe_region(mask: np.ndarray, state: str, tile: tuple[int, int] | None = None) -> str:
    """One sentence saying where the True elements of `mask` are (`state`: "unwritten", "wrong")."""
    count = int(mask.sum())
    if count == 0:
        return ""
    rows_all = np.flatnonzero(mask.all(axis=1))
    cols_all = np.flatnonzero(mask.all(axis=0))
    rows_any = np.flatnonzero(mask.any(axis=1))
    cols_any = np.flatnonzero(mask.any(axis=0))
    total_rows, total_cols = mask.shape
    tile_rows, tile_cols = tile if tile else (None, None)

    def blocks(indices, size: int | None, axis: str) -> str:
        if size is None:
            return ""
        return " = block " + axis + " " + ranges_text(sorted({int(i) // size for i in indices}))

    counted = _counted(count, state)
    if len(rows_all) and count == len(rows_all) * total_cols:
        return counted + ": rows " + ranges_text(rows_all) + blocks(rows_all, tile_rows, "row") + ", every column"
    if len(cols_all) and count == len(cols_all) * total_rows:
        return counted + ": columns " + ranges_text(cols_all) + blocks(cols_all, tile_cols, "column") + ", every row"
    edges = mask[rows_all].sum() + mask[:, cols_all].sum() - mask[np.ix_(rows_all, cols_all)].sum()
    if len(rows_all) and len(cols_all) and count == edges:
        return (counted + ": rows " + ranges_text(rows_all) + " and columns " + ranges_text(cols_all)
                + " (the edges of C)")
    if count == 1:
        row, col = int(rows_any[0]), int(cols_any[0])
        owner = f" (block ({col // tile_cols}, {row // tile_rows}))" if tile else ""
        return f"{counted} at row {row}, column {col}{owner}"
    box = (rows_any[-1] - rows_any[0] + 1) * (cols_any[-1] - cols_any[0] + 1)
    where = f"rows {rows_any[0]}-{rows_any[-1]}, columns {cols_any[0]}-{cols_any[-1]}"
    if tile:
        where += (" (block rows " + ranges_text(sorted({int(r) // tile_rows for r in rows_any}))
                  + ", block columns " + ranges_text(sorted({int(c) // tile_cols for c in cols_any})) + ")")
    return f"{counted} within {where}, {100 * count / box:.0f}% of that box"


def diagnose_output(verdict: Verdict, output: np.ndarray, expected: np.ndarray, plan=None) -> dict[str, Any]:
    """Counts, a summary in words, and the first mismatches with the block and thread responsible."""
    tile = plan.tile if plan is not None else None
    unwritten = verdict.masks["unwritten"]
    bad_values = verdict.masks["wrong"] | verdict.masks["nonfinite"]
    sentences = [s for s in (describe_region(unwritten, "unwritten", tile),
                             describe_region(bad_values, "wrong", tile)) if s]
    if not sentences:
        sentences.append(f"every element within 10x the tolerance, but the relative Frobenius error "
                         f"{verdict.rel_fro_error:.2e} exceeds {verdict.tolerance:.1e}")
    elif verdict.right and (unwritten.any() != bad_values.any()):
        sentences.append("every other element right")
    block = plan.config.block if plan is not None and plan.config is not None else None
    mismatches = []
    rows, cols = np.nonzero(unwritten | bad_values)
    for row, col in zip(rows[:MAX_MISMATCHES], cols[:MAX_MISMATCHES]):
        entry: dict[str, Any] = {"row": int(row), "col": int(col), "expected": float(expected[row, col]),
                 "got": None if unwritten[row, col] else float(output[row, col]),
                 "kind": "unwritten" if unwritten[row, col] else "wrong"}
        if tile:
            tile_rows, tile_cols = tile
            entry["block"] = [int(col) // tile_cols, int(row) // tile_rows]
            if block and tile_cols % block[0] == 0 and tile_rows % block[1] == 0:
                per_x, per_y = tile_cols // block[0], tile_rows // block[1]
                entry["thread"] = [(int(col) % tile_cols) // per_x, (int(row) % tile_rows) // per_y]
        mismatches.append(entry)
    return {
        "summary": "; ".join(sentences),
        "unwritten": verdict.unwritten, "wrong": verdict.wrong, "nonfinite": verdict.nonfinite,
        "right": verdict.right, "tile": list(tile) if tile else None,
        "first_mismatches": mismatches,
    }
