// A kernel file written for nvcc: it includes the C and C++ library and cuBLAS for the host runner
// that usually sits beside it, uses glibc's `uint` and <cstdint>'s types, and asserts in device code.
// Under NVRTC it compiles through driver-gemm's stand-in headers; the kernel computes
// C = alpha * A @ B + beta * C, all row-major, one thread per element of C.
#pragma once
#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <cublas_v2.h>
#include <cuda_runtime.h>

__global__ void sgemm_host_headers(int M, int N, int K, float alpha, const float *A, const float *B, float beta,
                                   float *C) {
    const uint row = blockIdx.y * blockDim.y + threadIdx.y;
    const uint col = blockIdx.x * blockDim.x + threadIdx.x;
    assert(blockDim.x * blockDim.y <= 1024);
    if (row < (uint)M && col < (uint)N) {
        float sum = 0.0f;
        for (int32_t k = 0; k < K; ++k) sum += A[(int64_t)row * K + k] * B[(int64_t)k * N + col];
        C[(int64_t)row * N + col] = alpha * sum + beta * C[(int64_t)row * N + col];
    }
}
