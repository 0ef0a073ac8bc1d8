// C = A @ B with each block's A and B tiles brought into shared memory by the tensor memory
// accelerator (TMA): one thread issues two bulk tensor copies per K-tile that complete on an
// mbarrier, every thread waits on the barrier's phase, then multiplies from shared memory.
// Row-major fp32, tiles of 32 x 32, one stage: a check of the launcher's tensor-map arguments,
// not a fast kernel. Rows and columns past the matrix come back as zeros (the map's
// out-of-bounds fill), so ragged M, N and K need no guards in the loads.
//
// The tensor maps describe A as (K, M) and B as (N, K), innermost first, with boxes of 32 x 32
// elements, no swizzle. TMA needs every row's byte stride to be a multiple of 16: K and N
// multiples of 4 here (the planner refuses other shapes).
struct alignas(64) TensorMap { unsigned long long opaque[16]; };

constexpr int TILE = 32;

__device__ __forceinline__ unsigned shared_address(const void* pointer)
{
    return (unsigned)__cvta_generic_to_shared(pointer);
}

extern "C" __global__ void __launch_bounds__(1024)
tma_tiles(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
          float* C, int M, int N, int K)
{
    __shared__ alignas(128) float As[TILE][TILE];
    __shared__ alignas(128) float Bs[TILE][TILE];
    __shared__ alignas(8) unsigned long long barrier;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    const bool leader = tx == 0 && ty == 0;
    const unsigned bar = shared_address(&barrier);
    if (leader) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar) : "memory");
        // The copy engine (the async proxy) must see the initialised barrier.
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    float sum = 0.0f;
    unsigned phase = 0;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        if (leader) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                         :: "r"(bar), "r"((unsigned)(2 * TILE * TILE * sizeof(float))) : "memory");
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                         " [%0], [%1, {%2, %3}], [%4];"
                         :: "r"(shared_address(&As[0][0])), "l"((unsigned long long)&map_a),
                            "r"(k0), "r"((int)(blockIdx.y * TILE)), "r"(bar) : "memory");
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                         " [%0], [%1, {%2, %3}], [%4];"
                         :: "r"(shared_address(&Bs[0][0])), "l"((unsigned long long)&map_b),
                            "r"((int)(blockIdx.x * TILE)), "r"(k0), "r"(bar) : "memory");
        }
        unsigned done = 0;
        while (!done) {
            asm volatile("{\n\t.reg .pred ready;\n\t"
                         "mbarrier.try_wait.parity.shared::cta.b64 ready, [%1], %2;\n\t"
                         "selp.u32 %0, 1, 0, ready;\n\t}"
                         : "=r"(done) : "r"(bar), "r"(phase) : "memory");
        }
        phase ^= 1;
        #pragma unroll 8
        for (int k = 0; k < TILE; ++k)
            sum += As[ty][k] * Bs[k][tx];
        // Nobody may still read the tiles when the leader asks the engine to overwrite them.
        __syncthreads();
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = sum;
}
