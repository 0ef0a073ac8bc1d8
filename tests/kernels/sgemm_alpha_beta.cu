// A kernel written elsewhere, with its own argument order: C = alpha * A @ B + beta * C.
extern "C" __global__ void sgemm_alpha_beta(int M, int N, int K, float alpha, const float* A, const float* B,
                                            float beta, float* C)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float dot = 0.0f;
        for (int k = 0; k < K; ++k) {
            dot += A[row * K + k] * B[k * N + col];
        }
        C[row * N + col] = alpha * dot + beta * C[row * N + col];
    }
}
