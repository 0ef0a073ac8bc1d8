"""A host model of v16's stream-K split (kernels/16_tma_ws_streamk.cu), written as the kernel computes it: the line of
tiles * ktiles K-tiles cut into one range a block, each range walked as segments of tiles, and the hand-over of partial
tiles through a slot and a flag per block. Every K-tile of every tile must be multiplied once, a block must have at
most one partial tile to hand over (its first segment), each owner must wait for exactly the blocks that hold the rest
of its tile, all blocks resident at once must finish whatever order they run in, and the flags must end as they
began: zero."""

from __future__ import annotations

import random

import pytest


def range_begin(units: int, blocks: int, block: int) -> int:
    """StreamLine::begin: block b's first unit."""
    return units * block // blocks


def segments(units: int, ktiles: int, blocks: int, block: int) -> list[tuple[int, int, int]]:
    """The (tile, kt_begin, kt_end) segments of block b's range, in its order (segment_at in a loop)."""
    unit, end = range_begin(units, blocks, block), range_begin(units, blocks, block + 1)
    out = []
    while unit < end:
        tile = unit // ktiles
        kt_begin = unit - tile * ktiles
        kt_end = min(end, (tile + 1) * ktiles) - tile * ktiles
        out.append((tile, kt_begin, kt_end))
        unit += kt_end - kt_begin
    return out


def awaited(units: int, ktiles: int, blocks: int, block: int, tile: int) -> list[int]:
    """The blocks an owner waits for, as its first consumer thread walks them: the next blocks while their ranges
    begin inside the tile, those with an empty range skipped."""
    tile_end = (tile + 1) * ktiles
    out = []
    other = block + 1
    while other < blocks and range_begin(units, blocks, other) < tile_end:
        if range_begin(units, blocks, other) < range_begin(units, blocks, other + 1):
            out.append(other)
        other += 1
    return out


def tiling(M, N, K, tm, bn, bk):
    return -(-N // bn) * -(-M // tm), -(-K // bk)


CASES = [  # M, N, K, tile rows, tile columns, K elements a K-tile, grid (the spec's min(sm_count, units), or more)
    (1001, 520, 776, 128, 64, 64, 132), (4104, 1032, 200, 128, 128, 64, 132), (127, 4104, 1032, 128, 64, 64, 132),
    (128, 4096, 4096, 128, 128, 64, 132), (64, 64, 8192, 64, 64, 64, 132), (1, 264, 64, 64, 64, 64, 5),
    (1, 264, 64, 64, 64, 64, 132), (64, 64, 8192, 128, 128, 128, 132), (1024, 512, 1024, 64, 64, 64, 132),
    (4096, 4096, 4096, 128, 256, 64, 132), (1001, 520, 784, 128, 256, 32, 7),
]


@pytest.mark.parametrize("M, N, K, tm, bn, bk, grid", CASES)
def test_every_k_tile_of_every_tile_is_multiplied_once(M, N, K, tm, bn, bk, grid):
    tiles, ktiles = tiling(M, N, K, tm, bn, bk)
    units = tiles * ktiles
    seen = [(tile, kt) for block in range(grid) for tile, begin, end in segments(units, ktiles, grid, block)
            for kt in range(begin, end)]
    assert sorted(seen) == [(tile, kt) for tile in range(tiles) for kt in range(ktiles)]


@pytest.mark.parametrize("M, N, K, tm, bn, bk, grid", CASES)
def test_a_block_hands_over_at_most_its_first_segment_and_each_owner_waits_for_exactly_the_rest(
        M, N, K, tm, bn, bk, grid):
    tiles, ktiles = tiling(M, N, K, tm, bn, bk)
    units = tiles * ktiles
    handed = {}                                             # tile -> blocks whose partial sums of it go to a slot
    for block in range(grid):
        for position, (tile, begin, end) in enumerate(segments(units, ktiles, grid, block)):
            if begin > 0:
                assert position == 0, f"block {block} hands over a later segment"
                handed.setdefault(tile, []).append(block)
    for block in range(grid):
        for tile, begin, end in segments(units, ktiles, grid, block):
            if begin == 0:
                expected = handed.get(tile, []) if end < ktiles else []
                assert (awaited(units, ktiles, grid, block, tile) if end < ktiles else []) == expected
    owners = {tile for block in range(grid) for tile, begin, _ in segments(units, ktiles, grid, block) if begin == 0}
    assert owners == set(range(tiles))                      # every tile stored once, by the block holding K-tile 0


@pytest.mark.parametrize("M, N, K, tm, bn, bk, grid", CASES)
@pytest.mark.parametrize("seed", range(3))
def test_resident_blocks_finish_in_any_order_and_leave_the_flags_zero(M, N, K, tm, bn, bk, grid, seed):
    tiles, ktiles = tiling(M, N, K, tm, bn, bk)
    units = tiles * ktiles
    work = {block: segments(units, ktiles, grid, block) for block in range(grid)}
    flags = [0] * grid
    slots = {}                                              # block -> (tile, its K-tiles) handed over
    done_tiles = {}
    rng = random.Random(seed)
    position = {block: 0 for block in range(grid)}
    while any(position[block] < len(work[block]) for block in range(grid)):
        ready = []
        for block in range(grid):
            if position[block] == len(work[block]):
                continue
            tile, begin, end = work[block][position[block]]
            if begin == 0 and end < ktiles and \
                    any(flags[other] == 0 for other in awaited(units, ktiles, grid, block, tile)):
                continue                                    # the owner spins on a flag
            ready.append(block)
        assert ready, "every unfinished block waits: the grid would hang"
        block = rng.choice(ready)
        tile, begin, end = work[block][position[block]]
        position[block] += 1
        if begin > 0:
            assert flags[block] == 0
            slots[block] = (tile, set(range(begin, end)))
            flags[block] = 1
            continue
        covered = set(range(begin, end))
        if end < ktiles:
            for other in awaited(units, ktiles, grid, block, tile):
                assert flags[other] == 1 and slots[other][0] == tile
                covered |= slots[other][1]
                flags[other] = 0
        assert covered == set(range(ktiles))
        done_tiles[tile] = done_tiles.get(tile, 0) + 1
    assert done_tiles == {tile: 1 for tile in range(tiles)}
    assert flags == [0] * grid
