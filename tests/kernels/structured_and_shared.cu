// Kernels whose answer is right only for the inputs their problem promises: a product of lower-triangular matrices
// and a segment GEMM whose segments share weight matrices.
//
// - lower_triangular_product: C = A @ B for lower-triangular A and B (M = N = K), as KernelBench's triangular
//   problems state them: element (r, c) sums A[r, k] * B[k, c] over c <= k <= r only, the other terms being zero,
//   and C above the diagonal is written 0. Given full matrices it is wrong everywhere but the last row and column.
// - segment_shared_weights: flashinfer's segment GEMM: segment s takes the rows offsets[s] to offsets[s + 1] - 1
//   of A and C and the matrix weight_index[s] of B ([weights, K, N]). IGNORE_INDEX reads matrix s % weights
//   instead: the bug of a kernel that forgets the index.
//
// One thread per element of C: they show what the check catches, not speed.
#include "../../kernels/types/element_types.cuh"

using dg::bfloat16_t;

__global__ void lower_triangular_product(const bfloat16_t* A, const bfloat16_t* B, float* C, int M, int N, int K)
{
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || column >= N)
        return;
    float sum = 0.0f;
    for (int k = column; k <= row && k < K; ++k)
        sum += dg::to_float(A[static_cast<long long>(row) * K + k]) * dg::to_float(B[static_cast<long long>(k) * N
                                                                                    + column]);
    C[static_cast<long long>(row) * N + column] = sum;
}

template <bool IGNORE_INDEX>
__global__ void segment_shared_weights(const bfloat16_t* A, const bfloat16_t* B, bfloat16_t* C,
                                       const long long* offsets, const long long* weight_index, int segments,
                                       int weights, int M, int N, int K)
{
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || column >= N)
        return;
    int segment = 0;
    while (segment < segments && row >= offsets[segment + 1])
        ++segment;
    if (segment == segments || row < offsets[0])
        return;                    // a row outside every segment
    const long long weight = IGNORE_INDEX ? segment % weights : weight_index[segment];
    const bfloat16_t* b = B + weight * K * N;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += dg::to_float(A[static_cast<long long>(row) * K + k]) * dg::to_float(b[static_cast<long long>(k) * N
                                                                                    + column]);
    C[static_cast<long long>(row) * N + column] = dg::from_float<bfloat16_t>(sum);
}
