// A split-K BF16 GEMM whose two halves of K meet across a grid-wide barrier (cooperative_groups' grid.sync()).
//
// Split-K and stream-K kernels from outside often end this way: every block writes its partial sums to a
// workspace, the whole grid waits, and then the blocks add the parts of each tile up. Such a barrier exists only
// in a cooperative launch: the driver makes every block of the grid resident at once and hands the kernel the
// workspace the barrier counts in. Launched any other way, cooperative_groups traps at the barrier. So the spec
// says `cooperative: true` and caps the grid at the blocks that fit at once (max_active_clusters); the plan refuses
// the kernel without it, having read the barrier in its PTX.
//
// Work units: tile t of C (64 x 64, args_tile.cuh's) times the first half of K is unit 2 t, times the second half
// unit 2 t + 1; a block takes units blockIdx.x, blockIdx.x + gridDim.x, ... and writes each unit's 64 x 64 sums to
// its slab of `partial`. After the barrier a block takes tiles the same way and writes C = slab 2 t + slab 2 t + 1:
// the two halves of a tile are mostly summed by blocks other than those that computed them.
//
// C (row-major FP32, M x N) = A (row-major BF16, M x K) @ B (row-major BF16, K x N).
// Launch: block 256, any grid that fits at once; partial holds 2 * ceil(M / 64) * ceil(N / 64) * 64 * 64 floats.

#include <cooperative_groups.h>

#include "args_tile.cuh"

__global__ void __launch_bounds__(args::THREADS)
args_grid_sync_split_k(const dg::bfloat16_t* A, const dg::bfloat16_t* B, float* C, int M, int N, int K,
                       float* partial)
{
    constexpr int SLAB = args::TILE_M * args::TILE_N;
    const int tiles_n = (N + args::TILE_N - 1) / args::TILE_N;
    const int tiles = tiles_n * ((M + args::TILE_M - 1) / args::TILE_M);
    const int half = (K + 1) / 2;
    // A thread's element (i, j) of a slab, in the tile's own row-major order.
    const int slab_row = threadIdx.x / 16, slab_col = threadIdx.x % 16;

    for (int unit = blockIdx.x; unit < 2 * tiles; unit += gridDim.x) {
        const int tile = unit / 2;
        const int k_begin = (unit % 2) ? half : 0;
        const int k_count = (unit % 2) ? K - half : half;
        const int row0 = (tile / tiles_n) * args::TILE_M;
        const int col0 = (tile % tiles_n) * args::TILE_N;
        // The K range as an operand of its own: A's columns and B's rows from k_begin on.
        const args::Strided a{A + k_begin, K, 1};
        const args::Strided b{B + static_cast<long long>(k_begin) * N, N, 1};
        float sums[4][4];
        args::tile_product(a, b, M, N, k_count, row0, col0, sums);
        float* slab = partial + static_cast<long long>(unit) * SLAB;
        for (int i = 0; i < 4; ++i) {
            for (int j = 0; j < 4; ++j) {
                slab[(slab_row + 16 * i) * args::TILE_N + slab_col + 16 * j] = sums[i][j];
            }
        }
    }

    cooperative_groups::this_grid().sync();   // every slab written, and visible to every block

    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int row0 = (tile / tiles_n) * args::TILE_M;
        const int col0 = (tile % tiles_n) * args::TILE_N;
        const float* first = partial + static_cast<long long>(2 * tile) * SLAB;
        const float* second = first + SLAB;
        for (int i = 0; i < 4; ++i) {
            for (int j = 0; j < 4; ++j) {
                const int row = args::tile_row(row0, i), col = args::tile_col(col0, j);
                const int at = (slab_row + 16 * i) * args::TILE_N + slab_col + 16 * j;
                if (row < M && col < N) {
                    C[static_cast<long long>(row) * N + col] = first[at] + second[at];
                }
            }
        }
    }
}
