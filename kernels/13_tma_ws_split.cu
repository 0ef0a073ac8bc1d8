// v13: v12p's persistent, warp-specialised machinery (TMA producer warpgroup, consumer warpgroups
// on wgmma, a ring of stages that runs on across tiles) for three input types, and with an
// optional split of K across the blocks of a thread-block cluster for shapes with few tiles.
//
// One kernel, so that a spec's `dispatch:` table can pick per shape among its template
// parameters (docs/tuning.md): the tile height (CWG), the ring's depth and the split.
//
// Element types (ELEM: bits per input element). Every stage holds K-tiles of 128 bytes a row,
// exactly one 128-byte swizzle row, so BK = 1024 / ELEM elements and a wgmma k step is always
// 32 bytes: the A tile, its descriptor and the byte sizes of the ring are those of v12p whatever
// the type; only the instruction and the B operand's orientation change.
// - ELEM 16, bf16: BK 64, m64n256k16. With BT 0 (B row-major, layout NN) the B tile is v12's four
//   64 x 64 boxes read MN-major (the instruction's transpose bit, BDESC 0 of v12's header); with
//   BT 1 (B column-major, layout NT) it is one box of 256 n rows of 64 k, read K-major.
// - ELEM 8, e4m3: BK 128, m64n256k32.f32.e4m3.e4m3. fp8 wgmma reads both operands K-major only,
//   so B is column-major (BT 1, layout NT: cuBLASLt's "TN", the one layout it has for fp8 on
//   sm_90): the B tile is one TMA box of 256 rows (n) x 128 bytes (k), the same geometry as the
//   A tile, and its descriptor is the A tile's (the 256-row K-major operand v11 reads as its B).
// - ELEM 32, tf32: BK 32, m64n256k8 with both operands from shared memory (BT 1, layout NT).
//   v11 takes B row-major and passes B^T through registers (TF32 wgmma reads only K-major
//   operands from shared memory); with B column-major no fragment passes through registers, as in
//   v12. Truncation to tf32 happens in the tensor cores, as in v10 and v11.
// The accumulators are fp32 in every case, their layout that of any m64n256 wgmma, so C is
// written by v12p's store_tile (fp32 as float2, bf16 in whole 32-byte sectors), after alpha:
// alpha * A B, where a spec's fp8 `scales: {a, b}` arrive folded into alpha (scale_a * scale_b *
// alpha), as cuBLASLt applies its scale pointers.
//
// SPLITS 1: v12p exactly (PINGPONG 0): a grid of at most one block per SM, block b takes tiles b,
// b + gridDim.x, ... of the ceil(N / 256) x ceil(M / TM) tile grid (TM = 64 CWG) in GROUP-swizzled
// order, the producer loading the next tile's K-tiles while the consumers store C.
// SPLITS > 1 (2, 4, 8): launched in clusters of SPLITS blocks ([SPLITS, 1, 1]); every block of a
// cluster takes the same tiles (cluster c: c, c + clusters, ...), rank r summing K-tiles
// [r kt / S, (r + 1) kt / S) of each into its own accumulators. The partial sums are then added
// through distributed shared memory, in the ring's own bytes (a 64 x 256 slab of fp32 partials is
// 64 KB a consumer warpgroup: they fit from 2 stages at CWG 1 and 3 at CWG 2):
//   (a) cluster barrier: every block's wgmmas and copies of this tile are done, so the ring's
//       bytes are free (the producer issues no load for the next tile before (c));
//   each consumer thread writes the 128 partials it holds, as 32 float4 at (j * threads + thread)
//   * 16 bytes (conflict-free; every rank lays them out alike), except the columns it will sum;
//   (b) cluster barrier: every partial is visible to the cluster;
//   rank r owns column groups j in [32 r / S, 32 (r + 1) / S) (8 columns each) of the tile: it adds
//   the other ranks' float4 for those j (ld.shared::cluster at the same offset in their shared
//   memory) to its own registers, and stores those columns of C: the epilogue's stores are spread
//   over the cluster's blocks, 1 / S of the tile each;
//   (c) cluster barrier: no block still reads another's partials, so the ring may be refilled and
//   a block may exit.
// In split mode the producer warpgroup stays to the end (every thread of a cluster meets at its
// barriers), and the next tile's loads wait for (c): the overlap of one tile's epilogue with the
// next tile's loads is given up there, where blocks have one or two tiles each. A block launched
// without its cluster traps (an ERROR row, not a wrong C).
//
// Shapes: TMA needs 16-byte rows: K * ELEM / 8 a multiple of 16 (both layouts) and, for B
// row-major, N * 2 too; the epilogue's vector stores need N % 8 == 0 (specs require it). M and the
// last tiles of N and K need nothing: the maps' zero fill covers them, rows past M are not stored.
//
// Launch: block 128 * (CWG + 1), grid SPLITS * min(sm_count // SPLITS, tiles) with cluster
// [SPLITS, 1, 1] (any multiple of SPLITS is correct), dynamic shared memory
// STAGES * (64 CWG + 256) * 128 + 16 * STAGES + 1024 bytes, tensor maps (128-byte swizzle):
// A box [64 CWG, BK]; B box [BK, 64] (BT 0) or [256, BK] (BT 1). Needs sm_90a.
// Resources (NVRTC 13, sm_90a, every form of specs/sweep-v13.yaml): 168 registers at CWG 2 (setmaxnreg
// then gives the consumers 232 and the producer 40), 154-190 at CWG 1 (256 threads, no setmaxnreg); no
// spills, no stack; dynamic shared memory 197,696 bytes (CWG 2, 4 stages), 205,904 (CWG 1, 5 stages):
// one block per SM, as v12p.
//
// Predicted (derived from the design before it was measured; the measured table follows):
// - SPLITS 1, bf16 NN: the instructions of v12p, so v12p's figures (93.6 / 95.3% of cuBLASLt at
//   4096^3, fp32 / bf16 out; 108.6 / 107.2% at 8192^3), give or take the launch's cluster
//   attribute of one block.
// - e4m3: a stage is the same 48 KB as bf16's and its four wgmma take the same cycles (twice the K
//   at twice the rate), so the ring's balance of copies and multiplies is v12p's, and v13-fp8
//   should reach the fraction of the fp8 peak that v12p reaches of the bf16 peak: about 70% (v12p,
//   ~700 of 989 TFLOP/s), where cuBLASLt's fp8 is at 61% (1.21 PFLOP/s at 4096^3). So 95-115% of
//   cuBLASLt fp8 at 4096^3 and 8192^3, less if the fp8 load pulls the SM clock further down.
// - e4m3 accuracy: the accumulators stay in the wgmma for the whole K (no promotion to a second set
//   of fp32 registers every K-tile, as CUTLASS's fp8 kernels do at n128: at n256 that would be 256
//   registers a thread). Hopper's fp8 MMA keeps about 14 bits of the running sum, so if each wgmma's
//   addition truncates it, the relative error grows about as 2^-14 * (2/3) * K / 32: about 1% at
//   K = 8192 and 2% at 14336, inside the fp8 tolerance (gemm/dtypes.error_bound: 2.8% and 3.7% for
//   fp32 out, 4.7% and 5.6% for bf16 out) but not far inside it (measured below: 2.5e-3 at 8192^3).
// - split K, decode shapes (M = 1 to 128): unsplit, such a shape has ceil(N / 256) = 16 to 56
//   tiles, so 16 to 56 of the 132 SMs stream B; split 2 to 8 ways, 112 to 128 would.
//   The time then tends to B's bytes over the HBM bandwidth: at 1x4096x4096 bf16, 32 MB at 3-4
//   TB/s is 8-11 us, plus a few us to start the blocks and add S - 1 partial slabs each through
//   distributed shared memory (64 KB a warpgroup and rank).
//
// Measured on the H200, 2026-12-02, % of the run's own cuBLASLt row (best of its heuristic's first 8) as
// measured, with the median SM clocks of kernel / vendor row (files and commands: docs/performance.md,
// "Focused checks"):
//   kernel / shape                    | 1024x512x1024    | 4096^3                  | 8192^3
//   v13-fp8 e4m3, bf16 out            | 58.6% (1980/1980) | 98.2% (1650/1980 MHz)  | 108.6% (1950/1590 MHz)
//   v13-fp8 e4m3, fp32 out            | 61.3% (1980/1980) | -                       | -
// At 8192^3 the kernel ran 360 MHz above its vendor row: at equal clock it is about 89% there. The rel err
// at 8192^3 was 2.5e-3 (bf16 out), well inside the fp8 tolerance.
//
// Split K, the suite's decode shapes (scripts/gpu_check.sh suite, specs/suite.yaml's dispatch; every row at
// 1980 MHz: these shapes stream B and do not reach the power limit), time in us and % of cuBLASLt:
//   shape            | bf16 out: SPLITS, us, %  | cuBLASLt us | tf32 (NT): SPLITS, us, % | cuBLASLt us
//   1x4096x4096      | 4, 22.0, 84.0%           | 18.5        | 4, 33.2, 71.5%           | 23.8
//   128x4096x4096    | 4, 24.8, 75.6%           | 18.7        | 4, 37.6, 83.2%           | 31.3
//   1x8192x8192      | 2, 51.7, 85.5%           | 44.2        | 2, 87.2, 85.1%           | 74.2
//   1x14336x4096     | 2, 45.3, 91.0%           | 41.2        | 2, 76.3, 84.4%           | 64.4
//   16x14336x4096    | 2, 45.4, 88.4%           | 40.1        | 2, 75.0, 99.9%           | 75.0
// Against the prediction: 1x4096x4096 takes 22 us, not 8-11 plus a few; the vendor row takes 18.5 us, or
// 1.8 TB/s of B, so neither streams B at HBM speed at this size, and an event pair's front-end time of a
// few us (docs/timing.md, CUPTI) is in both. Splitting deeper than the table does lost: 8 ways at
// N = 4096 read 50-60% and 4 ways at N = 8192 62-74% (checks/suite-bf16-deep-splits.json.gz), so the
// partial sums' exchange through distributed shared memory costs more than the idle SMs it fills.
// Every form passes on shapes cut by M, N and K (tests/test_gpu_v13.py).

