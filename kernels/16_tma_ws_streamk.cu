// v16: v13's persistent, warp-specialised kernel (TMA producer warpgroup, consumer warpgroups on wgmma, one ring of
// stages across a block's work) with the work split stream-K: every block takes the same number of K-tiles, whatever
// the number of tiles.
//
// Why: a shape of few tiles leaves SMs idle or a last wave mostly empty. At 1001x520x776 a 128 x 64 tile makes 72
// tiles of 13 K-tiles for 132 SMs; at 4104x1032x200 a 128 x 128 tile makes 297 tiles of 4, 2.25 waves, so the blocks
// of three tiles set the time. v13 splits K across a cluster, every tile the same number of ways, which fills the
// GPU only where the tile count times the split is near a multiple of the SM count. Stream-K cuts the line of all
// U = tiles * ktiles K-tiles (tile by tile, in v13's GROUP-swizzled order) into G equal ranges, one a block:
// block b takes units [U b / G, U (b + 1) / G) (72 * 13 = 936 over 132: 7 or 8 each, against 13).
//
// A block's range is a run of segments, one a tile it meets: whole tiles in the middle, and at either end a part.
// - A segment that starts at K-tile 0 is its tile's owner: it stores the tile. Where the segment stops short of the
//   tile's last K-tile, the rest of the tile lies at the start of the next blocks' ranges (blocks b + 1, ..., each
//   met the tile first): the owner waits for each one's flag, adds its partial sums to its own accumulators (in a
//   fixed order: the sum does not depend on timing), clears the flag for the next launch, and stores C.
// - A segment that starts past K-tile 0 can only be a block's first: that block writes its accumulators to its own
//   slot of the workspace (TM x BN fp32, as float4 at (j * THREADS + thread) * 16: coalesced, and laid out alike by
//   every block) and sets its flag, release at GPU scope after the consumers' barrier; the owner's one thread
//   acquires it, then the owner's consumers meet at theirs before reading.
// So a block has at most one slot and one flag, and the owner of a tile meets the tile's parts last: the blocks it
// waits for met them first, in the first steps of their ranges, and never wait on a lower block. The wait needs every
// block resident at once: the grid is at most one block per SM (a block traps where the grid exceeds %nsmid, the
// range of the GPU's SM ids, which may be above its SM count: an ERROR row rather than a hang).
//
// Element types, B's orientation, the tile (BN 256, 128 or 64 columns, CWG 1 or 2 warpgroups of 64 rows), the ring
// and the epilogue (v12p's store_tile: fp32 as float2, bf16 in whole 32-byte sectors, after alpha) are v13's. The
// producer prefetches the tensor maps' descriptors before its first copy.
// Shapes: as v13 (K * ELEM / 8 a multiple of 16; for B row-major N * 2 too; N % 8 == 0).
//
// Launch: block 128 * (CWG + 1), grid min(sm_count, tiles * ktiles) (any grid up to the SM count is correct),
// dynamic shared memory STAGES * (64 CWG + BN) * 128 + 16 * STAGES + 1024, tensor maps as v13's; after alpha two
// buffers: `workspace`, grid * 64 CWG * BN floats, and `flags`, grid ints, zero before the first launch (the kernel
// leaves them zero). Needs sm_90a.
//
// Predicted (from the design, before it ran): the blocks' K-tiles even out, so the time of a shape of few tiles falls
// towards its K-tiles over the SM count, plus the partial tiles' round trip through L2 (a 128 x 64 fp32 slab is
// 32 KB written and read once) and the owner's wait. 1001x520x776 at 128 x 64: 7.1 K-tiles a block against 13, so
// from v13's 81% of cuBLASLt to about 95-100%; 4104x1032x200 at 128 x 128: 9 against 12, from 69% to about 85%;
// the M = 128 decode shapes: 128x4096x4096 at 128 x 128 tiles, 15.5 K-tiles of 32 KB a block against v13's 32 of
// 24 KB split two ways.
//
// Measured on the H200, 2026-12-03 (`scripts/gpu_check.sh v16`: specs/sweep-v16.yaml's 9 forms a type that fit; files
// in docs/performance.md, "Focused checks"): % of the run's vendor row, the best v16 form of each shape, beside the
// suite's dispatch in the shape suite's run on the same page (v13, or v15 where the table picks it; SM clocks
// 1920-1980 MHz throughout: these shapes stay under the power limit).
//   shape             bf16 out: v16   suite    tf32: v16   suite
//   1024x512x1024          65.2%      90.1%         82.6%    107.7%
//   1001x520x776           66.3%      85.1%         76.7%     94.8%
//   127x4104x1032          70.1%      85.6%         86.4%     95.5%
//   4104x1032x200          63.6%      87.4%         89.5%    121.9%
//   128x4096x4096          79.1%      94.4%         89.3%     99.2%
//   128x8192x8192          84.0%      93.6%         87.7%     97.8%
//   128x14336x4096         60.9%      96.3%         88.5%     98.4%
// (bf16 at 128x14336x4096: 6 of its 9 forms before the run's timeout.) Against the prediction, stream-K loses on every
// shape: in bf16 out, 2.6 to 5 us more than the suite's kernels on the small shapes and 4 to 25 us more at M = 128; at
// 1024x512x1024, where v13 already gives each block one tile, v16's 132 blocks of 15.5 K-tiles take 13.2 us against
// v13's 128 blocks of 16 at 9.7. Inferred, not profiled: the M = 128 shapes stream B from DRAM
// (128 MB in 48 us at 128x8192x8192), and where v13's blocks all read the same band of K rows of B at once, v16's
// blocks start at K offsets spread over the whole of K, so the copies land all over B; on the small shapes, whose
// time is mostly fill and epilogue, the hand-over adds an L2 round trip each way to the owner's path. The suite's
// tables therefore keep v13 and v15 on these shapes.

