// Shaped like NVIDIA cuda-samples' matrixMul_nvrtc: the work is done by __device__ functions, and the kernels are
// extern "C" __global__ wrappers, one per block size. A spec's function: that names a helper rather than a kernel
// is told which it is, and which kernels the file defines.
template <int BLOCK_SIZE> __device__ void matrixMulCUDA(float *C, float *A, float *B, int wA, int wB)
{
    const int i = blockIdx.x * BLOCK_SIZE + threadIdx.x;
    C[i] = A[i] * wA + B[i] * wB;
}

// A helper that is no template.
__device__ __forceinline__ float scaled(float x) { return 2.0f * x; }

// One that host code may call too.
__host__ __device__ inline float shifted(float x) { return x + 1.0f; }

#ifndef __CUDACC_RTC__
// The file's own runner, which NVRTC does not see.
inline int blocks_for(int n) { return (n + 31) / 32; }
#endif

extern "C" __global__ void matrixMulCUDA_block16(float *C, float *A, float *B, int wA, int wB)
{
    matrixMulCUDA<16>(C, A, B, wA, wB);
}

extern "C" __global__ void matrixMulCUDA_block32(float *C, float *A, float *B, int wA, int wB)
{
    matrixMulCUDA<32>(C, A, B, wA, wB);
    C[0] = scaled(C[0]) + shifted(C[1]);
}
