// C = A @ B with A's and B's tiles brought in by the tensor memory accelerator through tensor maps the
// kernel does not take by value: maps in __constant__ memory that the host fills before the launch
// (cudaMemcpyToSymbol, the CUDA Programming Guide's other way of handing a kernel a map), and arrays of
// one map per matrix of a batch in global memory, indexed by the block's matrix (&maps[blockIdx.z]), as
// batched and grouped hand-written Hopper kernels build them on the host. Row-major fp32, tiles of
// 32 x 32, one stage, as tests/kernels/tma_tiles.cu: a check of how the maps reach the kernel, not a
// fast kernel. With WRONG the kernel misreads its maps (the constant maps swapped, or every matrix
// copied through the first map of the array), so its check must fail.
struct alignas(64) TensorMap { unsigned long long opaque[16]; };

constexpr int TILE = 32;

__constant__ TensorMap c_map_a;
__constant__ TensorMap c_map_b;

__device__ __forceinline__ unsigned shared_address(const void* pointer)
{
    return (unsigned)__cvta_generic_to_shared(pointer);
}

// One block's tile of C = A @ B (of matrix `matrix` of the batch), its tiles copied through `map_a`
// (A as (K, M), innermost first) and `map_b` (B as (N, K)).
__device__ __forceinline__ void tile_product(const TensorMap* map_a, const TensorMap* map_b, float* C, int M,
                                             int N, int K, long long matrix)
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
                         :: "r"(shared_address(&As[0][0])), "l"((unsigned long long)map_a),
                            "r"(k0), "r"((int)(blockIdx.y * TILE)), "r"(bar) : "memory");
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                         " [%0], [%1, {%2, %3}], [%4];"
                         :: "r"(shared_address(&Bs[0][0])), "l"((unsigned long long)map_b),
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
        C[matrix * M * N + (long long)row * N + col] = sum;
}

// The maps in __constant__ memory; square shapes keep the swapped maps of WRONG inside their buffers.
template <bool WRONG>
__global__ void __launch_bounds__(1024) tma_constant_maps(float* C, int M, int N, int K)
{
    tile_product(WRONG ? &c_map_b : &c_map_a, WRONG ? &c_map_a : &c_map_b, C, M, N, K, 0);
}

// An array of maps a matrix for A and for B, the batch on grid z; C's matrices M * N elements apart.
template <bool WRONG>
__global__ void __launch_bounds__(1024) tma_map_array(const TensorMap* maps_a, const TensorMap* maps_b, float* C,
                                                      int M, int N, int K)
{
    const unsigned matrix = WRONG ? 0 : blockIdx.z;
    tile_product(&maps_a[matrix], &maps_b[matrix], C, M, N, K, blockIdx.z);
}
