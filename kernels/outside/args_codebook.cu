// A 4-bit codebook GEMM in bitsandbytes' layouts (NF4, FP4): C (M x N, fp16) = A (M x K, fp16, row-major) @ B, where
// B (K x N) is W^T and reaches the kernel as W's codes, looked up in a table and scaled:
//   codes  [N, K / 8] uint32: word (n, r) holds, in bits 4i to 4i + 3, the code of W's row n at column 8r + i;
//   absmax [N, K / GROUP] fp32: s of W's row n over columns g * GROUP to (g + 1) * GROUP - 1 at n * (K / GROUP) + g;
//   table  [16] fp32: the value each code stands for, B = table[q] * s.
// AFFINE dequantizes as (q - 8) * s instead, as a kernel that takes NF4 codes for plain signed 4-bit integers does:
// the check fails it. One thread per element of C, accumulating in fp32: it shows the layouts and the check, not speed.
#include "../types/element_types.cuh"

template <bool AFFINE>
__global__ void args_codebook(const dg::half_t* A, const unsigned int* codes, const float* absmax, const float* table,
                              dg::half_t* C, int M, int N, int K, int group)
{
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || column >= N)
        return;
    const long long words = (K + 7) / 8, groups = K / group;
    const dg::half_t* a_row = A + static_cast<long long>(row) * K;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) {
        const unsigned int word = codes[column * words + k / 8];
        const int q = (word >> (4 * (k % 8))) & 0xF;
        const float s = absmax[column * groups + k / group];
        const float b = AFFINE ? static_cast<float>(q - 8) * s : table[q] * s;
        sum += dg::to_float(a_row[k]) * b;
    }
    C[static_cast<long long>(row) * N + column] = dg::from_float<dg::half_t>(sum);
}
