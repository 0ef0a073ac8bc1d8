// v14: v13's machinery for decode shapes (M of 1 to 64) and short ones (M of a few hundred), with the operands
// swapped: the wgmma computes C^T = B^T A^T, its 64-row side running along N and its N along M.
//
// Why: a wgmma's M is 64 rows at least, so v13 at M = 1 spends 63 of every 64 rows of tensor work and
// of its A tile on zeros. Here a tile is 64 CWG columns of C (the wgmma's rows: B^T) by MT rows of C
// (its columns, N of the instruction: A^T, 8, 16, 32, 64, 96, 112, 128, 136, 160, 192 or 256), so M = 1 wastes 7 of 8
// columns of the narrowest instruction instead, and a stage is (64 CWG + MT) * 128 bytes: 9 KB at CWG 1 and MT 8,
// so a ring of 16 stages keeps 144 KB of B in flight per SM, where decode shapes are bound by reading B. Past
// M = 128 the tile's height follows M in steps of 8 to 64 rows where v13's and v15's follow it in steps of
// 128: 320 rows are two tiles of 160 rather than three of 128 with the last a third full, and 224 two of 112.
//
// Operands (128-byte rows of K per stage, as v13: BK = 1024 / ELEM):
// - the wgmma's A operand is B^T, 64 CWG columns of B: with B column-major (BT 1, layout NT) one TMA box
//   of 64 CWG rows (n) of BK, K-major, the descriptor of v13's A tile; with B row-major (BT 0, layout
//   NN, bf16 only) CWG boxes of BK rows (k) of 64 n, MN-major, read with the instruction's transpose of
//   A and v12's MN-major descriptor (64-column panels, 8-row groups 1024 bytes apart);
// - its B operand is A^T: MT rows of A, K-major, one box of [MT, BK], the descriptor of v13's B (BT 1).
// The accumulators of an m64nMT wgmma (d[4 j + e]: row 16 warp + g + 8 (e / 2), column 8 j + 2 t + e % 2)
// are element (m, n) = (m0 + 8 j + 2 t + e % 2, n0 + 16 warp + g + 8 (e / 2)) of C: stored one element
// a thread at a time (C of a decode step is M x N, small next to B), after alpha.
//
// SPLITS 1, 2, 4, 8: as v13, every block of a cluster takes the same tiles and sums its slice of K;
// the partial sums are added through distributed shared memory, in the ring's own bytes, but shared by
// consumer threads rather than by column groups (MT 8 has one column group): rank r sums and stores the
// elements of consumer threads [r T / S, (r + 1) T / S) (T = 128 CWG), reading the other ranks' float4
// at the same offset (j * T + thread) * 16; the three cluster barriers are v13's.
//
// Tiles: ceil(M / MT) x ceil(N / (64 CWG)), taken down M first, cluster c taking c, c + clusters, ... as in
// v13: the row tiles of a column run at once and read its columns of B from DRAM once between them, where B
// (N x K) is the large operand. Shapes: as v13 (16-byte rows for TMA, N % 8 == 0
// for B row-major); M, N and K need no multiple of a tile: the maps' zero fill covers them, elements
// past M or N are not stored.
//
// Launch: block 128 * (CWG + 1), grid SPLITS * min(sm_count // SPLITS, max_active_clusters, tiles), cluster
// [SPLITS, 1, 1], dynamic shared memory STAGES * (64 CWG + MT) * 128 + 16 * STAGES + 1024 bytes; tensor maps (128-byte
// swizzle): A box [MT, BK]; B box [BK, 64] (BT 0) or [64 CWG, BK] (BT 1). Needs sm_90a.
//
// Resources (NVRTC 13.5, sm_90a, the forms of specs/sweep-v14.yaml and sweep-band.yaml): 30 to 152 registers at
// CWG 1 (more with MT and the split), 168 at CWG 2, 128 at 3 and 96 at 4 (setmaxnreg then gives the producer 40 and
// the consumers the rest: 232, 152, 104); a consumer thread holds MT / 2 accumulators, so MT is at most 192 at
// CWG 3 and 128 at 4. No spills, but for CWG 3 at MT 192 split (28 bytes).
//
// The design's expectation: decode shapes are bound by reading B once (M = 1 at N = K = 4096:
// 32 MB), and v13's best forms there left SMs idle (16 tiles of 256 columns split 4 ways: 64 blocks of 132).
// v14's 64-column tiles make 64 of them at N = 4096 (128 blocks split 2 ways) and 128 to 224 at N = 8192 and
// 14336 unsplit, each with up to 144 KB of B in flight: every SM streaming B, so about the vendor row's time
// (100%, against v13's 84-91%), at M = 1 to 64; at M = 128 two row tiles read B twice, so v13 stays there.
//
// Measured (H200, NVRTC 13.5, % of the vendor row of the same run, cuBLASLt best of 8, each form timed in 3 rounds
// alternating with it; docs/performance.md, "Focused checks": checks/suite-bf16.json.gz and suite-tf32.json.gz,
// `scripts/gpu_check.sh suite`):
//
//   shape            BF16 (bf16 out, NN)   TF32 (NT)     v13's forms (checks/suite-*-before.json.gz)
//   1x4096x4096      107.9                  85.1          84.6 / 72.7
//   16x4096x4096     108.5                 107.2          84.2 / 92.1
//   64x4096x4096      94.1                 101.8          81.4 / 97.7
//   1x8192x8192       98.6                  96.9          85.6 / 84.9
//   16x8192x8192      98.8                 112.8          86.7 / 98.5
//   64x8192x8192      96.9                 102.9          89.1 / 95.1
//   1x14336x4096      99.7                  94.3          91.2 / 84.3
//   16x14336x4096    100.6                 108.0          89.0 / 99.8
//   64x14336x4096     97.4                 100.8          90.0 / 95.1
//
// At M = 128 (checks/tune-m128-v14-*.json.gz) v14's best is 61-90%, behind v13 as expected; one 128-row tile
// (checks/m128-swap.json.gz) reaches 90-96%, still 1-4 points behind the suite's picks. At M = 224 to 320
// (specs/sweep-band.yaml, checks/band-swap.json.gz, one round) the wide tiles beat the suite's earlier picks where
// their rows and waves are nearly full: 288x8192x8192 on 160 x 128 tiles 90.6% (bf16 out) and 111.8% (TF32) against
// 71.8% and 81.4%, 256x11008x4096 on 128 x 192 tiles 101.8% against 89.2% (TF32); the suite's tables take them
// there (specs/suite.yaml; judged on new shapes, checks/band-swap-fresh-*.json.gz). At M = 144 to 192
// (checks/band-tall.json.gz beside band-tall-tables.json.gz, one round) one row tile of 160 or 192 rows, or K split
// two ways over one of 160 or two of 96, ran 87.7-99.2% (bf16 out) where the tables' 64-row tiles ran 49.7-93.8%,
// and in TF32 102.4-132.9% against 66.2-104.2% (three shapes); the tables take them, judged on six other shapes
// (checks/band-tall-judges-*.json.gz): where the pick changed, 62.7% -> 91.5% (bf16 out) and 78.9% -> 115.1%.
// At M = 257 to 272 two row tiles of 136 (checks/band-fine.json.gz): 90.8% (bf16 out) and 139.4% (TF32) at
// 264x6144x4096 against the tables' 67.6% and 86.7%; judged at 268x8192x8192, 60.5% -> 93.7% and 76.8% -> 129.7%
// (checks/band-fine-judges-*.json.gz). At M = 200 to 240 no tile of 112 or 136 rows beat the tables' picks.
// Against torch.mm under do_bench on the same tensors (checks/torch-suite.json.gz): 104.9% (BF16) and 113.3% (TF32) at
// 1x4096x4096, 97.7% and 103.3% at 1x14336x4096. Every form of tests/test_gpu_v14.py (64 forms, split or not,
// on shapes cut by M, N and K) passes against float64 (checks/gpu-tests-v14.log.gz), and so does every wide
// form (checks/gpu-tests-v14-wide.log.gz).
// Nsight Compute (one launch a case at the GPU's own clocks, `scripts/gpu_check.sh profile-v14`,
// checks/profile-v14-bf16.json.gz): at 1x4096x4096 (MT 8, split 2 ways) the launch reads 34.0 MB from DRAM
// (B is 32 MB) in 11.6 us, 2.9 TB/s, with the tensor pipe busy 3% of the time and the barrier and
// long_scoreboard the top stalls; at 64x8192x8192 (MT 64, unsplit) it reads 137.7 MB (B is 128 MB) in
// 37.9 us, 3.6 TB/s, the tensor pipe busy 52%. Both read B about once, at 60-75% of the HBM's 4.8 TB/s; so
// (inferred, not measured apart) what is left at M = 1 is the split's exchange and the launch's fill. The
// event timer's median there is 16.9 us against the 11.6 us under ncu, a gap that holds the event pair's
// front-end time (docs/timing.md, "A kernel-only timer: CUPTI").
// The ceiling (`scripts/gpu_check.sh read-ceiling`, checks/read-ceiling.json.gz: B read whole by a plain Triton
// kernel beside torch.mm, both under do_bench with the L2 cleared before each call): torch.mm is within 3-6% of
// that read at N = K = 8192 and at 14336x4096, so there no form of v14 can pass the vendor row by more than that;
// at N = K = 4096 it is 10-20% above the read, which is where v14 leads at M = 1 and 16.

