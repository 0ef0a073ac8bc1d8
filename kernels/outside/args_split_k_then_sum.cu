// A GEMM of two launches, as split-K kernels without atomics are written: the first computes SPLITS partial
// products over slices of K into a workspace (grid z numbers the slices), the second sums them into C with
// alpha and beta. C = alpha * A @ B + beta * C only if both ran, in order, on the same workspace.

constexpr int TILE = 16;

template <int SPLITS>
__global__ void __launch_bounds__(TILE * TILE)
split_k_partials(const float* A, const float* B, float* partials, int M, int N, int K)
{
    const int row = blockIdx.y * TILE + threadIdx.y, column = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || column >= N)
        return;
    const int slice = (K + SPLITS - 1) / SPLITS;
    const int first = blockIdx.z * slice, last = min(K, first + slice);
    float sum = 0.0f;
    for (int k = first; k < last; ++k)
        sum += A[static_cast<long long>(row) * K + k] * B[static_cast<long long>(k) * N + column];
    partials[(static_cast<long long>(blockIdx.z) * M + row) * N + column] = sum;
}

template <int SPLITS>
__global__ void sum_partials(const float* partials, float* C, int M, int N, float alpha, float beta)
{
    const long long at = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    const long long count = static_cast<long long>(M) * N;
    if (at >= count)
        return;
    float sum = 0.0f;
    for (int split = 0; split < SPLITS; ++split)
        sum += partials[split * count + at];
    C[at] = alpha * sum + beta * C[at];
}
