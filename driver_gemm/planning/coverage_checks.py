"""Whether a case's grid and declared tile cover C, and the messages that say what they leave unwritten.

`coverage` reads what a grid's expressions say (which axes step along M and N, which number the batch's matrices
or the groups, whether the grid is persistent or flat); the checks here hold one case's launch to C with those
readings: a declared tile times the blocks on its axes, a count axis with a block for every matrix, a grid whose
expression gives its own tile (``ceil(N / 64)``), a flat grid of elements. Each shortfall is a problem naming
the rows, columns, elements or matrices never written and the grid that would write them.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from ..specfile import expr
from ..gemm.groups import GemmGroups
from ..cuda.launch import LaunchConfig
from ..specfile.kernels import MAX_ACTIVE_CLUSTERS_NAME, SM_COUNT_NAME
from ..specfile.limits import MAX_DIMENSION
from ..specfile.model import KernelSpec, Shape, template_argument
from .coverage import (COUNT_NAMES, ROWS_ON_X_NOTE, UNCHECKED_NOTE, count_axes, divides_by, flat_elements, folds_batch,
                       folds_end_to_end, grid_axes, inferred_tile, number_partner_axes, one_block_per_matrix,
                       per_matrix_tile, rows_on_x, tile_axes, tiles_times_factor)


@dataclass(frozen=True)
class SplitMultiple:
    """An axis taken to share out the tiles of each block of the axis along M (N), whose count is a multiple of
    those tiles (`_split_over`): more blocks than tiles, the rest returning early, which a kernel does by the grid's
    size (``blockIdx.z * gridDim.y + blockIdx.y``). Without that, the axis is a split of K, and the rows (columns)
    past `covered` are never written. `note` says so until the kernel's PTX settles it (`split_multiple_check`)."""

    axis: int             # the axis along M or N
    other: int            # the axis of the multiple
    size_name: str        # "M" or "N"
    tile: int             # the rows (columns) of C a block computes
    factor: int           # the tiles each block of `axis` spans
    covered: int          # of M (N), without the split
    note: str


def count_text(value: int) -> str:
    """A whole number as a message shows it: in full up to 20 digits, beyond that its first digits and length
    (an expression over 1e300 evaluates to an integer of 301 digits)."""
    text = str(value)
    digits = len(text.lstrip("-"))
    return text if digits <= 20 else f"{text[:4]}... ({digits} digits)"


def check_count_axes(kernel: KernelSpec, env, config: LaunchConfig, problem) -> None:
    """An axis that numbers the batch's matrices or the groups (`coverage.count_axes`: ``batch`` on z) has a block
    for every one: blockIdx picks the matrix, so with fewer (``batch - 1``) the last ones are never written, whatever
    the tiles of each. A ``min()`` cap (a kernel looping over the rest) is not held to it."""
    for axis, name in count_axes(kernel.grid):
        count, extent = env.get(name, 1), config.grid[axis]
        if extent >= count:
            continue
        one, many = ("matrix", "matrices") if name == "batch" else ("group", "groups")
        left = f"{one} {extent}" if count - extent == 1 else f"{many} {extent}-{count - 1}"
        problem(f"grid {'xyz'[axis]} extent {extent} ('{kernel.grid[axis].source}' with "
                f"{names_with_values(kernel.grid[axis], env)}) is less than the {name} count, {count} {many}: blockIdx."
                f"{'xyz'[axis]} numbers them, so {left} would never be written", f"grid[{axis}]",
                hint=f"grid {'xyz'[axis]} should be {name}, a block for every {one}, or min({name}, 65535) where the "
                     f"kernel loops over the {many} past the cap")


