"""A host model of v13's split of K (kernels/13_tma_ws_split.cu): the ranks' K slices, the accumulator fragment
each consumer thread holds, the partials' layout in shared memory and each rank's share of the tile, written
as the kernel writes them. Summed on integers (exact in float64), the tile must come out as A @ B, every
element stored exactly once, and no rank may read a partial its peer did not write."""

import numpy as np
import pytest

WIDTHS = (256, 128, 64)     # the tile's columns (BN): BN / 8 column groups of 8 each, acc[4 j + e]


def k_slice(ktiles: int, rank: int, splits: int) -> tuple[int, int]:
    """K-tiles [begin, begin + count) of rank `rank`: kt_begin and kt_count in the kernel."""
    begin = ktiles * rank // splits
    return begin, ktiles * (rank + 1) // splits - begin


def fragment(thread: int) -> tuple[int, int, int, int]:
    """(consumer, warp, g, t) of consumer thread `thread` (tid - 128)."""
    consumer, within = divmod(thread, 128)
    warp, lane = divmod(within, 32)
    return consumer, warp, lane // 4, lane % 4


def element(thread: int, j: int, e: int) -> tuple[int, int]:
    """Row and column in the tile of acc[4 j + e] of consumer thread `thread`."""
    consumer, warp, g, t = fragment(thread)
    return 64 * consumer + 16 * warp + g + 8 * (e // 2), 8 * j + 2 * t + e % 2


def rank_partials(A: np.ndarray, B: np.ndarray, rows: int, columns: int, splits: int, bk: int) -> list[np.ndarray]:
    """Each rank's partial sum of the tile (rows 0 .. rows of A, columns 0 .. columns of B) over its K slice, with A
    and B zero-filled past the matrix and K padded to whole K-tiles, as TMA's fill leaves them."""
    M, K = A.shape
    N = B.shape[1]
    ktiles = -(-K // bk)
    padded_a = np.zeros((rows, ktiles * bk))
    padded_a[:min(M, rows), :K] = A[:rows]
    padded_b = np.zeros((ktiles * bk, columns))
    padded_b[:K, :min(N, columns)] = B[:, :columns]
    partial = []
    for rank in range(splits):
        begin, count = k_slice(ktiles, rank, splits)
        k = slice(begin * bk, (begin + count) * bk)
        partial.append(padded_a[:, k] @ padded_b[k, :])
    return partial


def model_tile(A: np.ndarray, B: np.ndarray, cwg: int, splits: int, bk: int, bn: int) -> tuple[np.ndarray, np.ndarray]:
    """One tile (rows 0 .. 64 cwg, columns 0 .. bn) computed as the kernel does: C and how often each was stored."""
    groups = bn // 8
    threads, share = 128 * cwg, groups // splits
    tile_rows = 64 * cwg
    partial = rank_partials(A, B, tile_rows, bn, splits, bk)
    acc = np.zeros((splits, threads, 4 * groups))
    for thread in range(threads):
        for j in range(groups):
            for e in range(4):
                row, column = element(thread, j, e)
                acc[:, thread, 4 * j + e] = [p[row, column] for p in partial]
    # Each rank's shared memory after (a): float4 j * threads + thread, for every j outside its own share.
    smem = np.full((splits, groups * threads, 4), np.nan)
    for rank in range(splits):
        for j in range(groups):
            if not share * rank <= j < share * (rank + 1):
                smem[rank, j * threads:(j + 1) * threads] = acc[rank, :, 4 * j:4 * j + 4]
    C = np.full((tile_rows, bn), np.nan)
    stores = np.zeros((tile_rows, bn), dtype=int)
    for rank in range(splits):          # after (b): rank adds its peers' float4 of its own share and stores it
        for thread in range(threads):
            for j in range(share * rank, share * (rank + 1)):
                total = acc[rank, thread, 4 * j:4 * j + 4].copy()
                for other in range(1, splits):
                    total += smem[(rank + other) % splits, j * threads + thread]
                for e in range(4):
                    row, column = element(thread, j, e)
                    C[row, column] = total[e]
                    stores[row, column] += 1
    return C, stores


@pytest.mark.parametrize("cwg, splits, K, bk", [(1, 2, 776, 64), (2, 8, 200, 64), (2, 4, 208, 128), (1, 8, 32, 32),
                                                (2, 1, 100, 32)])
@pytest.mark.parametrize("bn", WIDTHS)
def test_the_split_tile_is_a_times_b_with_every_element_stored_once(cwg, splits, K, bk, bn):
    rng = np.random.default_rng(splits * 1000 + K)
    M, N = 64 * cwg - 3, bn - 8         # the last rows and columns past the matrix: zero fill, as TMA's
    A = rng.integers(-4, 5, size=(M, K)).astype(np.float64)
    B = rng.integers(-4, 5, size=(K, N)).astype(np.float64)
    C, stores = model_tile(A, B, cwg, splits, bk, bn)
    assert (stores == 1).all()                       # every element of the tile by exactly one rank
    assert not np.isnan(C).any()                     # no rank read a partial that was never written
    assert np.array_equal(C[:M, :N], A @ B)


@pytest.mark.parametrize("ktiles", [1, 2, 3, 4, 7, 13, 64])
@pytest.mark.parametrize("splits", [1, 2, 4, 8])
def test_the_ranks_k_slices_cover_every_k_tile_once(ktiles, splits):
    covered = []
    for rank in range(splits):
        begin, count = k_slice(ktiles, rank, splits)
        assert count >= 0 and count in (ktiles // splits, -(-ktiles // splits))   # balanced to one K-tile
        covered += range(begin, begin + count)
    assert covered == list(range(ktiles))


@pytest.mark.parametrize("cwg, stages", [(1, 2), (1, 5), (2, 3), (2, 4)])
@pytest.mark.parametrize("bn", WIDTHS)
def test_the_partials_fit_in_the_ring_they_reuse(cwg, stages, bn):
    threads = 128 * cwg
    last_byte = 16 * ((bn // 8 - 1) * threads + threads - 1) + 16
    ring = stages * (64 * cwg + bn) * 128
    # The kernel's static_assert (16 GROUPS THREADS), and the spec's require (256 BN CWG)
    assert last_byte == 16 * (bn // 8) * threads == 256 * bn * cwg <= ring
