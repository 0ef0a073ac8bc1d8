// A deliberately wrong bf16 kernel: the shared-memory tiled GEMM of
// kernels/types/smem_typed.cu with the step count rounded down, so the last
// partial tile of K is never added. Exact when TILE divides K; when it does
// not, every element of C misses its last K % TILE products (at K = 777 and
// TILE = 16, 9 of 777 terms: about 11 % relative error). The typed tests
// check that the bf16 tolerance fails it and that NVRTC builds it like the
// correct one.

#include "../../kernels/types/element_types.cuh"

template <int TILE>
__global__ void bf16_gemm_skips_k_tail(const dg::bfloat16_t* A, const dg::bfloat16_t* B, dg::bfloat16_t* C,
                                       int M, int N, int K, int lda, int ldb, int ldc, long long strideA,
                                       long long strideB, long long strideC, float alpha, float beta)
{
    __shared__ float a_tile[TILE][TILE + 1];
    __shared__ float b_tile[TILE][TILE + 1];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    const long long batch = blockIdx.z;
    A += batch * strideA;
    B += batch * strideB;
    C += batch * strideC;

    float dot = 0.0f;
    const int steps = K / TILE;   // the bug: (K + TILE - 1) / TILE
    for (int step = 0; step < steps; ++step) {
        const int a_col = step * TILE + tx;
        const int b_row = step * TILE + ty;
        a_tile[ty][tx] = row < M ? dg::to_float(A[(long long)row * lda + a_col]) : 0.0f;
        b_tile[ty][tx] = col < N ? dg::to_float(B[(long long)b_row * ldb + col]) : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) {
            dot += a_tile[ty][k] * b_tile[k][tx];
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        dg::bfloat16_t* out = C + (long long)row * ldc + col;
        const float previous = beta != 0.0f ? beta * dg::to_float(*out) : 0.0f;
        *out = dg::from_float<dg::bfloat16_t>(alpha * dot + previous);
    }
}
