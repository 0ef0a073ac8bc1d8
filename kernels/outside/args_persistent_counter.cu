// A persistent BF16 GEMM whose blocks take tiles from an atomic counter in a device workspace.
//
// Tile schedulers of persistent kernels (CUTLASS's stream-K and tile schedulers, many hand-written
// Hopper GEMMs) keep their state in a workspace the host zeroes before every launch. This kernel is
// the smallest such scheduler: a fixed grid of blocks (a couple per SM), each taking the next tile
// with atomicAdd on tile_counter[0] until none is left, and looking the tile up in tile_order, a
// host-filled table (0, 1, 2, ...: the spec fills it with `iota`) that a real scheduler would use to
// walk tiles in an L2-friendly order. A counter left over from the previous launch would make every
// block stop at once and C go unwritten: so the harness must reset it before every sample, outside
// the timed region. The tile itself is args_tile.cuh's.
//
// C (row-major FP32, M x N) = A (row-major BF16, M x K) @ B (row-major BF16, K x N).
// Launch: block 256, any grid; tile_counter holds one int (zero), tile_order ceil(M/64) * ceil(N/64).

#include "args_tile.cuh"

__global__ void __launch_bounds__(args::THREADS)
args_persistent_counter(const dg::bfloat16_t* A, const dg::bfloat16_t* B, float* C, int M, int N, int K,
                        int* tile_counter, const int* tile_order)
{
    __shared__ int next_tile;
    const int tiles_n = (N + args::TILE_N - 1) / args::TILE_N;
    const int tiles = tiles_n * ((M + args::TILE_M - 1) / args::TILE_M);
    const args::Strided a{A, K, 1};
    const args::Strided b{B, N, 1};
    while (true) {
        if (threadIdx.x == 0) {
            next_tile = atomicAdd(tile_counter, 1);
        }
        __syncthreads();
        const int taken = next_tile;
        __syncthreads();   // every thread has read next_tile before thread 0 writes the next one
        if (taken >= tiles) {
            break;
        }
        const int tile = tile_order[taken];
        const int row0 = (tile / tiles_n) * args::TILE_M;
        const int col0 = (tile % tiles_n) * args::TILE_N;
        float sums[4][4];
        args::tile_product(a, b, M, N, K, row0, col0, sums);
        for (int i = 0; i < 4; ++i) {
            for (int j = 0; j < 4; ++j) {
                const int row = args::tile_row(row0, i), col = args::tile_col(col0, j);
                if (row < M && col < N) {
                    C[(long long)row * N + col] = sums[i][j];
                }
            }
        }
    }
}
