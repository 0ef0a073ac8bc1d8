// A GEMM with a bias epilogue, as llm.c's matmul_forward kernels take it: out (M x N) = inp (M x K) @ weight^T
// (weight N x K, so B is column-major: layout NT) + bias[n], the bias added to every row. One thread per element of
// C: it shows the bias's check, not speed.
__global__ void args_bias(float* out, const float* inp, const float* weight, const float* bias, int M, int N, int K)
{
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || column >= N)
        return;
    const float* a_row = inp + static_cast<long long>(row) * K;
    const float* b_column = weight + static_cast<long long>(column) * K;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += a_row[k] * b_column[k];
    out[static_cast<long long>(row) * N + column] = sum + bias[column];
}
