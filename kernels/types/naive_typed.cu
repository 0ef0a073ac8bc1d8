// Typed naive GEMM: one thread per element of C, any element types and layouts, strided batches.
//
// The reference point for the typed kernels, written for correctness only:
// C[b] = alpha * A[b] @ B[b] + beta * C[b] with A, B and C of the element
// types TA, TB, TC, products accumulated in Acc (float), and A and B each
// row- or column-major (dg::Row / dg::Col) with their own leading dimension.
// C is row-major. blockIdx.z is the batch: matrix b of each operand starts
// stride{A,B,C} elements after matrix b - 1 (0 for A or B broadcasts one
// matrix to every batch).
//
// Signature (every typed kernel): (A, B, C, M, N, K, lda, ldb, ldc,
// strideA, strideB, strideC, alpha, beta); sizes and leading dimensions are
// int32, strides int64, alpha and beta float32. fp8's per-tensor scales
// (scale_a * scale_b) are folded into alpha by the caller, as they multiply
// the product exactly where alpha does. With beta == 0, C is never read (it
// may hold NaN poison).
//
// Launch: block (BX, BY), grid (ceil(N / BX), ceil(M / BY), batch).

#include "element_types.cuh"

template <typename TA, typename TB, typename TC, typename Acc, typename LayoutA, typename LayoutB>
__global__ void gemm_naive_typed(const TA* A, const TB* B, TC* C, int M, int N, int K, int lda, int ldb, int ldc,
                                 long long strideA, long long strideB, long long strideC, float alpha, float beta)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const long long batch = blockIdx.z;
    if (row >= M || col >= N) {
        return;
    }
    A += batch * strideA;
    B += batch * strideB;
    C += batch * strideC;

    Acc dot = 0;
    for (int k = 0; k < K; ++k) {
        dot += (Acc)dg::to_float(A[LayoutA::at(row, k, lda)]) * (Acc)dg::to_float(B[LayoutB::at(k, col, ldb)]);
    }
    TC* out = C + (long long)row * ldc + col;
    const float previous = beta != 0.0f ? beta * dg::to_float(*out) : 0.0f;
    *out = dg::from_float<TC>(alpha * (float)dot + previous);
}
