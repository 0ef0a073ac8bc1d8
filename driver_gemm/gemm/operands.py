"""Operands in memory: row- or column-major matrices with leading dimensions, in strided batches.

Each of A (M x K), B (K x N) and C (M x N), repeated `batch` times, is one flat buffer: element
(i, j) of matrix b is at ``b * batch_stride + i * ld + j`` row-major, ``... + j * ld + i``
column-major. The stride may be smaller than one matrix where the matrices interleave (Megatron's
baddbmm on ``[seq, batch * heads, dim]`` tensors: stride ``dim``, rows ``batch * heads * dim``
apart), but no two matrices share an element, except A's or B's one matrix for every batch (stride
0). A batch of two levels (``count: [B, H]``: the heads of a ``[B, S, H, D]`` tensor) puts matrix (i, j) at
``i * stride[0] + j * stride[1]``, numbered ``z = i * H + j``; a level of stride 0 gives A's or B's one matrix
to every index of that level. Padding (the elements no matrix holds) is filled with values a kernel must not use,
and C's is checked after the launch. Layout codes (``layout: TN``) give A's and B's storage: N as is
(row-major), T transposed (column-major); NT stores both inputs K-major, the layout fp8 tensor cores
need (cuBLAS calls it "TN"). C is row-major unless ``layouts: {c: col}``. The spec fields:
docs/spec-reference.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from . import dtypes
from .dtypes import ElementType, GemmTypes
from .groups import GemmGroups
from ..errors import SpecError

ORDERS = ("row", "col")
LAYOUT_CODES = {"N": "row", "T": "col"}
ORDER_WORDS = {"row": "row-major", "col": "column-major"}
# What ``structure: {a: ..., b: ...}`` may declare of an input, and what drawing it imposes on every matrix.
STRUCTURES = {"upper": "upper triangular (zero below the diagonal)",
              "lower": "lower triangular (zero above the diagonal)",
              "diagonal": "diagonal (zero off the diagonal)",
              "symmetric": "symmetric (the upper triangle mirrored below)"}
# The triangles of C a SYRK kernel writes (``gram: {triangle: lower}``), the diagonal included.
GRAM_TRIANGLES = ("lower", "upper")
# What beta multiplies in a Gram product (``gram: {c0: input}``): a C0 drawn apart, or the input matrix itself.
GRAM_C0 = ("drawn", "input")
OTHER_ORDER = {"row": "col", "col": "row"}


@dataclass(frozen=True)
class Gram:
    """A Gram product of one input matrix X: ``of`` "a" is C = A A^T (B is A transposed, so N == M), ``of`` "b" is
    C = B^T B (A is B transposed, so M == N). The tied operand has no memory of its own: it is the other's buffer
    read the other way round (A row-major M x K is B column-major K x N with B's ld A's, and the converse). With
    `triangle`, the kernel writes only that triangle of C, its diagonal included, and leaves the other as it was, as
    cuBLAS's SYRK does; without it, the whole of C. `c0` says what beta multiplies: C0 drawn apart from X
    ("drawn"), or X itself ("input": alpha X X^T + beta X, a Newton-Schulz step's, so X is square)."""

    of: str
    triangle: str | None = None
    c0: str = "drawn"

    def __post_init__(self) -> None:
        if self.of not in ("a", "b"):
            raise ValueError(f"a Gram product is of a or b, got {self.of!r}")
        if self.triangle is not None and self.triangle not in GRAM_TRIANGLES:
            raise ValueError(f"a Gram product's triangle is {' or '.join(GRAM_TRIANGLES)}, got {self.triangle!r}")
        if self.c0 not in GRAM_C0:
            raise ValueError(f"a Gram product's c0 is {' or '.join(GRAM_C0)}, got {self.c0!r}")

    @property
    def tied(self) -> str:
        """The operand that is the other transposed: b for a Gram product of a, a for one of b."""
        return "b" if self.of == "a" else "a"

    @property
    def adds_input(self) -> bool:
        """Whether beta multiplies the input itself (C = alpha X X^T + beta X), not a C0 of its own."""
        return self.c0 == "input"

    @property
    def product(self) -> str:
        return "C = A A^T" if self.of == "a" else "C = B^T B"

    def describe(self) -> str:
        """For the plan's notes: which operand is which, and what C gets."""
        written = f" ({self.triangle} triangle written)" if self.triangle else ""
        added = f", plus beta {self.of.upper()} (C0 is {self.of.upper()} itself)" if self.adds_input else ""
        return f"{self.tied.upper()} is {self.of.upper()} transposed: one buffer, {self.product}{added}{written}"

    def written(self, rows: int, cols: int) -> np.ndarray:
        """True where the kernel writes C (rows x cols): its triangle, the diagonal included, or everywhere."""
        if self.triangle is None:
            return np.ones((rows, cols), dtype=bool)
        below = np.tri(rows, cols, dtype=bool)
        return below if self.triangle == "lower" else ~np.tri(rows, cols, -1, dtype=bool)

    def whole(self) -> "Gram":
        """The same product with all of C written: what a vendor GEMM of the buffer with itself computes."""
        return Gram(self.of, c0=self.c0)

    def as_dict(self) -> dict[str, str]:
        return {"of": self.of, **({"triangle": self.triangle} if self.triangle else {}),
                **({"c0": self.c0} if self.adds_input else {})}


# The most matrix pairs whose distance one step of the two-level overlap check holds at a time (int64 or Python
# integers): its memory stays a few tens of MiB whatever the counts, its time grows with count[0] x count[1].
OVERLAP_CHUNK = 1 << 20
# The most matrices (count[0] x count[1]) a batch of two levels holds: the overlap check's time grows with their count,
# and the layout lists every matrix's start (`matrix_starts`), before any limit on the operands' buffers is reached.
MAX_TWO_LEVEL_MATRICES = 1 << 24


@dataclass(frozen=True)
class MatrixLayout:
    """A batch of `rows` x `cols` matrices in one flat buffer: order, leading dimension and batch stride.

    A batch of two levels (`levels` = (count[0], count[1])) holds `batch` =
    count[0] x count[1] matrices, matrix (i, j) at ``i * outer_stride + j *
    batch_stride``, numbered z = i x count[1] + j; one level (`levels` None)
    puts matrix z at ``z * batch_stride``.
    """

    operand: str
    rows: int
    cols: int
    order: str
    ld: int
    batch: int
    batch_stride: int
    levels: tuple[int, int] | None = None
    outer_stride: int = 0

    @property
    def two_level(self) -> bool:
        """Whether the batch has two levels (``count: [B, H]``)."""
        return self.levels is not None

    @property
    def level_strides(self) -> tuple[int, int]:
        """(outer, inner) strides of a two-level batch; (0, the stride) for one level."""
        return (self.outer_stride, self.batch_stride) if self.two_level else (0, self.batch_stride)

    @property
    def given_stride(self) -> int | tuple[int, int]:
        """The batch stride as the spec gives it: a number for one level, (outer, inner) for two."""
        return (self.outer_stride, self.batch_stride) if self.two_level else self.batch_stride

    @property
    def recorded_stride(self) -> int | list[int]:
        """`given_stride` as a results file and a dispatch table's comparison hold it: [outer, inner] for two."""
        stride = self.given_stride
        return list(stride) if isinstance(stride, tuple) else stride

    def stride_text(self) -> str:
        """The batch stride as the spec writes it: ``64`` for one level, ``[4096, 64]`` for two."""
        return _shown(self.given_stride)

    def matrix_name(self, index: int) -> str:
        """Matrix `index` (z) as a reader counts it: ``3`` for one level, ``(1, 2)`` (i, j) for two."""
        if self.levels is None:
            return str(index)
        return f"({index // self.levels[1]}, {index % self.levels[1]})"

    def matrix_starts(self) -> np.ndarray:
        """The flat index of each matrix's first element, in the order z (int64, one per matrix)."""
        if self.levels is None:
            return np.arange(self.batch, dtype=np.int64) * self.batch_stride
        outer, inner = self.levels
        starts = np.arange(outer, dtype=np.int64)[:, None] * self.outer_stride \
            + np.arange(inner, dtype=np.int64)[None, :] * self.batch_stride
        return starts.reshape(-1)

    def distinct_counts(self) -> tuple[int, ...]:
        """How many different matrices each level holds: 1 on a level of stride 0 (one matrix for all), else its
        count; (count,) for one level, (outer, inner) for two."""
        if self.levels is None:
            return (1 if self.batch_stride == 0 else self.batch,)
        return tuple(1 if stride == 0 else count for count, stride in zip(self.levels, self.level_strides))

    @property
    def tight_ld(self) -> int:
        """The smallest leading dimension: the length of a row (row-major) or of a column (column-major)."""
        return self.cols if self.order == "row" else self.rows

    @property
    def lines(self) -> int:
        """How many rows (row-major) or columns (column-major) one matrix has: they are `ld` apart."""
        return self.rows if self.order == "row" else self.cols

    @property
    def matrix_elements(self) -> int:
        """The elements one matrix occupies, padding included: the tight batch stride."""
        return self.lines * self.ld

    @property
    def elements(self) -> int:
        """The length of the whole buffer in elements.

        Each matrix's lines take `ld` elements, padding included, as BLAS
        sizes a matrix (lines x ld), where the matrices follow one another.
        Where the stride packs them closer (matrices interleaved within rows,
        or a stride that drops the last line's padding), the buffer ends at
        the batch's last element, or after the first matrix's lines where
        that is further: the tensor such a batch is a view of.
        """
        if self.batch == 0 or self.matrix_elements == 0:
            return 0
        if self.levels is not None:
            return self._two_level_elements()
        whole_lines = (self.batch - 1) * self.batch_stride + self.matrix_elements
        if self.batch == 1 or self.batch_stride >= self.matrix_elements:
            return whole_lines
        last_element = (self.batch - 1) * self.batch_stride + (self.lines - 1) * self.ld + self.tight_ld - 1
        return max(self.matrix_elements, last_element + 1)

    def _two_level_elements(self) -> int:
        """`elements` for two levels: the lines whole where every level that moves (count above 1, stride not 0)
        puts its matrices one after another, else up to the batch's last element (or the first matrix's lines)."""
        assert self.levels is not None
        moving = [stride for count, stride in zip(self.levels, self.level_strides) if count > 1 and stride]
        last_start = sum((count - 1) * stride for count, stride in zip(self.levels, self.level_strides))
        if all(stride >= self.matrix_elements for stride in moving):
            return last_start + self.matrix_elements
        last_element = last_start + (self.lines - 1) * self.ld + self.tight_ld - 1
        return max(self.matrix_elements, last_element + 1)

    def first_shared_element(self) -> tuple[int, tuple[int, int], tuple[int, int]] | None:
        """Where two matrices of the batch share an element: (d, (row, col) in matrix 0, (row, col) in matrix d)
        for the smallest such d, or None where every element belongs to one matrix.

        Matrix d is matrix 0 moved by ``d * stride``, so matrices b and b + d
        overlap exactly where 0 and d do. A move of q lines and r elements
        (``d * stride = q * ld + r``, 0 <= r < ld) lands matrix d's first
        element on matrix 0's line q at position r, or its line 0 at position
        ``ld - r`` on matrix 0's line q + 1: no other pair of positions within
        a line's `tight_ld` can meet, since `ld` is at least that.
        """
        lines, line_length, ld, stride = self.lines, self.tight_ld, self.ld, self.batch_stride
        if self.batch < 2 or lines == 0 or line_length == 0:
            return None
        if stride == 0:
            return 1, (0, 0), (0, 0)
        # Matrix d starting at or past the end of matrix 0's lines shares nothing with it.
        last_move = min(self.batch - 1, lines * ld // stride)
        # Python integers where int64 could overflow (M, N, K up to 2^40 each), int64 elsewhere for speed.
        moves = np.arange(1, last_move + 1, dtype=np.int64 if last_move * stride + ld < 2 ** 62 else object)
        whole_lines, within = np.divmod(moves * stride, ld)
        on_line = (whole_lines <= lines - 1) & (within <= line_length - 1)
        on_next_line = (whole_lines + 1 <= lines - 1) & (ld - within <= line_length - 1)
        hits = np.flatnonzero(on_line | on_next_line)
        if not hits.size:
            return None
        hit = int(hits[0])
        q, r = int(whole_lines[hit]), int(within[hit])
        first, other = ((q, r), (0, 0)) if on_line[hit] else ((q + 1, 0), (0, ld - r))
        return int(moves[hit]), self.row_col(*first), self.row_col(*other)

    def first_shared_pair(self, *, broadcast_allowed: bool = False) \
            -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int]] | None:
        """Where two matrices of a two-level batch share an element: ((i, j), (row, col)) of one and ((i, j), (row,
        col)) of the other, for the pair whose starts are closest; None where every element belongs to one matrix.

        Two matrices overlap exactly where their starts are a distance d apart
        that the one-level check finds (`first_shared_element`: d = q lines +
        r, a line's first element on the other's line q or q + 1), so every
        difference (di, dj) of matrix indices is tried once, those beyond one
        matrix's lines skipped, `OVERLAP_CHUNK` at a time: the memory stays
        bounded, the time grows with count[0] x count[1]. With
        `broadcast_allowed`, a level of stride 0 is one matrix (a broadcast).
        """
        assert self.levels is not None
        counts = list(self.levels)
        strides = list(self.level_strides)
        if broadcast_allowed:
            counts = [1 if stride == 0 else count for count, stride in zip(counts, strides)]
        lines, line_length, ld = self.lines, self.tight_ld, self.ld
        if counts[0] * counts[1] < 2 or lines == 0 or line_length == 0:
            return None
        reach = lines * ld          # a start this far from another's or further shares nothing with it
        outer_count, inner_count = counts
        outer_stride, inner_stride = strides
        wide = (outer_count * outer_stride + inner_count * inner_stride + reach) >= 2 ** 62
        dtype = object if wide else np.int64
        best = None
        # Chunks of inner moves (each of at most OVERLAP_CHUNK), and of outer moves within each, hold the arrays
        # below to about OVERLAP_CHUNK pairs whatever the counts.
        inner_chunk = min(2 * inner_count - 1, OVERLAP_CHUNK)
        for first_inner in range(-(inner_count - 1), inner_count, inner_chunk):
            inner_moves = np.arange(first_inner, min(inner_count, first_inner + inner_chunk), dtype=dtype)
            rows_per_chunk = max(1, OVERLAP_CHUNK // len(inner_moves))
            for first_outer in range(0, outer_count, rows_per_chunk):
                outer_moves = np.arange(first_outer, min(outer_count, first_outer + rows_per_chunk),
                                        dtype=dtype)[:, None]
                if first_outer * outer_stride + int(inner_moves[0]) * inner_stride >= reach:
                    break       # every later outer move starts at least this far away from these inner ones
                moves = outer_moves * outer_stride + inner_moves[None, :] * inner_stride
                # (0, 0) is a matrix itself, and (0, -dj) the pair (0, dj) the other way round
                moved = (outer_moves > 0) | (inner_moves[None, :] > 0)
                distance = np.abs(moves)
                # // and % rather than np.divmod, which takes no Python integers (the object arrays of `wide`)
                whole_lines, within = distance // ld, distance % ld
                on_line = (whole_lines <= lines - 1) & (within <= line_length - 1)
                on_next_line = (whole_lines + 1 <= lines - 1) & (ld - within <= line_length - 1)
                hits = moved & (on_line | on_next_line)
                if not hits.any():
                    continue
                flat = int(np.argmin(np.where(hits, distance, reach).reshape(-1)))     # the chunk's closest pair
                outer_index, inner_index = divmod(flat, len(inner_moves))
                found = int(distance[outer_index, inner_index])
                if best is None or found < best[0]:
                    best = (found, int(outer_moves[outer_index, 0]), int(inner_moves[inner_index]),
                            bool(on_line[outer_index, inner_index]), int(whole_lines[outer_index, inner_index]),
                            int(within[outer_index, inner_index]), int(moves[outer_index, inner_index]) < 0)
                if best[0] == 0:
                    break       # two matrices at one start: no pair is closer
            if best is not None and best[0] == 0:
                break
        if best is None:
            return None
        _, outer_move, inner_move, line_hit, q, r, reversed_pair = best
        low = (0, max(0, -inner_move))
        high = (outer_move, low[1] + inner_move)
        if reversed_pair:       # the second matrix starts first: it is the one the other lands on
            low, high = high, low
        first, other = ((q, r), (0, 0)) if line_hit else ((q + 1, 0), (0, ld - r))
        return low, self.row_col(*first), high, self.row_col(*other)

    def row_col(self, line: int, position: int) -> tuple[int, int]:
        """(row, column) of the element at `position` along line `line` (a row row-major, a column column-major)."""
        return (line, position) if self.order == "row" else (position, line)

    def offsets(self) -> np.ndarray:
        """The flat index of every logical element, as an int64 array of shape (batch, rows, cols)."""
        i = np.arange(self.rows, dtype=np.int64)[:, None]
        j = np.arange(self.cols, dtype=np.int64)[None, :]
        within = i * self.ld + j if self.order == "row" else j * self.ld + i
        if self.levels is not None:
            return self.matrix_starts()[:, None, None] + within
        return np.arange(self.batch, dtype=np.int64)[:, None, None] * self.batch_stride + within

    def pack(self, values: np.ndarray, fill: float = np.nan) -> np.ndarray:
        """The flat float64 buffer holding `values` (batch x rows x cols, or rows x cols for one matrix);
        `fill` everywhere else."""
        values = self.batched_values(values)
        flat = np.full(self.elements, fill, dtype=np.float64)
        flat[self.offsets()] = values        # a broadcast batch (stride 0) writes its matrix `batch` times
        return flat

    def unpack(self, flat: np.ndarray) -> np.ndarray:
        """The batch x rows x cols matrices held in the flat buffer `flat` (the inverse of `pack`)."""
        flat = np.asarray(flat)
        if flat.shape != (self.elements,):
            raise ValueError(f"{self.operand}: a buffer of {flat.size} elements, expected {self.elements}")
        return flat[self.offsets()]

    def padding_mask(self) -> np.ndarray:
        """True for the buffer's elements that belong to no matrix (what a kernel must leave alone)."""
        mask = np.ones(self.elements, dtype=bool)
        mask[self.offsets()] = False
        return mask

    def batched_values(self, values: np.ndarray) -> np.ndarray:
        """`values` as float64 batch x rows x cols (one matrix gains the batch axis), checked against the layout."""
        values = np.asarray(values, dtype=np.float64)
        if values.ndim == 2:
            values = values[None]
        if values.shape != (self.batch, self.rows, self.cols):
            raise ValueError(f"{self.operand}: values of shape {values.shape}, expected "
                             f"{(self.batch, self.rows, self.cols)}")
        if self.levels is not None:
            by_level = values.reshape(*self.levels, self.rows, self.cols)
            for axis, (word, stride) in enumerate(zip(("outer", "inner"), self.level_strides)):
                if stride == 0 and self.levels[axis] > 1 and \
                        not (by_level == np.take(by_level, [0], axis=axis)).all():
                    raise ValueError(f"{self.operand} is broadcast on the {word} level (stride 0): every index of "
                                     "that level must hold the same matrix")
            return values
        if self.batch_stride == 0 and self.batch > 1 and not (values == values[:1]).all():
            raise ValueError(f"{self.operand} is broadcast (batch stride 0): every batch must hold the same matrix")
        return values

    def describe(self) -> str:
        return f"{self.operand} ({self.rows} x {self.cols}, {ORDER_WORDS[self.order]})"


def matrix_layout(operand: str, rows: int, cols: int, order: str = "row", ld: int | None = None,
                  batch: int = 1, batch_stride: int | tuple[int, int] | None = None, *,
                  broadcast_allowed: bool = False, where: str | None = None, field: str | None = None,
                  levels: tuple[int, int] | None = None) -> MatrixLayout:
    """A checked `MatrixLayout`: `ld` and `batch_stride` default to tight, and impossible ones are refused.

    The leading dimension must be at least the row length (row-major) or the
    column length (column-major); the batch stride a whole number of elements,
    0 or more. No two matrices of the batch may share an element, save that
    with `broadcast_allowed` (inputs) a stride of 0 gives every batch one
    matrix: a stride below one matrix is taken where the matrices interleave.
    Mistakes raise a `SpecError` that names the operand, the elements that
    collide, `where` and `field`. With `levels` (count[0], count[1]), the
    batch has two levels (`batch` is then their product) and `batch_stride`
    is (outer, inner), by default (count[1] matrices, one matrix): see
    `two_level_layout`.
    """
    if order not in ORDERS:
        raise SpecError(f"the order of {operand} is row or col, got {order!r}", where, field and f"{field}.order")
    for name, value in (("rows", rows), ("cols", cols), ("batch", batch)):
        if int(value) != value or value < 0:
            raise SpecError(f"{operand}: {name} must be a non-negative integer, got {value!r}", where, field)
    tight = cols if order == "row" else rows
    ld = max(tight, 1) if ld is None else ld
    ld_name = f"ld{operand.lower()}"
    if int(ld) != ld or ld < max(tight, 1):
        what = "the length of a row" if order == "row" else "the length of a column"
        raise SpecError(f"{ld_name} = {ld} is too small for {operand} ({rows} x {cols}, {ORDER_WORDS[order]}): "
                        f"it needs {ld_name} >= {max(tight, 1)} ({what})", where, field and f"ld.{operand.lower()}",
                        hint=f"leave {ld_name} out for the tight {max(tight, 1)}")
    layout = MatrixLayout(operand, int(rows), int(cols), order, int(ld), int(batch), 0)
    if levels is not None:
        return two_level_layout(layout, levels, batch_stride, broadcast_allowed=broadcast_allowed, where=where,
                                field=field)
    assert not isinstance(batch_stride, tuple), "a stride of two levels needs the levels' counts"
    minimum = layout.matrix_elements
    stride = minimum if batch_stride is None else batch_stride
    stride_field = field and f"batch.stride.{operand.lower()}"
    if int(stride) != stride or stride < 0:
        raise SpecError(f"the batch stride of {operand} is a whole number of elements, 0 or more, got {stride}",
                        where, stride_field, hint=f"leave it out for one matrix after another ({minimum})")
    layout = MatrixLayout(operand, int(rows), int(cols), order, int(ld), int(batch), int(stride))
    shared = None if broadcast_allowed and stride == 0 else layout.first_shared_element()
    if shared is not None:
        other, (first_row, first_col), (other_row, other_col) = shared
        # Two writes of one element of C race; inputs that share part of a matrix are, as a rule, a miscounted stride.
        why = f"two writes of {operand} would race there" if not broadcast_allowed else \
            f"matrices of {operand} share elements only as a whole (stride 0: one matrix for every batch)"
        broadcast = " (or 0, every batch reading one matrix)" if broadcast_allowed else ""
        span, span_words = _span(layout, ld_name)
        raise SpecError(f"the batch stride of {operand}, {stride}, is smaller than one matrix ({layout.describe()} "
                        f"with {ld_name} = {ld} spans {span} elements, {span_words}: putting the matrices one after "
                        f"another needs >= {span}{broadcast}) and does not interleave the matrices either: element "
                        f"(row {first_row}, column {first_col}) of matrix 0 is element (row {other_row}, column "
                        f"{other_col}) of matrix {other}, and {why}",
                        where, stride_field, hint=_interleave_hint(layout, ld_name))
    return layout


def two_level_layout(layout: MatrixLayout, levels: tuple[int, int], strides: int | tuple[int, int] | None, *,
                     broadcast_allowed: bool = False, where: str | None = None,
                     field: str | None = None) -> MatrixLayout:
    """`layout` (one matrix, its leading dimension checked) as a batch of two levels: count[0] x count[1] matrices,
    matrix (i, j) at ``i * strides[0] + j * strides[1]``. `strides` left out is matrices one after another
    (count[1] matrices, one matrix); a single 0 is both levels broadcast (A or B only). No two matrices may share an
    element, save with `broadcast_allowed` every index of a level of stride 0 reading one matrix; a collision
    raises a `SpecError` naming the element, the two matrices (i, j) and strides that keep them apart."""
    operand = layout.operand
    stride_field = field and f"batch.stride.{operand.lower()}"
    for index, count in enumerate(levels):
        if int(count) != count or count < 1:
            raise SpecError(f"the batch count of level {index} ({('outer', 'inner')[index]}) must be a positive "
                            f"integer, got {count!r}", where, f"batch.count[{index}]")
    if int(levels[0]) * int(levels[1]) > MAX_TWO_LEVEL_MATRICES:
        raise SpecError(f"a batch of two levels holds at most {MAX_TWO_LEVEL_MATRICES:,} matrices "
                        f"(MAX_TWO_LEVEL_MATRICES), got {int(levels[0]):,} x {int(levels[1]):,} = "
                        f"{int(levels[0]) * int(levels[1]):,}", where, "batch.count",
                        hint="use smaller counts; a level of stride 0 still counts its matrices")
    inner_count = int(levels[1])
    matrix = layout.matrix_elements
    tight = (inner_count * matrix, matrix)
    if strides is None:
        strides = tight
    elif not isinstance(strides, tuple):
        if strides != 0:
            raise SpecError(f"the batch of {operand} has two levels, so its stride is a list [outer, inner], got "
                            f"{strides}", where, stride_field,
                            hint=f"[{tight[0]}, {tight[1]}] puts the matrices one after another; a single 0 reads "
                                 "one matrix for every (i, j)")
        strides = (0, 0)
    for index, stride in enumerate(strides):
        if int(stride) != stride or stride < 0:
            raise SpecError(f"the batch strides of {operand} are whole numbers of elements, 0 or more, got "
                            f"[{strides[0]}, {strides[1]}]", where, stride_field and f"{stride_field}[{index}]",
                            hint=f"leave it out for one matrix after another ([{tight[0]}, {tight[1]}])")
    outer, inner = int(strides[0]), int(strides[1])
    laid_out = MatrixLayout(operand, layout.rows, layout.cols, layout.order, layout.ld,
                            int(levels[0]) * inner_count, inner, (int(levels[0]), inner_count), outer)
    shared = laid_out.first_shared_pair(broadcast_allowed=broadcast_allowed)
    if shared is not None:
        (first_i, first_j), (first_row, first_col), (other_i, other_j), (other_row, other_col) = shared
        why = f"two writes of {operand} would race there" if not broadcast_allowed else \
            f"matrices of {operand} share elements only as a whole (a level of stride 0: one matrix for all of it)"
        ld_name = f"ld{operand.lower()}"
        span, span_words = _span(laid_out, ld_name)
        raise SpecError(f"the batch strides of {operand}, [{outer}, {inner}], put two matrices on one element "
                        f"({laid_out.describe()} with {ld_name} = {layout.ld} spans {span} elements, {span_words}): "
                        f"element (row {first_row}, column {first_col}) of matrix ({first_i}, {first_j}) is element "
                        f"(row {other_row}, column {other_col}) of matrix ({other_i}, {other_j}), and {why}",
                        where, stride_field, hint=_two_level_hint(laid_out, ld_name, broadcast_allowed))
    return laid_out


def _two_level_hint(layout: MatrixLayout, ld_name: str, broadcast_allowed: bool) -> str:
    """What strides keep a two-level batch's matrices apart: one after another, or the inner level side by side
    within each line (the heads of a [B, S, H, D] tensor) and the outer one past a matrix's lines."""
    assert layout.levels is not None
    inner_count = layout.levels[1]
    line_length, matrix = layout.tight_ld, layout.matrix_elements
    along = "rows" if layout.order == "row" else "columns"
    broadcast = "; 0 on a level reads one matrix for all of it" if broadcast_allowed else ""
    return (f"[{inner_count * matrix}, {matrix}] puts the matrices one after another; to interleave the inner level "
            f"within {along} (inner stride >= {line_length}), {ld_name} must be at least {inner_count} x "
            f"{line_length} = {inner_count * line_length}, the inner stride at most ({ld_name} - {line_length}) / "
            f"{max(inner_count - 1, 1)} and the outer stride at least {layout.lines} x {ld_name} = "
            f"{layout.lines * layout.ld}{broadcast}")


def _span(layout: MatrixLayout, ld_name: str) -> tuple[int, str]:
    """The elements from a matrix's first to its last, the last line's padding left out, with how they are counted:
    the smallest stride that puts the next matrix after it."""
    lines, line_length = ("rows", "cols") if layout.order == "row" else ("cols", "rows")
    return ((layout.lines - 1) * layout.ld + layout.tight_ld,
            f"({lines} - 1) x {ld_name} + {line_length}")


def _interleave_hint(layout: MatrixLayout, ld_name: str) -> str:
    """What strides keep a batch's matrices apart: one after another, or side by side within each line."""
    line_length, count = layout.tight_ld, layout.batch
    along = "rows" if layout.order == "row" else "columns"
    span, span_words = _span(layout, ld_name)
    padded = (f"; {layout.matrix_elements} keeps the last {along[:-1]}'s padding"
              if layout.matrix_elements != span else "")
    return (f"a stride of at least {span} ({span_words}{padded}) puts the matrices one after another; to interleave "
            f"them within {along} (stride >= {line_length}), {ld_name} must be at least {count} x {line_length} = "
            f"{count * line_length} and the stride at most ({ld_name} - {line_length}) / {count - 1}")


def parse_layout(code: str | None = None, orders: Mapping[str, str] | None = None, *,
                 where: str | None = None) -> dict[str, str]:
    """The storage order of A, B and C from a layout code (``NN``, ``NT``, ``TN``, ``TT``) and/or ``layouts: {a: col}``.

    See the module's docstring for what the letters mean. Both may be given
    when they agree; the mapping may also set ``c``. Returns
    ``{"a": ..., "b": ..., "c": ...}`` with values ``row`` or ``col``.
    """
    result = {"a": "row", "b": "row", "c": "row"}
    if code is not None:
        text = str(code).strip().upper()
        if len(text) != 2 or any(letter not in LAYOUT_CODES for letter in text):
            shown = repr(code) if len(repr(code)) <= 60 else repr(code)[:57] + "..."   # a message stays readable
            raise SpecError(f"layout is two letters of N and T (NN, NT, TN, TT), got {shown}", where, "layout",
                            hint="N: stored as driver-gemm stores it (row-major), T: transposed (column-major)")
        result["a"], result["b"] = LAYOUT_CODES[text[0]], LAYOUT_CODES[text[1]]
    for key, value in (orders or {}).items():
        if key not in result:
            raise SpecError(f"unknown operand {key!r}", where, f"layouts.{key}", hint="the operands are a, b and c")
        if value not in ORDERS:
            raise SpecError(f"an operand is row or col, got {value!r}", where, f"layouts.{key}")
        if code is not None and key in "ab" and value != result[key]:
            raise SpecError(f"layouts.{key} = {value} contradicts layout {code}", where, f"layouts.{key}")
        result[key] = value
    return result


def layout_code(orders: Mapping[str, str]) -> str:
    """``NN``/``NT``/``TN``/``TT`` for the orders of A and B, with ``-Ccol`` when C is column-major."""
    code = "".join("N" if orders[key] == "row" else "T" for key in "ab")
    return code + ("-Ccol" if orders.get("c", "row") == "col" else "")


@dataclass(frozen=True)
class GemmOperands:
    """The three operands of a (batched) GEMM C[b] = alpha * A[b] @ B[b] + beta * C[b] as laid out in memory; with
    `groups`, a grouped GEMM (`gemm.groups`), whose B holds a matrix per group, or the weights the groups share."""

    M: int
    N: int
    K: int
    a: MatrixLayout
    b: MatrixLayout
    c: MatrixLayout
    groups: GemmGroups | None = None
    # The inputs' declared structure, ((operand, word of STRUCTURES), ...): imposed on the drawn A and B.
    structure: tuple[tuple[str, str], ...] = ()
    # A Gram product (`Gram`): one of A and B is the other transposed, in the other's buffer.
    gram: Gram | None = None

    def structure_note(self) -> str | None:
        """What the drawn inputs' structure is, for the plan's notes; None for inputs drawn full."""
        if not self.structure:
            return None
        return "inputs drawn structured: " + ", ".join(f"{operand.upper()} {STRUCTURES[word]}"
                                                       for operand, word in self.structure)

    @property
    def batch(self) -> int:
        """The matrices of C (of A too; a contiguous grouped GEMM's B has one per group)."""
        return self.c.batch

    @property
    def levels(self) -> tuple[int, int] | None:
        """(count[0], count[1]) of a batch of two levels, which every operand shares; None for one level."""
        return self.c.levels

    def levels_note(self) -> str | None:
        """What a batch of two levels is, for the plan's notes: its counts, how z numbers (i, j), and each operand's
        strides; None for one level."""
        if self.levels is None:
            return None
        outer, inner = self.levels
        strides = ", ".join(f"{layout.operand} {layout.stride_text()}" for layout in (self.a, self.b, self.c))
        return (f"a batch of two levels: {outer} x {inner} = {self.batch} matrices, matrix (i, j) at i * stride[0] + "
                f"j * stride[1] and numbered z = i * {inner} + j; strides {strides}")

    @property
    def flops(self) -> int:
        """The floating-point operations of the product: 2 M N K for each matrix of the batch, or the groups'."""
        return self.groups.flops if self.groups is not None else 2 * self.M * self.N * self.K * self.batch

    def dense(self) -> "GemmOperands":
        """The ungrouped product that holds a grouped one's rows, as a vendor library computes it in one call: M x N
        x K with one B (contiguous), or the batch of every group's full matrices (masked; where the groups share
        weights, a B per group in the batch, since a batched product has no index from group to weight). Itself when
        ungrouped."""
        if self.groups is None:
            return self
        if self.groups.layout == "masked":
            b = self.b if not self.groups.shares_weights else \
                matrix_layout("B", self.K, self.N, self.b.order, self.b.ld, self.groups.count)
            return GemmOperands(self.M, self.N, self.K, self.a, b, self.c)
        b = matrix_layout("B", self.K, self.N, self.b.order, self.b.ld)
        return GemmOperands(self.M, self.N, self.K, self.a, b, self.c)

    @property
    def orders(self) -> dict[str, str]:
        return {"a": self.a.order, "b": self.b.order, "c": self.c.order}

    @property
    def layout_code(self) -> str:
        return layout_code(self.orders)

    def kernel_scalars(self) -> dict[str, int]:
        """The layout arguments of the typed kernels' signature (see ``kernels/types/``); a batch of two levels gives
        its inner strides (stride[1]) as strideA, strideB and strideC."""
        return {"lda": self.a.ld, "ldb": self.b.ld, "ldc": self.c.ld,
                "strideA": self.a.batch_stride, "strideB": self.b.batch_stride, "strideC": self.c.batch_stride}


def gemm_operands(M: int, N: int, K: int, *, orders: Mapping[str, str] | None = None,
                  ld: Mapping[str, int] | None = None, batch: int = 1,
                  strides: Mapping[str, int | tuple[int, int]] | None = None, where: str | None = None,
                  groups: GemmGroups | None = None, gram: Gram | None = None,
                  levels: tuple[int, int] | None = None) -> GemmOperands:
    """Checked layouts of A, B and C for an M x N x K GEMM: `orders` from `parse_layout`, `ld` and `strides` per operand
    (keys ``a``, ``b``, ``c``; missing ones tight), `batch` matrices each, no two sharing an element (but A's or B's
    with a stride of 0, one matrix for every batch). With `groups`, B has a matrix per group (per weight, where the
    groups share weights), and A and C one per group where the groups are masked (`batch` is then 1). With `gram`,
    the tied operand is the other's buffer read transposed (`tied_layout`). With `levels` (count[0], count[1]) the
    batch has two levels, `batch` their product, and each of `strides` is (outer, inner) or 0 (`two_level_layout`)."""
    orders = {"a": "row", "b": "row", "c": "row", **(orders or {})}
    ld, strides = dict(ld or {}), dict(strides or {})
    for name, mapping in (("ld", ld), ("batch.stride", strides)):
        unknown = sorted(set(mapping) - {"a", "b", "c"})
        if unknown:
            raise SpecError(f"unknown operand {unknown[0]!r}", where, f"{name}.{unknown[0]}",
                            hint="the operands are a, b and c")
    for index, count in enumerate(levels or ()):
        if int(count) != count or count < 1:
            raise SpecError(f"the batch count of level {index} ({('outer', 'inner')[index]}) must be a positive "
                            f"integer, got {count!r}", where, f"batch.count[{index}]")
    if int(batch) != batch or batch < 1:
        raise SpecError(f"the batch count must be a positive integer, got {batch!r}", where, "batch.count")
    shapes = {"a": (M, K), "b": (K, N), "c": (M, N)}
    counts = {key: batch for key in "abc"}
    if groups is not None:
        counts = {"a": 1, "b": groups.b_matrices, "c": 1} if groups.layout == "contiguous" else \
            {"a": groups.count, "b": groups.b_matrices, "c": groups.count}
    drawn = "abc" if gram is None else [key for key in "abc" if key != gram.tied]
    if levels is not None and (groups is not None or levels[0] * levels[1] != batch):
        raise ValueError(f"a batch of two levels {levels} is {batch} matrices and no groups")
    layouts = {key: matrix_layout(key.upper(), *shapes[key], orders[key], ld.get(key), counts[key], strides.get(key),
                                  broadcast_allowed=key != "c", where=where, field=key, levels=levels)
               for key in drawn}
    if gram is not None:
        layouts[gram.tied] = tied_layout(gram, M, N, K, layouts[gram.of], orders, ld, strides, where)
    return GemmOperands(M, N, K, layouts["a"], layouts["b"], layouts["c"], groups, gram=gram)


def tied_layout(gram: Gram, M: int, N: int, K: int, source: MatrixLayout, orders: Mapping[str, str],
                ld: Mapping[str, int], strides: Mapping[str, int | tuple[int, int]],
                where: str | None = None) -> MatrixLayout:
    """The layout of a Gram product's tied operand: `source`'s buffer read transposed, its order the other, its
    leading dimension and batch stride `source`'s. C must be square; an order, leading dimension or batch stride
    the spec gave the tied operand must be that one. Mistakes raise a `SpecError` naming gram and the field."""
    tied, of = gram.tied, gram.of
    if M != N:
        square = "N equal to M (C = A A^T is M x M)" if of == "a" else "M equal to N (C = B^T B is N x N)"
        raise SpecError(f"gram of {of.upper()} computes {gram.product}, a square C, but this shape has M={M} and N={N} "
                        f"(K={K})", where, "gram",
                        hint=f"give shapes whose C is square: {square}; a set {{MN: [...], K: [...]}} sweeps square "
                             "C's over K")
    if gram.adds_input and K != M:
        raise SpecError(f"gram of {of.upper()} with c0: input adds beta {of.upper()} to {gram.product}, so "
                        f"{of.upper()} is square like C, but this shape has K={K} and {'M' if of == 'a' else 'N'}={M}",
                        where, "gram", hint="give shapes with K equal to M and N ([n, n, n]), or leave c0 out")
    order = OTHER_ORDER[source.order]
    rows, cols = (K, N) if tied == "b" else (M, K)
    if orders.get(tied, order) != order:
        raise SpecError(f"gram of {of.upper()}: {tied.upper()} is {of.upper()} transposed, so "
                        f"{ORDER_WORDS[order]} where {of.upper()} is {ORDER_WORDS[source.order]}, not "
                        f"{ORDER_WORDS[orders[tied]]}", where, f"layouts.{tied}",
                        hint=f"leave {tied.upper()}'s layout out, or give it {order}")
    for field_name, given, own in ((f"ld.{tied}", ld.get(tied), source.ld),
                                   (f"batch.stride.{tied}", strides.get(tied), source.given_stride)):
        if given is not None and given != own and not (source.two_level and given == 0 and own == (0, 0)):
            raise SpecError(f"gram of {of.upper()}: {tied.upper()} is {of.upper()}'s buffer read transposed, so its "
                            f"{field_name.rsplit('.', 1)[0]} is {of.upper()}'s, {_shown(own)}, not {_shown(given)}",
                            where, field_name, hint=f"leave {field_name} out, or make it equal to {of.upper()}'s")
    return MatrixLayout(tied.upper(), rows, cols, order, source.ld, source.batch, source.batch_stride, source.levels,
                        source.outer_stride)


def _shown(stride: int | tuple[int, int]) -> str:
    """A stride as the spec writes it: ``64``, or ``[4096, 64]`` for two levels."""
    return f"[{stride[0]}, {stride[1]}]" if isinstance(stride, tuple) else str(stride)


# --------------------------------------------------------------------------- inputs, outputs, reference

def padding_value(element: ElementType) -> float:
    """What fills the padding of an input: NaN for floating-point types, else the integer furthest from the drawn
    ones (the most negative; for unsigned types, the largest), so a kernel that reads it makes C wrong."""
    if not element.is_integer:
        return np.nan
    limits = np.iinfo(element.storage_dtype)
    return float(limits.min if limits.min < 0 else limits.max)


def input_bytes(layout: MatrixLayout, values: np.ndarray, element: ElementType | str) -> bytes:
    """The upload of input `values` (batch x rows x cols float64, exactly representable) in `layout`
    and type `element`."""
    element = dtypes.element_type(element)
    return dtypes.to_bytes(layout.pack(values, padding_value(element)), element)


def output_bytes(layout: MatrixLayout, element: ElementType | str, start: np.ndarray | None = None) -> bytes:
    """The starting content of the output buffer: the poison pattern everywhere, or `start` (C0, for kernels
    that read C) in the matrices and the poison pattern in the padding."""
    element = dtypes.element_type(element)
    codes = dtypes.poison_codes(layout.elements, element)
    if start is not None:
        codes[layout.offsets()] = dtypes.encode(layout.batched_values(start), element)
    return codes.astype(element.storage_dtype.newbyteorder("<")).tobytes()


@dataclass
class KernelOutput:
    """A kernel's output read back: the values (batch x M x N), their raw codes, and the padding's fate."""

    values: np.ndarray
    codes: np.ndarray
    padding_written: int

    def unwritten(self, element: ElementType | str) -> np.ndarray:
        """True where an element still holds the poison pattern (only meaningful when C started poisoned)."""
        return dtypes.unwritten_mask(self.codes, element)


def read_output(layout: MatrixLayout, raw: bytes, element: ElementType | str) -> KernelOutput:
    """Decode the output buffer `raw` (filled by `output_bytes`, then written by a kernel)."""
    element = dtypes.element_type(element)
    if len(raw) != layout.elements * element.storage_bytes:
        raise ValueError(f"{layout.operand}: {len(raw)} bytes read back, expected "
                         f"{layout.elements * element.storage_bytes}")
    codes = np.frombuffer(raw, dtype=element.storage_dtype.newbyteorder("<")).astype(element.storage_dtype)
    padding_written = int((~dtypes.unwritten_mask(codes[layout.padding_mask()], element)).sum())
    matrix_codes = layout.unpack(codes)
    return KernelOutput(dtypes.decode(matrix_codes, element), matrix_codes, padding_written)


@dataclass
class TypedInputs:
    """A, B and (for kernels that read C) C0 as exact float64 values, batch x rows x cols each."""

    seed: int
    a: np.ndarray
    b: np.ndarray
    c0: np.ndarray | None = None


def make_typed_inputs(operands: GemmOperands, types: GemmTypes, seed: int, *, with_c: bool = False) -> TypedInputs:
    """Inputs drawn by `dtypes.draw` in each operand's type (a broadcast operand: one matrix, repeated)."""
    rng = np.random.default_rng(seed)

    def draw(layout: MatrixLayout, element: ElementType) -> np.ndarray:
        if layout.levels is not None:     # a level of stride 0 draws one matrix for every index of it
            distinct = layout.distinct_counts()
            values = dtypes.draw((distinct[0] * distinct[1], layout.rows, layout.cols), element, rng)
            values = np.broadcast_to(values.reshape(*distinct, layout.rows, layout.cols),
                                     (*layout.levels, layout.rows, layout.cols))
            return values.reshape(layout.batch, layout.rows, layout.cols).copy()
        count = 1 if layout.batch_stride == 0 else layout.batch
        values = dtypes.draw((count, layout.rows, layout.cols), element, rng)
        return np.broadcast_to(values, (layout.batch, layout.rows, layout.cols)).copy()

    structure = dict(operands.structure)
    gram = operands.gram
    adds_input = gram is not None and gram.adds_input
    c0 = draw(operands.c, types.c) if with_c and not adds_input else None
    if gram is not None:
        # One matrix drawn; the tied operand is its transpose (the same values, which its buffer holds as they are).
        drawn = impose_structure(draw(getattr(operands, gram.of), getattr(types, gram.of)), structure.get(gram.of))
        transposed = np.ascontiguousarray(np.swapaxes(drawn, -1, -2))
        if with_c and adds_input:     # beta multiplies X itself, square like C; C's type holds its values
            c0 = drawn.copy()
        return TypedInputs(seed, *((drawn, transposed) if gram.of == "a" else (transposed, drawn)), c0)
    a, b = draw(operands.a, types.a), draw(operands.b, types.b)     # drawn in this order whatever the structure
    return TypedInputs(seed, impose_structure(a, structure.get("a")), impose_structure(b, structure.get("b")), c0)


def impose_structure(values: np.ndarray, structure: str | None) -> np.ndarray:
    """`values` (rows x cols, or a batch of such) with `structure` (a word of `STRUCTURES`) imposed on each matrix:
    zeros outside the triangle or the diagonal, or the upper triangle mirrored below; `values` itself for None.
    The values kept are drawn ones, so they stay exact in the operand's type, and the reference worked out from the
    result is that of the structured inputs."""
    if structure is None:
        return values
    if structure not in STRUCTURES:
        raise ValueError(f"unknown structure {structure!r}: one of {', '.join(STRUCTURES)}")
    if structure == "upper":
        return np.triu(values)
    if structure == "lower":
        return np.tril(values)
    rows, cols = values.shape[-2:]
    if structure == "diagonal":
        return np.where(np.eye(rows, cols, dtype=bool), values, np.zeros((), values.dtype))
    if rows != cols:
        raise ValueError(f"a symmetric matrix is square, this one is {rows} x {cols}")
    upper = np.triu(values)
    return upper + np.swapaxes(np.triu(values, 1), -1, -2)


def reference(a: np.ndarray, b: np.ndarray, alpha: float = 1.0, beta: float = 0.0, c0: np.ndarray | None = None,
              *, scale_a: float = 1.0, scale_b: float = 1.0) -> np.ndarray:
    """``C[b] = alpha * scale_a * scale_b * A[b] @ B[b] + beta * C0[b]`` in float64, batch x M x N.

    `scale_a` and `scale_b` are fp8's per-tensor scale factors (cuBLASLt's
    A and B scale pointers): the kernel multiplies by them after the dot
    product, as cuBLASLt does. A and B both given as float32 are multiplied
    in float32 (the product then widened), for shapes whose float64 product
    would take the CPU too long.
    """
    single = np.asarray(a).dtype == np.float32 and np.asarray(b).dtype == np.float32
    a, b = (np.asarray(operand, np.float32 if single else np.float64) for operand in (a, b))
    a, b = (a[None] if a.ndim == 2 else a), (b[None] if b.ndim == 2 else b)
    product = np.matmul(a, b).astype(np.float64)
    factor = alpha * scale_a * scale_b
    if factor != 1.0:
        product *= factor
    if beta != 0.0:
        if c0 is None:
            raise ValueError("beta is not 0: the reference needs C's starting values")
        product += beta * np.asarray(c0, np.float64).reshape(product.shape)
    return product


def typed_template_arguments(types: GemmTypes, orders: Mapping[str, str]) -> tuple[str, ...]:
    """The leading template arguments of the kernels in ``kernels/types/``: TA, TB, TC, Acc, LayoutA, LayoutB.

    E.g. bf16 in and out, fp32 accumulation, layout TN gives
    ``("dg::bfloat16_t", "dg::bfloat16_t", "dg::bfloat16_t", "float", "dg::Col", "dg::Row")``.
    Those kernels store C row-major and accumulate in fp32; other
    combinations raise a `ValueError` naming what they lack.
    """
    if orders.get("c", "row") != "row":
        raise ValueError("the typed kernels store C row-major")
    if types.accumulate.name != "fp32" or types.a.is_integer or types.c.is_integer:
        raise ValueError(f"the typed kernels accumulate floating-point inputs in fp32, not {types.accumulate.name}")
    layout = {"row": "dg::Row", "col": "dg::Col"}
    return (types.a.kernel_type, types.b.kernel_type, types.c.kernel_type, "float",
            layout[orders["a"]], layout[orders["b"]])
