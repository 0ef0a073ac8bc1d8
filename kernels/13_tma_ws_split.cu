// v13: v12p's persistent, warp-specialised machinery (TMA producer warpgroup, consumer warpgroups
// on wgmma, a ring of stages that runs on across tiles) for three input types, with a tile 256,
// 128, 96 or 64 columns wide, and an optional split of K across the blocks of a thread-block cluster,
// for shapes with few tiles.
//
// One kernel, so that a spec's `dispatch:` table can pick per shape among its template
// parameters (docs/tuning.md): the tile width (BN) and height (CWG), the ring's depth and the split.
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
// Tile width (BN 256, 128, 96, 64): the same instructions at n256, n128, n96 or n64, so BN / 2 accumulators a
// consumer thread; the B tile is BN rows of K-major B (BT 1) or ceil(BN / 64) boxes of 64 columns (BT 0: at BN 96
// two boxes, of which the wgmma reads 96 columns through the 128-byte swizzle of both panels), so a stage is
// (64 CWG + BN) * 128 bytes ((64 CWG + 128) * 128 at BN 96 and BT 0): 40 KB at CWG 1 and BN 256, 16 KB at BN 64,
// and a ring of the narrow tile holds up to 13 stages. A split shares the tile's BN / 8 column groups evenly (BN 96:
// up to 4 ways). A narrower tile makes more tiles of a small or skinny shape
// (1024x512x1024: 32 tiles of 64 x 256, 128 of 64 x 64) at more loads from L2 per multiply-add.
// The accumulators are fp32 in every case, their layout that of any m64n256 wgmma, so C is
// written by v12p's store_tile (fp32 as float2, bf16 in whole 32-byte sectors), after alpha:
// alpha * A B, where a spec's fp8 `scales: {a, b}` arrive folded into alpha (scale_a * scale_b *
// alpha), as cuBLASLt applies its scale pointers.
//
// SPLITS 1 (and BN 256: v12p exactly, PINGPONG 0): a grid of at most one block per SM, block b takes
// tiles b, b + gridDim.x, ... of the ceil(N / BN) x ceil(M / TM) tile grid (TM = 64 CWG) in
// GROUP-swizzled order, the producer loading the next tile's K-tiles while the consumers store C.
// SPLITS > 1 (2, 4, 8): launched in clusters of SPLITS blocks ([SPLITS, 1, 1]); every block of a
// cluster takes the same tiles (cluster c: c, c + clusters, ...), rank r summing K-tiles
// [r kt / S, (r + 1) kt / S) of each into its own accumulators. The partial sums are then added
// through distributed shared memory, in the ring's own bytes (a 64 x BN slab of fp32 partials is
// BN / 4 KB a consumer warpgroup, 64 KB at BN 256: they fit in any ring the specs allow):
//   (a) cluster barrier: every block's wgmmas and copies of this tile are done, so the ring's
//       bytes are free (the producer issues no load for the next tile before (c));
//   each consumer thread writes the BN / 2 partials it holds, as BN / 8 float4 at (j * threads + thread)
//   * 16 bytes (conflict-free; every rank lays them out alike), except the columns it will sum;
//   (b) cluster barrier: every partial is visible to the cluster;
//   rank r owns column groups j in [G r / S, G (r + 1) / S) (G = BN / 8, 8 columns each): it adds
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
// Launch: block 128 * (CWG + 1), grid SPLITS * min(sm_count // SPLITS, max_active_clusters, tiles) with cluster
// [SPLITS, 1, 1] (any multiple of SPLITS is correct; no more clusters than fit at once), dynamic shared memory
// STAGES * (64 CWG + BN) * 128 + 16 * STAGES + 1024 bytes (B row-major: 64 ceil(BN / 64) for BN), tensor maps
// (128-byte swizzle):
// A box [64 CWG, BK]; B box [BK, 64] (BT 0) or [BN, BK] (BT 1). Needs sm_90a.
// Resources (NVRTC 13.5, sm_90a, the forms of specs/suite.yaml's tables): 168 registers at CWG 2
// (setmaxnreg then gives the consumers 232 and the producer 40); at CWG 1 (256 threads, no setmaxnreg)
// 188-190 at BN 256, 113 at BN 128, 58-78 at BN 64; no spills, no stack; dynamic shared memory from
// 99,392 bytes (CWG 1, BN 128, 4 stages) to 214,224 (CWG 1, BN 64, 13 stages). The grid asks for one
// block per SM, as v12p's does, even where two would fit.
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
// at 8192^3 was 2.5e-3 (bf16 out), well inside the fp8 tolerance. Timed in 3 rounds alternating with its vendor
// row, the row's algorithm picked by a screen and a final (docs/timing.md; checks/fp8-rounds.json.gz), bf16 out:
// 100.0% at 4096^3, 102.3% at 8192^3, 101.9% at 8192x1024x8192, 104.7% at 4096x14336x4096 and 98.9% at
// 4096x4096x14336.
//
// The suite's small and skinny shapes (scripts/gpu_check.sh suite, and tune-v13 for the 64-column entries
// marked *, whose figures are the tune's own run; every row at 1980 MHz, as these shapes do not reach the power
// limit): % of cuBLASLt with a table of 256-column tiles only -> with the shipped table (its BN/CWG/STAGES/
// SPLITS), then the kernel's time against the vendor row's, in us:
//   shape            | bf16 out                                 | tf32 (NT)
//   1024x512x1024    | 60.4 -> 88.7% (64/1/8/1)*   9.3 vs 8.2   | 79.7 -> 107.6% (64/1/8/1)*  12.3 vs 13.2
//   1x4096x4096      | 84.0 -> 84.6% (256/1/5/4)  21.8 vs 18.4  | 71.5 -> 72.7% (128/1/4/4)   32.5 vs 23.6
//   64x4096x4096     | 76.8 -> 93.3% (64/1/8/2)*  18.6 vs 17.4  | 90.0 -> 100.6% (64/1/8/2)*  30.2 vs 30.4
//   128x4096x4096    | 75.6 -> 94.7% (64/2/8/2)*  19.7 vs 18.7  | 83.2 -> 96.5% (64/2/8/2)*   32.1 vs 31.0
//   1x8192x8192      | 85.5 -> 85.6% (256/1/5/2)  51.5 vs 44.1  | 85.1 -> 84.9% (256/1/5/2)   87.3 vs 74.1
//   1x14336x4096     | 91.0 -> 91.2% (256/1/4/2)  45.0 vs 41.0  | 84.4 -> 84.3% (256/1/5/2)   76.1 vs 64.2
//   128x14336x4096   | 86.3 -> 96.4% (128/2/5/1)  42.8 vs 41.3  | 92.2 -> 98.4% (128/2/5/1)   73.7 vs 72.5
//   1001x520x776     | 57.4 -> 83.4% (64/2/6/1)*  10.0 vs 8.3   | 66.2 -> 98.5% (64/2/8/1)*   12.6 vs 12.4
//   127x4104x1032    | 56.4 -> 78.0% (64/1/8/1)*  13.0 vs 10.1  | 66.9 -> 94.9% (64/2/6/2)*   15.6 vs 14.8
//   4104x1032x200    | 59.6 -> 68.7% (128/2/4/1)  17.0 vs 11.6  |   -  -> 96.7% (128/2/4/1)   19.6 vs 18.9
// (* tuned at 1001x520x784, the fp8-compatible K of the sweep, and shipped for 1001x520x776.)
// The narrow tiles win wherever the wide ones left SMs idle or a last wave mostly empty, and with them a
// deeper ring (8 stages of 16 KB at CWG 1 and BN 64): 6 to 32 points. At M = 1 (and the decode shapes
// the tables' `when` ranges give its entries) tiles split 2 or 4 ways still win, and still at 84-91%
// (bf16) and 72-85% (tf32): those shapes stream B (1x4096x4096 bf16: 32 MB in 18.4 us on the vendor
// row, 1.8 TB/s), and an event pair's front-end time of a few us (docs/timing.md, CUPTI) is in both
// rows. No tune winner splits 8 ways: the partial sums' exchange through distributed shared memory
// costs more than the idle SMs it would fill. 4104x1032x200 (K of 200: 4 K-tiles a tile) stays the
// weakest bf16 shape: each tile is mostly its fill and its epilogue, which a persistent block of one
// tile at a time does not hide.
// The suite's tables give the decode shapes with M up to 64 to v14 (kernels/14_tma_ws_swap.cu, its header
// has the figures: 84-112%), whose tiles of 8 to 64 rows of C let every SM stream B unsplit or split 2 ways;
// at 128x8192x8192 they run 64-column tiles unsplit (bf16 out, 94.7% against 81.6% for 256-column tiles split
// 2 ways) and 128-column tiles split 2 ways (tf32, 98.5% against 83.9%), the winners of
// checks/tune-m128-v13-*.json.gz.
//
// The consumers' K loop (consume_ktiles, shared by v13 to v16). Nsight Compute's source pages beside the vendor's
// kernel at 1001x520x776 (checks/ncu-vs-vendor-pages.tar.gz) show our consumers issuing about twice the vendor's
// instructions a K-tile (about 100 against 45): the wgmma descriptors and the ring's slot built anew for every step
// in ordinary registers, then moved to uniform ones (R2UR) for each wgmma, where the vendor's stay in uniform
// registers. On 64- and 96-column tiles a K-tile's wgmmas take only 128 to 192 cycles, so those instructions are
// not hidden behind them. Three changes:
// - the warpgroup index is broadcast from lane 0 (__shfl_sync), so the compiler knows it is the same across a
//   warp and keeps everything the consumers derive from it in uniform registers;
// - the ring's slot and phase are carried from K-tile to K-tile, and each operand's descriptor is built once a
//   K-tile and moved along K by adding to its address field (desc_advance);
// - a tile's last K-tile runs only the k steps that hold any of K (tail_ksteps): the copy engine fills the rest
//   with zeros. The suite's three awkward shapes have K 8 past a whole K-tile: one step instead of four.
// Predicted: the loop of the 64 x 64 form shrinks from 91 instructions a K-tile to about 50 (cuobjdump: 66 after
// the first change, 52 after the second); a few points on the narrow tiles, none on 256-column ones; the short
// last K-tile about 4% at 4104x1032x200, whose last K-tile's wgmmas are on the critical path (a 192 x 192 tile's
// K-tile is 1,152 cycles of them, of which it skips 864, about 0.4 us), and 1% at the other two.
// Measured, bf16 out, the suite's forms, two runs of 3 rounds each alternating with the vendor row
// (checks/consumer-loop-*.json.gz): % of cuBLASLt before -> after the tail steps, the relaxed cluster start (v15)
// and the uniform index -> after the carried ring position and descriptors, and the kernel's median time:
//   1024x512x1024    89.0, 89.0 -> 93.3, 93.5 -> 96.3, 96.2   (9.31 -> 8.96 -> 8.56 us)
//   1001x520x776     87.3, 87.9 -> 89.8, 89.7 -> 92.1, 92.7   (9.81 -> 9.66 -> 9.25 us)
//   127x4104x1032    91.1, 91.6 -> 93.3, 94.6 -> 94.1, 93.2   (11.14 -> 10.94 -> 10.77 us)
//   4104x1032x200    88.4, 88.9 -> 90.7, 91.3 -> 91.8, 91.2   (13.39 -> 12.96 -> 12.80 us)
// TF32 (v13-tf32's forms, before -> after, checks/consumer-loop-tf32-*.json.gz): 102.4 -> 104.3% at 1001x520x776,
// 94.5 -> 95.3% at 127x4104x1032, and even at 4096^3 (v15, 256-column tiles: 104.0 / 100.6 -> 103.5 / 100.7%).
// The narrow tiles gained more than predicted (7 points on the 64 x 64 tile), so (inferred, not profiled again) more
// of their gap to the vendor's kernels lay in the consumers' instructions than the earlier profiles' top stall, the
// wait for a stage to land, suggested.
// Every form passes on shapes cut by M, N and K (tests/test_gpu_v13.py), and on K past its last whole K-tile by each
// number of k steps in every type (K_TAIL_SHAPES).

