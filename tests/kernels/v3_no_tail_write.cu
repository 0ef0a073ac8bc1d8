// A deliberately broken v3 (1D register coarsening): its write-back stores a
// thread's TN outputs only when all TN fit inside the row, so when N is not a
// multiple of TN the last N % TN columns of C are never written.
template <int BM, int BN, int BK, int TN>
__global__ void sgemm_coarsen_1d_no_tail(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float a_tile[BM * BK];
    __shared__ float b_tile[BK * BN];
    const int threads = blockDim.x * blockDim.y;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    float acc[TN] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = 0; i < BM * BK / threads; ++i) {
            const int idx = i * threads + tid;
            const int r = idx / BK, c = idx % BK;
            a_tile[idx] = (block_row + r < M && k0 + c < K) ? A[(block_row + r) * K + k0 + c] : 0.0f;
        }
        for (int i = 0; i < BK * BN / threads; ++i) {
            const int idx = i * threads + tid;
            const int r = idx / BN, c = idx % BN;
            b_tile[idx] = (k0 + r < K && block_col + c < N) ? B[(k0 + r) * N + block_col + c] : 0.0f;
        }
        __syncthreads();
        for (int k = 0; k < BK; ++k) {
            const float a = a_tile[threadIdx.y * BK + k];
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                acc[j] += a * b_tile[k * BN + threadIdx.x * TN + j];
            }
        }
        __syncthreads();
    }
    const int row = block_row + threadIdx.y;
    const int col0 = block_col + threadIdx.x * TN;
    if (row < M && col0 + TN <= N) {   // the bug: a partial group of TN columns is dropped
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            C[row * N + col0 + j] = acc[j];
        }
    }
}
