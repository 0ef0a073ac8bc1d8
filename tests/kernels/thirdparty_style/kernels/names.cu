// Kernels named the ways libraries name them: inside namespaces, as templates with bool, enum and
// defaulted parameters, as overloads of one name for two element types, with const __restrict__
// pointers and with size_t / int64_t sizes. Each computes C = A @ B (row-major A and C; B in ORDER),
// one thread per element, so that a GPU run can check them.
#include <cuda_fp16.h>
#include "gemm_common.h"

namespace tp { namespace detail {
// CHECKED: bounds-checked; without it the kernel needs M and N to be whole tiles (the spec's require:).
template <int TILE, bool CHECKED, Order ORDER = Order::Row, typename T = float>
__global__ void __launch_bounds__(TILE * TILE) gemm(int M, int N, int K, const T *__restrict__ A,
                                                   const T *__restrict__ B, T *__restrict__ C) {
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    if (CHECKED && (row >= M || col >= N)) return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum += float(A[row * K + k]) * float(B[at<ORDER>(k, col, ORDER == Order::Row ? N : K)]);
    C[row * N + col] = T(sum);
}
} }  // namespace tp::detail

__global__ void gemm_overloaded(const float *A, const float *B, float *C, int M, int N, int K) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}

__global__ void gemm_overloaded(const __half *A, const __half *B, __half *C, int M, int N, int K) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum += __half2float(A[row * K + k]) * __half2float(B[k * N + col]);
    C[row * N + col] = __float2half(sum);
}

__global__ void gemm_wide_sizes(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
                                size_t M, size_t N, int64_t K, float alpha) {
    const size_t row = blockIdx.y * (size_t)blockDim.y + threadIdx.y;
    const size_t col = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float sum = 0.0f;
    for (int64_t k = 0; k < K; ++k) sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = alpha * sum;
}