#include "12_bf16_tma_ws.cu"     // v12p's store_tile (and tma.cuh, wgmma.cuh)
#include "wgmma_smem.cuh"       // SmemWgmma: every instruction v13 runs

// One 32-byte k step of a consumer warpgroup's tile: the instruction for the input type, B's orientation and
// the tile width. a_tile and b_tile are the stage's A rows of this warpgroup and its B tile; s is the step. B
// row-major (BT 0) lies in boxes b_box_bytes apart, each a panel of B_ROW-byte rows in the swizzle of that width:
// 64 columns in 128-byte rows, or 32 in 64-byte rows (v15's 96-column tiles); a step is 16 of their k rows.
template <int ELEM, int BT, int BN, int B_ROW = 128>
__device__ __forceinline__ void wgmma_k_step(float (&acc)[BN / 2], unsigned a_tile, unsigned b_tile, int s,
                                             unsigned b_box_bytes)
{
    const unsigned long long a_desc = desc_advance(swizzled_desc<128>(a_tile), 32 * s);
    if constexpr (BT == 0) {
        SmemWgmma<ELEM, 0, 1, BN>::run(acc, a_desc,
                                       desc_advance(swizzled_desc_mn<B_ROW>(b_tile, b_box_bytes), 16 * B_ROW * s));
    } else {
        SmemWgmma<ELEM, 0, 0, BN>::run(acc, a_desc, desc_advance(swizzled_desc<128>(b_tile), 32 * s));
    }
}

