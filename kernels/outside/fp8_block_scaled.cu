// A block-scaled FP8 GEMM with the scale layouts DeepGEMM's kernels take: A (M x K, e4m3, row-major) has one
// float factor per row and 128 columns, stored column after column of that grid (element (m, k / 128) at
// (k / 128) * M + m); B (K x N, e4m3, stored as N rows of K) one per 128 x 128 block, stored as
// ceil(N / 128) rows of ceil(K / 128) (element (k / 128, n / 128) at (n / 128) * ceil(K / 128) + k / 128).
// C = sum over k blocks of (A block . B block) * scale_a * scale_b, in fp32: each 128-long partial sum is
// scaled as the blocks' factors say, the way a block-scaled kernel promotes its tensor-core partials.
// One thread per element of C: it shows the layouts and the check, not speed.
#include "../types/element_types.cuh"

constexpr int SCALE_BLOCK = 128;

__global__ void fp8_block_scaled(const dg::e4m3_t* A, const dg::e4m3_t* B, float* C, int M, int N, int K,
                                 const float* scales_a, const float* scales_b)
{
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || column >= N)
        return;
    const int k_blocks = (K + SCALE_BLOCK - 1) / SCALE_BLOCK;
    const dg::e4m3_t* a_row = A + static_cast<long long>(row) * K;
    const dg::e4m3_t* b_column = B + static_cast<long long>(column) * K;
    float sum = 0.0f;
    for (int block = 0; block < k_blocks; ++block) {
        const int end = min(K, (block + 1) * SCALE_BLOCK);
        float partial = 0.0f;
        for (int k = block * SCALE_BLOCK; k < end; ++k)
            partial += dg::to_float(a_row[k]) * dg::to_float(b_column[k]);
        sum += partial * scales_a[static_cast<long long>(block) * M + row]
                       * scales_b[static_cast<long long>(column / SCALE_BLOCK) * k_blocks + block];
    }
    C[static_cast<long long>(row) * N + column] = sum;
}
