// Typed shared-memory tiles: v2's tiling for any element types and layouts, strided batches.
//
// A TILE x TILE block computes a TILE x TILE tile of C[b] (blockIdx.z = b),
// walking K in steps of TILE. Each step stages one tile of A and one of B in
// shared memory, already widened to float: the multiply-adds then read
// floats whatever the storage type, and each global element is converted
// once per block instead of once per use.
//
// Loads stay coalesced in both layouts: for a row-major operand consecutive
// threads (threadIdx.x) read along the row; for a column-major one they read
// down the column, and the element is stored transposed in shared memory.
// The tiles have one column of padding so that the transposed stores of a
// warp fall into different banks. Elements past the edge of A or B are
// stored as zeros, so partial tiles of M, N and K add nothing.
//
// Signature and batch convention: see naive_typed.cu. C is row-major.
// Launch: block (TILE, TILE), grid (ceil(N / TILE), ceil(M / TILE), batch).

#include "element_types.cuh"

template <typename Layout, typename T>
__device__ inline float load_or_zero(const T* matrix, int i, int j, int rows, int cols, int ld)
{
    return (i < rows && j < cols) ? dg::to_float(matrix[Layout::at(i, j, ld)]) : 0.0f;
}

template <typename TA, typename TB, typename TC, typename Acc, typename LayoutA, typename LayoutB, int TILE>
__global__ void gemm_smem_typed(const TA* A, const TB* B, TC* C, int M, int N, int K, int lda, int ldb, int ldc,
                                long long strideA, long long strideB, long long strideC, float alpha, float beta)
{
    __shared__ float a_tile[TILE][TILE + 1];   // a_tile[m][k]
    __shared__ float b_tile[TILE][TILE + 1];   // b_tile[k][n]

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE;
    const int col0 = blockIdx.x * TILE;
    const long long batch = blockIdx.z;
    A += batch * strideA;
    B += batch * strideB;
    C += batch * strideC;

    Acc dot = 0;
    const int steps = (K + TILE - 1) / TILE;
    for (int step = 0; step < steps; ++step) {
        const int k0 = step * TILE;
        if constexpr (LayoutA::row_major) {
            a_tile[ty][tx] = load_or_zero<LayoutA>(A, row0 + ty, k0 + tx, M, K, lda);
        } else {
            a_tile[tx][ty] = load_or_zero<LayoutA>(A, row0 + tx, k0 + ty, M, K, lda);
        }
        if constexpr (LayoutB::row_major) {
            b_tile[ty][tx] = load_or_zero<LayoutB>(B, k0 + ty, col0 + tx, K, N, ldb);
        } else {
            b_tile[tx][ty] = load_or_zero<LayoutB>(B, k0 + tx, col0 + ty, K, N, ldb);
        }
        __syncthreads();

        for (int k = 0; k < TILE; ++k) {
            dot += (Acc)a_tile[ty][k] * (Acc)b_tile[k][tx];
        }
        __syncthreads();  // the next step overwrites the tiles others may still be reading
    }

    const int row = row0 + ty;
    const int col = col0 + tx;
    if (row < M && col < N) {
        TC* out = C + (long long)row * ldc + col;
        const float previous = beta != 0.0f ? beta * dg::to_float(*out) : 0.0f;
        *out = dg::from_float<TC>(alpha * (float)dot + previous);
    }
}
