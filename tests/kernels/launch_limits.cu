// C = A @ B (fp32, row-major), one element a thread, in three forms whose compiled images carry a launch limit of
// their own: a __launch_bounds__ of 64 threads, a stack frame larger than a thread's local memory, and a
// __cluster_dims__ of 16 blocks (over the portable 8).
__device__ float element(const float* A, const float* B, int N, int K, long long row, long long col)
{
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) {
        sum += A[row * K + k] * B[static_cast<long long>(k) * N + col];
    }
    return sum;
}

extern "C" __global__ void __launch_bounds__(64) bounded(const float* A, const float* B, float* C, int M, int N, int K)
{
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < static_cast<long long>(M) * N) {
        C[i] = element(A, B, N, K, i / N, i % N);
    }
}

extern "C" __global__ void deep_stack(const float* A, const float* B, float* C, int M, int N, int K)
{
    volatile float scratch[150000];     // 600,000 bytes a thread: more local memory than a thread may have
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    scratch[i % 150000] = 1.0f;
    if (i < static_cast<long long>(M) * N) {
        C[i] = element(A, B, N, K, i / N, i % N) * scratch[(i + 1) % 150000];
    }
}

extern "C" __global__ void __cluster_dims__(16, 1, 1) wide_cluster(const float* A, const float* B, float* C, int M,
                                                                    int N, int K)
{
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < static_cast<long long>(M) * N) {
        C[i] = element(A, B, N, K, i / N, i % N);
    }
}
