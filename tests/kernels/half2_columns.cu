// fp16 GEMM, two adjacent columns of C a thread, written in the style of hand-written hgemm kernels that move fp16
// data two elements at a time through __half2 (LeetCUDA's HALF2 macro): B is read and C written as one 32-bit
// scalar access (ld.global.u32, st.global.u32), whose address must be 4-byte aligned like a vector's. Every row of B
// and C starts 4-byte aligned only where N is even: at an odd N the access of B's second row faults
// (CUDA_ERROR_MISALIGNED_ADDRESS), and the plan notes it. A is read as __half2 pairs along K only where K is even
// (the kernel tests K's low bit), one element at a time otherwise, so an odd K alone is safe. Right at even N.

#include <cuda_fp16.h>

extern "C" __global__ void half2_columns(const __half* A, const __half* B, __half* C, int M, int N, int K)
{
    const int col = (blockIdx.x * blockDim.x + threadIdx.x) * 2;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float sum0 = 0.0f, sum1 = 0.0f;
    if ((K & 1) == 0) {
        for (int k = 0; k < K; k += 2) {
            const __half2 a = *reinterpret_cast<const __half2*>(&A[row * K + k]);
            const __half2 b0 = *reinterpret_cast<const __half2*>(&B[k * N + col]);
            const __half2 b1 = *reinterpret_cast<const __half2*>(&B[(k + 1) * N + col]);
            sum0 += __low2float(a) * __low2float(b0) + __high2float(a) * __low2float(b1);
            sum1 += __low2float(a) * __high2float(b0) + __high2float(a) * __high2float(b1);
        }
    } else {
        for (int k = 0; k < K; ++k) {
            const float a = __half2float(A[row * K + k]);
            const __half2 b = *reinterpret_cast<const __half2*>(&B[k * N + col]);
            sum0 += a * __low2float(b);
            sum1 += a * __high2float(b);
        }
    }
    *reinterpret_cast<__half2*>(&C[row * N + col]) = __floats2half2_rn(sum0, sum1);
}
