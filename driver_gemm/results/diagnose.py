"""Where a wrong kernel goes wrong: the failed elements of C summarised in words, blocks and threads.

Pure NumPy over the verdict's masks. Rows or columns that are bad from end to
end are named as ranges; the rest is described by its bounding box. With a
declared output tile (``tile: [rows, cols]``, columns on grid x and rows on
grid y) each failed element is traced to the block that should have written
it, and, when the block divides its tile evenly, to the thread under the
usual blocked mapping (each thread owning a contiguous sub-tile).
"""

from __future__ import annotations

import math
from typing import Any, Iterable

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


def _span(low: int, high: int) -> str:
    return f"{low}" if low == high else f"{low}-{high}"


def describe_region(mask: np.ndarray, state: str, tile: tuple[int, int] | None = None) -> str:
    """One sentence saying where the True elements of `mask` are (`state`: "unwritten", "wrong")."""
    count = int(mask.sum())
    if count == 0:
        return ""
    rows_any = np.flatnonzero(mask.any(axis=1))
    cols_any = np.flatnonzero(mask.any(axis=0))
    counted = _counted(count, state)
    tile_rows, tile_cols = tile if tile else (None, None)
    if count == 1:
        row, col = int(rows_any[0]), int(cols_any[0])
        owner = f" (block ({col // tile_cols}, {row // tile_rows}))" if tile else ""
        return f"{counted} at row {row}, column {col}{owner}"
    if count * 10 >= mask.size * 9 and count < mask.size:
        # Nearly all of C: the few elements left are what is worth naming.
        left = np.argwhere(~mask)
        named = ", ".join(f"row {row}, column {col}" for row, col in left[:3]) + (", ..." if len(left) > 3 else "")
        return f"{counted}: all but {mask.size - count} ({named})"
    rows_all = np.flatnonzero(mask.all(axis=1))
    cols_all = np.flatnonzero(mask.all(axis=0))
    total_rows, total_cols = mask.shape

    def blocks(indices, size: int | None, axis: str) -> str:
        if size is None:
            return ""
        return " = block " + axis + " " + ranges_text(sorted({int(i) // size for i in indices}))

    if len(rows_all) and count == len(rows_all) * total_cols:
        return counted + ": rows " + ranges_text(rows_all) + blocks(rows_all, tile_rows, "row") + ", every column"
    if len(cols_all) and count == len(cols_all) * total_rows:
        return counted + ": columns " + ranges_text(cols_all) + blocks(cols_all, tile_cols, "column") + ", every row"
    edges = mask[rows_all].sum() + mask[:, cols_all].sum() - mask[np.ix_(rows_all, cols_all)].sum()
    if len(rows_all) and len(cols_all) and count == edges:
        # The last rows and columns are where a kernel that skips a partial tile leaves C; others are not edges.
        if _ends_at(rows_all, total_rows) and _ends_at(cols_all, total_cols):
            return (counted + ": rows " + ranges_text(rows_all) + " and columns " + ranges_text(cols_all)
                    + " (the edges of C)")
        return (counted + ": rows " + ranges_text(rows_all) + blocks(rows_all, tile_rows, "row") + " and columns "
                + ranges_text(cols_all) + blocks(cols_all, tile_cols, "column") + ", every element of each")
    box = (rows_any[-1] - rows_any[0] + 1) * (cols_any[-1] - cols_any[0] + 1)
    where = f"rows {_span(rows_any[0], rows_any[-1])}, columns {_span(cols_any[0], cols_any[-1])}"
    if tile:
        where += (" (block rows " + ranges_text(sorted({int(r) // tile_rows for r in rows_any}))
                  + ", block columns " + ranges_text(sorted({int(c) // tile_cols for c in cols_any})) + ")")
    return f"{counted} within {where}, {100 * count / box:.0f}% of that box"


def _ends_at(indices: np.ndarray, total: int) -> bool:
    """Whether `indices` (sorted) are one run ending at the last index."""
    return int(indices[-1]) == total - 1 and int(indices[-1] - indices[0]) == len(indices) - 1


def diagnose_output(verdict: Verdict, output: np.ndarray, expected: np.ndarray, plan=None,
                    matrices: int = 1) -> dict[str, Any]:
    """Counts, a summary in words, and the first mismatches with the block and thread responsible.

    `output` and `expected` hold one matrix, or `matrices` matrices of equal height stacked (row b * M + i): each
    is then described on its own rows, as its blocks number them."""
    tile = plan.tile if plan is not None else None
    height = output.shape[0] // max(matrices, 1)
    masks = {"unwritten": verdict.masks["unwritten"], "nonfinite": verdict.masks["nonfinite"],
             "wrong": verdict.masks["wrong"] & ~verdict.masks["nonfinite"]}
    failed = masks["unwritten"] | masks["nonfinite"] | masks["wrong"]
    sentences = _patterns(verdict, output, expected, failed, matrices, height)
    if not sentences:
        sentences = _epilogue_patterns(verdict, output, expected, _described_bias(plan))
    states = (("unwritten", "unwritten"), ("nonfinite", "NaN or infinite"), ("wrong", "wrong"))
    failing = [b for b in range(matrices) if failed[b * height:(b + 1) * height].any()]
    for b in failing[:MAX_MATRICES]:
        own = slice(b * height, (b + 1) * height)
        found = [describe_region(masks[name][own], state, tile) for name, state in states]
        found = [text for text in found if text]
        sentences.append(("; ".join(found)) if matrices == 1 else f"matrix {b}: " + "; ".join(found))
    if len(failing) > MAX_MATRICES:
        sentences.append(f"matrices {ranges_text(failing[MAX_MATRICES:])} fail too")
    if verdict.padding_written:
        sentences.append(f"{_counted(verdict.padding_written, 'written')} into C's padding, outside the matrices "
                         "(past the end of a row or column, or between the matrices of a batch)")
    sentences.extend(_the_rest(verdict, output, expected, failed))
    block = plan.config.block if plan is not None and plan.config is not None else None
    mismatches = []
    rows, cols = np.nonzero(failed)
    for row, col in zip(rows[:MAX_MISMATCHES], cols[:MAX_MISMATCHES]):
        unwritten = bool(masks["unwritten"][row, col])
        entry: dict[str, Any] = {"row": int(row) % height, "col": int(col), "expected": float(expected[row, col]),
                                 "got": None if unwritten else float(output[row, col]),
                                 "kind": "unwritten" if unwritten else "wrong"}
        if matrices > 1:
            entry["matrix"] = int(row) // height
        if tile:
            tile_rows, tile_cols = tile
            row_in_matrix = int(row) % height
            entry["block"] = [int(col) // tile_cols, row_in_matrix // tile_rows]
            if block and tile_cols % block[0] == 0 and tile_rows % block[1] == 0:
                per_x, per_y = tile_cols // block[0], tile_rows // block[1]
                entry["thread"] = [(int(col) % tile_cols) // per_x, (row_in_matrix % tile_rows) // per_y]
        mismatches.append(entry)
    return {
        "summary": "; ".join(sentences),
        "unwritten": verdict.unwritten, "wrong": verdict.wrong, "nonfinite": verdict.nonfinite,
        "right": verdict.right, "tile": list(tile) if tile else None,
        "first_mismatches": mismatches,
    }


MAX_MATRICES = 3      # matrices of a batch described one by one; the rest are named


def _relative_error(output: np.ndarray, expected: np.ndarray, usable: np.ndarray) -> float:
    """The relative Frobenius error of `output` against `expected` over the `usable` elements (inf for none)."""
    reference = float(np.linalg.norm(expected[usable]))
    error = float(np.linalg.norm(output[usable].astype(np.float64) - expected[usable]))
    if not usable.any():
        return math.inf
    return error / reference if reference > 0 else error


def _patterns(verdict: Verdict, output: np.ndarray, expected: np.ndarray, failed: np.ndarray, matrices: int,
              height: int) -> list[str]:
    """What the whole of C is, when it is something recognisable other than the product: its transpose, the product
    scaled (when at least half its elements failed), or, in a batch, another matrix's product."""
    found = _other_matrices(verdict, output, expected, failed, matrices, height)
    if failed.sum() * 2 < failed.size:
        return found
    usable = ~(verdict.masks["unwritten"] | verdict.masks["nonfinite"])
    close = max(verdict.tolerance, 1e-12)
    width = output.shape[1]
    if height == width:
        transposed = np.concatenate([expected[b * height:(b + 1) * height].T for b in range(matrices)])
        if _relative_error(output, transposed, usable) <= close:
            found.append("C holds the product transposed (C's rows and columns swapped: its layout, or the grid's "
                         "x and y)")
    values, reference = output[usable].astype(np.float64), expected[usable]
    weight = float(reference @ reference)
    if not found and weight > 0:
        factor = float(values @ reference) / weight
        if abs(factor - 1) > 10 * close and factor != 0 and \
                _relative_error(output, factor * expected, usable) <= close:
            found.append(f"every element is the product times {factor:.4g} (alpha or a sum applied a wrong number "
                         "of times?)")
    return found


# The fewest rows and columns on which C minus the expected is told apart as one value per row or per column: on
# fewer, an offset per row or column fits any difference.
MIN_OFFSET_EXTENT = 4
# The share of the elements that a clamp must leave inside its bounds: a C of one or two values is no clamp.
MIN_UNCLAMPED_SHARE = 0.1


def _epilogue_patterns(verdict: Verdict, output: np.ndarray, expected: np.ndarray,
                       bias: tuple[str, str] | None) -> list[str]:
    """What C is when a kernel's epilogue did something the check does not: added a value per column or per row (a
    bias undescribed, left out, or along the other axis), or applied a ReLU, a leaky ReLU or a clamp. Each is named
    only where it accounts for C within the tolerance and moves it from the expected by more than that, so that an
    ordinary wrong kernel (an element, a tile, a part of K wrong) is not described as one. `bias`: the name and axis
    of the bias the case describes, if any."""
    usable = ~(verdict.masks["unwritten"] | verdict.masks["nonfinite"])
    if usable.sum() * 10 < usable.size * 9:
        return []
    reference = np.where(usable, expected, 0.0)
    allowed = max(verdict.tolerance, 1e-12) * float(np.linalg.norm(reference))
    if allowed == 0:
        return []
    values = np.where(usable, output.astype(np.float64), 0.0)
    for pattern in (_offsets, _activation, _clamp):
        found = pattern(values, reference, usable, allowed, bias)
        if found:
            return [found]
    return []


def _accounts_for(miss: float, shift: float, allowed: float) -> bool:
    """Whether a candidate for C, `miss` (Frobenius norm) from the kernel's C and `shift` from the expected, explains
    the failure: C is within the tolerance of it, it is well outside the tolerance of the expected, and C is much
    nearer to it than to the expected."""
    return miss <= allowed and shift > allowed and 4 * miss <= shift


def _described_bias(plan) -> tuple[str, str] | None:
    """The name and axis (N, M) of the bias buffer the case's plan describes; None without a plan (or a bias)."""
    for name, buffer in (getattr(plan, "buffers", None) or {}).items():   # a plan may be a stand-in without buffers
        if getattr(buffer, "bias", None) is not None:
            return name, buffer.bias.along
    return None


def _offsets(values: np.ndarray, reference: np.ndarray, usable: np.ndarray, allowed: float,
             bias: tuple[str, str] | None) -> str | None:
    """C minus the expected as one value per column, per row, both, or one value everywhere: fitted by the means of
    each column, then of each row of what is left, over the usable elements."""
    if min(values.shape) < MIN_OFFSET_EXTENT:
        return None
    difference = values - reference
    per_column_count, per_row_count = usable.sum(axis=0), usable.sum(axis=1)
    everywhere = float(difference.sum()) / max(int(usable.sum()), 1)
    column = difference.sum(axis=0) / np.maximum(per_column_count, 1)
    difference -= column[None, :]
    difference[~usable] = 0.0
    row = difference.sum(axis=1) / np.maximum(per_row_count, 1)
    difference -= row[:, None]
    difference[~usable] = 0.0
    miss = float(np.linalg.norm(difference))
    column_part = math.sqrt(float(per_column_count @ (column - everywhere) ** 2))
    row_part = math.sqrt(float(per_row_count @ row ** 2))
    constant_part = abs(everywhere) * math.sqrt(float(usable.sum()))
    shift = math.sqrt(float(per_column_count @ column ** 2) + row_part ** 2)
    if not _accounts_for(miss, shift, allowed):
        return None
    by_column, by_row = column_part > allowed, row_part > allowed
    if not by_column and not by_row:
        if constant_part <= allowed:
            return None
        return (f"C minus the expected is {everywhere:.4g} everywhere: a constant added that the spec does not "
                "describe (a bias of one value?)")
    if by_column and by_row:
        if bias is not None:
            return ("C minus the expected is one value per row plus one per column: a bias added along the other "
                    f"axis than the spec's {bias[0]} (bias: {bias[1]}) describes")
        return ("C minus the expected is one value per row plus one per column: biases along both axes that the "
                "spec does not describe")
    axis, line, lines = ("N", "column", "columns") if by_column else ("M", "row", "rows")
    said = f"C minus the expected is one value per {line} (as a bias along {axis} adds)"
    if bias is not None and bias[1] == axis:
        return (f"{said}: the bias {bias[0]} left out, added to the wrong {lines}, or scaled (the check adds it "
                "once, after alpha)")
    return (f"{said}: a bias the spec does not describe (a buffer with bias: {axis}), or one described along the "
            "other axis or scaled")


def _activation(values: np.ndarray, reference: np.ndarray, usable: np.ndarray, allowed: float,
                bias: tuple[str, str] | None) -> str | None:
    """C as the expected where that is positive and 0 (a ReLU) or a fixed fraction of it (a leaky ReLU, a slope
    between 0 and 1) elsewhere."""
    negative = (reference < 0) & usable
    below, got = reference[negative], values[negative]
    if below.size == 0:
        return None
    above_miss = float(np.linalg.norm(np.where(negative, 0.0, values - reference)))
    weight = float(below @ below)
    slope = float(got @ below) / weight if weight > 0 else 0.0
    for candidate in (0.0, slope):
        if not 0 <= candidate < 1:    # |C| or -C is no activation of this kind
            continue
        miss = math.hypot(above_miss, float(np.linalg.norm(got - candidate * below)))
        if _accounts_for(miss, abs(1 - candidate) * math.sqrt(weight), allowed):
            if candidate == 0.0:
                return ("C equals the expected where that is positive and 0 elsewhere: a ReLU epilogue, which the "
                        "check does not apply (describe it with the kernel's elementwise: [relu])")
            return (f"C equals the expected where that is positive and {candidate:.4g} times it elsewhere: a leaky "
                    "ReLU epilogue, which the check does not apply (describe it with the kernel's elementwise: "
                    f"[{{leaky_relu: {candidate:.4g}}}])")
    return None


def _clamp(values: np.ndarray, reference: np.ndarray, usable: np.ndarray, allowed: float,
           bias: tuple[str, str] | None) -> str | None:
    """C as the expected clamped to C's own least and greatest values, with many elements inside them."""
    low, high = float(values[usable].min()), float(values[usable].max())
    inside = (reference > low) & (reference < high) & usable
    if not low < high or inside.sum() < MIN_UNCLAMPED_SHARE * usable.sum():
        return None
    clamped = np.clip(reference, low, high)
    clamped[~usable] = 0.0
    miss = float(np.linalg.norm(values - clamped))
    shift = float(np.linalg.norm(clamped - reference))
    if not _accounts_for(miss, shift, allowed):
        return None
    below, above = bool(((reference < low) & usable).any()), bool(((reference > high) & usable).any())
    if below and above:
        return (f"C equals the expected clamped to [{low:.4g}, {high:.4g}]: a clamp (hardtanh) epilogue, which the "
                "check does not apply (describe it with the kernel's elementwise: "
                f"[{{clamp: [{low:.4g}, {high:.4g}]}}])")
    bound = f"at least {low:.4g}" if below else f"at most {high:.4g}"
    return (f"C equals the expected clamped to {bound}: a clamp epilogue, which the check does not apply "
            "(describe it in the kernel's elementwise: list)")


def _other_matrices(verdict: Verdict, output: np.ndarray, expected: np.ndarray, failed: np.ndarray, matrices: int,
                    height: int) -> list[str]:
    """The matrices of a batch that hold another one's product (a batch stride or index gone wrong)."""
    usable = ~(verdict.masks["unwritten"] | verdict.masks["nonfinite"])
    close = max(verdict.tolerance, 1e-12)
    swapped = []
    for b in range(matrices if matrices > 1 else 0):
        rows = slice(b * height, (b + 1) * height)
        if failed[rows].sum() * 2 < failed[rows].size:
            continue
        source = next((other for other in range(matrices) if other != b and _relative_error(
            output[rows], expected[other * height:(other + 1) * height], usable[rows]) <= close), None)
        if source is not None:
            swapped.append(f"matrix {b} holds matrix {source}'s product")
    return [", ".join(swapped) + " (a batch stride or index)"] if swapped else []


def _the_rest(verdict: Verdict, output: np.ndarray, expected: np.ndarray, failed: np.ndarray) -> list[str]:
    """What the elements not named are: right, or off too (an error spread over C, under the 10 x tolerance that
    names an element); or, where nothing was named, which tolerance C exceeds."""
    rest = ~failed
    if failed.any():
        if not rest.any():
            return []
        spread = _relative_error(output, expected, rest)
        if spread <= verdict.tolerance:
            return ["every other element right"]
        return [f"the other elements are off too: their relative Frobenius error is {spread:.2e}, over the "
                f"tolerance {verdict.tolerance:.1e}"]
    if verdict.rel_fro_error > verdict.tolerance:
        return [f"no element is 10x the tolerance off, but the relative Frobenius error {verdict.rel_fro_error:.2e} "
                f"exceeds the tolerance {verdict.tolerance:.1e}: an error spread over C (as a part of K dropped or "
                "added twice, or a sum kept in a narrower type, would make)"]
    if verdict.abs_tolerance is not None and verdict.max_abs_error > verdict.abs_tolerance:
        errors = np.where(rest, np.abs(output.astype(np.float64) - expected), 0.0)
        row, col = np.unravel_index(int(np.argmax(errors)), errors.shape)
        return [f"the largest absolute error, {verdict.max_abs_error:.2e} at row {row}, column {col}, exceeds the "
                f"absolute tolerance {verdict.abs_tolerance:.1e}"]
    return []
