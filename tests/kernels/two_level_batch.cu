// A batch of two levels, as attention multiplies the heads of a [batch, seq, heads, dim] tensor per (b, h): matrix
// (i, j) of an operand starts at i * outer + j * inner elements, its rows ld apart; the grid's z numbers the
// matrices z = i * heads + j.
//
// - two_levels: reads each matrix where its two strides put it.
// - inner_level_only: takes z as the inner index alone and never moves by the outer stride, as a kernel written for
//   one level of heads would: every outer index but the first reads and writes the first's matrices.
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

extern "C" __global__ void two_levels(int M, int N, int K, float alpha, const float* A, int lda, long long outerA,
                                      long long strideA, const float* B, int ldb, long long outerB, long long strideB,
                                      float beta, float* C, int ldc, long long outerC, long long strideC, int heads)
{
    const long long i = blockIdx.z / heads, j = blockIdx.z % heads;
    multiply_one(M, N, K, alpha, A + i * outerA + j * strideA, lda, B + i * outerB + j * strideB, ldb, beta,
                 C + i * outerC + j * strideC, ldc);
}

extern "C" __global__ void inner_level_only(int M, int N, int K, float alpha, const float* A, int lda,
                                            long long outerA, long long strideA, const float* B, int ldb,
                                            long long outerB, long long strideB, float beta, float* C, int ldc,
                                            long long outerC, long long strideC, int heads)
{
    const long long j = blockIdx.z % heads;
    multiply_one(M, N, K, alpha, A + j * strideA, lda, B + j * strideB, ldb, beta, C + j * strideC, ldc);
}
