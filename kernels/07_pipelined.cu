// v7: a multi-stage cp.async pipeline: the next K-tiles are copied while the current one is used.
//
// v6 runs load -> barrier -> compute -> barrier: while a tile is copied no
// FFMA issues, and while it is used no copy is in flight; only other resident
// blocks hide the global-memory latency. Here shared memory holds STAGES tiles
// (a ring) and the copies are asynchronous: `cp.async` moves global memory
// straight into shared memory (no staging registers, no load-to-store stall),
// each K-tile's copies form one commit group, and before using tile kt a
// thread waits until at most STAGES - 2 groups are still in flight
// (`cp.async.wait_group`), then a barrier makes every thread's copies visible.
// So STAGES - 1 tiles are always on their way while one is computed, and the
// loop needs one barrier per K-tile instead of two:
//
//   prologue: issue tiles 0 .. STAGES-2, one commit group each
//   for kt:   wait_group(STAGES-2); __syncthreads();
//             issue tile kt+STAGES-1 into the slot of tile kt-1; commit;
//             compute tile kt
//
// The slot written at kt is the one computed at kt - 1, and the barrier just
// passed guarantees every warp has finished with it: no second barrier is
// needed. A group is committed every iteration, empty past the last tile, so
// the group count, and with it the meaning of wait_group, stays the same.
//
// Copies. B tile rows are copied as 16-byte `cp.async.cg` (L2 only) when
// N % 4 == 0 (rows then start 16-byte aligned and a 16-byte chunk at a column
// multiple of 4 is wholly inside or wholly past the row), with src-size 0, i.e.
// zero-fill, for chunks past N or past K; otherwise, decided once per launch,
// element by element with 4-byte `cp.async.ca`. A is kept transposed in
// shared memory, as in v6, so the inner loop's A fragments are float4 loads;
// cp.async cannot transpose a 16-byte chunk, so A is copied with 4-byte
// cp.async, any K, each element predicated with src-size 4 or 0 (zero-fill
// past M and K). Its element mapping, k = idx % 8 + 8 * (idx / (8 * BM)),
// r = (idx / 8) % BM, gives a warp 4 rows x 8 consecutive k (32-byte global
// sectors) and stores a_tile[k][r] at bank 4 * k + r (mod 32, with the BM + 4
// padding and BM a multiple of 32): 32 distinct banks. The copy costs
// BM * BK / threads instructions per tile against BK * (TM + TN) / 4 LDS.128
// and BK * TM * TN FFMAs; A's cache lines are still read whole from L2.
//
// The warp tiling, the conflict-free inner loop and the guarded epilogue
// (float4 stores of C when N % 4 == 0) are v6's.
//
// Launch: BM = BN = 128, BK = 16, WM = 64, WN = 32, TM = TN = 8, STAGES = 3:
// 256 threads, block (256), grid (ceil(N / 128), ceil(M / 128)), dynamic
// shared memory STAGES * BK * (BM + 4 + BN) * 4 bytes = 49,920 bytes (above
// 48 KB: the runner raises the kernel's limit).
// Index arithmetic is 32-bit: M * K, K * N and M * N must stay below 2^31.
//
// Measured on H200 (bench/results/nvidia-h200/fp32.json.gz, cold L2): at 128 x 128 tiles, 3.03 ms at
// 4096^3 (88.3% of cuBLAS); with v8's 128 x 256 tile (v7_big in specs/fast.yaml) 3.01 ms (88.9%).

