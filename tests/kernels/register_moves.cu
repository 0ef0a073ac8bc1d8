// C = A @ B (fp32, row-major), one element a thread, in a warp-specialised layout's register moves: the block's
// first warpgroup gives registers back down to 40 a thread (setmaxnreg.dec), the four others ask for ASK
// (setmaxnreg.inc). Launched with 640 threads under a bound of 640, a block has 96 registers a thread: four
// warpgroups may ask for 104 at most, and any more waits forever.
template <int ASK>
__global__ void __launch_bounds__(640, 1)
register_moves(const float* A, const float* B, float* C, int M, int N, int K)
{
    const int warpgroup = __shfl_sync(0xffffffff, threadIdx.x / 128, 0);
    if (warpgroup == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(ASK) : "memory");
    }
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < static_cast<long long>(M) * N) {
        const long long row = i / N, col = i % N;
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) {
            sum += A[row * K + k] * B[static_cast<long long>(k) * N + col];
        }
        C[i] = sum;
    }
}
