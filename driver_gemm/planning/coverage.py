"""Whether a grid covers C when the spec declares no ``tile:``: read from the grid's own expressions where they say.

A grid written as ``ceil(N / X)``, ``N / X``, ``N // X``, ``floor(N / X)`` or ``(N + X - 1) // X`` on x (and
the same of M on y) gives each block X columns (rows) of C: that is the tile the grid was written for, so the
grid covers C when its extent times X reaches N (M). A flat element-index grid, ``ceil(M * N / T)`` (or of
``batch * M * N``) on one axis, gives each block T consecutive elements of C (`flat_elements`): it covers C when
its extent times T reaches the elements. Any other grid says nothing about the tile; the plan then notes that
coverage is unchecked and how to declare ``tile:``.

A persistent grid (one that reads ``sm_count`` or ``max_active_clusters``, or neither M nor N, or caps an extent
with ``min`` of a count that reads neither, as ``min(264, ceil(M / 64) * ceil(N / 64))``, on a shape whose tiles
outnumber the cap) launches as many blocks as fit, each looping over tiles of its own choosing: no grid extent says
what is covered, so nothing is checked before the launch, a declared tile included; the run's check of every element
of C is what holds it.

An axis that reads ``batch`` (or a grouped GEMM's ``groups``) numbers the matrices (groups): `count_axes`. A grid
whose every other axis is 1 (``[batch]``, ``[1, 1, groups]``) gives each matrix (group) one block: it is no
persistent grid, and a declared tile covers a matrix only where it is the whole of it (`one_block_per_matrix`).

A grid whose x counts M and whose y counts N (`rows_on_x`) is held to C either way round, since some kernels do take
their row from blockIdx.x; whether this one does, neither the grid nor a reliable reading of the PTX says, so the
plan notes what the grid assumes (`ROWS_ON_X_NOTE`), unless the spec says it (``rows_on:``).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from ..specfile import expr


def inferred_tile(grid: expr.Expression, size: str) -> expr.Expression | None:
    """The per-block extent X that `grid` divides `size` (``M`` or ``N``) by, as an expression; None if it does not."""
    node = grid.tree
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("ceil", "floor") \
            and len(node.args) == 1:
        node = node.args[0]
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv))):
        return None
    divisor = node.right
    numerator = node.left
    if isinstance(numerator, ast.Name) and numerator.id == size:
        return expr.parse(ast.unparse(divisor))
    # (N + X - 1) // X: the rounded-up division written out
    if isinstance(node.op, ast.FloorDiv) and _names_of(numerator) >= {size} and \
            isinstance(numerator, ast.BinOp) and isinstance(numerator.op, (ast.Add, ast.Sub)):
        return expr.parse(ast.unparse(divisor))
    return None


def tiles_times_factor(extent: expr.Expression) -> tuple[expr.Expression, expr.Expression] | None:
    """An extent written as C's tiles along M or N times a factor that reads neither (``ceil(N / BN) * SPLITK``,
    ``2 * ceil(M / BM)``): the product of its factors that read M or N, and the product of the rest, each as an
    expression. Such an axis folds a count of the kernel's own into the tiles, most often a split of K whose index
    the kernel takes as ``blockIdx.x / tiles``. None for an extent of any other form (a sum, a division, a factor
    reading M or N alone)."""
    factors = _multiplied(extent.tree)
    tiles = [node for node in factors if _names_of(node) & {"M", "N"}]
    others = [node for node in factors if not _names_of(node) & {"M", "N"}]
    if not tiles or not others:
        return None
    return (expr.parse(" * ".join(_factor_text(node) for node in tiles)),
            expr.parse(" * ".join(_factor_text(node) for node in others)))


def _multiplied(node: ast.AST) -> list[ast.AST]:
    """The factors of a product as written (``a * b * c``: a, b and c); the node alone if it is no product."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _multiplied(node.left) + _multiplied(node.right)
    return [node]


def _factor_text(node: ast.AST) -> str:
    """A factor as written, in parentheses where it is a sum or a difference (so that a product of it reads the
    same)."""
    text = ast.unparse(node)
    return f"({text})" if isinstance(node, ast.BinOp) and not isinstance(node.op, (ast.Mult, ast.Pow)) else text


