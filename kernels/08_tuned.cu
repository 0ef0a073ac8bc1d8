// v8: tuned for Hopper's FP32 pipes: 16 x 8 thread tiles, a full-ring pipeline with the next
// tile's first fragments prefetched into registers across the barrier, and an L2-friendly
// block order.
//
// ncu on H200 shows what is left after v7 at 4096^3: the FMA pipe is ~70% busy
// (cuBLAS: ~80%), and the warps wait on shared-memory results (short
// scoreboard) and on the barrier at the top of every K-tile, where nothing is
// in registers yet. Changes against v7:
//
// 1. Bigger thread tiles, the shape cuBLAS's own SIMT kernel uses
//    (sm80_xmma_gemm_f32f32_..._tilesize256x128x8_warpsize4x2x1_ffma): a warp
//    computes 64 x 64 as 4 x 8 lanes of 16 x 8 results, so one k costs 6 LDS.128
//    for 128 FFMAs (v7's 8 x 8: 4 for 64) and the 128 accumulators leave room
//    for 2 sets of fragments: about 230 registers, one block of 8 warps per SM.
// 2. Register double buffering: the fragments of k + 1 are loaded while the
//    FFMAs of k run, and the barrier sits before the last k of a tile instead
//    of before the first, so the next tile's k = 0 fragments are loaded before
//    the FFMAs of the current tile's last k: the FFMA stream never waits for a
//    shared load after a barrier. Because every thread's last shared read of a
//    slot happens before that barrier, the slot can be refilled right after
//    it: all STAGES slots of the ring hold tiles in flight (v7: STAGES - 1).
//
//      prologue: issue tiles 0 .. STAGES-1 (one commit group each);
//                wait for tile 0; barrier; load fragments k = 0
//      tile kt:  for k < BK-1 (BK / KSPLIT - 1, see 5.): load fragments k+1; FFMAs of k
//                wait_group(STAGES-2)  (tile kt+1 landed); barrier
//                issue tile kt+STAGES into slot kt % STAGES; commit
//                load fragments k = 0 of tile kt+1; FFMAs of k = BK-1
//
//    Group g always holds tile g, so before the wait of tile kt there are
//    STAGES + kt groups and tiles 0 .. kt+1 must be complete: STAGES - 2 may
//    still be pending. A group is committed every tile, empty past the end.
// 3. Thread-block swizzle: consecutive block ids walk down GROUP block rows
//    before moving one block column right, so the blocks resident at one time
//    share GROUP row panels of A and a few column panels of B in L2 instead of
//    one row panel of A and all of B.
//
// 4. Register-bank-aware layouts. The register file has two banks (register
//    number mod 2); an FFMA whose register-file operands (those not served by
//    the operand reuse cache) share a bank waits a cycle, which ncu reports
//    as "dispatch stall" (0.29 per issued instruction in v7 at 128 x 256
//    tiles, 0.10 for cuBLAS). acc[i][4q .. 4q+3] must be an aligned register
//    quad for the 16-byte store of C and b_frag[4q .. 4q+3] is the quad of an
//    LDS.128, so acc[i][j] and b_frag[j] always had the same parity: with
//    a_frag[i] reused, nearly every FFMA of v7 conflicts. Here column c of
//    the B tile is stored at c ^ 1 (the pairs of each float4 swapped), so the
//    LDS.128 puts column c in a register of the other parity; rows of the A
//    tile are pair-swapped the same way and the FFMAs go in serpentine order
//    (row i + 1 starts at the column row i ended with), so the change of
//    a_frag between rows also reads two different banks. cp.async cannot
//    permute inside a 16-byte chunk, so B is copied with 4-byte cp.async for
//    every N, laid out so that a warp copies whole rows (32 consecutive floats
//    per instruction) and every copy's address is a per-row base plus a
//    constant: no per-copy address arithmetic, and none of v7's long-scoreboard
//    stalls on address registers still being read by in-flight LDGSTS.
//
// 5. For small problems, split each K-tile between KSPLIT groups of warps
//    (intra-block split-K): group g multiplies rows g * BK / KSPLIT .. of every
//    tile into its own accumulators, and at the end groups 1.. store theirs in
//    shared memory (conflict-free, element-major) and group 0 adds them and
//    writes C. A 1024 x 512 problem has only 128 tiles of 64 x 64, or 256 of
//    32 x 64, for 132 SMs: more warps per tile instead of more tiles keeps the
//    SMs' FMA pipes fed without more, smaller, less efficient tiles, and C is
//    written once (no atomics, no workspace).
//
// 6. SPREAD 1: a tile's copies spread over the k steps of the tile before it instead of one burst after the barrier.
//    Nsight Compute beside cuBLAS's own SIMT kernel at 4096^3 (checks/ncu-vs-vendor-v8.log.gz, one launch each at
//    1.98 GHz: 2.852 against 2.683 ms) finds the same FFMAs and as many 4-byte cp.async copies on both sides, but the
//    vendor's warps issue 0.90 instructions a cycle per scheduler against v8's 0.83; v8's stall samples fall more on
//    its copies (4.8% against 0.6%, with lg_throttle, the queue of global accesses full, at 3.2%), on dispatch (6.2%
//    against 4.6%) and on long scoreboard (3.1% against 1.0%). The vendor issues its copies through its k loop; v8
//    issued a tile's 24 a thread at once. With SPREAD 1 the ring's first STAGES - 1 tiles are issued before the loop,
//    and during tile kt the copies of tile kt + STAGES - 1 go to the slot tile kt - 1 used, a part at each k step
//    between the shared loads and the FFMAs (at most ceil(24 / 15) = 2 a step at 128 x 256), committed before the
//    wait: still one group a tile, so the waits count as before, with one tile less of lead. Predicted: the copies'
//    and the long-scoreboard stalls go, 2-4% at 4096^3 and 8192^3. Measured, each pair in 3 rounds
//    (specs/sweep-v8-copies.yaml; checks/v8-copies-*.json.gz): SPREAD 1 lost 12-17 points in every configuration,
//    81.5% against 93.9% of cuBLAS at 4096^3, 82.9% against 96.4% at 8192^3, 74.6-83.1% against 89.5-98.4% for the
//    small ones. So the burst is not what holds v8 back; why spreading costs this much was not profiled (the copies
//    sit between a k step's shared loads and its FFMAs, and the ring's lead is one tile shorter). The specs keep
//    SPREAD 0, which compiles to the same machine code as v8 before the parameter (cuobjdump, instruction by
//    instruction, in all three configurations of specs/fast.yaml).
//
// Copies (4-byte cp.async with zero-fill through src-size 0, any K and N), the
// padded conflict-free shared layouts, the lane layout and the guarded
// epilogue (16-byte stores of C when N % 4 == 0) are otherwise v7's.
//
// Launch (large): BM = 128, BN = 256, BK = 16, WM = WN = 64, TM = 16, TN = 8,
// STAGES = 3, GROUP = 64, KSPLIT = 1: 8 warps (2 x 4), 256 threads, block (256),
// grid (ceil(N / 256), ceil(M / 128)), dynamic shared memory
// STAGES * BK * (BM + 4 + BN) * 4 = 74,496 bytes, ~234 registers: 1 block/SM.
// Launch (small): BM = 32, BN = 64, BK = 32, WM = WN = 32, TM = 8, TN = 4,
// STAGES = 3, GROUP = 1, KSPLIT = 2: 2 warp tiles x 2 k-groups = 128 threads,
// grid (ceil(N / 64), ceil(M / 32)), dynamic shared memory
// max(STAGES * BK * (BM + 4 + BN), (KSPLIT - 1) * BM * BN) * 4 = 38,400 bytes.
// Index arithmetic is 32-bit: M * K, K * N and M * N must stay below 2^31.
//
// Measured on H200 (cold L2): 2.85 ms at 4096^3 = 48.2 TFLOP/s, 93.7% of cuBLAS
// (bench/results/nvidia-h200/fp32.json.gz); timed in 3 rounds alternating with cuBLAS, both at 1980 MHz,
// 94.1% at 4096^3 and 96.8% at 8192^3 (22.22 against 21.51 ms; checks/fast-v8-rounds.json.gz).
// The small-shape configurations with KSPLIT, in the same rounds (checks/fast-v8-small-rounds.json.gz):
// v8_small 97.8% at 1024x512x1024 and 91.8% at 1001x513x777, v8_small_k4 88.8% and 95.1%.
// The block order matters at 8192^3 (specs/sweep-v8-order.yaml in the same rounds,
// checks/v8-order-rounds.json.gz): bands of 1 to 8 block rows give 94.0-94.4%, 16 95.2%, 32 95.9%,
// and 64 or more (the grid's height there: column-major throughout) 96.4%. Why the whole column
// beats an L2-sized band was not profiled.
// specs/sweep-v8.yaml and specs/sweep-v8-small.yaml are the tuning sweeps of the large and the small
// configurations (`driver-gemm tune`).