#include "15_tma_ws_multicast.cu"   // v13's wgmma_k_step, consume_ktiles and store_tile; v15's named_barrier_sync

__device__ __forceinline__ int load_acquire_gpu(const int* flag)
{
    int value;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(value) : "l"(flag) : "memory");
    return value;
}

__device__ __forceinline__ void store_release_gpu(int* flag, int value)
{
    asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}

__device__ __forceinline__ unsigned sm_slots()
{
    unsigned count;
    asm volatile("mov.u32 %0, %%nsmid;" : "=r"(count));
    return count;
}

// The stream-K line: U = tiles * ktiles K-tile units cut into `blocks` ranges; range b is [begin(b), begin(b + 1)).
struct StreamLine {
    int ktiles, blocks;
    long long units;

    __device__ __forceinline__ long long begin(int block) const { return units * block / blocks; }
};

// One segment of a block's range: K-tiles [kt_begin, kt_end) of tile `tile`, at the block's `unit`-th K-tile.
struct Segment {
    int tile, kt_begin, kt_end;
};

__device__ __forceinline__ Segment segment_at(const StreamLine& line, long long unit, long long range_end)
{
    const int tile = static_cast<int>(unit / line.ktiles);
    const long long tile_end = static_cast<long long>(tile + 1) * line.ktiles;
    const int kt_begin = static_cast<int>(unit - static_cast<long long>(tile) * line.ktiles);
    const int kt_end = static_cast<int>((range_end < tile_end ? range_end : tile_end) - static_cast<long long>(tile) * line.ktiles);
    return Segment{tile, kt_begin, kt_end};
}