def flat_elements(grid: Sequence[expr.Expression]) -> tuple[int, expr.Expression, expr.Expression] | None:
    """The axis, the element count and the per-block divisor of a flat element-index grid: one axis divides the
    elements of C (``M * N``, or ``batch * M * N`` for every matrix of the batch, in any order) by a count that
    reads none of them, as ``ceil(M * N / 256)``, ``M * N // 256``, ``floor(M * N / 256)`` or ``(M * N + 255) //
    256`` is written, while no other axis reads M or N. Its blocks each take that many consecutive elements of C,
    row-major across C's rows (and the batch's matrices), as ``idx = blockIdx.x * blockDim.x + threadIdx.x`` with
    ``row = idx / N`` does. None for any other grid (``ceil(M / BM) * ceil(N / BN)`` numbers 2-D tiles)."""
    reading = [axis for axis, extent in enumerate(grid) if extent.names & {"M", "N"}]
    if len(reading) != 1:
        return None
    axis = reading[0]
    node = grid[axis].tree
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("ceil", "floor") \
            and len(node.args) == 1:
        node = node.args[0]
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv))):
        return None
    numerator, divisor = node.left, node.right
    if isinstance(node.op, ast.FloorDiv) and isinstance(numerator, ast.BinOp) \
            and isinstance(numerator.op, (ast.Add, ast.Sub)) and not _names_of(numerator.right) & _ELEMENT_NAMES:
        numerator = numerator.left   # (M * N + 255) // 256: the rounded-up division written out
    factors = _element_factors(numerator)
    if factors is None or not {"M", "N"} <= set(factors) or len(factors) != len(set(factors)) \
            or _names_of(divisor) & (_ELEMENT_NAMES | {"K", "groups"}):
        return None
    return axis, expr.parse(ast.unparse(numerator)), expr.parse(ast.unparse(divisor))


# The names whose product is the count of C's elements a flat grid numbers.
_ELEMENT_NAMES = frozenset({"M", "N", "batch"})


def _element_factors(node: ast.AST) -> list[str] | None:
    """The names of a product of M, N and ``batch`` alone (``batch * M * N``); None for anything else, a number
    among the factors included (it would count other than C's elements)."""
    if isinstance(node, ast.Name) and node.id in _ELEMENT_NAMES:
        return [node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _element_factors(node.left), _element_factors(node.right)
        return None if left is None or right is None else left + right
    return None


def _names_of(node: ast.AST) -> set[str]:
    return {child.id for child in ast.walk(node) if isinstance(child, ast.Name)}


# The names whose reading makes a grid follow the GPU rather than C.
_DEVICE_NAMES = frozenset({"sm_count", "max_active_clusters"})


def is_persistent(grid: Sequence[expr.Expression], env: dict | None = None) -> bool:
    """Whether `grid` launches blocks by the GPU's size (or a constant count) rather than by C's tiles: where it
    reads the GPU's size or neither M nor N (one block per matrix, `one_block_per_matrix`, excepted), or, on the
    shape of `env` (any shape without one), caps an extent with a count below the tiles it would number."""
    if one_block_per_matrix(grid, env):   # [batch]: its count follows the matrices, neither the GPU nor a number
        return False
    names = frozenset().union(*(extent.names for extent in grid))
    return bool(names & _DEVICE_NAMES) or not names & {"M", "N"} or any(_capped_by_count(extent, env)
                                                                         for extent in grid)


def one_block_per_matrix(grid: Sequence[expr.Expression], env: dict | None = None) -> tuple[int, str] | None:
    """The axis that numbers the matrices (groups) and the name it reads, where `grid` gives each of them one block:
    the one axis of `count_axes`, every other axis 1 (as written, or on the shape of `env`), and nothing read of M,
    N or the GPU's size (``[batch]``, ``[1, 1, groups]``). None for any other grid."""
    counted = count_axes(grid)
    if len(counted) != 1 or frozenset().union(*(extent.names for extent in grid)) & (_DEVICE_NAMES | {"M", "N"}):
        return None
    axis = counted[0][0]
    for other, extent in enumerate(grid):
        if other == axis:
            continue
        try:
            value = extent.evaluate_int(env) if env is not None else int(extent.source)
        except (expr.ExpressionError, ValueError):
            return None
        if value != 1:
            return None
    return counted[0]


def _capped_by_count(extent: expr.Expression, env: dict | None) -> bool:
    """Whether `extent` is ``min(...)`` of something that reads neither M nor N (a block count: the author's SMs
    times blocks per SM, or a launch limit) that, on the shape of `env`, is below what the rest of the min
    (C's tiles) counts, so that each block takes several tiles. A cap the shape does not reach leaves a grid that
    numbers tiles, held to covering C as any other; so is the rest of a grid whose min() reads neither M nor N
    (a batch axis's cap), as that axis numbers no tiles."""
    node = extent.tree
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "min"):
        return False
    caps = [argument for argument in node.args if not _names_of(argument) & {"M", "N"}]
    tiles = [argument for argument in node.args if _names_of(argument) & {"M", "N"}]
    if not caps or not tiles:
        # A min() of counts alone (the gridDim.z cap of min(batch, 65535)) caps an axis that numbers no tiles of C:
        # the axes that do are still held to covering it.
        return False
    if env is None:
        return True
    try:
        cap = min(expr.parse(ast.unparse(argument)).evaluate_int(env) for argument in caps)
        counted = min(expr.parse(ast.unparse(argument)).evaluate_int(env) for argument in tiles)
    except expr.ExpressionError:   # the extent itself is reported where it is evaluated
        return True
    return cap < counted


