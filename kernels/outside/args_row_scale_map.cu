// A GEMM that reads a per-row factor through a TMA tensor map over a buffer it takes no pointer to, as
// block-scaled FP8 kernels read their scale factors (DeepGEMM: A's factors arrive only as a map).
// C = (A @ B) * s[row], one 16 x 16 tile per block; the block's 16 factors land in shared memory through
// one 1-D copy completing on an mbarrier. With every factor 1.0, C is A @ B only if the map reached the
// buffer whole: a map over anything else, or a copy that never landed, scales rows by another value.
#include "../tma.cuh"

constexpr int TILE = 16;

__device__ __forceinline__ void tma_load_1d(unsigned dst, const TensorMap& map, int x, unsigned barrier)
{
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2}], [%3];"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x), "r"(barrier)
                 : "memory");
}

__global__ void __launch_bounds__(TILE * TILE)
args_row_scale_map(const float* A, const float* B, float* C, int M, int N, int K,
                   const __grid_constant__ TensorMap row_scales)
{
    __shared__ alignas(128) float scale[TILE];
    __shared__ alignas(8) unsigned long long landed;
    const int row0 = blockIdx.y * TILE;
    const unsigned barrier = shared_address(&landed);
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        mbarrier_init(barrier, 1);
        mbarrier_init_fence();
        mbarrier_arrive_expect_tx(barrier, TILE * sizeof(float));
        tma_load_1d(shared_address(scale), row_scales, row0, barrier);   // rows past M read as zeros
    }
    __syncthreads();
    mbarrier_wait(barrier, 0);
    const int row = row0 + threadIdx.y, column = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || column >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += A[static_cast<long long>(row) * K + k] * B[static_cast<long long>(k) * N + column];
    C[static_cast<long long>(row) * N + column] = sum * scale[threadIdx.y];
}