#include "12_bf16_tma_ws.cu"     // v12p's store_tile, desc_128b, wgmma_bf16_m64n256k16 (and tma.cuh, wgmma.cuh)

// D (64 x 256) += A (64 x 16) * B (16 x 256), both K-major in shared memory.
__device__ __forceinline__ void wgmma_bf16_kmajor_m64n256k16(float (&d)[128], unsigned long long a_desc,
                                                             unsigned long long b_desc)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" WGMMA_D_0_63 ", " WGMMA_D_64_127 "}, "
                 "%128, %129, 1, 1, 1, 0, 0;\n"
                 : WGMMA_D64(0), WGMMA_D64(64)
                 : "l"(a_desc), "l"(b_desc));
}

// D (64 x 256) += A (64 x 32) * B (32 x 256) in e4m3, both K-major in shared memory (fp8 has no transpose).
__device__ __forceinline__ void wgmma_e4m3_m64n256k32(float (&d)[128], unsigned long long a_desc,
                                                      unsigned long long b_desc)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {" WGMMA_D_0_63 ", " WGMMA_D_64_127 "}, "
                 "%128, %129, 1, 1, 1;\n"
                 : WGMMA_D64(0), WGMMA_D64(64)
                 : "l"(a_desc), "l"(b_desc));
}

