// A batched GEMM of cuBLAS's gemmBatched kind: each matrix of the batch is reached through an array of
// pointers (const float* const A[]), not a base address and a stride. C[b] = alpha * A[b] @ B[b] + beta * C[b],
// one 16 x 16 tile per block and one matrix per grid z. A pointer that does not lead to its own matrix of the
// batch (every entry the first matrix, or the arrays in another order) computes another product, and fails.

constexpr int TILE = 16;

__global__ void __launch_bounds__(TILE * TILE)
args_pointer_arrays(const float* const* A, const float* const* B, float* const* C, int M, int N, int K,
                    float alpha, float beta)
{
    const float* a = A[blockIdx.z];
    const float* b = B[blockIdx.z];
    float* c = C[blockIdx.z];
    const int row = blockIdx.y * TILE + threadIdx.y, column = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || column >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += a[static_cast<long long>(row) * K + k] * b[static_cast<long long>(k) * N + column];
    const long long at = static_cast<long long>(row) * N + column;
    c[at] = alpha * sum + beta * c[at];
}