#include "cp_async.cuh"
#include "tile_io.cuh"

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, int MINB>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MINB)
sgemm_pipelined(const float* A, const float* B, float* C, int M, int N, int K)
{
    constexpr int NT = (BM / WM) * (BN / WN) * 32;   // threads per block (blockDim.x)
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
    static_assert(NT % (BN / 4) == 0 && BK % (NT / (BN / 4)) == 0, "B copy (16 B): passes of whole rows must tile BK");
    static_assert(NT % BN == 0 && BK % (NT / BN) == 0, "B copy (4 B): passes of whole rows must tile BK");
    static_assert(STAGES >= 2, "at least double buffering");

    extern __shared__ __align__(16) float smem[];     // STAGES x { a_tile[BK][BM + 4], b_tile[BK][BN] }

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int thread_row = (warp / (BN / WN)) * WM + (lane / LC) * 4;
    const int thread_col = (warp % (BN / WN)) * WN + (lane % LC) * 4;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const bool b_vec = (N & 3) == 0;
    const unsigned smem_base = smem_addr(smem);

    // Copy assignments, fixed for the whole K loop. Pointers advance by one
    // K-tile per issue; the row (M) and column (N) guards are computed once,
    // only the K guard is evaluated per tile. A guarded-off copy has src-size
    // 0: its source address is formed but never read.
    //   A: lane kk = tid % 8 copies k = kk + 8 * g, rows a_r0 + j * A_ROWS.
    constexpr int A_ROWS = NT / 8;                   // rows covered by one pass of the block
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
    const unsigned a_dst0 = smem_base + (a_kk * A_STRIDE + a_r0) * 4;
    //   B, 16-byte path: chunk b_c4 = tid % (BN / 4) of rows b_r0 + j * B_ROWS.
    constexpr int B_ROWS = NT / (BN / 4);
    constexpr int B_J = BK / B_ROWS;
    const int b_c = (tid % (BN / 4)) * 4;
    const int b_r0 = tid / (BN / 4);
    const bool b_ok = block_col + b_c < N;
    const float* b_src = B + b_r0 * N + block_col + b_c;
    const unsigned b_dst0 = smem_base + (A_FLOATS + b_r0 * BN + b_c) * 4;
    //   B, 4-byte path: column b1_c = tid % BN of rows b1_r0 + j * B1_ROWS.
    constexpr int B1_ROWS = NT / BN;
    constexpr int B1_J = BK / B1_ROWS;
    const int b1_c = tid % BN;
    const int b1_r0 = tid / BN;
    const bool b1_ok = block_col + b1_c < N;
    const float* b1_src = B + b1_r0 * N + block_col + b1_c;
    const unsigned b1_dst0 = smem_base + (A_FLOATS + b1_r0 * BN + b1_c) * 4;

    // Issue the copies of K-tile `tile` into ring slot `slot` (no commit).
    auto load_tile = [&](int slot, int tile) {
        const int k0 = tile * BK;
        const unsigned slot_bytes = slot * STAGE_FLOATS * 4;
#pragma unroll
        for (int g = 0; g < A_G; ++g) {
            const bool k_ok = k0 + a_kk + 8 * g < K;
#pragma unroll
            for (int j = 0; j < A_J; ++j) {
                cp_async_4(a_dst0 + slot_bytes + ((8 * g) * A_STRIDE + j * A_ROWS) * 4,
                           a_src[j] + k0 + 8 * g, (a_ok[j] && k_ok) ? 4 : 0);
            }
        }
        if (b_vec) {
#pragma unroll
            for (int j = 0; j < B_J; ++j) {
                const int dk = k0 + j * B_ROWS;          // b_src already points at row b_r0
                cp_async_16(b_dst0 + slot_bytes + j * B_ROWS * BN * 4, b_src + dk * N,
                            (b_ok && b_r0 + dk < K) ? 16 : 0);
            }
        } else {
#pragma unroll
            for (int j = 0; j < B1_J; ++j) {
                const int dk = k0 + j * B1_ROWS;         // b1_src already points at row b1_r0
                cp_async_4(b1_dst0 + slot_bytes + j * B1_ROWS * BN * 4, b1_src + dk * N,
                           (b1_ok && b1_r0 + dk < K) ? 4 : 0);
            }
        }
    };

    float acc[TM][TN] = {};
    float a_frag[TM];
    float b_frag[TN];

    const int ktiles = (K + BK - 1) / BK;
    cp_async_first_tiles<STAGES - 1>(ktiles, load_tile);

    int read_slot = 0;
    int write_slot = STAGES - 1;
    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<STAGES - 2>();   // this thread's copies of tile kt have landed
        __syncthreads();               // everyone's have, and everyone is done with tile kt - 1
        if (kt + STAGES - 1 < ktiles) {
            load_tile(write_slot, kt + STAGES - 1);
        }
        cp_async_commit();

        const float* a_tile = smem + read_slot * STAGE_FLOATS;
        const float* b_tile = a_tile + A_FLOATS;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM / 4; ++i) {
                const float4 a = *reinterpret_cast<const float4*>(&a_tile[k * A_STRIDE + thread_row + i * 4 * LR]);
                a_frag[4 * i + 0] = a.x;
                a_frag[4 * i + 1] = a.y;
                a_frag[4 * i + 2] = a.z;
                a_frag[4 * i + 3] = a.w;
            }
#pragma unroll
            for (int j = 0; j < TN / 4; ++j) {
                const float4 b = *reinterpret_cast<const float4*>(&b_tile[k * BN + thread_col + j * 4 * LC]);
                b_frag[4 * j + 0] = b.x;
                b_frag[4 * j + 1] = b.y;
                b_frag[4 * j + 2] = b.z;
                b_frag[4 * j + 3] = b.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    acc[i][j] += a_frag[i] * b_frag[j];
                }
            }
        }
        read_slot = read_slot + 1 == STAGES ? 0 : read_slot + 1;
        write_slot = write_slot + 1 == STAGES ? 0 : write_slot + 1;
    }
    cp_async_wait<0>();

    store_c_tile<TM, TN, LR, LC>(C, M, N, block_row + thread_row, block_col + thread_col, acc, b_vec);
}
