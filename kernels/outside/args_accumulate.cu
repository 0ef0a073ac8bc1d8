// A BF16 GEMM with no alpha and no beta that adds its product to C: C += A @ B.
//
// Split-K passes, residual updates and many hand-written kernels take no scalars at all: they
// overwrite C or accumulate into it. This one accumulates, so the harness must start C from known
// values and check C0 + A @ B (the spec says `epilogue: accumulate`). The tile is args_tile.cuh's.
//
// C (row-major FP32, M x N) += A (row-major BF16, M x K) @ B (row-major BF16, K x N).
// Launch: block 256, grid (ceil(N / 64), ceil(M / 64)).

#include "args_tile.cuh"

__global__ void __launch_bounds__(args::THREADS)
args_accumulate(const dg::bfloat16_t* A, const dg::bfloat16_t* B, float* C, int M, int N, int K)
{
    const int row0 = blockIdx.y * args::TILE_M;
    const int col0 = blockIdx.x * args::TILE_N;
    float sums[4][4];
    args::tile_product(args::Strided{A, K, 1}, args::Strided{B, N, 1}, M, N, K, row0, col0, sums);
    for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) {
            const int row = args::tile_row(row0, i), col = args::tile_col(col0, j);
            if (row < M && col < N) {
                C[(long long)row * N + col] += sums[i][j];
            }
        }
    }
}
