// A GEMM whose epilogue reads its factors from __constant__ memory that host code would fill with
// cudaMemcpyToSymbol before the launch: a scale in a namespace and one factor per column of a 16-column
// tile. C = scale * column_scale[column % 16] * (A @ B), one 16 x 16 tile per block. With every factor 1.0
// C is A @ B only if both variables were written: left unwritten they read as zero, and C as zeros.

constexpr int TILE = 16;

namespace epilogue {
__constant__ float scale;
}
__constant__ float column_scale[TILE];

__global__ void __launch_bounds__(TILE * TILE)
args_constant_scale(const float* A, const float* B, float* C, int M, int N, int K)
{
    const int row = blockIdx.y * TILE + threadIdx.y, column = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || column >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += A[static_cast<long long>(row) * K + k] * B[static_cast<long long>(k) * N + column];
    C[static_cast<long long>(row) * N + column] = epilogue::scale * column_scale[threadIdx.x] * sum;
}
