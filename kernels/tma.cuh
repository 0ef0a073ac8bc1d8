// The tensor memory accelerator (TMA) and the mbarriers its copies complete on, as v11 uses them.
// A tensor map arrives as a `const __grid_constant__ TensorMap` kernel parameter (encoded on the
// host by cuTensorMapEncodeTiled); one thread asks the copy engine for a box of a matrix, the
// engine writes it into shared memory (swizzled as the map says) and counts the bytes against
// an mbarrier's transaction count; threads wait on the barrier's phase. Needs sm_90.
#pragma once

struct alignas(64) TensorMap { unsigned long long opaque[16]; };

__device__ __forceinline__ unsigned shared_address(const void* pointer)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

__device__ __forceinline__ void mbarrier_init(unsigned barrier, unsigned arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(barrier), "r"(arrivals) : "memory");
}

// Makes initialised barriers visible to the copy engine (the async proxy) and the other threads.
__device__ __forceinline__ void mbarrier_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival that also announces `bytes` of copies still to land in this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned barrier, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(unsigned barrier)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(barrier) : "memory");
}

// Spin until the barrier has completed the phase of the given parity.
__device__ __forceinline__ void mbarrier_wait(unsigned barrier, unsigned parity)
{
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n\t.reg .pred ready;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 ready, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, ready;\n\t}"
                     : "=r"(done)
                     : "r"(barrier), "r"(parity)
                     : "memory");
    }
}

// Copy the box at element coordinates (x innermost, y) of `map` into shared memory at `dst`,
// completing on `barrier`. Coordinates past the matrix read as zeros (the map's fill).
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap& map, int x, int y, unsigned barrier)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x), "r"(y), "r"(barrier)
                 : "memory");
}

// Fetch a tensor map's descriptor ahead of the first copy through it, so that the copy does not wait for it.
__device__ __forceinline__ void prefetch_tensor_map(const TensorMap& map)
{
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(&map)) : "memory");
}

// A producer's wait for its `fill`-th stage fill (counted over the whole ring, from 0) to have a free
// slot: from the second lap on, the consumers' release of that slot on the lap before.
template <int STAGES>
__device__ __forceinline__ void ring_wait_free(unsigned empty, int fill)
{
    if (fill >= STAGES) {
        mbarrier_wait(empty + 8 * (fill % STAGES), (fill / STAGES - 1) & 1);
    }
}

// Where a ring lies in the kernel's dynamic shared memory, from the shared address `raw` of its first byte:
// - the stages from `base`, `raw` rounded up to a multiple of 1024 bytes: the 128-byte swizzle's atom (8 rows of
//   128 bytes) repeats every 1024 bytes, and the TMA engine writes, and wgmma's descriptors read, a swizzled tile
//   only from such a boundary;
// - STAGES stages of STAGE_BYTES (stage(slot)), then GAP_BYTES of the kernel's own from gap() (v15: its staging
//   buffers of C), then the mbarriers, 8 bytes each: the STAGES `full` ones (full_bar(slot)), the STAGES `empty`
//   ones (empty_bar(slot)), and from after_barriers() any the kernel adds (v12pp: its two `turn` barriers).
// SHARED_BYTES is what a launch asks for (the kernels' launch lines, the specs' `shared_bytes:`): all of that but the
// kernel's own further barriers, plus 1024 bytes, the most the rounding of `base` can skip.
template <int STAGES, int STAGE_BYTES, int GAP_BYTES = 0>
struct RingLayout {
    // Constants, not static data members: NVRTC would give each of those a global in the image.
    enum : int {
        ALIGNMENT = 1024,
        BARRIER_BYTES = 8,
        SHARED_BYTES = STAGES * STAGE_BYTES + GAP_BYTES + 2 * STAGES * BARRIER_BYTES + ALIGNMENT,
    };
    static_assert(STAGE_BYTES % ALIGNMENT == 0, "every stage starts on a 1024-byte boundary");
    static_assert(GAP_BYTES % BARRIER_BYTES == 0, "the barriers after the gap stay 8-byte aligned");

    unsigned base;   // the first stage
    unsigned full;   // STAGES `full` barriers
    unsigned empty;  // STAGES `empty` barriers

    __device__ __forceinline__ constexpr explicit RingLayout(unsigned raw)
        : base((raw + (ALIGNMENT - 1)) & ~(ALIGNMENT - 1)), full(base + STAGES * STAGE_BYTES + GAP_BYTES),
          empty(full + BARRIER_BYTES * STAGES)
    {
    }

    __device__ __forceinline__ constexpr unsigned stage(int slot) const { return base + slot * STAGE_BYTES; }
    __device__ __forceinline__ constexpr unsigned full_bar(int slot) const { return full + BARRIER_BYTES * slot; }
    __device__ __forceinline__ constexpr unsigned empty_bar(int slot) const { return empty + BARRIER_BYTES * slot; }
    __device__ __forceinline__ constexpr unsigned gap() const { return base + STAGES * STAGE_BYTES; }
    __device__ __forceinline__ constexpr unsigned after_barriers() const { return empty + BARRIER_BYTES * STAGES; }
};

// The ring's barriers, made by one thread before any thread uses them: each stage's `full` (one arrival, the
// producer's, with the bytes its copies bring) and `empty` (`releases` arrivals, the consumer warps that read it).
template <int STAGES>
__device__ __forceinline__ void ring_init(unsigned full, unsigned empty, unsigned releases)
{
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(full + 8 * s, 1);
            mbarrier_init(empty + 8 * s, releases);
        }
        mbarrier_init_fence();
    }
    __syncthreads();
}

// A producer's fill of one stage of a ring of {A tile, B tile}: arms the stage's `full` barrier
// with the stage's bytes, then asks for the A box at (k, row) and B_BOXES boxes of B at (col +
// BOX_COLUMNS * j, k), laid one after another behind the A tile. v11 and v12 share it.
template <int A_BYTES, int B_BOXES, int B_BOX_BYTES, int BOX_COLUMNS>
__device__ __forceinline__ void tma_fill_stage(unsigned stage, unsigned full, const TensorMap& map_a,
                                               const TensorMap& map_b, int k, int row, int col)
{
    mbarrier_arrive_expect_tx(full, A_BYTES + B_BOXES * B_BOX_BYTES);
    tma_load_2d(stage, map_a, k, row, full);
#pragma unroll
    for (int j = 0; j < B_BOXES; ++j) {
        tma_load_2d(stage + A_BYTES + j * B_BOX_BYTES, map_b, col + BOX_COLUMNS * j, k, full);
    }
}

// Warp-specialised kernels give registers from the copying warps to the computing ones.
template <int COUNT>
__device__ __forceinline__ void registers_decrease()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(COUNT));
}

template <int COUNT>
__device__ __forceinline__ void registers_increase()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(COUNT));
}

// The registers each of CWG consumer warpgroups may ask for once the producer warpgroup has given back down to
// PRODUCER: setmaxnreg moves registers only within what the block was launched with, the launch bound's share a
// thread of 128 (CWG + 1) threads (the compiler allocates all of it to a kernel that uses setmaxnreg); a consumer
// asking for more than that leaves would wait for registers forever. Counts are multiples of 8.
template <int CWG, int PRODUCER>
__host__ __device__ constexpr int consumer_registers()
{
    constexpr int threads = 128 * (CWG + 1);
    constexpr int launched = (65536 / threads) / 8 * 8;
    return ((launched * threads - 128 * PRODUCER) / (128 * CWG)) / 8 * 8;
}
