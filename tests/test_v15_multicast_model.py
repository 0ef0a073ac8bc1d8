"""A host model of v15 (kernels/15_tma_ws_multicast.cu), written as the kernel does its work:
- the clusters' walk over units of CM tiles one above the other (and of CM x CN tiles, with the multicast masks that
  must reach exactly the ranks sharing a tile row or column), which must compute every tile of C once, on the large
  shapes' tile, the narrow ones and those of 192 rows or columns;
- the ranks' shares of the B tile at every tile width, which must write each byte of it once;
- the ring shared by a cluster (each rank's A copy, every rank's share of B written into every rank, the `full`
  barriers' byte counts, releases on every rank's `empty` barriers, the producers' tail), run under random
  interleavings with the mbarriers' parity waits: no stage may be read before all of its bytes have landed or
  rewritten before every reader has released it, nothing may deadlock, and no arrival may reach an exited block;
- the staged epilogue's chunks: every element written once, where the copy engine's 128-byte swizzle reads it,
  and each warp's stores spread over the banks."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from test_v13_split_model import fragment


def swizzled_tile_of(index: int, columns: int, rows_total: int, group: int) -> tuple[int, int]:
    """kernels/block_order.cuh's swizzled_tile_of: (column, row) of tile `index` of a columns x rows_total grid."""
    if group <= 1:
        return index % columns, index // columns
    per_group = group * columns
    first = (index // per_group) * group
    rows = min(rows_total - first, group)
    return (index % per_group) // rows, first + (index % per_group) % rows


def cluster_tiles(M: int, N: int, cm: int, group: int, grid: int, tm: int = 128, bn: int = 256) \
        -> list[list[tuple[int, int]]]:
    """The tiles (row, column) each block of a grid of `grid` blocks computes, in its order, as the kernel's
    consumers walk them: cluster blockIdx / CM takes units first, first + step, ...; rank r the unit's row CM u + r.
    Tiles are tm x bn (64 CWG x BN; the defaults are the large shapes' 128 x 256)."""
    columns, rows = -(-N // bn), -(-M // tm)
    unit_rows = -(-rows // cm)
    units = columns * unit_rows
    blocks = []
    for block in range(grid):
        rank, first, step = block % cm, block // cm, grid // cm
        tiles = []
        for index in range(first, units, step):
            column, unit_row = swizzled_tile_of(index, columns, unit_rows, group)
            tiles.append((unit_row * cm + rank, column))
        blocks.append(tiles)
    return blocks


@pytest.mark.parametrize("M, N", [(4096, 4096), (8192, 1024), (1001, 520), (4104, 1032), (128, 14336), (129, 256),
                                  (127, 4104)])
@pytest.mark.parametrize("cm", [1, 2, 4])
@pytest.mark.parametrize("group", [1, 8, 16])
@pytest.mark.parametrize("tm, bn", [(128, 256), (64, 128), (128, 128), (64, 64), (192, 192), (128, 192), (192, 64),
                                    (64, 96), (192, 96)])
def test_every_tile_of_c_is_computed_once_and_ranks_of_a_cluster_share_their_b_panel(M, N, cm, group, tm, bn):
    columns, rows = -(-N // bn), -(-M // tm)
    grid = cm * min(132 // cm, columns * -(-rows // cm))     # the spec's grid expression
    blocks = cluster_tiles(M, N, cm, group, grid, tm, bn)
    inside = [tile for tiles in blocks for tile in tiles if tile[0] < rows]
    assert sorted(inside) == sorted((row, column) for row in range(rows) for column in range(columns))
    past = [tile for tiles in blocks for tile in tiles if tile[0] >= rows]
    assert len(past) == (cm * -(-rows // cm) - rows) * columns        # only the last unit row's, where it is partial
    for cluster in range(grid // cm):                 # a cluster's ranks: as many tiles, each step one B panel
        ranks = blocks[cm * cluster:cm * cluster + cm]
        assert len({len(tiles) for tiles in ranks}) == 1
        for step in zip(*ranks):
            assert len({column for _, column in step}) == 1
            assert [row % cm for row, _ in step] == list(range(cm))


def cluster_tiles_2d(M: int, N: int, cm: int, cn: int, group: int, grid: int, tm: int, bn: int) \
        -> list[list[tuple[int, int]]]:
    """As `cluster_tiles` for clusters of cm tile rows by cn tile columns: rank r is tile row r % cm and tile column
    r // cm of its cluster's unit, units cm x cn tiles over a ceil(columns / cn) x ceil(rows / cm) grid."""
    columns, rows = -(-N // bn), -(-M // tm)
    unit_rows, unit_columns = -(-rows // cm), -(-columns // cn)
    ranks = cm * cn
    blocks = []
    for block in range(grid):
        rank, first, step = block % ranks, block // ranks, grid // ranks
        blocks.append([(unit_row * cm + rank % cm, unit_column * cn + rank // cm)
                       for unit_column, unit_row in (swizzled_tile_of(index, unit_columns, unit_rows, group)
                                                     for index in range(first, unit_columns * unit_rows, step))])
    return blocks


def multicast_masks(cm: int, cn: int, rank: int) -> tuple[int, int]:
    """The kernel's masks for rank `rank`: (the ranks its B copies reach, the ranks its A copies reach)."""
    row_rank, column_rank = rank % cm, rank // cm
    column_ranks = ((1 << cm) - 1) << (cm * column_rank)
    row_ranks = sum(1 << (row_rank + cm * c) for c in range(cn))
    return column_ranks, row_ranks


@pytest.mark.parametrize("M, N", [(1001, 520), (127, 4104), (4104, 1032), (1, 264), (4096, 4096)])
@pytest.mark.parametrize("cm, cn", [(1, 2), (1, 4), (2, 2), (2, 4), (4, 2)])
@pytest.mark.parametrize("group", [1, 8])
@pytest.mark.parametrize("tm, bn", [(64, 64), (64, 128), (192, 192)])
def test_clusters_of_tile_rows_by_columns_compute_every_tile_once_and_multicast_to_the_ranks_that_share(
        M, N, cm, cn, group, tm, bn):
    columns, rows = -(-N // bn), -(-M // tm)
    ranks = cm * cn
    grid = ranks * min(132 // ranks, -(-columns // cn) * -(-rows // cm))     # the spec's grid expression
    blocks = cluster_tiles_2d(M, N, cm, cn, group, grid, tm, bn)
    inside = [tile for tiles in blocks for tile in tiles if tile[0] < rows and tile[1] < columns]
    assert sorted(inside) == sorted((row, column) for row in range(rows) for column in range(columns))
    for cluster in range(grid // ranks):
        members = blocks[ranks * cluster:ranks * cluster + ranks]
        assert len({len(tiles) for tiles in members}) == 1      # the ranks step together: each fill reaches all
        for step in zip(*members):
            for rank, (row, column) in enumerate(step):
                b_mask, a_mask = multicast_masks(cm, cn, rank)
                # B copies reach exactly the ranks of this tile column, A copies exactly those of this tile row
                assert b_mask == sum(1 << r for r, tile in enumerate(step) if tile[1] == column)
                assert a_mask == sum(1 << r for r, tile in enumerate(step) if tile[0] == row)


def b_panel(bn: int) -> int:
    """Columns of a row-major B box (one swizzle panel): 64 in 128-byte rows, or 32 in 64-byte rows where BN is no
    multiple of 64."""
    return 64 if bn % 64 == 0 else 32


def b_shares(bt: int, bn: int, cm: int, bk_bytes: int = 128) -> list[list[tuple[int, int]]]:
    """Each rank's copies of the B tile, as (byte offset in the stage's B tile, bytes), as the producer issues them:
    BT 0, boxes j in [b r / CM, b (r + 1) / CM) of the b = BN / panel boxes of `b_panel` columns (64 k rows each);
    BT 1, one box of BN / CM K-major rows of 128 bytes at row BN r / CM."""
    shares = []
    for rank in range(cm):
        if bt == 0:
            boxes = bn // b_panel(bn)
            box_bytes = 64 * 2 * b_panel(bn)
            shares.append([(j * box_bytes, box_bytes) for j in range(boxes * rank // cm, boxes * (rank + 1) // cm)])
        else:
            rows = bn // cm
            shares.append([(rank * rows * bk_bytes, rows * bk_bytes)])
    return shares


@pytest.mark.parametrize("bt", [0, 1])
@pytest.mark.parametrize("bn", [64, 96, 128, 192, 256])
@pytest.mark.parametrize("cm", [1, 2, 4])
def test_the_ranks_shares_of_b_write_every_byte_of_the_tile_once_and_fill_each_full_barrier_exactly(bt, bn, cm):
    shares = b_shares(bt, bn, cm)
    written = sorted(copy for share in shares for copy in share)
    position = 0
    for offset, nbytes in written:                 # back to back from 0: no byte twice, none left out
        assert offset == position
        position += nbytes
    assert position == bn * 128                    # B_BYTES: with A's, what each block's `full` barrier expects
    atom = 8 * (2 * b_panel(bn) if bt == 0 else 128)
    for offset, nbytes in written:                 # each copy starts on a swizzle atom (8 rows of its row width)
        assert offset % atom == 0 and nbytes % atom == 0


# ---- the ring shared by a cluster ----

@dataclass
class Barrier:
    """An mbarrier: arrivals pending in the current phase, its transaction count, the phases completed."""
    count: int
    pending: int = 0
    tx: int = 0
    completed: int = 0

    def __post_init__(self):
        self.pending = self.count

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.completed += 1
            self.pending = self.count

    def arrive(self, expect_tx: int = 0):
        self.tx += expect_tx
        self.pending -= 1
        assert self.pending >= 0
        self._maybe_complete()

    def complete_tx(self, nbytes: int):
        self.tx -= nbytes
        self._maybe_complete()

    def ready(self, parity: int) -> bool:
        """try_wait.parity: the phase of this parity has completed (the current phase's parity differs)."""
        return self.completed % 2 != parity


@dataclass
class Block:
    full: list[Barrier]
    empty: list[Barrier]
    slots: list[dict]                                 # per slot: part -> the fill that last wrote it
    exited: bool = False


A_BYTES, B_BYTES = 16384, 32768


def run_cluster(cm: int, stages: int, fills: int, seed: int, release_everywhere: bool = True, cwg: int = 2) -> None:
    """One cluster's ring, its blocks of `cwg` consumer warpgroups, under a random interleaving; asserts the protocol's
    invariants as it goes. With `release_everywhere` false, a warp releases a stage on its own block's `empty` barrier
    only (a wrong ring)."""
    rng = random.Random(seed)
    releasers = 4 * cwg * (cm if release_everywhere else 1)
    blocks = [Block([Barrier(1) for _ in range(stages)], [Barrier(releasers) for _ in range(stages)],
                    [dict() for _ in range(stages)]) for _ in range(cm)]
    # Readers: the consumer warps (rank, consumer, warp); released: the fills each has released so far.
    warps = [(r, c, w) for r in range(cm) for c in range(cwg) for w in range(4)]
    reading = {warp: [] for warp in warps}             # fills a warp's wgmmas may still read (at most 2)
    next_fill = {warp: 0 for warp in warps}             # the next fill a warp waits for
    released = {warp: 0 for warp in warps}
    producer_fill = [0] * cm                            # the next fill each rank's producer asks for
    tail = [0] * cm                                     # the producer's tail waits done
    in_flight = []                                      # copies issued, not yet landed: (dest rank, slot, part, fill)

    parts = ["A"] + [f"B{rank}" for rank in range(cm)]   # a stage: its own A, every rank's share of B

    def slot_free(block, it) -> bool:
        """ring_wait_free: fill `it`'s slot released on the lap before (always free on the first lap)."""
        return it < stages or block.empty[it % stages].ready((it // stages - 1) & 1)

    def step_producer(rank) -> bool:
        it = producer_fill[rank]
        block = blocks[rank]
        if it < fills:
            slot = it % stages
            if not slot_free(block, it):
                return False
            block.full[slot].arrive(expect_tx=A_BYTES + B_BYTES)
            in_flight.append((rank, slot, "A", it, A_BYTES))
            for dest in range(cm):                      # this rank's share of B, multicast
                in_flight.append((dest, slot, f"B{rank}", it, B_BYTES // cm))
            producer_fill[rank] += 1
            return True
        if tail[rank] < stages:                          # the tail: fills fills .. fills + stages - 1 free
            if not slot_free(block, fills + tail[rank]):
                return False
            tail[rank] += 1
            if tail[rank] == stages:
                block.exited = True
            return True
        return False

    def land(copy) -> None:
        dest, slot, part, it, nbytes = copy
        block = blocks[dest]
        assert not block.exited, "a copy reached an exited block"
        # Every reader of this rank must be done with the fill this one replaces.
        for warp in warps:
            if warp[0] == dest:
                assert it - stages not in reading[warp], f"fill {it} overwrote fill {it - stages} still being read"
        block.slots[slot][part] = it
        block.full[slot].complete_tx(nbytes)

    def release(warp, it) -> None:
        reading[warp].remove(it)
        released[warp] += 1
        for rank in range(cm) if release_everywhere else [warp[0]]:
            assert not blocks[rank].exited, "a release reached an exited block"
            blocks[rank].empty[it % stages].arrive()

    def step_consumer(warp) -> bool:
        rank = warp[0]
        it = next_fill[warp]
        if it < fills:
            slot = it % stages
            if not blocks[rank].full[slot].ready((it // stages) & 1):
                return False
            assert all(blocks[rank].slots[slot].get(part) == it for part in parts), \
                f"fill {it} read before all of its bytes landed: {blocks[rank].slots[slot]}"
            reading[warp].append(it)
            next_fill[warp] += 1
            if it >= 1:                                  # wgmma_wait<1>: fill it - 1 is done, release it
                release(warp, it - 1)
            return True
        if reading[warp]:                                # wgmma_wait<0>, then the last fill's release
            release(warp, reading[warp][0])
            return True
        return False

    while True:
        actions = [("producer", rank) for rank in range(cm)] + [("consumer", warp) for warp in warps] + \
                  [("land", index) for index in range(len(in_flight))]
        rng.shuffle(actions)
        progressed = False
        for kind, who in actions:
            if kind == "land":
                land(in_flight.pop(who))
                progressed = True
            elif kind == "producer":
                progressed = step_producer(who)
            else:
                progressed = step_consumer(who)
            if progressed:
                break
        if not progressed:
            break
    assert all(done == fills for done in released.values()), "deadlock: a consumer never finished"
    assert all(block.exited for block in blocks), "deadlock: a producer's tail never finished"
    assert not in_flight


@pytest.mark.parametrize("cm", [1, 2, 4])
@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("cwg", [1, 2, 3])
def test_the_clusters_ring_never_reads_early_overwrites_a_stage_in_use_or_deadlocks(cm, stages, cwg):
    for seed in range(25):
        run_cluster(cm, stages, fills=3 * stages + 1, seed=seed, cwg=cwg)


def test_the_model_catches_releases_on_the_own_block_only():
    # The protocol's point: were each warp to release a stage on its own block's `empty` barrier only, a peer's
    # multicast could overwrite a stage still being read. The model, so changed, must fail under some interleaving.
    failures = 0
    for seed in range(40):
        try:
            run_cluster(2, 2, fills=8, seed=seed, release_everywhere=False)
        except AssertionError:
            failures += 1
    assert failures > 0


# ---- the staged epilogue ----

def swizzled_offset(row: int, column: int, row_bytes: int = 128) -> int:
    """kernels/wgmma.cuh's swizzled_offset<ROW>: 16-byte column `column` of row `row` of a tile of `row_bytes`-long
    rows in the swizzle of that width (the bits of 16-byte columns XORed with those of 128-byte lines)."""
    at = row * row_bytes
    return at + (column ^ ((at >> 7) & (row_bytes // 16 - 1))) * 16


def chunk_row(out: int, bn: int) -> int:
    """Bytes of a staged chunk's row: 128, or 64 where a slab's row is an odd number of 64-byte halves."""
    return 128 if bn * out // 8 % 128 == 0 else 64


def chunk_writes(out: int, q: int, row_bytes: int = 128) -> list[tuple[int, int, int, int, int]]:
    """stage_chunk's stores for chunk q of a consumer warpgroup: (warp, lane, byte address in the buffer, row,
    column of the first of the pair), in the order a warp issues them (one instruction per (jj, half))."""
    groups = row_bytes // out
    writes = []
    for jj in range(groups):
        j = q * groups + jj
        for half in range(2):
            for thread in range(128):
                _, warp, g, t = fragment(thread)
                r = 16 * warp + g + 8 * half
                if out == 16:
                    at = swizzled_offset(r, jj, row_bytes) + 4 * t
                else:
                    at = swizzled_offset(r, 2 * jj + t // 2, row_bytes) + 8 * (t % 2)
                writes.append((warp, thread % 32, at, r, 8 * j + 2 * t))
    return writes


def tma_box_address(row: int, column: int, element_bytes: int, row_bytes: int = 128) -> int:
    """Where the copy engine reads element (row, column) of a [64, row_bytes / element_bytes] box with the swizzle of
    its row width (128 bytes: 16-byte column c of row r at r * 128 + (c ^ r % 8) * 16; 64 bytes: at
    r * 64 + (c ^ r / 2 % 4) * 16, bits 4-5 of the address XORed with bits 7-8)."""
    byte = row * row_bytes + column * element_bytes
    return byte ^ (((byte >> 7) & (row_bytes // 16 - 1)) << 4)


@pytest.mark.parametrize("out, bn", [(16, 256), (32, 256), (16, 96), (32, 96), (16, 192), (16, 64)])
def test_every_staged_element_lies_where_the_copy_engine_reads_it_and_is_written_once(out, bn):
    element_bytes = out // 8
    row_bytes = chunk_row(out, bn)
    chunk_columns = row_bytes // element_bytes
    chunks = bn * element_bytes // row_bytes
    assert chunks * chunk_columns == bn                                      # the slab in whole chunks
    for q in range(chunks):
        written = [0] * (64 * row_bytes)
        for _, _, at, row, column in chunk_writes(out, q, row_bytes):
            local = column - q * chunk_columns
            assert 0 <= local < chunk_columns
            assert at == tma_box_address(row, local, element_bytes, row_bytes)  # the pair's first element
            for byte in range(at, at + 2 * element_bytes):                   # the pair: contiguous in its 16 bytes
                written[byte] += 1
            assert at // 16 == (at + 2 * element_bytes - 1) // 16
        assert written == [1] * (64 * row_bytes)


@pytest.mark.parametrize("out, row_bytes, wavefronts", [(16, 128, 1), (32, 128, 2), (16, 64, 1)])
def test_a_warps_staging_stores_take_the_fewest_wavefronts(out, row_bytes, wavefronts):
    # Per instruction, a warp's 32 stores over 32 banks of 4 bytes: 128 bytes (bf16 pairs) fit one wavefront,
    # 256 (fp32 pairs) two; more would be bank conflicts.
    instructions = {}
    for warp, lane, at, _, _ in chunk_writes(out, 1, row_bytes):
        instructions.setdefault(warp, []).append((lane, at))
    for stores in instructions.values():
        for start in range(0, len(stores), 32):
            instruction = stores[start:start + 32]
            banks = {}
            for _, at in instruction:
                for word in range(at // 4, (at + 2 * (out // 8)) // 4):
                    banks.setdefault(word % 32, set()).add(word)
            assert max(len(words) for words in banks.values()) == wavefronts