#include "13_tma_ws_split.cu"   // v13's cluster helpers, descriptors and SmemWgmma (wgmma_smem.cuh)

// One 32-byte k step of a consumer warpgroup: `columns` is its 64 columns of B in the stage (the wgmma's
// A), `rows` the stage's MT rows of A (its B, K-major); the instruction for the type, B's orientation and MT.
template <int ELEM, int BT, int MT>
__device__ __forceinline__ void swap_k_step(float (&acc)[MT / 2], unsigned columns, unsigned rows, int s)
{
    const unsigned long long b_desc = desc_advance(swizzled_desc<128>(rows), 32 * s);
    if constexpr (BT == 0) {                           // bf16, B row-major: one 64-column panel, MN-major
        SmemWgmma<ELEM, 1, 0, MT>::run(acc, desc_advance(desc_128b(columns, 64 * 128, 1024), 2048 * s), b_desc);
    } else {
        SmemWgmma<ELEM, 0, 0, MT>::run(acc, desc_advance(swizzled_desc<128>(columns), 32 * s), b_desc);
    }
}

// A consumer warpgroup's accumulators of C^T stored into C (row-major M x N): element (m, n) as the header
// gives it, fp32 or bf16, one at a time; elements past M or N are not stored.
template <int OUT, int ACC>
__device__ __forceinline__ void store_transposed(const float (&acc)[ACC], void* C, int M, int N, int m0, int n0)
{
    const int lane = threadIdx.x % 32;
    const int warp = (threadIdx.x / 32) % 4;
    const int g = lane / 4;
    const int t = lane % 4;
#pragma unroll
    for (int i = 0; i < ACC; ++i) {
        const int m = m0 + 8 * (i / 4) + 2 * t + i % 2;
        const int n = n0 + 16 * warp + g + 8 * ((i % 4) / 2);
        if (m >= M || n >= N) {
            continue;
        }
        const size_t at = static_cast<size_t>(m) * N + n;
        if constexpr (OUT == 32) {
            static_cast<float*>(C)[at] = acc[i];
        } else {
            static_cast<unsigned short*>(C)[at] = static_cast<unsigned short>(bf16_bits(acc[i]));
        }
    }
}

