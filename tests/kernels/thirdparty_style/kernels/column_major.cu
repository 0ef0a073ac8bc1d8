// cuBLAS's convention: every matrix column-major with its leading dimension, C = alpha * A @ B + beta * C,
// the scalars among the pointers, and the tile's shared memory given at launch (extern __shared__).
template <int TILE>
__global__ void sgemm_column_major(int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                                   int ldb, float beta, float *C, int ldc) {
    extern __shared__ float tiles[];          // A's tile, then B's: 2 * TILE * TILE floats
    float *a_tile = tiles, *b_tile = tiles + TILE * TILE;
    const int row = blockIdx.x * TILE + threadIdx.x;    // x runs down a column: coalesced in column-major
    const int col = blockIdx.y * TILE + threadIdx.y;
    float sum = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        a_tile[threadIdx.y * TILE + threadIdx.x] =
            (row < M && k0 + threadIdx.y < K) ? A[(k0 + threadIdx.y) * lda + row] : 0.0f;
        b_tile[threadIdx.y * TILE + threadIdx.x] =
            (k0 + threadIdx.x < K && col < N) ? B[col * ldb + k0 + threadIdx.x] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) sum += a_tile[k * TILE + threadIdx.x] * b_tile[threadIdx.y * TILE + k];
        __syncthreads();
    }
    if (row < M && col < N) C[col * ldc + row] = alpha * sum + beta * C[col * ldc + row];
}