template <int ELEM, int BT, int CWG, int STAGES, int GROUP, int OUT, int BN>
__global__ void __launch_bounds__(128 * (CWG + 1), 1)
gemm_tma_ws_streamk(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                    void* C, int M, int N, int K, float alpha, float* workspace, int* flags)
{
    constexpr int BK = 1024 / ELEM;                    // elements in a 128-byte row
    constexpr int TM = 64 * CWG;                       // rows of C per tile
    constexpr int ACC = BN / 2;                        // accumulators a consumer thread holds
    constexpr int GROUPS = BN / 8;                     // their float4 groups (acc[4 j .. 4 j + 3])
    constexpr int A_BYTES = TM * 128;
    constexpr int B_BYTES = BN * 128;
    constexpr int B_BOX_BYTES = BK * 64 * 2;           // BT 0 (bf16): a box of BK k rows x 64 n
    constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    constexpr int KSTEPS = 4;                          // 32 bytes of K per wgmma
    constexpr int PRODUCER_REGISTERS = 40;
    constexpr int CONSUMER_REGISTERS = consumer_registers<CWG, PRODUCER_REGISTERS>();
    constexpr int RELEASES = 4 * CWG;                  // lane 0 of each consumer warp
    constexpr int THREADS = 128 * CWG;                 // consumer threads
    constexpr int SLOT_FLOATS = TM * BN;               // a block's partial tile in the workspace
    constexpr int CONSUMERS_BARRIER = 1;               // named barrier of the consumer warpgroups (0: __syncthreads)
    static_assert(ELEM == 32 || ELEM == 16 || ELEM == 8, "tf32, bf16 or e4m3 inputs");
    static_assert(BT == 1 || ELEM == 16, "only bf16 wgmma reads an MN-major (row-major) B");
    static_assert(BT == 0 || BT == 1, "B row-major (0) or column-major (1)");
    static_assert(CWG >= 1 && CWG <= 2, "1 or 2 consumer warpgroups");
    static_assert(STAGES >= 2, "a ring of at least two stages");
    static_assert(OUT == 32 || OUT == 16, "fp32 or bf16 output");
    static_assert(BN == 256 || BN == 128 || BN == 64, "a tile 256, 128 or 64 columns wide");

    if (gridDim.x > sm_slots()) {
        __trap();                                      // an owner could wait for a block that never starts
    }

    extern __shared__ unsigned char smem_raw[];
    const RingLayout<STAGES, STAGE_BYTES> ring(shared_address(smem_raw));

    const int tid = threadIdx.x;
    const int warpgroup = __shfl_sync(0xffffffff, tid / 128, 0);   // one value a warp: see v13
    const int tile_columns = (N + BN - 1) / BN;
    const int tile_rows = (M + TM - 1) / TM;
    const int ktiles = (K + BK - 1) / BK;
    const StreamLine line{ktiles, static_cast<int>(gridDim.x), static_cast<long long>(tile_columns) * tile_rows * ktiles};
    const int block = blockIdx.x;
    const long long range_begin = line.begin(block);
    const long long range_end = line.begin(block + 1);
    ring_init<STAGES>(ring.full, ring.empty, RELEASES);

    if (warpgroup == 0) {
        if constexpr (CWG > 1) {
            registers_decrease<PRODUCER_REGISTERS>();
        }
        if (tid == 0) {
            prefetch_tensor_map(map_a);
            prefetch_tensor_map(map_b);
            int it = 0;                                // K-tiles loaded by this block so far
            for (long long unit = range_begin; unit < range_end;) {
                const Segment segment = segment_at(line, unit, range_end);
                const int2 tile = swizzled_tile_of<GROUP>(segment.tile, tile_columns, tile_rows);
                const int tile_row = tile.y * TM;
                const int tile_col = tile.x * BN;
                for (int kt = segment.kt_begin; kt < segment.kt_end; ++kt, ++it) {
                    const int slot = it % STAGES;
                    const unsigned stage = ring.stage(slot);
                    ring_wait_free<STAGES>(ring.empty, it);
                    if constexpr (BT == 0) {
                        tma_fill_stage<A_BYTES, BN / 64, B_BOX_BYTES, 64>(stage, ring.full_bar(slot), map_a, map_b,
                                                                          kt * BK, tile_row, tile_col);
                    } else {
                        mbarrier_arrive_expect_tx(ring.full_bar(slot), STAGE_BYTES);
                        tma_load_2d(stage, map_a, kt * BK, tile_row, ring.full_bar(slot));
                        tma_load_2d(stage + A_BYTES, map_b, kt * BK, tile_col, ring.full_bar(slot));
                    }
                }
                unit += segment.kt_end - segment.kt_begin;
            }
        }
        return;
    }
    if constexpr (CWG > 1) {
        registers_increase<CONSUMER_REGISTERS>();
    }

    const int consumer = warpgroup - 1;
    const int thread = tid - 128;                      // 0 .. THREADS - 1
    int it = 0;                                        // K-tiles consumed by this block so far
    for (long long unit = range_begin; unit < range_end;) {
        const Segment segment = segment_at(line, unit, range_end);
        const int count = segment.kt_end - segment.kt_begin;
        // the k steps of the segment's last K-tile: fewer where it ends K
        const int last_steps = segment.kt_end == ktiles ? tail_ksteps<ELEM, KSTEPS>(K) : KSTEPS;
        float acc[ACC];
#pragma unroll
        for (int i = 0; i < ACC; ++i) {
            acc[i] = 0.0f;
        }
        consume_ktiles<KSTEPS>(acc, ring, it, count, [&](unsigned stage, int s) {
            wgmma_k_step<ELEM, BT, BN>(acc, stage + consumer * 64 * 128, stage + A_BYTES, s, B_BOX_BYTES);
        }, last_steps);
        it += count;
        unit += count;

        if (segment.kt_begin > 0) {
            // The tail of a tile its owner (a lower block) stores: hand over the partial sums.
            float4* slot = reinterpret_cast<float4*>(workspace + static_cast<size_t>(block) * SLOT_FLOATS);
#pragma unroll
            for (int j = 0; j < GROUPS; ++j) {
                __stcg(slot + j * THREADS + thread, make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]));
            }
            named_barrier_sync(CONSUMERS_BARRIER, THREADS);
            if (thread == 0) {
                store_release_gpu(flags + block, 1);
            }
            continue;
        }

        if (segment.kt_end < ktiles) {
            // The owner of a tile whose other K-tiles the next blocks took first: add their partial sums.
            const long long tile_end = static_cast<long long>(segment.tile + 1) * ktiles;
            if (thread == 0) {
                for (int other = block + 1; other < line.blocks && line.begin(other) < tile_end; ++other) {
                    if (line.begin(other) < line.begin(other + 1)) {
                        while (load_acquire_gpu(flags + other) == 0) {
                        }
                        flags[other] = 0;                  // ready for the next launch
                    }
                }
            }
            named_barrier_sync(CONSUMERS_BARRIER, THREADS);
            for (int other = block + 1; other < line.blocks && line.begin(other) < tile_end; ++other) {
                if (line.begin(other) == line.begin(other + 1)) {
                    continue;                              // an empty range (a grid above the K-tiles) wrote nothing
                }
                const float4* slot = reinterpret_cast<const float4*>(workspace + static_cast<size_t>(other) * SLOT_FLOATS);
#pragma unroll
                for (int j = 0; j < GROUPS; ++j) {
                    const float4 v = __ldcg(slot + j * THREADS + thread);
                    acc[4 * j] += v.x;
                    acc[4 * j + 1] += v.y;
                    acc[4 * j + 2] += v.z;
                    acc[4 * j + 3] += v.w;
                }
            }
        }
        const int2 tile = swizzled_tile_of<GROUP>(segment.tile, tile_columns, tile_rows);
#pragma unroll
        for (int i = 0; i < ACC; ++i) {
            acc[i] *= alpha;
        }
        store_tile<OUT>(acc, C, M, N, tile.y * TM + 64 * consumer, tile.x * BN);
    }
}
