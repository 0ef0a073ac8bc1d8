// A Linear layer's forward as a rig holds it: C = A @ B + bias[n] (and + residual[m][n]), fp32, row-major, with the
// bias and the residual the rig's own tensors, given to check_kernel by name (tensors=).
//
// One thread per element of C: it shows what the check catches, not speed. C++ linkage (no extern "C"): the
// image's symbol carries the parameter types the check reads each tensor's element type against.

__global__ void gemm_bias(const float* A, const float* B, const float* bias, float* C, int M, int N, int K)
{
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || column >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += A[static_cast<long long>(row) * K + k] * B[static_cast<long long>(k) * N + column];
    C[static_cast<long long>(row) * N + column] = sum + bias[column];
}

__global__ void gemm_bias_residual(const float* A, const float* B, const float* bias, const float* residual,
                                   float* C, int M, int N, int K)
{
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || column >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += A[static_cast<long long>(row) * K + k] * B[static_cast<long long>(k) * N + column];
    const long long at = static_cast<long long>(row) * N + column;
    C[at] = sum + bias[column] + residual[at];
}

// The bias read through an index: bias[columns[n]] (a gather), the indices int32.
__global__ void gemm_gathered_bias(const float* A, const float* B, const float* bias, const int* columns, float* C,
                                   int M, int N, int K)
{
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || column >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += A[static_cast<long long>(row) * K + k] * B[static_cast<long long>(k) * N + column];
    C[static_cast<long long>(row) * N + column] = sum + bias[columns[column]];
}