def check_tile(kernel: KernelSpec, env, shape: Shape, config: LaunchConfig, problem,
               persistent: bool = False, groups: GemmGroups | None = None) -> tuple[int, int] | None:
    """With a declared tile (rows x cols of C per block), a grid that follows C must cover it: on the axes that
    step along N and M (x and y as usual), each times the blocks of an axis its tiles are split over
    (`_split_over`), or, where one axis numbers every tile or shares its blocks out over both, in its count of
    blocks. A persistent grid is not held to it (`coverage`); a grid of one block per matrix (group) is held to
    the tile's covering the whole of one (`_check_one_block_per_matrix`); where an axis numbers contiguous groups,
    each of its slices to the largest group's rows (`_group_slice_rows`); a flat grid (``ceil(M * N / 256)``,
    `coverage.flat_elements`) with a tile of one row, in C's elements, the tile's columns to a block. Returns the
    tile's rows and columns (None when undeclared or not computable)."""
    if kernel.tile is None:
        return None
    try:
        rows, cols = (t.evaluate_int(env) for t in kernel.tile)
    except expr.ExpressionError as exc:
        problem(str(exc), "tile")
        return None
    extents_ok = True
    for index, (extent, what) in enumerate(((rows, "rows"), (cols, "columns"))):
        if not 1 <= extent <= MAX_DIMENSION:   # a tile outside C's own range covers nothing the grid can be checked by
            problem(f"'{kernel.tile[index].source}' gives {count_text(extent)} {what} of C a block computes: a "
                    f"tile is 1 to {MAX_DIMENSION:,} (MAX_DIMENSION) {what}", f"tile[{index}]")
            extents_ok = False
    if not extents_ok:
        return None
    if persistent:
        return rows, cols
    per_matrix = one_block_per_matrix(kernel.grid, env)
    if per_matrix:
        _check_one_block_per_matrix(kernel, env, shape, per_matrix, rows, cols, groups, problem)
        return rows, cols
    flat = flat_elements(kernel.grid)
    if flat is not None and rows == 1:
        # A flat grid (ceil(M * N / 256)) numbers C's elements, not its tiles: a tile of one row is the run of
        # consecutive elements each block takes, row-major across C's rows (and matrices), not one row's columns.
        _check_flat_elements(kernel, env, shape, config, flat, cols, kernel.tile[1].source,
                             f"tile: [1, {kernel.tile[1].source}]", problem)
        return rows, cols
    axes = grid_axes(kernel.grid) or _split_grid_axes(kernel, env, config, rows, cols) \
        or number_partner_axes(kernel.grid)
    if axes is None:
        _check_tile_count(kernel, env, shape, config, rows, cols, problem)
        return rows, cols
    column_axis, row_axis = axes
    column_split = _split_over(kernel, env, config, axes, column_axis, "N", cols)
    row_split = _split_over(kernel, env, config, axes, row_axis, "M", rows)
    if column_split and row_split and column_split[0] == row_split[0]:
        # One axis shares its blocks out over both the columns and the rows of the others' blocks (blockIdx.x / 2
        # and blockIdx.x % 2): how, the grid does not say, so only its count of blocks can be held to C's tiles.
        _check_tile_count(kernel, env, shape, config, rows, cols, problem)
        return rows, cols
    sides = [(column_axis, "N", shape.N, cols, kernel.tile[1].source, column_split),
             (row_axis, "M", shape.M, rows, kernel.tile[0].source, row_split)]
    slices = _group_slice_axis(kernel, groups, row_axis)
    if slices is not None and not row_split:
        sides = sides[:1]
        _check_group_slices(kernel, config, row_axis, rows, kernel.tile[0].source, groups, slices, problem)
    # each: axis, size's name, size, tile, tile's source, split, matrices, rows covered (None: counted by matrices)
    short: list[tuple[int, str, int, int, str, tuple[int, int] | None, int, int | None]] = []
    for axis, size_name, size, tile, tile_source, split in sides:
        matrices = env.get("batch", 1) if folds_batch(kernel.grid[axis]) else 1
        covered = config.grid[axis] * tile * (split[1] if split else 1)
        if matrices > 1 and not split and not folds_end_to_end(kernel.grid[axis]):
            # ceil(M / BM) * batch: each matrix's rows in whole tiles of their own, not the batch's end to end
            if config.grid[axis] < -(-size // tile) * matrices:
                short.append((axis, size_name, size, tile, tile_source, split, matrices, None))
        elif covered < size * matrices:
            short.append((axis, size_name, size, tile, tile_source, split, matrices, covered))
    if short and _tile_count_covers(kernel, env, shape, config, rows, cols):
        return rows, cols   # a swizzled grid (CUTLASS's x of twice the column tiles, y of half the rows) is whole
    for axis, size_name, size, tile, tile_source, split, matrices, covered in short:
        if covered is None:
            _matrices_short(kernel, config, axis, size_name, size, tile, tile_source, matrices, problem)
            continue
        what = "columns" if size_name == "N" else "rows"
        of = f"{size_name} = {size}" if matrices == 1 else f"the batch's {matrices} x {size_name} = {size * matrices}"
        blocks = f"{config.grid[axis]} blocks x {tile}"
        if not kernel.grid[axis].names & {"M", "N"}:    # a number where C's columns (rows) belong
            blocks += f", grid {'xyz'[axis]} '{kernel.grid[axis].source}', while no grid axis reads {size_name}"
        divisor = tile_source
        hint_tail = ""
        if split:
            other, other_blocks = split
            step = inferred_tile(kernel.grid[axis], size_name)
            blocks = (f"{config.grid[axis]} blocks of grid {'xyz'[axis]} x {other_blocks} of grid {'xyz'[other]}, "
                      f"{tile} {what} each")
            divisor = f"({_operand(tile_source, left=True)} * {_operand(kernel.grid[other].source)})"
            factor = step.evaluate_int(env) // tile
            hint_tail = f", each of its blocks split over grid {'xyz'[other]}'s {other_blocks}"
            if other_blocks < factor:
                hint_tail += (f"; or grid {'xyz'[other]} should be {factor}, as '{kernel.grid[axis].source}' gives "
                              f"each block of grid {'xyz'[axis]} {factor} tiles of {tile}")
        if not kernel.grid[axis].names & {"M", "N"}:
            hint_tail = f" ({-(-size // tile) * matrices:,} on this shape)" + hint_tail
        problem(f"the grid covers {covered} of {of} {what} ({blocks}): {span(what, covered, size * matrices - 1)} "
                "would never be written", f"grid[{axis}]",
                hint=f"grid {'xyz'[axis]} should be {ceil_of(size_name, divisor)}"
                     + (" * batch" if matrices > 1 else "") + hint_tail)
    return rows, cols


def _split_grid_axes(kernel: KernelSpec, env, config: LaunchConfig, rows: int, cols: int) -> tuple[int, int] | None:
    """The axes that step along N and M of a grid whose columns (or rows) are split over another axis as written
    (``[16, ceil(M / 256), ceil(N / (128 * 16))]``), where each such axis is the split `_split_over` finds by value
    for the axis whose divisor names it: held to C axis by axis, each with its split, the check says how much of N
    (M) the two cover together and what either should be. None where that does not hold (the count of blocks is
    then all that is checked)."""
    axes = grid_axes(kernel.grid, splits=True)
    if axes is None:
        return None
    for extra in set(tile_axes(kernel.grid)) - set(axes):
        owners = [(axis, size, tile) for axis, size, tile in ((axes[0], "N", cols), (axes[1], "M", rows))
                  if divides_by(kernel.grid, axis, extra)]
        if len(owners) != 1 or (_split_over(kernel, env, config, axes, *owners[0]) or (None,))[0] != extra:
            return None
    return axes


def span(what: str, first: int, last: int) -> str:
    """Rows (columns) `first` to `last` as a message names them: one of them alone by itself."""
    return f"{what[:-1]} {first}" if first == last else f"{what} {first}-{last}"


def _split_over(kernel: KernelSpec, env, config: LaunchConfig, axes: tuple[int, ...], axis: int, size: str,
                tile: int) -> tuple[int, int] | None:
    """The axis whose blocks share out each block of `axis` along `size` (N or M), and its count of blocks; None
    if none does. Where `axis` divides `size` by `tile` times a whole factor f > 1 (each of its blocks spans f
    tiles), the tiles are split over an axis that reads neither M, N, the batch nor the groups: the one of f blocks
    however the two are written (``[ceil(N / (TILE * S * 2)), ceil(M / TILE), 2 * S]``), or, for an axis that does
    not read K either (a number or a param: a split of K reads K), one of a multiple of f (more blocks than tiles,
    the rest returning early: ``(blockIdx.z * gridDim.x + blockIdx.x)`` with x = 32 and f = 16) or a divisor of f
    (too few, said with the real coverage). A count that is neither (4 blocks for f = 3) says the axis launches
    copies of the same tiles, as a split of K does: it covers no more of C."""
    extent = inferred_tile(kernel.grid[axis], size)
    if extent is None:
        return None
    try:
        step = extent.evaluate_int(env)
    except expr.ExpressionError:
        return None
    if step <= tile or step % tile:
        return None
    factor = step // tile
    for other, grid_extent in enumerate(kernel.grid):
        if other in axes or grid_extent.names & {"M", "N", *COUNT_NAMES}:
            continue
        blocks = config.grid[other]
        commensurate = blocks > 1 and (blocks % factor == 0 or factor % blocks == 0)
        if blocks == factor or ("K" not in grid_extent.names and commensurate):
            return other, blocks
    return None


def find_split_multiples(kernel: KernelSpec, env, shape: Shape, config: LaunchConfig, rows: int,
                         cols: int) -> tuple[SplitMultiple, ...]:
    """The splits `check_tile` took of the tiles of a block of the axis along M (N) over an axis whose count is a
    multiple of them, and more (`_split_over`), where C is covered only with the split: without it, that axis is a
    split of K, as TileLang's ``[ceil(N / 64), ceil(M / 128), 4]`` with 64 x 64 tiles is, and rows of C are left."""
    axes = grid_axes(kernel.grid) or _split_grid_axes(kernel, env, config, rows, cols) \
        or number_partner_axes(kernel.grid)
    if axes is None:
        return ()
    column_axis, row_axis = axes
    found = []
    splits = [(column_axis, "N", shape.N, cols, kernel.tile[1].source), (row_axis, "M", shape.M, rows,
                                                                          kernel.tile[0].source)]
    taken = [_split_over(kernel, env, config, axes, axis, size_name, tile)
             for axis, size_name, _, tile, _ in splits]
    if taken[0] and taken[1] and taken[0][0] == taken[1][0]:
        return ()    # one axis shares out both: held to the count of blocks alone
    for (axis, size_name, size, tile, tile_source), split in zip(splits, taken):
        if split is None or folds_batch(kernel.grid[axis]):
            continue
        other, other_blocks = split
        factor = inferred_tile(kernel.grid[axis], size_name).evaluate_int(env) // tile
        covered = config.grid[axis] * tile
        if other_blocks <= factor or covered >= size:
            continue
        what = "columns" if size_name == "N" else "rows"
        letter, other_letter = "xyz"[axis], "xyz"[other]
        note = (f"grid {other_letter}'s {other_blocks:,} blocks, a multiple of the {factor} tiles of {tile} {what} "
                f"that '{kernel.grid[axis].source}' gives each block of grid {letter}, are taken to share those tiles "
                f"out, the extra blocks returning early (blockIdx.{letter} * gridDim.{other_letter} + "
                f"blockIdx.{other_letter}); as a split of K they would leave {span(what, covered, size - 1)} of "
                f"{size_name} = {size} unwritten; the kernel's PTX settles it: sharing them out needs the grid's size "
                "(%nctaid)")
        found.append(SplitMultiple(axis, other, size_name, tile, factor, covered, note))
    return tuple(found)


def over_coverage_notes(kernel: KernelSpec, env, shape: Shape, config: LaunchConfig, rows: int, cols: int,
                        groups: GemmGroups | None) -> list[str]:
    """A note for each axis of x and y that numbers C's tiles along one dimension and launches at least one whole
    tile row (column) of blocks more than C has: an axis that counts the other dimension (``[ceil(N / 16),
    ceil(N / 16)]`` on a C of fewer rows than columns, ``[N]`` with ``tile: [1, N]``), or divides by less than the
    tile. Guarded kernels compute C right, so it is no refusal; the blocks past C idle, or write past it in a kernel
    without guards. An axis of C's tiles times a factor that reads neither M nor N (``ceil(N / BN) * SPLITK``,
    `_tiles_times_split`) is noted as what it may be: a split of K folded into the axis, or, in a kernel that does
    not split K, blocks past C. Axes along M and N are those `grid_axes` finds (or one that reads M or N beside a
    number, `number_partner_axes`), or, where both read the same one, x over columns and y over rows (``rows_on:
    x``: the other way round); a grid of one such axis, where C is one tile along the dimension it reads, is over
    the other. No note for a grid whose tiles are split over another axis, folded with the batch or the groups,
    short anywhere (a swizzled grid's), or numbered otherwise, nor for an axis of a number."""
    grid = kernel.grid
    numbering = tile_axes(grid)
    reads = {axis: grid[axis].names & {"M", "N"} for axis in numbering}
    unrelated = {"K", *COUNT_NAMES, SM_COUNT_NAME, MAX_ACTIVE_CLUSTERS_NAME}
    if groups is not None or not numbering or any(len(names) != 1 or axis > 1 for axis, names in reads.items()) \
            or any(grid[axis].names & unrelated or folds_batch(grid[axis]) for axis in numbering):
        return []
    tiles = {"M": -(-shape.M // rows), "N": -(-shape.N // cols)}
    known = grid_axes(grid) or number_partner_axes(grid)
    if known is not None:
        column_axis, row_axis = known
        if _split_over(kernel, env, config, known, column_axis, "N", cols) \
                or _split_over(kernel, env, config, known, row_axis, "M", rows):
            return []
        roles = {axis: role for axis, role in ((column_axis, "N"), (row_axis, "M")) if axis in numbering}
    elif len(numbering) == 2:
        column_axis, row_axis = (1, 0) if kernel.rows_on == "x" else (0, 1)
        roles = {column_axis: "N", row_axis: "M"}
    else:
        axis, = numbering
        triangle_tiles = _triangle_tiles(kernel, shape, rows, cols, tiles["M"] * tiles["N"], [axis])
        if triangle_tiles is not None and tiles["M"] < config.grid[axis] <= triangle_tiles:
            return []   # a Gram kernel's axis over one triangle's tiles, not over C's rows
        name, = reads[axis]
        other = "M" if name == "N" else "N"
        roles = {axis: other if tiles[name] == 1 and tiles[other] > 1 else name}
    if any(config.grid[axis] < tiles[role] for axis, role in roles.items()):
        return []
    notes = []
    for axis, role in sorted(roles.items()):
        blocks, needed = config.grid[axis], tiles[role]
        if blocks <= needed:
            continue
        name, = reads[axis]
        what = "rows" if role == "M" else "columns"
        tile, tile_source = (rows, kernel.tile[0].source) if role == "M" else (cols, kernel.tile[1].source)
        question = f": is it C's {what}?" if name != role else ""
        more = blocks - needed
        split = _tiles_times_split(kernel, env, axis, needed) if name == role else None
        if split is not None:
            factor_source, factor = split
            times = factor_source if factor_source == str(factor) else f"{factor_source} = {factor:,}"
            # The factor reads neither M nor N: a count of the kernel's own, most often a split of K folded into
            # the axis (blockIdx.x / tiles picks the split), as a grid z of it would be; whether the kernel splits
            # K or launches blocks past C, only its code says.
            notes.append(f"grid {'xyz'[axis]} launches {blocks:,} blocks ('{grid[axis].source}'): C's {needed:,} "
                         f"tile {what} of {tile} ({_tiles_along(role, tile_source, tile)}) times {times}: read as a "
                         f"split of K folded into grid {'xyz'[axis]} ({factor:,} copies of C's tile {what}, each "
                         f"adding its part of K to the same tiles, as a grid z of {factor_source} would), or, in a "
                         f"kernel that does not split K, as {more:,} more {what[:-1] if more == 1 else what} of "
                         f"blocks past C's {what}, idle where the kernel guards its {what} and writing past C where "
                         "it does not")
            continue
        notes.append(f"grid {'xyz'[axis]} launches {blocks:,} blocks ('{grid[axis].source}', which reads "
                     f"{name}{question}) where C has {needed:,} tile {what} of {tile} "
                     f"({_tiles_along(role, tile_source, tile)}): the {more:,} more {what[:-1] if more == 1 else what} "
                     f"of blocks lie past C's {what}, idle where the kernel guards its {what} and writing past C "
                     "where it does not")
    return notes


def _tiles_times_split(kernel: KernelSpec, env, axis: int, tiles: int) -> tuple[str, int] | None:
    """Where grid `axis` is C's `tiles` along the dimension it reads times a factor that reads neither M nor N
    (`coverage.tiles_times_factor`: ``ceil(N / BN) * SPLITK``), that factor as written and its value; None where it
    is not (``ceil(N / BN) + 4``, ``ceil(N / (BN / 2))``), or where its tiles are not C's."""
    parts = tiles_times_factor(kernel.grid[axis])
    if parts is None:
        return None
    counted, factor = parts
    try:
        counted_value, factor_value = counted.evaluate_int(env), factor.evaluate_int(env)
    except expr.ExpressionError:   # the extent's own evaluation says what is wrong with it
        return None
    if counted_value != tiles or factor_value <= 1:
        return None
    return factor.source, factor_value


def _blocks_and_tiles(kernel: KernelSpec, env, shape: Shape, config: LaunchConfig, rows: int,
                      cols: int) -> tuple[int, int, list[int]]:
    """The grid's blocks over the axes that number tiles (`coverage.tile_axes`, and an axis that `_split_over`
    finds sharing out the tiles of another's blocks), C's tiles of `rows` x `cols` (of every matrix where an axis
    folds the batch in, `coverage.folds_batch`), and those axes."""
    axes = set(tile_axes(kernel.grid))
    for axis, extent in enumerate(kernel.grid):
        for size, tile in (("N", cols), ("M", rows)):
            if extent.names & {"M", "N"} and axis in axes:
                split = _split_over(kernel, env, config, tuple(axes), axis, size, tile)
                if split:
                    axes.add(split[0])
    matrices = env.get("batch", 1) if any(folds_batch(kernel.grid[axis]) for axis in axes) else 1
    return (math.prod(config.grid[axis] for axis in axes), -(-shape.M // rows) * -(-shape.N // cols) * matrices,
            sorted(axes))


def _tile_count_covers(kernel: KernelSpec, env, shape: Shape, config: LaunchConfig, rows: int, cols: int) -> bool:
    """Whether the grid has a block for every tile of C."""
    blocks, tiles, _ = _blocks_and_tiles(kernel, env, shape, config, rows, cols)
    return blocks >= tiles


def _check_tile_count(kernel: KernelSpec, env, shape: Shape, config: LaunchConfig, rows: int, cols: int,
                      problem) -> None:
    """A grid that numbers C's tiles its own way (``ceil(M / BM) * ceil(N / BN)`` blocks on one axis, or columns
    split over two) covers C when it has a block for every tile: every axis but the batch's and a split of K,
    multiplied."""
    blocks, tiles, axes = _blocks_and_tiles(kernel, env, shape, config, rows, cols)
    triangle_tiles = _triangle_tiles(kernel, shape, rows, cols, tiles, axes)
    if triangle_tiles is not None and blocks >= triangle_tiles < tiles:
        return   # a Gram kernel's block per tile of one triangle (its mirror stored too, or the triangle alone)
    if blocks < tiles and (_rows_short(kernel, shape, config, rows, cols, axes, problem)
                           or _unread_rows_short(kernel, shape, config, rows, cols, problem)):
        return
    if blocks < tiles:
        names = ["xyz"[axis] for axis in axes]
        counted = f" over grid {', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else ""
        matrices = tiles // (-(-shape.M // rows) * -(-shape.N // cols))
        each = f" x batch = {matrices}" if matrices > 1 else ""
        missing = tiles - blocks
        row_tiles, column_tiles = _tiles_along("M", kernel.tile[0].source, rows), \
            _tiles_along("N", kernel.tile[1].source, cols)
        block_word = "block" if blocks == 1 else "blocks"
        if triangle_tiles is not None:
            # A Gram kernel's one axis may number one triangle's tiles: that is the count it falls short of.
            missing = triangle_tiles - blocks
            problem(f"the grid has {blocks:,} {block_word}{counted} for the {triangle_tiles:,} tiles of "
                    f"{rows} x {cols} of one triangle of C (T = {row_tiles} tiles a side, T * (T + 1) / 2{each}; "
                    f"all of C has {tiles:,}): {missing:,} {'tile' if missing == 1 else 'tiles'} would never be "
                    "written",
                    f"grid[{axes[0]}]",
                    hint=f"a grid over one triangle's tiles, diagonal included, is {row_tiles} * ({row_tiles} + 1) / 2"
                    + (" * batch" if matrices > 1 else "") + f"; one over all of C, {row_tiles} * {column_tiles}")
            return
        problem(f"the grid has {blocks:,} {block_word}{counted} for C's {tiles:,} tiles of {rows} x {cols} "
                f"({row_tiles} x {column_tiles}{each}): {missing:,} {'tile' if missing == 1 else 'tiles'} would never "
                "be written",
                f"grid[{axes[0]}]" if len(axes) == 1 else "grid",
                hint=_shared_axis_hint(kernel, env, config, rows, cols)
                or _same_dimension_hint(kernel, rows, cols)
                or _one_axis_hint(kernel, shape, "M", cols, column_tiles)
                or _one_axis_hint(kernel, shape, "N", rows, row_tiles)
                or _rounded_up_hint(kernel, env, config, axes, tiles)
                or f"a grid that numbers the tiles is {row_tiles} * {column_tiles}"
                + (" * batch" if matrices > 1 else ""))


def _triangle_tiles(kernel: KernelSpec, shape: Shape, rows: int, cols: int, tiles: int, axes: list[int]) -> int | None:
    """The tiles of one triangle of a Gram product's square C, the diagonal's included (T (T + 1) / 2 for T tiles a
    side, times the batch), where one grid axis numbers the tiles its own way and the tiles are square: SYRK
    kernels launch a block per tile of the triangle they write (``ceil(M / 64) * (ceil(M / 64) + 1) / 2``), and a
    Gram kernel that stores each tile's mirror covers C with as many. None for any other kernel or grid, which is
    held to all of C's tiles. Whether the kernel writes what it must is the check's to say."""
    gram = kernel.operands.gram if kernel.operands is not None else None
    if gram is None or rows != cols or shape.M != shape.N or len(axes) != 1:
        return None
    side = -(-shape.M // rows)
    matrices = tiles // (side * side)
    return side * (side + 1) // 2 * matrices


def _unread_rows_short(kernel: KernelSpec, shape: Shape, config: LaunchConfig, rows: int, cols: int,
                       problem) -> bool:
    """For a grid of too few blocks with one axis over C's columns (it reads N alone, covering them), none that
    reads M, and one other axis of a number or a param (``[ceil(N / 16), 4, batch]``): that axis is where C's rows
    belong, so the rows it leaves are said there, with the extent that covers them. False (nothing said) for any
    other grid."""
    reads = [extent.names & {"M", "N"} for extent in kernel.grid]
    columns = [axis for axis, names in enumerate(reads) if names == {"N"}]
    if len(columns) != 1 or any("M" in names for names in reads) or folds_batch(kernel.grid[columns[0]]) \
            or config.grid[columns[0]] * cols < shape.N:
        return False
    numbering = tile_axes(kernel.grid)
    others = [axis for axis, extent in enumerate(kernel.grid) if axis != columns[0] and axis not in numbering
              and not extent.names & {"K", *COUNT_NAMES, SM_COUNT_NAME, MAX_ACTIVE_CLUSTERS_NAME}]
    if len(others) != 1:
        return False
    axis = others[0]
    covered = config.grid[axis] * rows
    if covered >= shape.M:
        return False
    letter = "xyz"[axis]
    problem(f"the grid covers {covered} of M = {shape.M} rows ({config.grid[axis]} blocks x {rows}, grid {letter} "
            f"'{kernel.grid[axis].source}', while no grid axis reads M): {span('rows', covered, shape.M - 1)} would "
            f"never be written", f"grid[{axis}]",
            hint=f"grid {letter} should be {_tiles_along('M', kernel.tile[0].source, rows)}, C's row tiles")
    return True


def _matrices_short(kernel: KernelSpec, config: LaunchConfig, axis: int, size_name: str, size: int, tile: int,
                    tile_source: str, matrices: int, problem) -> None:
    """The problem of an axis that folds the batch in by matrices (``ceil(M / BM) * batch - 1``) with too few
    blocks: each matrix needs ceil(M / BM) of its own (its last tile rounded up by itself), so the blocks are
    counted in those, and what is left is said by matrix."""
    what = "columns" if size_name == "N" else "rows"
    per_matrix = -(-size // tile)
    blocks = config.grid[axis]
    first, part = divmod(blocks, per_matrix)
    left = []
    if part:
        left.append(f"{span(what, part * tile, size - 1)} of matrix {first}")
        first += 1
    if first < matrices:
        left.append(f"matrix {first}" if first == matrices - 1 else f"matrices {first}-{matrices - 1}")
    letter = "xyz"[axis]
    problem(f"the grid has {blocks:,} blocks on {letter} for the batch's {matrices:,} matrices of "
            f"{ceil_of(size_name, tile_source)} = {per_matrix:,} tile{'s' if per_matrix != 1 else ''} of {tile} "
            f"{what} each, {per_matrix * matrices:,} "
            f"blocks ('{kernel.grid[axis].source}' rounds each matrix's {what} up to whole tiles of its own): "
            f"{' and '.join(left)} would never be written", f"grid[{axis}]",
            hint=f"grid {letter} should be {ceil_of(size_name, tile_source)} * batch")


def _group_slice_axis(kernel: KernelSpec, groups: GemmGroups | None, row_axis: int) -> int | None:
    """The axis that numbers contiguous groups (`count_axes`: ``groups`` on z), other than the rows' axis: each of
    its slices is one group's rows, so the rows' axis is held to the largest group, not to M. None otherwise."""
    if groups is None or groups.layout != "contiguous":
        return None
    return next((axis for axis, name in count_axes(kernel.grid) if name == "groups" and axis != row_axis), None)


def _check_group_slices(kernel: KernelSpec, config: LaunchConfig, row_axis: int, rows: int, tile_source: str,
                        groups: GemmGroups, slice_axis: int, problem) -> None:
    """Each slice of the axis that numbers contiguous groups covers its group's rows with the rows' axis: the
    largest group must fit, whatever the average (``ceil(M / (16 * groups))`` holds for even groups only)."""
    covered = config.grid[row_axis] * rows
    largest = max(groups.rows, default=0)
    if covered >= largest:
        return
    group = groups.rows.index(largest)
    more = sum(held > covered for held in groups.rows) - 1
    others = f" (and {more} more {'group holds' if more == 1 else 'groups hold'} more than {covered})" if more else ""
    row_letter, slice_letter = "xyz"[row_axis], "xyz"[slice_axis]
    problem(f"grid {slice_letter} numbers the {groups.count} contiguous groups, so each of its slices covers "
            f"{covered} rows of its group ({config.grid[row_axis]} blocks of grid {row_letter} x {rows}, "
            f"'{kernel.grid[row_axis].source}'), but group {group} holds {largest}: its "
            f"{span('rows', covered, largest - 1)} would never be written{others}", f"grid[{row_axis}]",
            hint=f"grid {row_letter} should be {ceil_of('M', tile_source)}, as many row tiles as one group may hold; "
                 f"'{kernel.grid[row_axis].source}' covers the average group, which the largest exceeds unless "
                 "the rows are even")


def _check_one_block_per_matrix(kernel: KernelSpec, env, shape: Shape, per_matrix: tuple[int, str], rows: int,
                                cols: int, groups: GemmGroups | None, problem) -> None:
    """A grid of one block per matrix (group), `coverage.one_block_per_matrix`, with a declared tile: the one block
    covers its matrix only where the tile is the whole of it (``tile: [M, N]``), a contiguous group's rows the
    largest group's."""
    axis, name = per_matrix
    one = "matrix" if name == "batch" else "group"
    need_rows = max(groups.rows, default=0) if groups is not None and groups.layout == "contiguous" else shape.M
    if rows >= need_rows and cols >= shape.N:
        return
    left = []
    if rows < need_rows:
        left.append(span("rows", rows, need_rows - 1))
    if cols < shape.N:
        left.append(span("columns", cols, shape.N - 1))
    largest = " (the largest group's)" if need_rows != shape.M else ""
    letter = "xyz"[axis]
    problem(f"grid {letter} ('{kernel.grid[axis].source}' with {names_with_values(kernel.grid[axis], env)}) gives "
            f"each {one} one block, whose tile: [{kernel.tile[0].source}, {kernel.tile[1].source}] covers {rows} x "
            f"{cols} of its {need_rows} x {shape.N}{largest}: {' and '.join(left)} of each {one} would never be "
            "written", f"grid[{axis}]",
            hint=f"a block that computes its whole {one} is declared with tile: [M, N]; one that computes a tile "
                 f"needs grid axes over C's tiles too, [{ceil_of('N', kernel.tile[1].source)}, "
                 f"{ceil_of('M', kernel.tile[0].source)}, {name}]")


def check_rows_axis(kernel: KernelSpec, problem, notes: list[str]) -> None:
    """The grid against the block index the kernel reads its row of C from (``rows_on:``). A grid counts C's tiles
    the same either way round, so a grid with M on x and a kernel reading its row from blockIdx.y (or the reverse)
    covers C in count while leaving rows unwritten and writing past its columns; where the spec does not say, a
    grid with C's rows on x, the less usual way, is noted."""
    axes = grid_axes(kernel.grid, splits=True)     # (the axis counting C's columns, the one counting its rows)
    if axes is None:
        return
    rows_axis = "xyz"[axes[1]]
    if kernel.rows_on is None:
        if rows_on_x(kernel.grid):
            notes.append(ROWS_ON_X_NOTE)
        return
    if rows_axis != kernel.rows_on:
        columns_axis = "xyz"[axes[0]]
        usual = ("[ceil(N / cols), ceil(M / rows)]" if kernel.rows_on == "y"
                 else "[ceil(M / rows), ceil(N / cols)]")
        problem(f"grid {rows_axis} counts C's rows and grid {columns_axis} its columns, but the kernel reads its row "
                f"from blockIdx.{kernel.rows_on} (rows_on: {kernel.rows_on}): its blocks would take tile rows for "
                f"columns, leaving rows of C unwritten and writing past its columns where M and N differ",
                "grid", hint=f"a grid with C's rows on {kernel.rows_on} is {usual}")


def _tiles_along(size: str, tile_source: str, extent: int) -> str:
    """C's tiles along M or N (`size`) as a grid would count them: ``ceil(N / BN)``, or ``N`` for a tile of 1."""
    return size if extent == 1 else ceil_of(size, tile_source)


def ceil_of(numerator: str, divisor: str) -> str:
    """``ceil(numerator / divisor)`` written so that the spec's expressions read it as meant: each side in
    parentheses where its own operators would bind otherwise (a tile of ``8 * S`` gives ``ceil(M / (8 * S))``, not
    ``ceil(M / 8 * S)``, which is ceil((M / 8) * S)), so a hint pasted into a grid gives the blocks it names."""
    return f"ceil({_operand(numerator, left=True)} / {_operand(divisor)})"


def _operand(source: str, left: bool = False) -> str:
    """An expression's text as an operand of ``*`` or ``/``: as written where it is one name, number or call, or in
    parentheses already, or where it is the `left` operand and a product or quotient itself (``M * N / 256`` is
    ``(M * N) / 256``); in parentheses otherwise."""
    text = source.strip()
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return f"({text})"
    if isinstance(node, (ast.Name, ast.Constant, ast.Call)) or _enclosed(text):
        return text
    if left and isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)):
        return text
    return f"({text})"


def _enclosed(text: str) -> bool:
    """Whether `text` is one pair of parentheses around the rest (``(8 * S)``, not ``(M + 1) * (N + 1)``)."""
    depth = 0
    for index, char in enumerate(text):
        depth += char == "("
        depth -= char == ")"
        if depth == 0:
            return index == len(text) - 1 and index > 0
    return False


def _rows_short(kernel: KernelSpec, shape: Shape, config: LaunchConfig, rows: int, cols: int, axes: list[int],
                problem) -> bool:
    """For a grid of one axis that reads M alone (a matrix-vector kernel's ``[M // 4]``) on a C whose columns fit
    one tile: the blocks missing are rows of C (a floor division dropping the last rows), said as such with the
    grid that covers them. False (nothing said) for any other grid."""
    if len(axes) != 1 or kernel.grid[axes[0]].names & {"M", "N", "batch", "groups"} != {"M"} or shape.N > cols:
        return False
    axis = axes[0]
    covered = config.grid[axis] * rows
    if covered >= shape.M:
        return False
    problem(f"the grid covers {covered} of M = {shape.M} rows ({config.grid[axis]} blocks x {rows}, "
            f"'{kernel.grid[axis].source}'): {span('rows', covered, shape.M - 1)} would never be written",
            f"grid[{axis}]", hint=f"grid {'xyz'[axis]} should be {_tiles_along('M', kernel.tile[0].source, rows)}")
    return True


def _same_dimension_hint(kernel: KernelSpec, rows: int, cols: int) -> str:
    """For a grid two of whose axes read the same one of M and N alone while none reads the other (``[ceil(M / 16),
    ceil(M / 16)]``): one of the two was meant to read the other dimension. Which one follows the usual orientation,
    C's columns on x and its rows on y, swapped by ``rows_on: x``; empty where that axis is not one of the two, or
    for any other grid."""
    reads = [extent.names & {"M", "N"} for extent in kernel.grid]
    column_axis, row_axis = (1, 0) if kernel.rows_on == "x" else (0, 1)
    for name, other, wrong in (("M", "N", column_axis), ("N", "M", row_axis)):
        same = [axis for axis, names in enumerate(reads) if names == {name}]
        if len(same) == 2 and wrong in same and not any(other in names for names in reads):
            break
    else:
        return ""
    partner, = (axis for axis in same if axis != wrong)
    tiles, what = (_tiles_along("N", kernel.tile[1].source, cols), "column") if other == "N" else \
        (_tiles_along("M", kernel.tile[0].source, rows), "row")
    placed_by = "rows_on: x puts" if kernel.rows_on == "x" else "the usual grid puts"
    return (f"grid {'xyz'[wrong]} reads {name} as grid {'xyz'[partner]} does: it should be {tiles}, C's {what} "
            f"tiles, which {placed_by} on {'xyz'[wrong]}")


def _one_axis_hint(kernel: KernelSpec, shape: Shape, numbered: str, extent: int, other_tiles: str) -> str:
    """For a grid none of whose axes reads the other dimension than `numbered` (M for C's rows, N for its columns),
    where one reads `numbered` alone or the tile is one line wide across the other dimension on a C of several
    (`extent`, the tile's size across it), as a matrix-vector kernel (a warp a row) or a kernel computing one row of
    C (a warp a column) is launched: folding the other dimension into that axis would give the kernel blocks whose
    line it misreads, so the hint is an axis of its own over the other dimension (`other_tiles`), or a require: that
    keeps the kernel to the lines one block computes. Empty for any other grid."""
    other = "N" if numbered == "M" else "M"
    reads = [grid_extent.names & {"M", "N"} for grid_extent in kernel.grid]
    axis = next((index for index, names in enumerate(reads) if names == {numbered}), None)
    if any(other in names for names in reads) or not (axis is not None or extent == 1 and getattr(shape, other) > 1):
        return ""
    where = f" (grid {'xyz'[axis]} reads {numbered} alone)" if axis is not None else ""
    lines, across = ("rows", "columns") if numbered == "M" else ("columns", "rows")
    single = "a matrix-vector kernel" if numbered == "M" else "a kernel that computes one row of C"
    keep = f"{other} == 1, for {single}" if extent == 1 else \
        f"{other} <= {kernel.tile[1 if numbered == 'M' else 0].source}"
    return (f"the grid numbers C's {lines}{where}: add a grid axis over its {across}, {other_tiles}, that the kernel "
            f"reads its {across[:-1]} from, or require: {keep}")


def _floor_division(extent: expr.Expression) -> tuple[str, str] | None:
    """The numerator and divisor of an extent that rounds a division down, ``X // D`` or ``floor(X / D)``, where X
    reads M or N (``ceil(M / 16) // S``: C's row tiles shared out over S blocks of another axis); None otherwise."""
    node = extent.tree
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "floor" \
            and len(node.args) == 1 and isinstance(node.args[0], ast.BinOp) and isinstance(node.args[0].op, ast.Div):
        node = node.args[0]
    elif not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv)):
        return None
    if not {child.id for child in ast.walk(node.left) if isinstance(child, ast.Name)} & {"M", "N"}:
        return None
    return ast.unparse(node.left), ast.unparse(node.right)


def _rounded_up_hint(kernel: KernelSpec, env, config: LaunchConfig, axes: list[int], tiles: int) -> str:
    """For a grid counted against C's tiles whose axes that round a division of M's or N's down (`_floor_division`:
    ``[ceil(M / 16) // S, ceil(N / 16), S]``, rows shared out over x and z) fall short by what the rounding drops:
    those axes rounded up, where that gives a block for every tile. Empty otherwise."""
    divisions = {axis: _floor_division(kernel.grid[axis]) for axis in axes}
    rounded = {axis: ceil_of(*parts) for axis, parts in divisions.items() if parts is not None}
    if not rounded:
        return ""
    try:
        counts = [expr.parse(rounded[axis]).evaluate_int(env) if axis in rounded else config.grid[axis]
                  for axis in axes]
    except expr.ExpressionError:
        return ""
    if math.prod(counts) < tiles:
        return ""
    said = " and ".join(f"grid {'xyz'[axis]} should be {text}" for axis, text in sorted(rounded.items()))
    return f"{said}: rounded down, the division drops the tiles of its last, partial block"


def _shared_axis_hint(kernel: KernelSpec, env, config: LaunchConfig, rows: int, cols: int) -> str:
    """For a grid whose one axis shares out the tiles of both the column and the row axis's blocks (``[4, ceil(N /
    256), ceil(M / 256)]`` with a 128 x 128 tile): the blocks that axis needs, the tiles of one of their blocks."""
    found = grid_axes(kernel.grid)
    if found is None:
        return ""
    column_axis, row_axis = found
    column_split = _split_over(kernel, env, config, found, column_axis, "N", cols)
    row_split = _split_over(kernel, env, config, found, row_axis, "M", rows)
    if not (column_split and row_split and column_split[0] == row_split[0]):
        return ""
    span_cols = inferred_tile(kernel.grid[column_axis], "N").evaluate_int(env)
    span_rows = inferred_tile(kernel.grid[row_axis], "M").evaluate_int(env)
    need = (span_cols // cols) * (span_rows // rows)
    return (f"grid {'xyz'[column_split[0]]} should be {need}: a block of grid {'xyz'[row_axis]} and "
            f"{'xyz'[column_axis]} spans {span_rows} x {span_cols} of C, {span_rows // rows} x {span_cols // cols} "
            f"tiles of {rows} x {cols}")


def check_inferred_coverage(kernel: KernelSpec, env, shape: Shape, config: LaunchConfig, problem,
                            groups: GemmGroups | None = None) -> bool:
    """Without a tile: the grid checked against the tile its own expressions divide M and N by (`coverage`), on
    the axes that step along N and M (an axis folding the batch in by matrices, ``ceil(M / BM) * batch``, by
    BM for each matrix; where an axis numbers contiguous groups, the rows' by the largest group, the groups taken
    out of its divisor: ``ceil(M / (16 * groups))`` gives a block 16 rows). False when they do not say (coverage
    unchecked)."""
    axes = grid_axes(kernel.grid)
    if axes is None:
        return False
    column_axis, row_axis = axes
    cols = inferred_tile(kernel.grid[column_axis], "N") or per_matrix_tile(kernel.grid[column_axis], "N")
    rows = inferred_tile(kernel.grid[row_axis], "M") or per_matrix_tile(kernel.grid[row_axis], "M")
    if cols is None or rows is None:
        return False
    slice_axis = _group_slice_axis(kernel, groups, row_axis)
    try:
        col_extent, row_extent = cols.evaluate_int(env), rows.evaluate_int(env)
        if slice_axis is not None:
            row_extent = rows.evaluate_int({**env, "groups": 1})
    except expr.ExpressionError:
        return False
    sides = [(column_axis, col_extent, "N", shape.N, cols), (row_axis, row_extent, "M", shape.M, rows)]
    if slice_axis is not None and groups is not None:
        sides = sides[:1]
        tile_source = rows.source if "groups" not in rows.names else str(row_extent)
        _check_group_slices(kernel, config, row_axis, row_extent, tile_source, groups, slice_axis, problem)
    for axis, extent, size_name, size, divisor in sides:
        blocks = config.grid[axis]
        covered = blocks * extent
        # An axis that folds the batch in (ceil(M / BM) * batch) steps along every matrix's rows (columns).
        matrices = env.get("batch", 1) if folds_batch(kernel.grid[axis]) else 1
        if matrices > 1 and not folds_end_to_end(kernel.grid[axis]):
            if blocks < -(-size // extent) * matrices:
                _matrices_short(kernel, config, axis, size_name, size, extent, divisor.source, matrices, problem)
            continue
        if covered < size * matrices:
            what = "columns" if size_name == "N" else "rows"
            of = f"{size_name} = {size}" if matrices == 1 else \
                f"the batch's {matrices} x {size_name} = {size * matrices}"
            problem(f"the grid covers {covered} of {of} {what} ({blocks} blocks x {extent}, as "
                    f"'{kernel.grid[axis].source}' divides {size_name} by {divisor.source}): "
                    f"{span(what, covered, size * matrices - 1)} would never be written", f"grid[{axis}]",
                    hint=f"grid {'xyz'[axis]} should be {ceil_of(size_name, divisor.source)}"
                         + (" * batch" if matrices > 1 else "")
                         + "; if a block computes more than that, declare tile: [rows, cols]")
    return True


def check_flat_grid(kernel: KernelSpec, env, shape: Shape, config: LaunchConfig,
                    flat: tuple[int, expr.Expression, expr.Expression], problem) -> list[str]:
    """Without a tile, a flat element-index grid (`coverage.flat_elements`: ``ceil(M * N / T)``) whose T is the
    threads of a block of one axis (one element of C to a thread) checked against C's elements. A block of two or
    three axes (16 x 16: a 2-D tile of C's, its tiles numbered on one axis, as likely) or any other T leaves the
    grid's reading open (several elements to a thread, or a 2-D tile of T elements that the count does not place):
    the notes returned say coverage is unchecked and, where a kernel of one element per thread would leave elements
    of C unwritten, which, and how ``tile: [1, THREADS]`` has that checked."""
    axis, count, divisor = flat
    threads = math.prod(config.block)
    if config.block[1:] != (1, 1):
        return [UNCHECKED_NOTE]
    try:
        per_block = divisor.evaluate_int(env)
    except expr.ExpressionError:
        return [UNCHECKED_NOTE]
    if per_block == threads:
        _check_flat_elements(kernel, env, shape, config, flat, per_block, divisor.source,
                             f"one per thread, as '{kernel.grid[axis].source}' divides "
                             f"{count.source} by {divisor.source}", problem)
        return []
    total, _ = _flat_total(env, shape, count)
    covered = config.grid[axis] * threads
    if covered >= total:
        return [UNCHECKED_NOTE]
    return [UNCHECKED_NOTE,
            f"grid {'xyz'[axis]} '{kernel.grid[axis].source}' gives each block {count_text(per_block)} elements of C "
            f"while a block has {threads:,} threads: a kernel of one element per thread (idx = blockIdx.x * "
            f"blockDim.x + threadIdx.x) leaves {_elements_span(covered, total, shape)} unwritten; tile: [1, "
            f"{threads}] says each block computes {threads:,} consecutive elements of C and has the grid checked "
            f"against that"]


def _flat_total(env, shape: Shape, count: expr.Expression) -> tuple[int, str]:
    """C's elements a flat grid's `count` numbers (those of every matrix where it reads ``batch``), and how a message
    names them."""
    if "batch" in count.names and env.get("batch", 1) != 1:
        batch = env["batch"]
        return batch * shape.M * shape.N, f"the batch's {batch:,} x M x N = {batch * shape.M * shape.N:,}"
    return shape.M * shape.N, f"M x N = {shape.M * shape.N:,}"


def _elements_span(first: int, total: int, shape: Shape) -> str:
    """C's elements `first` to the last of `total` (row-major across rows and matrices), and where the first lies."""
    matrix, inside = divmod(first, shape.M * shape.N)
    row, column = divmod(inside, shape.N)
    where = f"row {row}, column {column}" + (f" of matrix {matrix}" if total > shape.M * shape.N else "")
    span = f"element {first:,}" if first == total - 1 else f"elements {first:,}-{total - 1:,}"
    return f"{span} (from {where})"


def _check_flat_elements(kernel: KernelSpec, env, shape: Shape, config: LaunchConfig,
                         flat: tuple[int, expr.Expression, expr.Expression], per_block: int, per_block_source: str,
                         reading: str, problem) -> None:
    """A flat grid's blocks, `per_block` consecutive elements each, held to C's elements (every matrix's where the
    grid's count reads ``batch``): the elements left, where they start, and the grid that covers them."""
    axis, count, _ = flat
    total, of = _flat_total(env, shape, count)
    blocks = config.grid[axis]
    covered = blocks * per_block
    if covered >= total:
        return
    letter = "xyz"[axis]
    problem(f"the grid covers {covered:,} of {of} elements of C ({blocks:,} blocks of grid {letter}, {per_block:,} "
            f"consecutive elements each, {reading}): {_elements_span(covered, total, shape)} would never be written",
            f"grid[{axis}]", hint=f"grid {letter} should be {ceil_of(count.source, per_block_source)}, "
                                  f"{-(-total // per_block):,} blocks on this shape")


def names_with_values(expression: expr.Expression, env) -> str:
    return ", ".join(f"{name}={template_argument(env[name])}" for name in sorted(expression.names)
                     if name in env) or "no names"
