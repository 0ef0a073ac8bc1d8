// v1: one thread per element of C, with threadIdx.x walking along a row.
//
// The same arithmetic as v0; only the mapping of threads to C changes. Now
// the 32 threads of a warp hold 32 consecutive columns of one row, so each
// iteration reads 32 consecutive floats of B (one 128-byte line), broadcasts
// one float of A, and the final write of C is one coalesced line. On the
// seed article's GPU this alone gave about 8x over v0.
//
// Launch: block (32, 32), grid (ceil(N / 32), ceil(M / 32)).

extern "C" __global__ void sgemm_naive_col_on_x(const float* A, const float* B, float* C,
                                                int M, int N, int K)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) {
        return;
    }
    float dot = 0.0f;
    for (int k = 0; k < K; ++k) {
        dot += A[row * K + k] * B[k * N + col];
    }
    C[row * N + col] = dot;
}
