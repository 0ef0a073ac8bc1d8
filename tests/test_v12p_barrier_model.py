"""A host model of the barrier protocol of gemm_bf16_tma_ws_persistent (v12p and v12pp, kernels/12_bf16_tma_ws.cu),
run under random interleavings: the checks a GPU cannot give without a hang or a silent wrong tile.

One producer thread, the lane-0 warps of the consumer warpgroups and the copy engine are Python generators stepped
in a random order; the mbarriers keep a completed-phase count, and a wait on parity p passes when the phase of
parity p is the last completed one, as mbarrier.try_wait.parity does. The model follows the kernel line by line:
the ring counter `it` running on across tiles, the release of a K-tile's stage after the next K-tile's wgmmas are
issued (wgmma_wait<1>) and of a tile's last stage after wgmma_wait<0>, ping-pong's turn barriers. It fails
(AssertionError) when a consumer reads a stage whose copy has not landed or that holds another K-tile, when a
stage is refilled before every reader released it, when a tile is not computed exactly once, and raises
RuntimeError on a deadlock. It models the protocol, not the kernel: the kernel's own check is its GPU test.
"""

from __future__ import annotations

import random

import pytest


class Barrier:
    def __init__(self, arrivals: int):
        self.arrivals, self.pending, self.completed, self.transactions = arrivals, 0, 0, 0

    def arrive(self, transactions: int = 0) -> None:
        self.pending += 1
        self.transactions += transactions
        self._complete()

    def land(self) -> None:
        self.transactions -= 1
        self._complete()

    def _complete(self) -> None:
        assert self.pending <= self.arrivals, "more arrivals than the barrier counts"
        if self.pending == self.arrivals and self.transactions == 0:
            self.pending, self.completed = 0, self.completed + 1

    def passed(self, parity: int) -> bool:
        return (self.completed & 1) != parity


def run_block(block: int, grid: int, tiles: int, ktiles: int, stages: int, pingpong: bool, seed: int, *,
              turns_kept: bool = True) -> None:
    """Block `block` of `grid` (persistent) over `tiles` tiles of `ktiles` K-tiles through a ring of `stages`;
    `turns_kept` False leaves out ping-pong's turn barriers (a broken protocol the model must catch)."""
    consumers = 2
    rng = random.Random(seed)
    full = [Barrier(1) for _ in range(stages)]
    empty = [Barrier(4 if pingpong else 4 * consumers) for _ in range(stages)]
    turn = [Barrier(4), Barrier(4)]
    stage_holds: list = [None] * stages
    in_flight: list = []                       # copies asked for and not landed: (slot, (tile, kt))
    mine = list(range(block, tiles, grid))
    computed: dict = {}

    def producer():
        it = 0
        for index in mine:
            for kt in range(ktiles):
                slot = it % stages
                if it >= stages:
                    while not empty[slot].passed((it // stages - 1) & 1):
                        yield
                full[slot].arrive(transactions=1)
                in_flight.append((slot, (index, kt)))
                it += 1
                yield

    def consumer_warp(consumer: int, warp: int):
        slab = 0 if pingpong else consumer
        local = turns = 0
        for index in mine:
            if pingpong and local % 2 != consumer:
                local += 1
                continue
            if pingpong and turns_kept and local >= 1:
                while not turn[consumer].passed((turns - 1 + consumer) & 1):
                    yield
            it = local * ktiles
            issued = []
            for kt in range(ktiles):
                slot = it % stages
                while not full[slot].passed((it // stages) & 1):
                    yield
                assert stage_holds[slot] == (index, kt), f"read {stage_holds[slot]} for {(index, kt)}"
                issued.append((slot, (index, kt)))
                yield
                if kt >= 1:
                    slot_done, held = issued.pop(0)
                    assert stage_holds[slot_done] == held, "stage refilled before its release"
                    empty[slot_done].arrive()
                it += 1
                yield
            if pingpong:
                turn[1 - consumer].arrive()
            if ktiles >= 1:
                slot_done, held = issued.pop(0)
                assert stage_holds[slot_done] == held, "stage refilled before its release"
                empty[slot_done].arrive()
            computed.setdefault((index, slab), []).append(warp)
            turns += 1
            local += 1
            yield

    def copy_engine():
        while True:
            if in_flight and rng.random() < 0.5:
                slot, what = in_flight.pop(rng.randrange(len(in_flight)) if rng.random() < 0.3 else 0)
                stage_holds[slot] = what
                full[slot].land()
            yield

    threads = [producer()] + [consumer_warp(c, w) for c in range(consumers) for w in range(4)]
    engine = copy_engine()
    steps = 0
    while threads:
        steps += 1
        if steps > 2_000_000:
            raise RuntimeError(f"deadlock: block {block} of {grid}, {tiles} tiles, {ktiles} K-tiles, "
                               f"{stages} stages, pingpong {pingpong}")
        if rng.random() < 0.3:
            next(engine)
            continue
        thread = rng.choice(threads)
        try:
            next(thread)
        except StopIteration:
            threads.remove(thread)
    slabs = [0] if pingpong else range(consumers)
    assert set(computed) == {(i, s) for i in mine for s in slabs}, "a tile missed or computed twice"
    assert all(len(warps) == 4 for warps in computed.values()), "a tile not finished by all its warps"
    assert not in_flight


def configurations(count: int, seed0: int = 0):
    """`count` random configurations (pingpong, stages, ktiles, grid, tiles, seed), as the kernel can be launched."""
    for seed in range(seed0, seed0 + count):
        rng = random.Random(seed)
        pingpong = rng.random() < 0.5
        stages, ktiles = rng.choice([2, 3, 4, 5]), rng.choice([1, 2, 3, 4, 5, 7, 13])
        grid, tiles = rng.choice([1, 2, 3, 132]), rng.choice([1, 2, 3, 5, 8, 11])
        yield pingpong, stages, ktiles, grid, tiles, seed


@pytest.mark.parametrize("pingpong, stages, ktiles, grid, tiles, seed", list(configurations(60)))
def test_every_stage_is_read_after_it_lands_and_before_it_is_refilled(pingpong, stages, ktiles, grid, tiles, seed):
    for block in range(min(grid, tiles)):
        run_block(block, grid, tiles, ktiles, stages, pingpong, seed * 1000 + block)


def test_without_the_turn_barriers_ping_pong_reads_a_stale_stage():
    """The model is not vacuous: left without its turn barriers, ping-pong's warpgroups run ahead of each other and
    one of them reads a stage that holds another K-tile (or releases one that was refilled)."""
    caught = 0
    for seed in range(40):
        try:
            run_block(0, 1, 6, 3, 2, True, seed, turns_kept=False)
        except AssertionError:
            caught += 1
    assert caught > 0