// D (64 x 256) += A (64 x 8) * B (8 x 256) in tf32, both K-major in shared memory.
__device__ __forceinline__ void wgmma_tf32_smem_m64n256k8(float (&d)[128], unsigned long long a_desc,
                                                          unsigned long long b_desc)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {" WGMMA_D_0_63 ", " WGMMA_D_64_127 "}, "
                 "%128, %129, 1, 1, 1;\n"
                 : WGMMA_D64(0), WGMMA_D64(64)
                 : "l"(a_desc), "l"(b_desc));
}

// Every thread of the cluster arrives, then waits for all of them; the release/acquire pair makes
// each thread's shared-memory writes before it visible to every thread of the cluster after it.
__device__ __forceinline__ void cluster_sync()
{
    __syncwarp();
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}

__device__ __forceinline__ unsigned cluster_ranks()
{
    unsigned ranks;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(ranks));
    return ranks;
}

// Rank `rank`'s shared-memory address of the byte at `local` in this block's shared memory.
__device__ __forceinline__ unsigned cluster_address(unsigned local, unsigned rank)
{
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
    return remote;
}

__device__ __forceinline__ float4 load_cluster_float4(unsigned address)
{
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(address)
                 : "memory");
    return v;
}

__device__ __forceinline__ void store_shared_float4(unsigned address, float x, float y, float z, float w)
{
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(address), "f"(x), "f"(y), "f"(z), "f"(w)
                 : "memory");
}

