// v0: one thread per element of C, with threadIdx.x walking down the rows.
//
// The baseline of the optimisation story, slow on purpose. Each thread
// computes one dot product of length K straight from global memory. Because
// x (the fastest-varying thread index, the one a warp is made of) is mapped
// to rows, the 32 threads of a warp read B[i][col] at one column and write
// C at 32 different rows: every access of the warp touches 32 separate
// cache lines instead of one. v1 fixes only that.
//
// Launch: block (32, 32), grid (ceil(M / 32), ceil(N / 32)).

extern "C" __global__ void sgemm_naive_row_on_x(const float* A, const float* B, float* C,
                                                int M, int N, int K)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    const int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) {
        return;
    }
    float dot = 0.0f;
    for (int k = 0; k < K; ++k) {
        dot += A[row * K + k] * B[k * N + col];
    }
    C[row * N + col] = dot;
}
