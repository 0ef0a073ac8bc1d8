// One 64 x 64 tile of C = A @ B for the args_* kernels: BF16 operands of any strides, FP32 sums.
//
// The kernels beside this header show how a kernel's own arguments reach it (a tile counter in a
// device workspace, a CUTLASS-style Params struct with alpha and beta by pointer, an epilogue that
// accumulates into C); the arithmetic is the same plain shared-memory tiling for all three, written
// once here. 256 threads (16 x 16) compute a 64 x 64 tile, each thread a 4 x 4 set of elements
// spaced 16 apart (rows ty + 16 i, columns tx + 16 j), walking K in steps of 16. Each step stages a
// 64 x 16 tile of A and a 16 x 64 tile of B in shared memory, widened to float; elements past the
// edges of A and B are stored as zeros, so partial tiles add nothing. Element (i, j) of an operand
// is at i * row_stride + j * col_stride, so one function serves every layout a stride can say.

#pragma once

#include "../types/element_types.cuh"

namespace args {

constexpr int TILE_M = 64;
constexpr int TILE_N = 64;
constexpr int TILE_K = 16;
constexpr int THREADS = 256;

struct Strided {
    const dg::bfloat16_t* data;
    long long row_stride;
    long long col_stride;

    __device__ float load_or_zero(int i, int j, int rows, int cols) const
    {
        return (i < rows && j < cols) ? dg::to_float(data[i * row_stride + j * col_stride]) : 0.0f;
    }
};

// The 4 x 4 sums of this thread for the tile whose first element is (row0, col0) of C.
// Every thread of the block must call it (it synchronises the block).
__device__ inline void tile_product(Strided a, Strided b, int M, int N, int K, int row0, int col0, float sums[4][4])
{
    __shared__ float a_tile[TILE_M][TILE_K + 1];   // a_tile[m][k], padded: two rows of a warp, two banks
    __shared__ float b_tile[TILE_K][TILE_N];       // b_tile[k][n]

    const int tid = threadIdx.x;
    const int tx = tid % 16;
    const int ty = tid / 16;
    for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) {
            sums[i][j] = 0.0f;
        }
    }
    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        for (int r = 0; r < 4; ++r) {
            const int e = tid + THREADS * r;          // 1024 elements of each tile, 4 per thread
            const int am = e / TILE_K, ak = e % TILE_K;
            a_tile[am][ak] = a.load_or_zero(row0 + am, k0 + ak, M, K);
            const int bk = e / TILE_N, bn = e % TILE_N;
            b_tile[bk][bn] = b.load_or_zero(k0 + bk, col0 + bn, K, N);
        }
        __syncthreads();
        for (int k = 0; k < TILE_K; ++k) {
            float a_values[4], b_values[4];
            for (int i = 0; i < 4; ++i) {
                a_values[i] = a_tile[ty + 16 * i][k];
                b_values[i] = b_tile[k][tx + 16 * i];
            }
            for (int i = 0; i < 4; ++i) {
                for (int j = 0; j < 4; ++j) {
                    sums[i][j] += a_values[i] * b_values[j];
                }
            }
        }
        __syncthreads();   // the next step overwrites the tiles others may still be reading
    }
}

// Where this thread's element (i, j) of the tile at (row0, col0) lies in C.
__device__ inline int tile_row(int row0, int i) { return row0 + threadIdx.x / 16 + 16 * i; }
__device__ inline int tile_col(int col0, int j) { return col0 + threadIdx.x % 16 + 16 * j; }

}  // namespace args