// Every thread of the cluster arrives, then waits for all of them; the release/acquire pair makes
// each thread's shared-memory writes before it visible to every thread of the cluster after it.
__device__ __forceinline__ void cluster_sync()
{
    __syncwarp();
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The cluster's first meeting, once each block's barriers are made and fenced (ring_init's fence.mbarrier_init): every
// thread arrives relaxed, as that fence is made for, then waits for all of them. A release arrival would put a
// GPU-wide memory barrier (MEMBAR.ALL.GPU) in every warp at the kernel's start, to order writes there are none of.
__device__ __forceinline__ void cluster_sync_barriers_made()
{
    __syncwarp();
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
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

// Column groups j in [first, last) of a consumer warpgroup's 64 x BN accumulators (d[4 j + e]: row
// row0 + 16 warp + g + 8 (e / 2), column col0 + 8 j + 2 t + e % 2) stored as pairs: fp32 as float2,
// bf16 as one 32-bit word. Aligned: col0 and 8 j + 2 t are even, N % 8 == 0 (the spec requires it).
template <int OUT, int ACC>
__device__ __forceinline__ void store_columns(const float (&acc)[ACC], void* C, int M, int N, int row0, int col0,
                                              int first, int last)
{
    const int lane = threadIdx.x % 32;
    const int warp = (threadIdx.x / 32) % 4;
    const int g = lane / 4;
    const int t = lane % 4;
#pragma unroll
    for (int j = 0; j < ACC / 4; ++j) {
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

// A block's place in its cluster of SIZE blocks: its rank, and the clusters' order over the work (cluster `first`
// takes units first, first + step, ...). A block launched without a cluster of SIZE blocks traps (an ERROR row, not
// a wrong C).
template <int SIZE>
struct ClusterPlace {
    int rank, first, step;

    __device__ __forceinline__ ClusterPlace()
        : rank(SIZE > 1 ? static_cast<int>(cluster_rank()) : 0), first(blockIdx.x / SIZE), step(gridDim.x / SIZE)
    {
        if (SIZE > 1 && cluster_ranks() != SIZE) {
            __trap();
        }
    }
};

// A block's share of its split cluster's work: its place, and its slice [kt_begin, kt_begin + kt_count) of every
// tile's `ktiles` K-tiles (balanced to one K-tile).
template <int SPLITS>
struct ClusterSlice : ClusterPlace<SPLITS> {
    int kt_begin, kt_count;

    __device__ __forceinline__ explicit ClusterSlice(int ktiles)
        : kt_begin(ktiles * this->rank / SPLITS), kt_count(ktiles * (this->rank + 1) / SPLITS - kt_begin)
    {
    }
};

// A warp's release of a ring stage (lane 0 arrives): on the stage's `empty` barrier in this block, or, where every
// block of a cluster of RANKS writes into the stage (v15's multicast), on that barrier in each of them. The remote
// arrival keeps the default release semantics at CTA scope: the stage's readers are the wgmmas already waited for,
// and a release at cluster scope puts a GPU-wide memory barrier (MEMBAR.ALL.GPU) before every arrival.
template <int RANKS>
__device__ __forceinline__ void release_stage(unsigned empty_barrier)
{
    if constexpr (RANKS == 1) {
        mbarrier_arrive(empty_barrier);
    } else {
#pragma unroll
        for (int rank = 0; rank < RANKS; ++rank) {
            asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];"
                         ::"r"(cluster_address(empty_barrier, rank)) : "memory");
        }
    }
}

// The k steps (32 bytes of K each, KSTEPS a K-tile) of the last K-tile of K that hold any of it. The copy engine
// fills the rest of that K-tile with zeros, whose multiplies need not run: where K is 8 past a multiple of the K-tile,
// as in all the suite's awkward shapes, the tile's last K-tile takes one k step instead of four.
template <int ELEM, int KSTEPS>
__device__ __forceinline__ int tail_ksteps(int K)
{
    constexpr int STEP = 256 / ELEM;                   // elements a k step
    constexpr int BK = KSTEPS * STEP;
    const int tail = K - (K - 1) / BK * BK;            // 1 .. BK elements in the last K-tile
    return (tail + STEP - 1) / STEP;
}

// A number of k steps known to the compiler, so that each count's K-tile is straight-line code.
template <int N>
struct KSteps {
    static constexpr int value = N;
};

// A consumer warpgroup's K loop over one tile: K-tiles it .. it + count - 1 of the ring (counted over the block's
// tiles), each awaited, multiplied by `k_step(stage, s)` for its KSTEPS steps (the last K-tile for its `last_steps`:
// tail_ksteps where it is K's last) and released (release_stage<RANKS>) once the wgmmas of the next are issued; the
// tile's last stage is released when its wgmmas are done, before the epilogue. The last K-tile has a copy of the
// loop's body for each number of steps: with the wgmmas of one K-tile under a condition on a step, ptxas serialises
// every wgmma of the kernel.
template <int KSTEPS, int RANKS = 1, int STAGES, int STAGE_BYTES, int GAP_BYTES, int ACC, typename KStep>
__device__ __forceinline__ void consume_ktiles(float (&acc)[ACC],
                                               const RingLayout<STAGES, STAGE_BYTES, GAP_BYTES>& ring, int it,
                                               int count, KStep k_step, int last_steps = KSTEPS)
{
    static_assert(KSTEPS == 4, "a short last K-tile below has 1 to 3 steps");
    const int lane = threadIdx.x % 32;
    // The ring position of K-tile it, carried from K-tile to K-tile rather than divided out of it each time.
    int slot = it % STAGES;
    unsigned phase = (it / STAGES) & 1;
    int previous = 0;              // the slot of the K-tile before, released once this one's wgmmas are issued
    const auto ktile = [&](auto steps, int kt) {
        mbarrier_wait(ring.full_bar(slot), phase);
        wgmma_fence();
#pragma unroll
        for (int s = 0; s < decltype(steps)::value; ++s) {
            k_step(ring.stage(slot), s);
        }
        wgmma_commit();
        wgmma_wait<1>();           // the K-tile before's wgmmas are done: its stage can be refilled
        if (kt >= 1 && lane == 0) {
            release_stage<RANKS>(ring.empty_bar(previous));
        }
        previous = slot;
        if (++slot == STAGES) {
            slot = 0;
            phase ^= 1;
        }
    };
    const int whole = last_steps == KSTEPS ? count : count - 1;   // K-tiles of all KSTEPS steps
    for (int kt = 0; kt < whole; ++kt) {
        ktile(KSteps<KSTEPS>(), kt);
    }
    if (whole < count) {
        switch (last_steps) {
        case 1: ktile(KSteps<1>(), whole); break;
        case 2: ktile(KSteps<2>(), whole); break;
        default: ktile(KSteps<3>(), whole); break;
        }
    }
    wgmma_wait<0>();
    hold_registers(acc);
    if (count >= 1 && lane == 0) {  // the tile's last stage: free for the next tile's loads
        release_stage<RANKS>(ring.empty_bar(previous));
    }
}

// Steps (a) and (b) of the split (see the header): this consumer thread's float4 groups j of partial sums that
// another rank adds (`mine(j)` false) are written to shared memory at (j * THREADS + thread) * 16, as every rank
// lays them out; to the groups it adds itself go the other ranks' partials at the same offset. Step (c), after
// the stores, is the caller's.
template <int SPLITS, int THREADS, int GROUPS, typename Mine>
__device__ __forceinline__ void add_cluster_partials(float (&acc)[4 * GROUPS], unsigned base, int thread, int rank,
                                                     Mine mine)
{
    cluster_sync();                                            // (a) the ring is free
#pragma unroll
    for (int j = 0; j < GROUPS; ++j) {
        if (!mine(j)) {
            store_shared_float4(base + 16 * (j * THREADS + thread), acc[4 * j], acc[4 * j + 1], acc[4 * j + 2],
                                acc[4 * j + 3]);
        }
    }
    cluster_sync();                                            // (b) every partial visible
    for (int other = 1; other < SPLITS; ++other) {
        const unsigned peer = static_cast<unsigned>((rank + other) % SPLITS);
#pragma unroll
        for (int j = 0; j < GROUPS; ++j) {
            if (mine(j)) {
                const float4 v = load_cluster_float4(cluster_address(base + 16 * (j * THREADS + thread), peer));
                acc[4 * j] += v.x;
                acc[4 * j + 1] += v.y;
                acc[4 * j + 2] += v.z;
                acc[4 * j + 3] += v.w;
            }
        }
    }
}

template <int ELEM, int BT, int CWG, int STAGES, int GROUP, int OUT, int SPLITS, int BN>
__global__ void __launch_bounds__(128 * (CWG + 1), 1)
gemm_tma_ws_split(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                  void* C, int M, int N, int K, float alpha)
{
    constexpr int BK = 1024 / ELEM;                    // elements in a 128-byte row
    constexpr int TM = 64 * CWG;                       // rows of C per tile
    constexpr int ACC = BN / 2;                        // accumulators a consumer thread holds
    constexpr int GROUPS = BN / 8;                     // their column groups of 8 (acc[4 j + e])
    constexpr int A_BYTES = TM * 128;
    constexpr int B_BOX_BYTES = BK * 64 * 2;           // BT 0 (bf16): a box of BK k rows x 64 n
    constexpr int B_BOXES = (BN + 63) / 64;            // BT 0: BN 96 reads two boxes and multiplies 96 columns
    constexpr int B_BYTES = BT == 0 ? B_BOXES * B_BOX_BYTES : BN * 128;
    constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    constexpr int KSTEPS = 4;                          // 32 bytes of K per wgmma
    constexpr int PRODUCER_REGISTERS = 40;
    constexpr int CONSUMER_REGISTERS = consumer_registers<CWG, PRODUCER_REGISTERS>();
    constexpr int RELEASES = 4 * CWG;                  // lane 0 of each consumer warp
    constexpr int THREADS = 128 * CWG;                 // consumer threads
    constexpr int SHARE = GROUPS / SPLITS;             // column groups of a tile each rank sums and stores
    static_assert(ELEM == 32 || ELEM == 16 || ELEM == 8, "tf32, bf16 or e4m3 inputs");
    static_assert(BT == 1 || ELEM == 16, "only bf16 wgmma reads an MN-major (row-major) B");
    static_assert(BT == 0 || BT == 1, "B row-major (0) or column-major (1)");
    static_assert(CWG >= 1 && CWG <= 2, "1 or 2 consumer warpgroups");
    static_assert(STAGES >= 2, "a ring of at least two stages");
    static_assert(OUT == 32 || OUT == 16, "fp32 or bf16 output");
    static_assert(SPLITS == 1 || SPLITS == 2 || SPLITS == 4 || SPLITS == 8, "a split of 1, 2, 4 or 8");
    static_assert(BN == 256 || BN == 128 || BN == 96 || BN == 64, "a tile 256, 128, 96 or 64 columns wide");
    static_assert(GROUPS % SPLITS == 0, "the ranks of a split share the tile's column groups evenly");
    static_assert(SPLITS == 1 || STAGES * STAGE_BYTES >= 16 * GROUPS * THREADS, "the partials fit in the ring");

    extern __shared__ unsigned char smem_raw[];
    const RingLayout<STAGES, STAGE_BYTES> ring(shared_address(smem_raw));

    const int tid = threadIdx.x;
    // From lane 0, so that the compiler knows it is one value a warp: what a warpgroup derives from it (its ring
    // positions and descriptors) stays in uniform registers (see the header).
    const int warpgroup = __shfl_sync(0xffffffff, tid / 128, 0);
    const int tile_columns = (N + BN - 1) / BN;
    const int tile_rows = (M + TM - 1) / TM;
    const int tiles = tile_columns * tile_rows;
    const int ktiles = (K + BK - 1) / BK;
    const ClusterSlice<SPLITS> slice(ktiles);
    const int rank = slice.rank, kt_begin = slice.kt_begin, kt_count = slice.kt_count;
    const int first = slice.first, step = slice.step;
    // the k steps of this block's last K-tile of a tile: fewer where its slice ends K
    const int last_steps = kt_begin + kt_count == ktiles ? tail_ksteps<ELEM, KSTEPS>(K) : KSTEPS;
    ring_init<STAGES>(ring.full, ring.empty, RELEASES);

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
                    const unsigned stage = ring.stage(slot);
                    ring_wait_free<STAGES>(ring.empty, it);
                    if constexpr (BT == 0) {
                        tma_fill_stage<A_BYTES, B_BOXES, B_BOX_BYTES, 64>(stage, ring.full_bar(slot), map_a, map_b,
                                                                          kt * BK, tile_row, tile_col);
                    } else {
                        mbarrier_arrive_expect_tx(ring.full_bar(slot), STAGE_BYTES);
                        tma_load_2d(stage, map_a, kt * BK, tile_row, ring.full_bar(slot));
                        tma_load_2d(stage + A_BYTES, map_b, kt * BK, tile_col, ring.full_bar(slot));
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
    const int thread = tid - 128;                      // 0 .. THREADS - 1

    int local = 0;                                     // the block's tiles so far
    for (int index = first; index < tiles; index += step, ++local) {
        const int2 tile = swizzled_tile_of<GROUP>(index, tile_columns, tile_rows);
        float acc[ACC];
#pragma unroll
        for (int i = 0; i < ACC; ++i) {
            acc[i] = 0.0f;
        }
        consume_ktiles<KSTEPS>(acc, ring, local * kt_count, kt_count, [&](unsigned stage, int s) {
            wgmma_k_step<ELEM, BT, BN>(acc, stage + consumer * 64 * 128, stage + A_BYTES, s, B_BOX_BYTES);
        }, last_steps);
        const int row0 = tile.y * TM + 64 * consumer;
        const int col0 = tile.x * BN;
        if constexpr (SPLITS == 1) {
#pragma unroll
            for (int i = 0; i < ACC; ++i) {
                acc[i] *= alpha;
            }
            store_tile<OUT>(acc, C, M, N, row0, col0);
        } else {
            const int own_first = SHARE * rank;
            const int own_last = own_first + SHARE;
            add_cluster_partials<SPLITS, THREADS, GROUPS>(acc, ring.base, thread, rank,
                                                          [=](int j) { return j >= own_first && j < own_last; });
#pragma unroll
            for (int i = 0; i < ACC; ++i) {
                acc[i] *= alpha;
            }
            store_columns<OUT>(acc, C, M, N, row0, col0, own_first, own_last);
            fence_proxy_async();
            cluster_sync();                                        // (c) no partial still read
        }
    }
}
