// A strided batched FP32 GEMM, row-major, as cuBLAS's strided batched GEMM takes its arguments: matrix b of an
// operand starts stride * b elements after the first, its rows ld apart. The strides may be smaller than one matrix:
// Megatron's baddbmm multiplies the heads of a [seq, batch * heads, dim] tensor in place, head h's matrix starting
// at h * dim with its rows batch * heads * dim apart, so the heads' rows interleave.
//
// - strided_batched: reads each matrix where its stride puts it: right for any layout whose matrices of C are apart.
// - tight_rows: reads A's rows K apart, a kernel that ignores lda: right where A's rows are tight, wrong on an
//   interleaved A, whose rows hold every matrix's (and never past A's buffer, so it fails its check, not its launch).
//
// One thread per element of C: they show what the check catches, not speed.

__device__ void multiply_one(int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
                             float beta, float* C, int ldc)
{
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || column >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += A[static_cast<long long>(row) * lda + k] * B[static_cast<long long>(k) * ldb + column];
    float* out = C + static_cast<long long>(row) * ldc + column;
    *out = alpha * sum + beta * *out;
}

extern "C" __global__ void strided_batched(int M, int N, int K, float alpha, const float* A, int lda, long long strideA,
                                           const float* B, int ldb, long long strideB, float beta, float* C, int ldc,
                                           long long strideC)
{
    const long long batch = blockIdx.z;
    multiply_one(M, N, K, alpha, A + batch * strideA, lda, B + batch * strideB, ldb, beta, C + batch * strideC, ldc);
}

extern "C" __global__ void tight_rows(int M, int N, int K, float alpha, const float* A, int lda, long long strideA,
                                      const float* B, int ldb, long long strideB, float beta, float* C, int ldc,
                                      long long strideC)
{
    const long long batch = blockIdx.z;
    multiply_one(M, N, K, alpha, A + batch * strideA, K, B + batch * strideB, ldb, beta, C + batch * strideC, ldc);
}