def literal_tile_axes(grid: Sequence[expr.Expression]) -> bool:
    """Whether `grid` is laid out as a kernel generated for one shape is launched: numbers alone on x and y (its
    tiles), and on z, if any, what numbers no tiles of C: a number (a split of K, or the batch's count), or an
    extent that reads K (``ceil(K / 256)``) or the batch, but neither M, N, the groups nor the GPU's size."""
    if len(grid) < 2 or grid[0].names or grid[1].names:
        return False
    return all(not extent.names & ({"M", "N", "groups"} | _DEVICE_NAMES) for extent in grid[2:])


_AXIS_COUNTS = {2: "two", 3: "three"}


def fixed_block_count_note(grid: Sequence[expr.Expression], blocks: int, extents: Sequence[int] = (),
                           tiled: bool = False) -> str | None:
    """A note for a persistent grid whose count is fixed where it could follow the GPU: written for one GPU's SMs,
    it leaves SMs idle on a larger one and runs blocks in a second wave on a smaller one. A grid of numbers alone on
    x and y (`literal_tile_axes`) with more than one block on two axes or more (`extents`, as evaluated) is rather how
    a kernel generated for one shape is launched, its tiles numbered by x and y: the note says how such a grid is
    checked, for a kernel with a ``tile:`` (`tiled`) or without. None where the grid reads sm_count or
    max_active_clusters, or launches a single block."""
    names = frozenset().union(*(extent.names for extent in grid))
    if names & _DEVICE_NAMES or blocks <= 1:
        return None
    spread = sum(extent > 1 for extent in extents)
    # With z an expression (ceil(K / 256)), x and y must both be the tiles' axes; numbers alone may be any two.
    if literal_tile_axes(grid) and (spread >= 2 if not names else len(extents) >= 2 and min(extents[:2]) > 1):
        opening = (f"the grid's {blocks:,} blocks are numbers alone over {_AXIS_COUNTS.get(spread, spread)} axes"
                   if not names else f"the grid's {blocks:,} blocks are numbers alone on x and y")
        if tiled:
            return (f"{opening}, as a kernel generated for one shape is launched: taken as persistent, its coverage "
                    "of C is not checked; with its tile: it is checked against C where the kernel's PTX shows it "
                    "reads blockIdx.x and .y and never the grid's size (%nctaid), which this plan's does not show; "
                    "written as [ceil(N / cols), ceil(M / rows)], it is checked against C whatever the kernel")
        return (f"{opening}, as a kernel generated for one shape is launched: taken as persistent, its coverage of C "
                "is not checked; written as [ceil(N / cols), ceil(M / rows)] with tile: [rows, cols], or for such a "
                "kernel (one that reads blockIdx.x and .y, never gridDim) with tile: alone, it is checked against C")
    return (f"the persistent grid's {blocks:,} blocks are a fixed count, not the GPU's: sm_count (its SMs) or "
            "max_active_clusters in the grid makes it follow the GPU it runs on")


def grid_axes(grid: Sequence[expr.Expression], splits: bool = False) -> tuple[int, int] | None:
    """The grid axes that step along C's columns and rows: the one extent that reads N and not M, and the one that
    reads M and not N (x and y as usual, either way round), any other axis reading neither (the batch's, a split of
    K by a count, a param or a number, or 1). None for a grid that numbers tiles otherwise (all on one axis, or,
    unless `splits`, columns split over two axes as a swizzled grid does, `tile_axes`)."""
    reads = [extent.names & {"M", "N"} for extent in grid]
    columns = [axis for axis, names in enumerate(reads) if names == {"N"}]
    rows = [axis for axis, names in enumerate(reads) if names == {"M"}]
    if len(columns) != 1 or len(rows) != 1:
        return None
    if not splits and set(tile_axes(grid)) - {columns[0], rows[0]}:
        return None
    return columns[0], rows[0]