// Column groups j in [first, last) of a consumer warpgroup's 64 x 256 accumulators (d[4 j + e]: row
// row0 + 16 warp + g + 8 (e / 2), column col0 + 8 j + 2 t + e % 2) stored as pairs: fp32 as float2,
// bf16 as one 32-bit word. Aligned: col0 and 8 j + 2 t are even, N % 8 == 0 (the spec requires it).
template <int OUT>
__device__ __forceinline__ void store_columns(const float (&acc)[128], void* C, int M, int N, int row0, int col0,
                                              int first, int last)
{
    const int lane = threadIdx.x % 32;
    const int warp = (threadIdx.x / 32) % 4;
    const int g = lane / 4;
    const int t = lane % 4;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        if (j < first || j >= last) {
            continue;
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int m = row0 + 16 * warp + g + 8 * half;
            const int n = col0 + 8 * j + 2 * t;
            if (m >= M || n >= N) {
                continue;
            }
            const float x = acc[4 * j + 2 * half], y = acc[4 * j + 2 * half + 1];
            const size_t at = static_cast<size_t>(m) * N + n;
            if constexpr (OUT == 32) {
                float* out = static_cast<float*>(C);
                if (n + 1 < N) {
                    *reinterpret_cast<float2*>(out + at) = make_float2(x, y);
                } else {
                    out[at] = x;
                }
            } else {
                unsigned short* out = static_cast<unsigned short*>(C);
                if (n + 1 < N) {
                    *reinterpret_cast<unsigned*>(out + at) = bf16_bits(x) | (bf16_bits(y) << 16);
                } else {
                    out[at] = static_cast<unsigned short>(bf16_bits(x));
                }
            }
        }
    }
}

