// Kernels that fault on purpose, to test that a run survives them.

// Writes far outside any allocation: CUDA_ERROR_ILLEGAL_ADDRESS, which kills the context.
extern "C" __global__ void write_wild(const float* A, const float* B, float* C, int M, int N, int K)
{
    C[(size_t)1 << 40] = A[0] + B[0];
}

// Traps: CUDA_ERROR_LAUNCH_FAILED (an illegal instruction).
extern "C" __global__ void trap_now(const float* A, const float* B, float* C, int M, int N, int K)
{
    __trap();
}

// Never finishes: spins until C[0] holds a value it never will (C starts as NaN, and NaN != anything).
extern "C" __global__ void spin_forever(const float* A, const float* B, float* C, int M, int N, int K)
{
    volatile float* flag = C;
    while (flag[0] != 12345.0f) {
    }
}
