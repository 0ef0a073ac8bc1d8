"""Where a wrong kernel goes wrong: the failed elements of C summarised in words, blocks and threads.

Pure NumPy over the verdict's masks. Rows or columns that are bad from end to
end are named as ranges, and so are a triangle and all of C but a few; with a
declared output tile (``tile: [rows, cols]``, columns on grid x and rows on
grid y) the blocks holding failures are listed where they are few and the
box around them takes in right blocks; the rest is described by its bounding
box. Each failed element is traced to the block that should have written it,
and, when the block divides its tile evenly, to the thread under the usual
blocked mapping (each thread owning a contiguous sub-tile). What C holds is
named where it is recognisable: the product transposed or times a factor,
alpha or beta misapplied, another matrix's product.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

from ..measure.verify import Verdict

MAX_MISMATCHES = 10
MAX_MATRICES = 3      # matrices of a batch described one by one, the most failed first; the rest are counted
MAX_BLOCKS = 4        # failing blocks named one by one; more are counted with the first few named
MAX_LEFT_NAMED = 3    # the elements left out of "all but" named one by one; more, scattered, are counted
NEARLY_ALL = 0.9      # the share of C's elements from which a region is "all but" the few left
# How far from 1 a factor between C and the product must be to be named: past 10 x the tolerance (every element
# wrong), or past 5%, which no rounding makes and a scale or alpha misapplied does (bf16's and fp8's 10 x tolerance
# is over 20%, so a factor of 1.1 or 1.25 passes every element test). Nearer 1, it reads as an error spread over C.
FACTOR_NAMED_FROM = 0.05


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


def _listed(items: list[str]) -> str:
    """``["a", "b", "c"]`` to ``"a, b and c"``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _numbered(word: str, indices: Iterable[int]) -> str:
    """``("matrix", [3])`` to ``"matrix 3"``, ``("matrix", [3, 4, 6])`` to ``"matrices 3-4, 6"``."""
    indices = sorted(int(i) for i in indices)
    plural = {"matrix": "matrices"}.get(word, word + "s")
    return f"{word if len(indices) == 1 else plural} {ranges_text(indices)}"


def describe_region(mask: np.ndarray, state: str, tile: tuple[int, int] | None = None) -> str:
    """One sentence saying where the True elements of `mask` are (`state`: "unwritten", "wrong")."""
    return _region(mask, state, tile)[0]


