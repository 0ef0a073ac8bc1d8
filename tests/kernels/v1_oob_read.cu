// v1 with an off-by-one loop bound: it reads one element past the end of each
// row of A, and past the end of A itself in the last row (memcheck must say so).
extern "C" __global__ void sgemm_oob_read(const float* A, const float* B, float* C, int M, int N, int K)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) {
        return;
    }
    float dot = 0.0f;
    for (int k = 0; k <= K; ++k) {
        dot += A[row * K + k] * (k < K ? B[k * N + col] : 0.0f);
    }
    C[row * N + col] = dot;
}