#include "block_order.cuh"
#include "cp_async.cuh"
#include "tile_io.cuh"

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, int GROUP, int KSPLIT, int SPREAD = 0>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32 * KSPLIT)
sgemm_tuned(const float* A, const float* B, float* C, int M, int N, int K)
{
    constexpr int GT = (BM / WM) * (BN / WN) * 32;   // threads of one k-group (one set of warp tiles)
    constexpr int NT = GT * KSPLIT;                  // threads per block (blockDim.x)
    constexpr int BKS = BK / KSPLIT;                 // k rows of each tile per k-group
    constexpr int LR = WM / TM;
    constexpr int LC = WN / TN;
    constexpr int APAD = 4;
    constexpr int A_STRIDE = BM + APAD;              // floats per k-row of the transposed A tile
    constexpr int A_FLOATS = BK * A_STRIDE;
    constexpr int STAGE_FLOATS = A_FLOATS + BK * BN;
    static_assert(LR * LC == 32, "a warp tile must hold exactly 32 thread tiles");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 8 == 0, "float4 fragments, 8-wide k groups for the A copy");
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must cover the block tile");
    static_assert(NT % 8 == 0 && BM % (NT / 8) == 0, "A copy: passes of NT / 8 rows x 8 k must tile BM x BK");
    static_assert(BK % (NT / 32) == 0 && BN % 32 == 0, "B copy: each warp copies whole rows of 32-column groups");
    static_assert(STAGES >= 2 && GROUP >= 1, "at least double buffering");
    static_assert(KSPLIT >= 1 && BK % KSPLIT == 0 && BKS % 2 == 0, "k-groups take an even number of k rows per tile");
    static_assert(SPREAD == 0 || SPREAD == 1, "a tile's copies in one burst (0) or spread over the k steps (1)");

    extern __shared__ __align__(16) float smem[];     // STAGES x { a_tile[BK][BM + 4], b_tile[BK][BN] }

    const int2 tile = swizzled_tile<GROUP>();
    const int bx = tile.x;
    const int by = tile.y;

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int kgroup = warp / (GT / 32);             // which k rows of each tile this warp multiplies
    const int gwarp = warp % (GT / 32);              // warp tile inside the block tile
    const int thread_row = (gwarp / (BN / WN)) * WM + (lane / LC) * 4;
    const int thread_col = (gwarp % (BN / WN)) * WN + (lane % LC) * 4;
    const int block_row = by * BM;
    const int block_col = bx * BN;
    const bool b_vec = (N & 3) == 0;
    const unsigned smem_base = smem_addr(smem);

    // Copy assignments (as in v7), fixed for the whole K loop.
    constexpr int A_ROWS = NT / 8;
    constexpr int A_J = BM / A_ROWS;
    constexpr int A_G = BK / 8;
    const int a_kk = tid % 8;
    const int a_r0 = tid / 8;
    const float* a_src[A_J];
    bool a_ok[A_J];