def _region(mask: np.ndarray, state: str, tile: tuple[int, int] | None) -> tuple[str, np.ndarray]:
    """The sentence of `describe_region`, and the elements it names: the failed ones where it names them exactly
    (rows, columns, a triangle), else every element of the blocks or the box it names."""
    count = int(mask.sum())
    if count == 0:
        return "", np.zeros_like(mask)
    rows_any = np.flatnonzero(mask.any(axis=1))
    cols_any = np.flatnonzero(mask.any(axis=0))
    counted = _counted(count, state)
    tile_rows, tile_cols = tile if tile else (None, None)
    total_rows, total_cols = mask.shape
    if count == 1:
        row, col = int(rows_any[0]), int(cols_any[0])
        owner = f" (block ({col // tile_cols}, {row // tile_rows}))" if tile else ""
        return f"{counted} at row {row}, column {col}{owner}", mask.copy()
    if count == mask.size:
        return f"{counted}: every element", mask.copy()
    if count >= NEARLY_ALL * mask.size:
        return _all_but(mask, counted, tile), np.ones_like(mask)
    triangle = _triangle(mask)
    if triangle:
        return f"{counted}: {triangle}, every element of it", mask.copy()
    rows_all = np.flatnonzero(mask.all(axis=1))
    cols_all = np.flatnonzero(mask.all(axis=0))

    def blocks(indices, size: int | None, axis: str) -> str:
        if size is None:
            return ""
        return " = block " + axis + " " + ranges_text(sorted({int(i) // size for i in indices}))

    if len(rows_all) and count == len(rows_all) * total_cols:
        text = counted + ": rows " + ranges_text(rows_all) + blocks(rows_all, tile_rows, "row") + ", every column"
        return text, mask.copy()
    if len(cols_all) and count == len(cols_all) * total_rows:
        text = counted + ": columns " + ranges_text(cols_all) + blocks(cols_all, tile_cols, "column") + ", every row"
        return text, mask.copy()
    edges = mask[rows_all].sum() + mask[:, cols_all].sum() - mask[np.ix_(rows_all, cols_all)].sum()
    if len(rows_all) and len(cols_all) and count == edges:
        # The last rows and columns are where a kernel that skips a partial tile leaves C; others are not edges.
        if _ends_at(rows_all, total_rows) and _ends_at(cols_all, total_cols):
            return (counted + ": rows " + ranges_text(rows_all) + " and columns " + ranges_text(cols_all)
                    + " (the edges of C)"), mask.copy()
        return (counted + ": rows " + ranges_text(rows_all) + blocks(rows_all, tile_rows, "row") + " and columns "
                + ranges_text(cols_all) + blocks(cols_all, tile_cols, "column") + ", every element of each"), \
            mask.copy()
    if tile:
        listed = _in_blocks(mask, counted, tile)
        if listed is not None:
            return listed
    box = (rows_any[-1] - rows_any[0] + 1) * (cols_any[-1] - cols_any[0] + 1)
    where = f"rows {_span(rows_any[0], rows_any[-1])}, columns {_span(cols_any[0], cols_any[-1])}"
    if tile:
        where += (" (block rows " + ranges_text(sorted({int(r) // tile_rows for r in rows_any}))
                  + ", block columns " + ranges_text(sorted({int(c) // tile_cols for c in cols_any})) + ")")
    covered = np.zeros_like(mask)
    covered[rows_any[0]:rows_any[-1] + 1, cols_any[0]:cols_any[-1] + 1] = True
    return f"{counted} within {where}, {100 * count / box:.0f}% of that box", covered


def _ends_at(indices: np.ndarray, total: int) -> bool:
    """Whether `indices` (sorted) are one run ending at the last index."""
    return int(indices[-1]) == total - 1 and int(indices[-1] - indices[0]) == len(indices) - 1


def _triangle(mask: np.ndarray) -> str | None:
    """The name of the triangle of a square `mask` that its True elements are exactly, if they are one."""
    size = mask.shape[0]
    if size < 2 or mask.shape[1] != size:
        return None
    whole = np.ones((size, size), dtype=bool)
    for name, triangle in (("the lower triangle below the diagonal", np.tril(whole, -1)),
                           ("the lower triangle with the diagonal", np.tril(whole)),
                           ("the upper triangle above the diagonal", np.triu(whole, 1)),
                           ("the upper triangle with the diagonal", np.triu(whole))):
        if np.array_equal(mask, triangle):
            return name
    return None


def _block_counts(mask: np.ndarray, tile: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The failed elements of each block (block rows x block columns) and each block's elements inside C."""
    tile_rows, tile_cols = tile
    total_rows, total_cols = mask.shape
    block_rows, block_cols = -(-total_rows // tile_rows), -(-total_cols // tile_cols)
    rows, cols = np.nonzero(mask)
    counts = np.bincount((rows // tile_rows) * block_cols + cols // tile_cols,
                         minlength=block_rows * block_cols).reshape(block_rows, block_cols)
    heights = np.minimum(tile_rows, total_rows - np.arange(block_rows) * tile_rows)
    widths = np.minimum(tile_cols, total_cols - np.arange(block_cols) * tile_cols)
    return counts, np.outer(heights, widths)


def _in_blocks(mask: np.ndarray, counted: str, tile: tuple[int, int]) -> tuple[str, np.ndarray] | None:
    """The failed elements as the blocks that hold them, where the box around those blocks takes in blocks that hold
    none (a bounding box would name right blocks as failing); None where every block of the box holds failures."""
    counts, sizes = _block_counts(mask, tile)
    failing_y, failing_x = np.nonzero(counts)
    box_blocks = (failing_y.max() - failing_y.min() + 1) * (failing_x.max() - failing_x.min() + 1)
    if len(failing_y) == box_blocks:
        return None
    tile_rows, tile_cols = tile
    covered = np.zeros_like(mask)
    for y, x in zip(failing_y, failing_x):
        covered[y * tile_rows:(y + 1) * tile_rows, x * tile_cols:(x + 1) * tile_cols] = True
    shares = [(f"({x}, {y})", int(counts[y, x]), int(sizes[y, x])) for y, x in zip(failing_y, failing_x)]
    if all(count == size for _, count, size in shares):
        named = [name for name, _, _ in shares]
        if len(named) <= MAX_BLOCKS:
            return f"{counted} in blocks {_listed(named)}, every element of each", covered
        return (f"{counted} in {len(named)} blocks, every element of each: {', '.join(named[:MAX_BLOCKS])}, ..."), \
            covered
    named = [f"{name} ({_share(count, size)})" for name, count, size in shares]
    if len(named) <= MAX_BLOCKS:
        return f"{counted} in blocks {_listed(named)}", covered
    return f"{counted} in {len(named)} blocks: {', '.join(named[:MAX_BLOCKS])}, ...", covered


def _share(count: int, size: int) -> str:
    """`count` of `size` as a percentage, "<1%" for a few (never "0%" for some)."""
    percent = 100 * count / size
    return "<1%" if 0 < percent < 0.5 else f"{percent:.0f}%"


def _all_but(mask: np.ndarray, counted: str, tile: tuple[int, int] | None) -> str:
    """Nearly all of C: the elements left named where they are few or make a shape (the diagonal, rows, columns,
    whole blocks), else said to be scattered."""
    left = ~mask
    count = int(left.sum())
    if count <= MAX_LEFT_NAMED:
        named = ", ".join(f"row {row}, column {col}" for row, col in np.argwhere(left))
        return f"{counted}: all but {count} ({named})"
    shape = _shape_of(left, tile)
    if shape:
        return f"{counted}: all but {count}, {shape}"
    return f"{counted}: nearly every element (all but {count}, scattered over C)"


def _shape_of(left: np.ndarray, tile: tuple[int, int] | None) -> str | None:
    """What the few elements `left` are when they make a shape: the diagonal, whole rows, whole columns or whole
    blocks."""
    total_rows, total_cols = left.shape
    count = int(left.sum())
    diagonal = np.eye(total_rows, total_cols, dtype=bool)
    if np.array_equal(left, diagonal):
        return "the diagonal"
    rows_all, cols_all = np.flatnonzero(left.all(axis=1)), np.flatnonzero(left.all(axis=0))
    if len(rows_all) and count == len(rows_all) * total_cols:
        return "rows " + ranges_text(rows_all)
    if len(cols_all) and count == len(cols_all) * total_rows:
        return "columns " + ranges_text(cols_all)
    if tile:
        counts, sizes = _block_counts(left, tile)
        whole = np.nonzero(counts)
        if np.array_equal(counts[whole], sizes[whole]) and len(whole[0]) <= MAX_BLOCKS:
            return ("blocks " if len(whole[0]) > 1 else "block ") + \
                _listed([f"({x}, {y})" for y, x in zip(*whole)])
    return None


SPREAD_HINT = ("an error spread over C (as a part of K dropped or added twice, or a sum kept in a narrower type, would "
               "make)")


def diagnose_output(verdict: Verdict, output: np.ndarray, expected: np.ndarray, plan=None,
                    matrices: int = 1, *, start: np.ndarray | None = None, alpha: float | None = None,
                    beta: float | None = None, row_groups: np.ndarray | None = None,
                    levels: tuple[int, int] | None = None) -> dict[str, Any]:
    """Counts, a summary in words, and the first mismatches with the block and thread responsible.

    `output` and `expected` hold one matrix, or `matrices` matrices of equal height stacked (row b * M + i): each
    is then described on its own rows, as its blocks number them. Optional facts of the case sharpen the summary:
    `start`, what C held before the launch where C started from values (C0, shaped as `output`; None where it
    started poisoned), with `alpha` and `beta` names C0 left out, added twice or without beta, and alpha and beta
    swapped or alpha not applied; `row_groups`, the group of each row of `output` (-1 for rows no group holds),
    names the groups that fail and compares a grouped batch's matrices on their groups' rows only; `levels`
    (count[0], count[1]) of a batch of two levels names matrix b as (i, j), b = i * count[1] + j."""
    tile = plan.tile if plan is not None else None
    height = output.shape[0] // max(matrices, 1)
    masks = {"unwritten": verdict.masks["unwritten"], "nonfinite": verdict.masks["nonfinite"],
             "wrong": verdict.masks["wrong"] & ~verdict.masks["nonfinite"]}
    failed = masks["unwritten"] | masks["nonfinite"] | masks["wrong"]
    held_rows = np.asarray(row_groups).reshape(-1) >= 0 if row_groups is not None else None
    labels = [_matrix_label(b, height, row_groups, levels) for b in range(matrices)]
    swapped = _other_matrices(verdict, output, expected, failed, matrices, height, held_rows)
    sentences = [", ".join(f"{labels[b]} holds {labels[source]}'s product" for b, source in swapped.items())
                 + " (a batch stride or index)"] if swapped else []
    whole = [] if swapped else _patterns(verdict, output, expected, failed, matrices, height, start, alpha, beta)
    sentences += whole
    epilogue = [] if sentences else _epilogue_patterns(verdict, output, expected, _described_bias(plan))
    sentences += epilogue
    left_poisoned = "unwritten" if start is None else \
        "still holding C's starting value (unwritten, or written with that very value)"
    states = (("unwritten", left_poisoned), ("nonfinite", "NaN or infinite"), ("wrong", "wrong"))
    found, covered = _matrices_described(masks, failed, states, tile, matrices, height, labels, swapped, bool(whole),
                                         row_groups)
    sentences += found
    if not (swapped or whole or epilogue) and masks["wrong"].sum() >= NEARLY_ALL * failed.size:
        sentences.append(SPREAD_HINT)
    if verdict.padding_written:
        sentences.append(f"{_counted(verdict.padding_written, 'written')} into C's padding, outside the matrices "
                         "(past the end of a row or column, or between the matrices of a batch)")
    if not whole:
        sentences.extend(_the_rest(verdict, output, expected, failed, covered | failed))
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


def _matrix_label(b: int, height: int, row_groups: np.ndarray | None,
                  levels: tuple[int, int] | None = None) -> str:
    """How a matrix of the stack is named: "matrix b", "matrix (i, j)" in a batch of two levels, or "group g" where
    its rows are one group's (masked groups, each in a matrix of its own)."""
    if row_groups is not None:
        groups = {int(g) for g in np.asarray(row_groups).reshape(-1)[b * height:(b + 1) * height] if g >= 0}
        if len(groups) == 1:
            return f"group {groups.pop()}"
    if levels is not None:
        return f"matrix ({b // levels[1]}, {b % levels[1]})"
    return f"matrix {b}"


def _matrices_described(masks: dict, failed: np.ndarray, states: tuple, tile, matrices: int, height: int,
                        labels: list[str], swapped: dict[int, int], explained: bool,
                        row_groups: np.ndarray | None) -> tuple[list[str], np.ndarray]:
    """The failed elements of each matrix in words, and the elements those words name. A matrix left wholly
    unwritten or NaN is said in a word; of the others, the `MAX_MATRICES` with the most failed elements are described
    (in their order) and the rest counted. With `explained` (a pattern of all of C named) and for a matrix named as
    holding another's product, its wrong elements are left to that pattern."""
    sentences: list[str] = []
    covered = np.zeros_like(failed)
    own = [slice(b * height, (b + 1) * height) for b in range(matrices)]
    failing = [b for b in range(matrices) if failed[own[b]].any()]
    for b in swapped:       # named whole by the pattern: described further only for what else fails in it
        covered[own[b]] = True
    described = [b for b in failing if b not in swapped or (failed & ~masks["wrong"])[own[b]].any()]
    if matrices > 1:
        for name, said in (("unwritten", states[0][1]), ("nonfinite", "NaN or infinite")):
            whole = [b for b in failing if masks[name][own[b]].all()]
            if whole:
                every = f"all {height * failed.shape[1]} elements" + (" of each" if len(whole) > 1 else "")
                never = "never written (" if said == "unwritten" else ""
                sentences.append(f"{_listed([labels[b] for b in whole])}: {never}{every} {said}"
                                 + (")" if never else ""))
                for b in whole:
                    covered[own[b]] = True
            described = [b for b in described if b not in whole]
        if len(described) > MAX_MATRICES:
            by_size = sorted(described, key=lambda b: -int(failed[own[b]].sum()))
            described = sorted(by_size[:MAX_MATRICES])
    for b in described:
        parts = []
        for name, state in states:
            if name == "wrong" and (explained or b in swapped):
                covered[own[b]] |= masks[name][own[b]]
                continue
            text, region = _region(masks[name][own[b]], state, tile)
            if text and row_groups is not None and matrices == 1:
                text += _groups_of(masks[name], row_groups)
            covered[own[b]] |= region
            if text:
                parts.append(text)
        if parts:
            sentences.append("; ".join(parts) if matrices == 1 else f"{labels[b]}: " + "; ".join(parts))
    if matrices > 1:
        rest = [b for b in failing if b not in described and not covered[own[b]].all()]
        if rest:
            counts = [_counted(int(sum(masks[name][own[b]].sum() for b in rest)), state) for name, state in states
                      if any(masks[name][own[b]].any() for b in rest)]
            verb = "fails" if len(rest) == 1 else "fail"
            # a batch of two levels names its matrices (i, j), listed; plain indices are ranged
            named = _listed([labels[b] for b in rest]) if labels[rest[0]].startswith("matrix (") else \
                _numbered('matrix', rest)
            sentences.append(f"{named} {verb} too: {', '.join(counts)}")
            for b in rest:
                covered[own[b]] = True
    return sentences, covered


def _groups_of(mask: np.ndarray, row_groups: np.ndarray) -> str:
    """The groups whose rows hold the True elements of `mask`, in words (contiguous groups, one matrix)."""
    rows_of = np.asarray(row_groups).reshape(-1)[mask.any(axis=1)]
    groups = sorted({int(g) for g in rows_of if g >= 0})
    return f" (in the rows of {_numbered('group', groups)})" if groups else ""


def _relative_error(output: np.ndarray, expected: np.ndarray, usable: np.ndarray) -> float:
    """The relative Frobenius error of `output` against `expected` over the `usable` elements (inf for none)."""
    reference = float(np.linalg.norm(expected[usable]))
    error = float(np.linalg.norm(output[usable].astype(np.float64) - expected[usable]))
    if not usable.any():
        return math.inf
    return error / reference if reference > 0 else error


def _explains(output: np.ndarray, candidate: np.ndarray, expected: np.ndarray, usable: np.ndarray,
              tolerance: float) -> bool:
    """Whether C is `candidate` (over the usable elements) and not the expected: within the tolerance of it in
    Frobenius norm, every element within the verdict's element test of it (10 x the tolerance, scaled by the
    candidate's RMS and the element's own size), and well away from the expected."""
    if not usable.any():
        return False
    got, wanted, reference = output[usable].astype(np.float64), candidate[usable], expected[usable]
    allowed = tolerance * float(np.linalg.norm(reference))
    miss, shift = float(np.linalg.norm(got - wanted)), float(np.linalg.norm(wanted - reference))
    if not _accounts_for(miss, shift, allowed):
        return False
    rms = math.sqrt(float(wanted @ wanted) / wanted.size)
    return bool(np.all(np.abs(got - wanted) <= 10 * tolerance * (np.abs(wanted) + rms)))


def _patterns(verdict: Verdict, output: np.ndarray, expected: np.ndarray, failed: np.ndarray, matrices: int,
              height: int, start: np.ndarray | None, alpha: float | None, beta: float | None) -> list[str]:
    """What the whole of C is, when it is something recognisable other than the product: its transpose (where the
    product is not symmetric), alpha or beta misapplied (given C's start, alpha and beta), or the product times a
    factor. Each is named only where it accounts for every element of C."""
    usable = ~(verdict.masks["unwritten"] | verdict.masks["nonfinite"])
    close = max(verdict.tolerance, 1e-12)
    width = output.shape[1]
    if height == width and failed.sum() * 2 >= failed.size:
        transposed = np.concatenate([expected[b * height:(b + 1) * height].T for b in range(matrices)])
        # a symmetric product (a Gram matrix) is its own transpose: C holding it says nothing
        if _relative_error(transposed, expected, usable) > close and \
                _relative_error(output, transposed, usable) <= close:
            return ["C holds the product transposed (C's rows and columns swapped: its layout, or the grid's x and "
                    "y)"]
    for text, candidate in _scalar_mistakes(expected, start, alpha, beta):
        if _explains(output, candidate, expected, usable, close):
            return [text]
    values, reference = output[usable].astype(np.float64), expected[usable]
    weight = float(reference @ reference)
    if weight > 0:
        factor = float(values @ reference) / weight
        if factor != 0 and abs(factor - 1) > min(10 * close, FACTOR_NAMED_FROM) and \
                _explains(output, factor * expected, expected, usable, close):
            return [f"every element is the product times {factor:.4g} (alpha, a scale or a sum applied a wrong "
                    "number of times?)"]
    return []


def _scalar_mistakes(expected: np.ndarray, start: np.ndarray | None, alpha: float | None,
                     beta: float | None) -> list[tuple[str, np.ndarray]]:
    """What C would be under each common mistake with alpha and beta, with its description: C0 not read, beta C0
    added twice or without beta, alpha and beta swapped, alpha not applied."""
    candidates: list[tuple[str, np.ndarray]] = []
    if start is not None and beta:
        start = np.asarray(start, dtype=np.float64).reshape(expected.shape)
        product = expected - beta * start                   # alpha A @ B
        candidates.append((f"C equals alpha A @ B without beta C0 (beta = {beta:g}): C's starting values never "
                           "read", product))
        twice = "beta C0 added twice"
        if beta == 0.5:
            twice += ", or C0 added without beta"
        candidates.append((f"C equals alpha A @ B + 2 beta C0 (beta = {beta:g}): {twice}", product + 2 * beta * start))
        if beta not in (0.5, 1.0):
            candidates.append((f"C equals alpha A @ B + C0: C's starting values added without beta = {beta:g}",
                               product + start))
        if alpha is not None and alpha not in (0.0, beta):
            candidates.append((f"C equals beta A @ B + alpha C0 (alpha = {alpha:g}, beta = {beta:g}): alpha and "
                               "beta swapped", (beta / alpha) * product + alpha * start))
        if alpha is not None and alpha not in (0.0, 1.0):
            candidates.append((f"C equals A @ B + beta C0: alpha = {alpha:g} (with any scale folded into it) not "
                               "applied", product / alpha + beta * start))
    elif alpha is not None and alpha not in (0.0, 1.0):
        candidates.append((f"C equals A @ B: alpha = {alpha:g} (with any scale folded into it) not applied",
                           expected / alpha))
    return candidates


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
                    height: int, held_rows: np.ndarray | None) -> dict[int, int]:
    """The matrices of a batch that hold another one's product (a batch stride or index gone wrong), each with the
    matrix whose product it holds. With `held_rows` (True for the rows some group holds) a matrix is compared on its
    own group's rows only: the rows no group holds are blank."""
    usable = ~(verdict.masks["unwritten"] | verdict.masks["nonfinite"])
    close = max(verdict.tolerance, 1e-12)
    swapped: dict[int, int] = {}
    for b in range(matrices if matrices > 1 else 0):
        rows = slice(b * height, (b + 1) * height)
        own_rows = held_rows[rows] if held_rows is not None else np.ones(height, dtype=bool)
        if failed[rows][own_rows].sum() * 2 < failed[rows][own_rows].size:
            continue
        compared = usable[rows] & own_rows[:, None]
        source = next((other for other in range(matrices) if other != b and _relative_error(
            output[rows], expected[other * height:(other + 1) * height], compared) <= close), None)
        if source is not None:
            swapped[b] = source
    return swapped


def _the_rest(verdict: Verdict, output: np.ndarray, expected: np.ndarray, failed: np.ndarray,
              named: np.ndarray) -> list[str]:
    """What the elements outside those `named` (the failed ones, or the blocks, boxes and matrices named as holding
    them) are: right, or off too (an error spread over C, under the 10 x tolerance that names an element); or,
    where nothing was named, which tolerance C exceeds."""
    rest = ~named
    if failed.any():
        if not rest.any():
            return []
        others = "other elements" if np.array_equal(named, failed) else "elements elsewhere"
        spread = _relative_error(output, expected, rest)
        if spread <= verdict.tolerance:
            return ["every other element right" if others == "other elements" else "every element elsewhere right"]
        return [f"the {others} are off too: their relative Frobenius error is {spread:.2e}, over the "
                f"tolerance {verdict.tolerance:.1e}"]
    if verdict.rel_fro_error > verdict.tolerance:
        return [f"no element is 10x the tolerance off, but the relative Frobenius error {verdict.rel_fro_error:.2e} "
                f"exceeds the tolerance {verdict.tolerance:.1e}: {SPREAD_HINT}"]
    if verdict.abs_tolerance is not None and verdict.max_abs_error > verdict.abs_tolerance:
        errors = np.where(rest, np.abs(output.astype(np.float64) - expected), 0.0)
        row, col = np.unravel_index(int(np.argmax(errors)), errors.shape)
        return [f"the largest absolute error, {verdict.max_abs_error:.2e} at row {row}, column {col}, exceeds the "
                f"absolute tolerance {verdict.abs_tolerance:.1e}"]
    return []