template <int ELEM, int BT, int CWG, int STAGES, int GROUP, int OUT, int SPLITS>
__global__ void __launch_bounds__(128 * (CWG + 1), 1)
gemm_tma_ws_split(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                  void* C, int M, int N, int K, float alpha)
{
    constexpr int BK = 1024 / ELEM;                    // elements in a 128-byte row
    constexpr int TM = 64 * CWG;                       // rows of C per tile
    constexpr int BN = 256;
    constexpr int A_BYTES = TM * 128;
    constexpr int B_BYTES = BN * 128;
    constexpr int B_BOX_BYTES = BK * 64 * 2;           // BT 0 (bf16): a box of BK k rows x 64 n
    constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    constexpr int KSTEPS = 4;                          // 32 bytes of K per wgmma
    constexpr int PRODUCER_REGISTERS = 40;
    constexpr int CONSUMER_REGISTERS = ((65536 - 128 * PRODUCER_REGISTERS) / (128 * CWG)) / 8 * 8;
    constexpr int RELEASES = 4 * CWG;                  // lane 0 of each consumer warp
    constexpr int THREADS = 128 * CWG;                 // consumer threads
    constexpr int SHARE = 32 / SPLITS;                 // column groups of a tile each rank sums and stores
    static_assert(ELEM == 32 || ELEM == 16 || ELEM == 8, "tf32, bf16 or e4m3 inputs");
    static_assert(BT == 1 || ELEM == 16, "only bf16 wgmma reads an MN-major (row-major) B");
    static_assert(BT == 0 || BT == 1, "B row-major (0) or column-major (1)");
    static_assert(CWG >= 1 && CWG <= 2, "1 or 2 consumer warpgroups");
    static_assert(STAGES >= 2, "a ring of at least two stages");
    static_assert(OUT == 32 || OUT == 16, "fp32 or bf16 output");
    static_assert(SPLITS == 1 || SPLITS == 2 || SPLITS == 4 || SPLITS == 8, "a split of 1, 2, 4 or 8");
    static_assert(SPLITS == 1 || STAGES * STAGE_BYTES >= 512 * THREADS, "the partials fit in the ring");

    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = shared_address(smem_raw);
    const unsigned base = (raw + 1023u) & ~1023u;
    const unsigned full = base + STAGES * STAGE_BYTES;
    const unsigned empty = full + 8 * STAGES;

    const int tid = threadIdx.x;
    const int warpgroup = tid / 128;
    const int tile_columns = (N + BN - 1) / BN;
    const int tile_rows = (M + TM - 1) / TM;
    const int tiles = tile_columns * tile_rows;
    const int ktiles = (K + BK - 1) / BK;
    const int rank = SPLITS > 1 ? static_cast<int>(cluster_rank()) : 0;
    const int kt_begin = ktiles * rank / SPLITS;       // this block's K-tiles of every tile
    const int kt_count = ktiles * (rank + 1) / SPLITS - kt_begin;
    const int first = blockIdx.x / SPLITS;             // this block's cluster, and the clusters
    const int step = gridDim.x / SPLITS;

    if (SPLITS > 1 && cluster_ranks() != SPLITS) {
        __trap();                                      // launched without its cluster
    }
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(full + 8 * s, 1);
            mbarrier_init(empty + 8 * s, RELEASES);
        }
        mbarrier_init_fence();
    }
    __syncthreads();

    if (warpgroup == 0) {
        if constexpr (CWG > 1) {
            registers_decrease<PRODUCER_REGISTERS>();
        }
        int it = 0;                                    // K-tiles loaded by this block so far
        for (int index = first; index < tiles; index += step) {
            if (tid == 0) {
                const int2 tile = swizzled_tile_of<GROUP>(index, tile_columns, tile_rows);
                const int tile_row = tile.y * TM;
                const int tile_col = tile.x * BN;
                if constexpr (SPLITS > 1) {
                    fence_proxy_async();               // the partials' generic writes before these copies
                }
                for (int kt = kt_begin; kt < kt_begin + kt_count; ++kt, ++it) {
                    const int slot = it % STAGES;
                    const unsigned stage = base + slot * STAGE_BYTES;
                    ring_wait_free<STAGES>(empty, it);
                    if constexpr (BT == 0) {
                        tma_fill_stage<A_BYTES, BN / 64, B_BOX_BYTES, 64>(stage, full + 8 * slot, map_a, map_b,
                                                                          kt * BK, tile_row, tile_col);
                    } else {
                        mbarrier_arrive_expect_tx(full + 8 * slot, STAGE_BYTES);
                        tma_load_2d(stage, map_a, kt * BK, tile_row, full + 8 * slot);
                        tma_load_2d(stage + A_BYTES, map_b, kt * BK, tile_col, full + 8 * slot);
                    }
                }
            }
            if constexpr (SPLITS > 1) {
                cluster_sync();                        // (a), (b), (c): see the header
                cluster_sync();
                cluster_sync();
            }
        }
        return;
    }
    if constexpr (CWG > 1) {
        registers_increase<CONSUMER_REGISTERS>();
    }

    const int consumer = warpgroup - 1;
    const int lane = tid % 32;
    const int thread = tid - 128;                      // 0 .. THREADS - 1

    int local = 0;                                     // the block's tiles so far
    for (int index = first; index < tiles; index += step, ++local) {
        const int2 tile = swizzled_tile_of<GROUP>(index, tile_columns, tile_rows);
        float acc[128];
#pragma unroll
        for (int i = 0; i < 128; ++i) {
            acc[i] = 0.0f;
        }
        int it = local * kt_count;
        for (int kt = 0; kt < kt_count; ++kt, ++it) {
            const int slot = it % STAGES;
            mbarrier_wait(full + 8 * slot, (it / STAGES) & 1);
            const unsigned a_tile = base + slot * STAGE_BYTES + consumer * 64 * 128;
            const unsigned b_tile = base + slot * STAGE_BYTES + A_BYTES;
            wgmma_fence();
#pragma unroll
            for (int s = 0; s < KSTEPS; ++s) {
                const unsigned long long a_desc = swizzled_desc<128>(a_tile + 32 * s);
                if constexpr (BT == 0) {
                    wgmma_bf16_m64n256k16(acc, a_desc, desc_128b(b_tile + 2048 * s, B_BOX_BYTES, 1024));
                } else if constexpr (ELEM == 16) {
                    wgmma_bf16_kmajor_m64n256k16(acc, a_desc, swizzled_desc<128>(b_tile + 32 * s));
                } else if constexpr (ELEM == 8) {
                    wgmma_e4m3_m64n256k32(acc, a_desc, swizzled_desc<128>(b_tile + 32 * s));
                } else {
                    wgmma_tf32_smem_m64n256k8(acc, a_desc, swizzled_desc<128>(b_tile + 32 * s));
                }
            }
            wgmma_commit();
            wgmma_wait<1>();           // K-tile it - 1's wgmmas are done: its stage can be refilled
            if (kt >= 1 && lane == 0) {
                mbarrier_arrive(empty + 8 * ((it - 1) % STAGES));
            }
        }
        wgmma_wait<0>();
        hold_registers(acc);
        if (kt_count >= 1 && lane == 0) {  // the tile's last stage: free for the next tile's loads
            mbarrier_arrive(empty + 8 * ((it - 1) % STAGES));
        }
        const int row0 = tile.y * TM + 64 * consumer;
        const int col0 = tile.x * BN;
        if constexpr (SPLITS == 1) {
#pragma unroll
            for (int i = 0; i < 128; ++i) {
                acc[i] *= alpha;
            }
            store_tile<OUT>(acc, C, M, N, row0, col0);
        } else {
            const int own_first = SHARE * rank;
            const int own_last = own_first + SHARE;
            cluster_sync();                                        // (a) the ring is free
#pragma unroll
            for (int j = 0; j < 32; ++j) {
                if (j < own_first || j >= own_last) {
                    store_shared_float4(base + 16 * (j * THREADS + thread), acc[4 * j], acc[4 * j + 1],
                                        acc[4 * j + 2], acc[4 * j + 3]);
                }
            }
            cluster_sync();                                        // (b) every partial visible
            for (int other = 1; other < SPLITS; ++other) {
                const unsigned peer = static_cast<unsigned>((rank + other) % SPLITS);
#pragma unroll
                for (int j = 0; j < 32; ++j) {
                    if (j >= own_first && j < own_last) {
                        const float4 v = load_cluster_float4(cluster_address(base + 16 * (j * THREADS + thread), peer));
                        acc[4 * j] += v.x;
                        acc[4 * j + 1] += v.y;
                        acc[4 * j + 2] += v.z;
                        acc[4 * j + 3] += v.w;
                    }
                }
            }
#pragma unroll
            for (int i = 0; i < 128; ++i) {
                acc[i] *= alpha;
            }
            store_columns<OUT>(acc, C, M, N, row0, col0, own_first, own_last);
            fence_proxy_async();
            cluster_sync();                                        // (c) no partial still read
        }
    }
}