#pragma unroll
    for (int j = 0; j < A_J; ++j) {
        const int gr = block_row + a_r0 + j * A_ROWS;
        a_ok[j] = gr < M;
        a_src[j] = A + gr * K + a_kk;
    }
    // Row r of the A tile is stored at r ^ 1 (pairs swapped, as for B; A_ROWS is even).
    const unsigned a_dst0 = smem_base + (a_kk * A_STRIDE + (a_r0 ^ 1)) * 4;
    //   B: warp w copies rows w + NWARPS * q of the tile, lane l columns l + 32 * m,
    //   so a copy's source and destination are a per-row base plus a constant.
    //   Column c of the B tile is stored at c ^ 1 (the two pairs of each float4
    //   swapped): see 4. above.
    constexpr int NWARPS = NT / 32;
    constexpr int B_Q = BK / NWARPS;                 // rows per warp and tile
    constexpr int B_M = BN / 32;                     // columns per lane and row
    bool b_col_ok[B_M];
#pragma unroll
    for (int m = 0; m < B_M; ++m) {
        b_col_ok[m] = block_col + lane + 32 * m < N;
    }
    const float* b_src = B + warp * N + block_col + lane;
    const unsigned b_dst0 = smem_base + (A_FLOATS + warp * BN + (lane ^ 1)) * 4;

    // Issue the copies of K-tile `tile` into ring slot `slot` (no commit): the thread's copy c (A's first, then B's)
    // where c % parts == part, or every one at part -1. part and parts are constants wherever it is called.
    constexpr int A_COPIES = A_G * A_J;
    auto load_tile = [&](int slot, int tile, int part, int parts) {
        const int k0 = tile * BK;
        const unsigned slot_bytes = slot * STAGE_FLOATS * 4;
#pragma unroll
        for (int g = 0; g < A_G; ++g) {
            const bool k_ok = k0 + a_kk + 8 * g < K;
#pragma unroll
            for (int j = 0; j < A_J; ++j) {
                if (part < 0 || (g * A_J + j) % parts == part) {
                    cp_async_4(a_dst0 + slot_bytes + ((8 * g) * A_STRIDE + j * A_ROWS) * 4,
                               a_src[j] + k0 + 8 * g, (a_ok[j] && k_ok) ? 4 : 0);
                }
            }
        }
#pragma unroll
        for (int q = 0; q < B_Q; ++q) {
            const int dk = k0 + q * NWARPS;          // b_src already points at row `warp`
            const bool k_ok = warp + dk < K;
            const float* src = b_src + dk * N;
#pragma unroll
            for (int m = 0; m < B_M; ++m) {
                if (part < 0 || (A_COPIES + q * B_M + m) % parts == part) {
                    cp_async_4(b_dst0 + slot_bytes + (q * NWARPS * BN + 32 * m) * 4, src + 32 * m,
                               (k_ok && b_col_ok[m]) ? 4 : 0);
                }
            }
        }
    };

    float acc[TM][TN] = {};
    float a_frag[2][TM];
    float b_frag[2][TN];

    // Fragments of row k of the tile in ring slot `slot` into register set `buf` (compile-time).
    auto load_frags = [&](int buf, int slot, int kk) {
        const int k = kgroup * BKS + kk;
        const float* a_tile = smem + slot * STAGE_FLOATS;
        const float* b_tile = a_tile + A_FLOATS;
#pragma unroll
        for (int i = 0; i < TM / 4; ++i) {
            const float4 a = *reinterpret_cast<const float4*>(&a_tile[k * A_STRIDE + thread_row + i * 4 * LR]);
            a_frag[buf][4 * i + 0] = a.y;           // rows stored pair-swapped
            a_frag[buf][4 * i + 1] = a.x;
            a_frag[buf][4 * i + 2] = a.w;
            a_frag[buf][4 * i + 3] = a.z;
        }
#pragma unroll
        for (int j = 0; j < TN / 4; ++j) {
            const float4 b = *reinterpret_cast<const float4*>(&b_tile[k * BN + thread_col + j * 4 * LC]);
            b_frag[buf][4 * j + 0] = b.y;           // columns stored pair-swapped
            b_frag[buf][4 * j + 1] = b.x;
            b_frag[buf][4 * j + 2] = b.w;
            b_frag[buf][4 * j + 3] = b.z;
        }
    };
    auto fma_frags = [&](int buf) {
        // Serpentine order: row i + 1 starts with the column row i ended with, so that
        // b_frag stays in the operand reuse cache across the change of a_frag.
#pragma unroll
        for (int i = 0; i < TM; ++i) {
#pragma unroll
            for (int jj = 0; jj < TN; ++jj) {
                const int j = (i % 2 == 0) ? jj : TN - 1 - jj;
                acc[i][j] += a_frag[buf][i] * b_frag[buf][j];
            }
        }
    };

    // SPREAD 0 issues tiles 0 .. STAGES-1 first and refills a slot right after the barrier that frees it, all of a
    // tile's copies at once. SPREAD 1 issues tiles 0 .. STAGES-2 first; during tile kt it issues tile kt + STAGES - 1
    // into the slot tile kt - 1 used (free since the barrier that ended tile kt - 1; at kt = 0 the last slot, not yet
    // used), a part of its copies at each k step between the shared loads and the FFMAs, and commits it before the
    // wait: a tile's copies no longer queue up behind each other in one burst. Either way group g holds tile g, so
    // the wait for tile kt + 1 allows STAGES - 2 groups in flight.
    constexpr int LEAD = SPREAD ? STAGES - 1 : STAGES;   // tiles issued before the first multiply
    const int ktiles = (K + BK - 1) / BK;
    cp_async_first_tiles<LEAD>(ktiles, [&](int s, int tile) { load_tile(s, tile, -1, 1); });
    cp_async_wait<LEAD - 1>();     // tile 0 (group 0) has landed
    __syncthreads();
    load_frags(0, 0, 0);

    int slot = 0;                  // ring slot of tile kt
    for (int kt = 0; kt < ktiles; ++kt) {
        const int refill_slot = slot == 0 ? STAGES - 1 : slot - 1;
        const bool refill = SPREAD && kt + STAGES - 1 < ktiles;
#pragma unroll
        for (int k = 0; k < BKS - 1; ++k) {
            load_frags((k + 1) % 2, slot, k + 1);
            if (refill) {
                load_tile(refill_slot, kt + STAGES - 1, k, BKS - 1);
            }
            fma_frags(k % 2);
        }
        if (SPREAD) {
            cp_async_commit();         // tile kt + STAGES - 1 (empty past the last tile)
        }
        // Every thread has read its last fragments of this slot (its last k is in registers).
        cp_async_wait<STAGES - 2>();   // tile kt + 1 (group kt + 1) has landed
        __syncthreads();               // for every thread; and nobody reads slot `slot` any more
        if (!SPREAD) {
            if (kt + STAGES < ktiles) {
                load_tile(slot, kt + STAGES, -1, 1);
            }
            cp_async_commit();
        }
        const int next = slot + 1 == STAGES ? 0 : slot + 1;
        if (kt + 1 < ktiles) {
            load_frags(BKS % 2, next, 0);
        }
        fma_frags((BKS - 1) % 2);
        slot = next;
    }
    cp_async_wait<0>();

    if (KSPLIT > 1) {
        // Sum the k-groups' partial tiles through shared memory (the ring is free once every
        // warp is past its last fragment loads): group g > 0 stores, group 0 adds and writes C.
        // Element e of thread t of group g goes to red[((g - 1) * TM * TN + e) * GT + t]:
        // consecutive threads, consecutive words, no bank conflicts.
        float* red = smem;
        const int t = tid % GT;
        __syncthreads();
        if (kgroup > 0) {
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    red[((kgroup - 1) * TM * TN + i * TN + j) * GT + t] = acc[i][j];
                }
            }
        }
        __syncthreads();
        if (kgroup > 0) {
            return;
        }
#pragma unroll
        for (int g = 1; g < KSPLIT; ++g) {
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    acc[i][j] += red[((g - 1) * TM * TN + i * TN + j) * GT + t];
                }
            }
        }
    }

    store_c_tile<TM, TN, LR, LC>(C, M, N, block_row + thread_row, block_col + thread_col, acc, b_vec);
}
