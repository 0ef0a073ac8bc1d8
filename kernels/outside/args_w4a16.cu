// A weight-only quantized GEMM (W4A16) with GPTQ's layouts: C (M x N, fp16) = A (M x K, fp16, row-major) @ B, where
// B (K x N) reaches the kernel as 4-bit codes q and is dequantized as (q - z) * s:
//   qweight [K / 8, N] int32, packed along K: bits 4i to 4i + 3 of word (r, n) hold q of row 8r + i, column n;
//   scales  [K / GROUP, N] fp16: s of rows g * GROUP to (g + 1) * GROUP - 1 of column n at g * N + n;
//   qzeros  [K / GROUP, ceil(N / 8)] int32, packed along N: bits 4i to 4i + 3 of word (g, c) hold z of column 8c + i.
// IGNORE_ZEROS reads no zero point and takes 8, the symmetric one, everywhere: a kernel that drops the zero points,
// which the check fails wherever the drawn ones are not all 8. One thread per element of C, accumulating in fp32:
// it shows the layouts and the check, not speed.
#include "../types/element_types.cuh"

template <bool IGNORE_ZEROS>
__global__ void args_w4a16(const dg::half_t* A, const int* qweight, const dg::half_t* scales, const int* qzeros,
                           dg::half_t* C, int M, int N, int K, int group)
{
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || column >= N)
        return;
    const int zero_words = (N + 7) / 8;
    const dg::half_t* a_row = A + static_cast<long long>(row) * K;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) {
        const unsigned int word = static_cast<unsigned int>(qweight[static_cast<long long>(k / 8) * N + column]);
        const int q = (word >> (4 * (k % 8))) & 0xF;
        const int g = k / group;
        int z = 8;
        if (!IGNORE_ZEROS) {
            const unsigned int zeros = static_cast<unsigned int>(qzeros[static_cast<long long>(g) * zero_words
                                                                        + column / 8]);
            z = (zeros >> (4 * (column % 8))) & 0xF;
        }
        const float s = dg::to_float(scales[static_cast<long long>(g) * N + column]);
        sum += dg::to_float(a_row[k]) * (static_cast<float>(q - z) * s);
    }
    C[static_cast<long long>(row) * N + column] = dg::from_float<dg::half_t>(sum);
}
