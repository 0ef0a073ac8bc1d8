"""A host model of v14 (kernels/14_tma_ws_swap.cu): the swapped product's accumulators (C^T = B^T A^T, the wgmma's
rows along N, its columns along M) mapped back to C, and the split of K whose partial sums are shared out by
consumer thread, written as the kernel writes them. Summed on integers (exact in float64), the tile must come out
as A @ B, every element stored exactly once, and no rank may read a partial its peer did not write."""

import numpy as np
import pytest

from test_v13_split_model import fragment, rank_partials


def element(thread: int, i: int) -> tuple[int, int]:
    """Row (m) and column (n) in the tile of C of acc[i] of consumer thread `thread`: the m64nMT fragment's row
    16 warp + g + 8 (e / 2) is a column of C, its column 8 j + 2 t + e % 2 a row (i = 4 j + e)."""
    consumer, warp, g, t = fragment(thread)
    j, e = divmod(i, 4)
    return 8 * j + 2 * t + e % 2, 64 * consumer + 16 * warp + g + 8 * (e // 2)


def model_tile(A: np.ndarray, B: np.ndarray, cwg: int, splits: int, bk: int, mt: int):
    """One tile (rows 0 .. mt, columns 0 .. 64 cwg of C) computed as the kernel does: C and how often each was
    stored."""
    threads, accumulators = 128 * cwg, mt // 2
    share = threads // splits
    columns = 64 * cwg
    partial = rank_partials(A, B, mt, columns, splits, bk)
    acc = np.zeros((splits, threads, accumulators))
    for thread in range(threads):
        for i in range(accumulators):
            row, column = element(thread, i)
            acc[:, thread, i] = [p[row, column] for p in partial]
    # Each rank's shared memory after (a): float4 j * threads + thread of every thread it does not own.
    smem = np.full((splits, (mt // 8) * threads, 4), np.nan)
    for rank in range(splits):
        for thread in range(threads):
            if thread // share != rank:
                for j in range(mt // 8):
                    smem[rank, j * threads + thread] = acc[rank, thread, 4 * j:4 * j + 4]
    C = np.full((mt, columns), np.nan)
    stores = np.zeros((mt, columns), dtype=int)
    for rank in range(splits):          # after (b): each rank sums and stores the elements of the threads it owns
        for thread in range(rank * share, (rank + 1) * share):
            total = acc[rank, thread].copy()
            for other in range(1, splits):
                peer = (rank + other) % splits
                for j in range(mt // 8):
                    total[4 * j:4 * j + 4] += smem[peer, j * threads + thread]
            for i in range(accumulators):
                row, column = element(thread, i)
                C[row, column] = total[i]
                stores[row, column] += 1
    return C, stores


@pytest.mark.parametrize("cwg, splits, K, bk, mt", [
    *[(*form, mt) for form in [(1, 1, 784, 64), (1, 4, 208, 64), (2, 2, 96, 128), (2, 8, 32, 32), (1, 2, 100, 32)]
      for mt in (8, 16, 32, 64)],
    # the wide tiles: up to four consumer warpgroups, the wgmma's N up to 256
    (2, 1, 200, 64, 256), (2, 2, 136, 64, 160), (3, 1, 72, 32, 192), (3, 2, 96, 64, 96), (4, 2, 160, 64, 128),
    # heights of 112 and 136 rows: 14 and 17 float4 groups of partials a thread, an odd count among them
    (2, 2, 200, 64, 136), (3, 2, 72, 32, 112)])
def test_the_swapped_tile_is_a_times_b_with_every_element_stored_once(cwg, splits, K, bk, mt):
    rng = np.random.default_rng(splits * 1000 + K + mt)
    M, N = max(1, mt - 3), 64 * cwg - 8      # the last rows and columns past the matrix: zero fill, as TMA's
    A = rng.integers(-4, 5, size=(M, K)).astype(np.float64)
    B = rng.integers(-4, 5, size=(K, N)).astype(np.float64)
    C, stores = model_tile(A, B, cwg, splits, bk, mt)
    assert (stores == 1).all()                       # every element of the tile by exactly one rank
    assert not np.isnan(C).any()                     # no rank read a partial that was never written
    assert np.array_equal(C[:M, :N], A @ B)


@pytest.mark.parametrize("cwg, stages, mt", [(1, 2, 8), (1, 16, 8), (2, 2, 64), (2, 12, 16)])
def test_the_partials_fit_in_the_ring_they_reuse(cwg, stages, mt):
    threads = 128 * cwg
    last_byte = 16 * ((mt // 8 - 1) * threads + threads - 1) + 16
    assert last_byte == 16 * (mt // 8) * threads <= stages * (64 * cwg + mt) * 128   # the kernel's static_assert