template <int ELEM, int BT, int CWG, int STAGES, int OUT, int SPLITS, int MT>
__global__ void __launch_bounds__(128 * (CWG + 1), 1)
gemm_tma_ws_swap(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                 void* C, int M, int N, int K, float alpha)
{
    constexpr int BK = 1024 / ELEM;                    // elements in a 128-byte row
    constexpr int TN = 64 * CWG;                       // columns of C per tile (the wgmma's rows)
    constexpr int ACC = MT / 2;                        // accumulators a consumer thread holds
    constexpr int GROUPS = MT / 8;                     // their float4 groups (acc[4 j + e])
    constexpr int PANEL_BYTES = 64 * 128;              // a warpgroup's 64 columns of B in a stage
    constexpr int B_BYTES = TN * 128;
    constexpr int A_BYTES = MT * 128;
    constexpr int STAGE_BYTES = B_BYTES + A_BYTES;
    constexpr int KSTEPS = 4;                          // 32 bytes of K per wgmma
    constexpr int PRODUCER_REGISTERS = 40;
    constexpr int CONSUMER_REGISTERS = consumer_registers<CWG, PRODUCER_REGISTERS>();   // 104 at CWG 4 (96 x 640)
    constexpr int RELEASES = 4 * CWG;                  // lane 0 of each consumer warp
    constexpr int THREADS = 128 * CWG;                 // consumer threads
    constexpr int SHARE = THREADS / SPLITS;            // consumer threads whose elements each rank sums and stores
    static_assert(ELEM == 32 || ELEM == 16 || ELEM == 8, "tf32, bf16 or e4m3 inputs");
    static_assert(BT == 1 || ELEM == 16, "only bf16 wgmma reads an MN-major (row-major) B");
    static_assert(BT == 0 || BT == 1, "B row-major (0) or column-major (1)");
    static_assert(CWG >= 1 && CWG <= 4, "1 to 4 consumer warpgroups");
    static_assert(STAGES >= 2, "a ring of at least two stages");
    static_assert(OUT == 32 || OUT == 16, "fp32 or bf16 output");
    static_assert(SPLITS == 1 || SPLITS == 2 || SPLITS == 4 || SPLITS == 8, "a split of 1, 2, 4 or 8");
    static_assert(MT == 8 || MT == 16 || MT == 32 || MT == 64 || MT == 96 || MT == 112 || MT == 128 || MT == 136
                  || MT == 160 || MT == 192 || MT == 256,
                  "a tile 8, 16, 32, 64, 96, 112, 128, 136, 160, 192 or 256 rows of C high");
    // The accumulators live in the registers a consumer thread has under the launch bound of 128 (CWG + 1) threads
    // (168 at CWG 2, 128 at 3, 96 at 4), beside about 30 of addresses and counters.
    static_assert(ACC <= (CWG <= 2 ? 128 : CWG == 3 ? 96 : 64), "MT / 2 accumulators fit a consumer thread");
    static_assert(SPLITS == 1 || STAGES * STAGE_BYTES >= 16 * GROUPS * THREADS, "the partials fit in the ring");

    extern __shared__ unsigned char smem_raw[];
    const RingLayout<STAGES, STAGE_BYTES> ring(shared_address(smem_raw));

    const int tid = threadIdx.x;
    const int warpgroup = __shfl_sync(0xffffffff, tid / 128, 0);   // one value a warp: see v13
    const int tile_rows = (M + MT - 1) / MT;
    const int tiles = tile_rows * ((N + TN - 1) / TN);
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
                const int m0 = (index % tile_rows) * MT;
                const int n0 = (index / tile_rows) * TN;
                if constexpr (SPLITS > 1) {
                    fence_proxy_async();               // the partials' generic writes before these copies
                }
                for (int kt = kt_begin; kt < kt_begin + kt_count; ++kt, ++it) {
                    const int slot = it % STAGES;
                    const unsigned stage = ring.stage(slot);
                    ring_wait_free<STAGES>(ring.empty, it);
                    mbarrier_arrive_expect_tx(ring.full_bar(slot), STAGE_BYTES);
                    if constexpr (BT == 0) {
#pragma unroll
                        for (int c = 0; c < CWG; ++c) {
                            tma_load_2d(stage + c * PANEL_BYTES, map_b, n0 + 64 * c, kt * BK, ring.full_bar(slot));
                        }
                    } else {
                        tma_load_2d(stage, map_b, kt * BK, n0, ring.full_bar(slot));
                    }
                    tma_load_2d(stage + B_BYTES, map_a, kt * BK, m0, ring.full_bar(slot));
                }
            }
            if constexpr (SPLITS > 1) {
                cluster_sync();                        // (a), (b), (c): see v13's header
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
    const bool owned = thread / SHARE == rank;         // this thread's elements are this rank's to sum and store

    int local = 0;                                     // the block's tiles so far
    for (int index = first; index < tiles; index += step, ++local) {
        float acc[ACC];
#pragma unroll
        for (int i = 0; i < ACC; ++i) {
            acc[i] = 0.0f;
        }
        consume_ktiles<KSTEPS>(acc, ring, local * kt_count, kt_count, [&](unsigned stage, int s) {
            swap_k_step<ELEM, BT, MT>(acc, stage + consumer * PANEL_BYTES, stage + B_BYTES, s);
        }, last_steps);
        const int m0 = (index % tile_rows) * MT;
        const int n0 = (index / tile_rows) * TN + 64 * consumer;
        if constexpr (SPLITS > 1) {
            add_cluster_partials<SPLITS, THREADS, GROUPS>(acc, ring.base, thread, rank, [=](int) { return owned; });
        }
        if (owned) {
#pragma unroll
            for (int i = 0; i < ACC; ++i) {
                acc[i] *= alpha;
            }
            store_transposed<OUT>(acc, C, M, N, m0, n0);
        }
        if constexpr (SPLITS > 1) {
            fence_proxy_async();
            cluster_sync();                                        // (c) no partial still read
        }
    }
}
