// Where a thread's tiles meet the edges of the matrices: guarded 16-byte loads (v5, v6)
// and the store of a thread's tile of C (v5 to v8).
#pragma once

// Columns col .. col + 3 of row `row` of a row-major rows x cols matrix, zeros where they
// fall outside it. With vec (cols % 4 == 0, and col a multiple of 4) the four are wholly
// inside or wholly past the row: one 16-byte load; otherwise each is checked.
__device__ __forceinline__ float4 load_float4_guarded(const float* m, int rows, int cols, int row, int col, bool vec)
{
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < rows) {
        const float* src = m + row * cols + col;
        if (vec) {
            if (col < cols) {
                v = *reinterpret_cast<const float4*>(src);
            }
        } else {
            if (col < cols) v.x = src[0];
            if (col + 1 < cols) v.y = src[1];
            if (col + 2 < cols) v.z = src[2];
            if (col + 3 < cols) v.w = src[3];
        }
    }
    return v;
}

// A thread's TM x TN accumulators go to C: acc[4 i + ii][4 j + jj] belongs at row
// row0 + i * 4 * LR + ii, column col0 + j * 4 * LC + jj, so LR = LC = 1 is one contiguous
// block and a warp-tiled thread holds 4 x 4 pieces LR rows and LC columns of them apart.
// Rows past M are skipped. With vec (N % 4 == 0, and col0 a multiple of 4) a float4 is
// wholly inside its row or wholly past it: one 16-byte store; otherwise each element is
// checked against N.
template <int TM, int TN, int LR, int LC>
__device__ __forceinline__ void store_c_tile(float* C, int M, int N, int row0, int col0, const float (&acc)[TM][TN],
                                             bool vec)
{
    static_assert(TM % 4 == 0 && TN % 4 == 0, "4 x 4 pieces");
#pragma unroll
    for (int i = 0; i < TM / 4; ++i) {
#pragma unroll
        for (int ii = 0; ii < 4; ++ii) {
            const int row = row0 + i * 4 * LR + ii;
            if (row >= M) {
                continue;
            }
#pragma unroll
            for (int j = 0; j < TN / 4; ++j) {
                const int col = col0 + j * 4 * LC;
                const float* v = &acc[4 * i + ii][4 * j];
                float* dst = C + row * N + col;
                if (vec) {
                    if (col < N) {
                        *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
                    }
                } else {
                    if (col < N) dst[0] = v[0];
                    if (col + 1 < N) dst[1] = v[1];
                    if (col + 2 < N) dst[2] = v[2];
                    if (col + 3 < N) dst[3] = v[3];
                }
            }
        }
    }
}