def number_partner_axes(grid: Sequence[expr.Expression]) -> tuple[int, int] | None:
    """The axes that step along C's columns and rows (as `grid_axes`) of a grid whose one axis of x and y reads M
    alone (or N alone) and whose other is a number or a param, as TileLang launches a kernel of a symbolic M and a
    static N (``[16, ceil(M / 64)]``): the number counts the blocks along the dimension the other axis does not read.
    No other axis may read M or N; the number is no ``1`` as written (a grid over C's rows alone, a matrix-vector
    kernel's, keeps its own check) and no divisor another axis splits M or N by (`tile_axes`). None otherwise."""
    if len(grid) < 2:
        return None
    reading = [axis for axis, extent in enumerate(grid) if extent.names & {"M", "N"}]
    if len(reading) != 1 or reading[0] > 1:
        return None
    axis = reading[0]
    partner = 1 - axis
    reads = grid[axis].names & {"M", "N"}
    unrelated = {"K", *COUNT_NAMES} | _DEVICE_NAMES
    if len(reads) != 1 or grid[axis].names & unrelated or grid[partner].names & ({"M", "N"} | unrelated) \
            or partner in tile_axes(grid):
        return None
    if not grid[partner].names and grid[partner].evaluate_int({}) == 1:
        return None
    return (partner, axis) if reads == {"M"} else (axis, partner)


def rows_on_x(grid: Sequence[expr.Expression]) -> bool:
    """Whether `grid` steps along C's rows on x and its columns on y (`grid_axes`): the other way round from the
    docs' ``[ceil(N / cols), ceil(M / rows)]``."""
    axes = grid_axes(grid, splits=True)
    return axes is not None and axes == (1, 0)


def divides_by(grid: Sequence[expr.Expression], axis: int, by: int) -> bool:
    """Whether extent `axis` divides M or N by grid extent `by` as written (``ceil(N / (BN * 4))`` by ``4``)."""
    return ast.unparse(grid[by].tree) in _divisor_factors(grid[axis].tree)


def tile_axes(grid: Sequence[expr.Expression]) -> list[int]:
    """The axes whose blocks number C's tiles: those that read M or N (a batch folded in too), and one that reads
    neither only where another axis divides M or N by it as written, columns split over x and z as
    ``[4, ceil(M / BM), ceil(N / (BN * 4))]``. The rest (the batch's, a split of K by ``ceil(K / 256)``, a param
    such as ``SPLITS`` or a number) launch copies of the same tiles: counting them would let a grid of too few
    tiles pass."""
    splits = set().union(*(_divisor_factors(extent.tree) for extent in grid if extent.names & {"M", "N"}))
    # An axis that reads M or N numbers tiles even where it folds the batch in (ceil(M / BM) * ceil(N / BN) * batch);
    # one that reads the batch or the groups alone numbers matrices (groups), even where another axis divides M by
    # the groups ([ceil(N / 16), ceil(M / (16 * groups)), groups]: each z slice is one group's rows).
    return [axis for axis, extent in enumerate(grid)
            if extent.names & {"M", "N"} or (not extent.names & set(COUNT_NAMES)
                                             and ast.unparse(extent.tree) in splits)]


def _divisor_factors(node: ast.AST) -> set[str]:
    """The factors (as written, ast.unparse's spelling) of every divisor in an extent that divides M or N:
    ``BN * 4`` and ``4`` for ``ceil(N / (BN * 4))``, and for ``ceil(N / BN / 4)``, ``BN`` and ``4``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("ceil", "floor") \
            and len(node.args) == 1:
        return _divisor_factors(node.args[0])
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)):
        return _product_factors(node.right) | _divisor_factors(node.left)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub)):
        return _divisor_factors(node.left) | _divisor_factors(node.right)
    return set()


def _product_factors(node: ast.AST) -> set[str]:
    factors = {ast.unparse(node)}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        factors |= _product_factors(node.left) | _product_factors(node.right)
    return factors


# The names that count a batch's matrices and a grouped GEMM's groups: an axis that reads one numbers them.
COUNT_NAMES = ("batch", "groups")


def count_axes(grid: Sequence[expr.Expression]) -> list[tuple[int, str]]:
    """The axes whose blocks number the batch's matrices (or the groups), each with the name it reads: an extent
    that reads ``batch`` (``groups``) and neither M nor N (those fold it into C's tiles, `folds_batch`) nor the GPU's
    size, and not under a ``min()`` cap of a count that does not read it (``min(batch, 65535)``: a kernel that loops
    over the matrices past gridDim.z's limit). blockIdx on such an axis picks the matrix, so it needs a block for
    every one."""
    found = []
    for axis, extent in enumerate(grid):
        for name in COUNT_NAMES:
            if name in extent.names and not extent.names & ({"M", "N"} | _DEVICE_NAMES) \
                    and not _capped(extent.tree, name):
                found.append((axis, name))
    return found


def _capped(node: ast.AST, name: str) -> bool:
    """Whether a ``min()`` in `node` has an argument that does not read `name`: a cap on what `name` counts."""
    return any(isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "min"
               and any(name not in _names_of(argument) for argument in call.args) for call in ast.walk(node))


def folds_batch(extent: expr.Expression) -> bool:
    """Whether `extent` numbers C's tiles of every matrix of the batch (``ceil(M / BM) * batch``, ``ceil(M * batch /
    BM)``): it reads M or N and ``batch``, uncapped. A grouped GEMM's M is already every group's rows (contiguous
    groups), so ``groups`` beside M says no such thing. How its blocks cover the batch, `folds_end_to_end` says."""
    return "batch" in extent.names and bool(extent.names & {"M", "N"}) and not _capped(extent.tree, "batch")


def folds_end_to_end(extent: expr.Expression) -> bool:
    """Whether a batch-folding `extent` (`folds_batch`) divides the batch's rows (columns) laid end to end, as
    ``ceil(M * batch / BM)`` does: a division whose numerator reads both the batch and M or N. Its blocks cover
    batch x M rows, a tile straddling two matrices. Otherwise (``ceil(M / BM) * batch``) each matrix's rows are
    rounded up to whole tiles of their own, and the axis needs ceil(M / BM) blocks for every matrix."""
    return any(isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv))
               and "batch" in _names_of(node.left) and _names_of(node.left) & {"M", "N"}
               for node in ast.walk(extent.tree))


def per_matrix_tile(extent: expr.Expression, size: str) -> expr.Expression | None:
    """The per-block extent X of a grid that folds the batch in by matrices (``ceil(M / X) * batch``, ``ceil(M / X)
    * (batch - 1)``): the divisor of the one division of `size` it holds, as an expression; None for any other
    extent (one laid end to end, `folds_end_to_end`, or none of `size` alone)."""
    if not folds_batch(extent) or folds_end_to_end(extent):
        return None
    found = []
    for node in ast.walk(extent.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("ceil", "floor") \
                or isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)):
            tile = inferred_tile(expr.parse(ast.unparse(node)), size)
            if tile is not None:
                found.append(tile.source)
    return expr.parse(found[0]) if len(set(found)) == 1 else None


def one_block_per_matrix_note(axis: int, name: str) -> str:
    """The note for a grid of one block per matrix (group), `one_block_per_matrix`, without a tile: that block
    computes the whole of its matrix, which the grid cannot show."""
    one = "matrix" if name == "batch" else "group"
    return (f"grid {'xyz'[axis]} reads {name} alone: one block for each {one}, which must compute the whole of it, so "
            f"coverage of C is unchecked before the launch; tile: [M, N] says a block computes its whole {one} and "
            f"has that checked, and the run's check names any element of C left unwritten")


PERSISTENT_NOTE = ("coverage of C unchecked before the launch: the grid follows the GPU (sm_count, "
                   "max_active_clusters, a fixed count or a min() capped by one), not C's tiles, as a persistent "
                   "kernel's does; the run's check names any element of C left unwritten")


UNCHECKED_NOTE = ("coverage of C unchecked: the spec declares no tile: and the grid is not ceil(N / cols) x "
                  "ceil(M / rows); declare tile: [rows, cols] (the part of C one block computes) to have the grid "
                  "checked against M and N")


ROWS_ON_X_NOTE = ("grid x counts C's rows (M) and grid y its columns (N): right for a kernel that reads its row from "
                  "blockIdx.x; one that reads it from blockIdx.y would leave rows of C unwritten (rows_on: x or y "
                  "says which the kernel does, and holds the grid to it)")
