// v10: Hopper's warpgroup MMA (wgmma) in TF32, fed from shared memory. v9's mma.sync is the
// Ampere tensor-core instruction: a warp multiplies 16 x 8 x 8 per instruction and every
// operand passes through its registers: each thread issues about one shared load and one
// conversion per multiply instruction.
// wgmma is sm_90a's: four warps (a warpgroup) issue one 64 x N x 8 multiply, with N up to
// 256, and the tensor cores read the wide operand straight from shared memory through a
// 64-bit descriptor. One wgmma.m64n256k8 is 131,072 multiply-adds: the issue cost of
// feeding the tensor cores all but disappears, and the instruction runs asynchronously
// while the warps load the next operands.
//
// The operand rule that shapes this kernel: in TF32, wgmma only reads K-major operands
// (k contiguous) from shared memory. A (M x K, row-major) is K-major; B (K x N,
// row-major) is not. So the kernel computes the transpose, C^T = B^T A^T:
// - wgmma's "A" (64 x 8 per warpgroup and k step) is B^T, held in registers. A thread
//   loads its four values from the B tile in shared memory with scalar loads, the
//   m16n8k8 fragment layout of v9 (lane = 4 g + t, warp w of the warpgroup owns rows
//   16 w ..): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4), where a "row"
//   is a column n of C and a "column" is k.
// - wgmma's "B" (8 x BM) is A^T: the A tile, BM rows of BK = 32 floats = 128 bytes, read
//   from shared memory through a descriptor with the 128-byte swizzle: the 16-byte chunk
//   c of row r is stored at chunk c ^ (r % 8), so the eight rows the tensor cores read
//   together hit eight different bank groups (BK = 16: 64-byte rows and the 64-byte
//   swizzle). Stepping k by 8 moves the descriptor's start address by 32 bytes inside
//   the swizzled rows.
// - the accumulators are C^T: d[4 j + e] of lane (g, t) in warp w of warpgroup q is
//   C^T row n = 64 q + 16 w + g + 8 (e / 2), column m = 8 j + 2 t + e % 2.
//
// Inputs reach the tensor cores as stored: they use the top 19 bits of each FP32 value
// (TF32 by truncation, unit roundoff 2^-10) where v9 rounds to nearest first.
//
// Pipeline: a STAGES-deep ring of {A tile, B tile} filled by cp.async (zero-filled outside
// the matrix, so any M, N, K works). The wgmmas of tile kt are queued behind those of tile
// kt - 1, so the tensor cores always have a group waiting while the threads prepare the
// next one:
//
//   prologue: issue tiles 0 .. STAGES-2; wait tile 0; barrier; load B^T fragments of tile 0
//   tile kt:  fence; BK / 8 wgmma of tile kt; commit
//             wgmma wait_group 1 (tile kt-1 done: its slot and fragment registers are free)
//             cp.async wait_group(STAGES-3) (tile kt+1 landed); proxy fence; barrier
//             issue tile kt+STAGES-1 into the slot of tile kt-1; commit
//             load B^T fragments of tile kt+1
//
// Copies land through the generic proxy while wgmma reads through the async proxy, hence
// fence.proxy.async between a thread's completed copies and the barrier that publishes them.
// Blocks take their tiles in GROUP-row bands (block_order.cuh, as v8).
//
// Launch: block (128 * WGS), grid (ceil(N / (64 * WGS)), ceil(M / BM)); dynamic shared memory
// STAGES * (BM * BK * 4 + BK * 4 * (64 * WGS + 8)) + 1024 bytes (the 1024 aligns the swizzle
// atoms). Needs sm_90a. Index arithmetic is 32-bit: M * K, K * N and M * N below 2^31.
//
// Measured on H200 (tests/data/results/tf32-v10-h200.json, `driver-gemm run specs/tf32.yaml -k v10`, L2
// flushed), BM 256, BK 32, 2 warpgroups, 4 stages, GROUP 8: 0.467 ms at 4096^3 = 295 TFLOP/s = 83.2% of
// cuBLAS TF32 (0.388 ms), 81.1% at 8192^3; 2.2 times v9's best and 6.2 times v8. Relative error 6.9e-4:
// the tensor cores truncate to TF32, where v9 and cuBLAS round (2.6e-4). Its sweep
// (tests/data/results/tune-v10-h200.json.gz, `driver-gemm tune specs/sweep-v10.yaml`) keeps this
// configuration, at 83.0% and 82.4%; in the runs of bench/results/nvidia-h200/tf32.json.gz and
// bench/results/nvidia-h200/checks/tma.json.gz, 84.2-85.2%.
// The copies are planned once, outside the K loop, so that no per-tile chain of integer work on their
// addresses and bounds stands between the 2 warps of a scheduler and the tensor pipe. At 1024x512x1024
// (16 blocks for 132 SMs) it reaches 48.7% of cuBLAS TF32: small problems want smaller tiles or a split of K.

#include "block_order.cuh"
#include "cp_async.cuh"
#include "wgmma.cuh"

template <int BM, int BK, int WGS, int STAGES, int GROUP>
__global__ void __launch_bounds__(WGS * 128, 1)
sgemm_tf32_wgmma(const float* A, const float* B, float* C, int M, int N, int K)
{
    constexpr int ROW_BYTES = BK * 4;               // a row of the A tile: one 128- or 64-byte swizzle row
    constexpr int BN = 64 * WGS;                    // one 64-column slab of C per warpgroup
    constexpr int NT = WGS * 128;
    constexpr int B_STRIDE = BN + 8;                // floats; 8 t + g spreads a fragment load over 32 banks
    constexpr int A_BYTES = BM * BK * 4;
    constexpr int STAGE_BYTES = A_BYTES + BK * B_STRIDE * 4;
    constexpr int KSTEPS = BK / 8;
    static_assert(BM == 128 || BM == 256, "wgmma N of 128 or 256");
    static_assert(WGS >= 1 && WGS <= 4, "1 to 4 warpgroups");
    static_assert(STAGES >= 3, "the wait for tile kt + 1 during tile kt needs three slots");
    static_assert(BK == 32 || BK == 16, "K-tiles of 128- or 64-byte rows");
    static_assert(A_BYTES % 1024 == 0 && STAGE_BYTES % (8 * ROW_BYTES) == 0, "swizzle atoms stay aligned");
    static_assert((BM * BK / 4) % NT == 0 && (BK * BN / 4) % NT == 0, "16-byte copies: whole passes");

    extern __shared__ float smem_raw[];
    const unsigned smem_base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const float* smem = smem_raw + (smem_base - smem_addr(smem_raw)) / 4;

    const int tid = threadIdx.x;
    const int warpgroup = tid / 128;
    const int warp = (tid / 32) % 4;
    const int lane = tid % 32;
    const int g = lane / 4;
    const int t = lane % 4;
    const int2 tile = swizzled_tile<GROUP>();
    const int block_row = tile.y * BM;
    const int block_col = tile.x * BN;
    const int frag_col = warpgroup * 64 + warp * 16 + g;    // this thread's column of the B tile (row of B^T)

    // The 16-byte copies of a tile, planned once: with only the tile's k0 and ring slot
    // changing from tile to tile, a copy costs an add, an address and a predicate instead
    // of v9's divisions, swizzle and bounds arithmetic per copy (which, at two warps per
    // scheduler, left the tensor pipe waiting on the integer pipes). A thread's A copies
    // are chunk a_c of rows a_r0 + i * A_PASS_ROWS: the same chunk and, A_PASS_ROWS being a
    // multiple of 8, the same swizzle in every row. Its B copies are columns b_c .. b_c + 3
    // of rows b_r0 + i * B_PASS_ROWS of the tile.
    constexpr int A_COPIES = BM * BK / 4 / NT;
    constexpr int A_PASS_ROWS = NT / (BK / 4);
    constexpr int B_COPIES = BK * BN / 4 / NT;
    constexpr int B_PASS_ROWS = NT / (BN / 4);
    static_assert(A_PASS_ROWS % 8 == 0 && A_COPIES <= 32, "one swizzle per thread; a bit per copy");
    const int a_r0 = tid / (BK / 4), a_c = tid % (BK / 4);
    const unsigned a_dst = swizzled_offset<ROW_BYTES>(a_r0, a_c);
    const int a_src = (block_row + a_r0) * K + 4 * a_c;
    const int a_pass = A_PASS_ROWS * K;
    unsigned a_row_ok = 0;
#pragma unroll
    for (int i = 0; i < A_COPIES; ++i) {
        a_row_ok |= (block_row + a_r0 + i * A_PASS_ROWS < M ? 1u : 0u) << i;
    }
    const int b_r0 = tid / (BN / 4), b_c = (tid % (BN / 4)) * 4;
    const unsigned b_dst = A_BYTES + (b_r0 * B_STRIDE + b_c) * 4;
    const int b_src = b_r0 * N + block_col + b_c;
    const bool b_col_ok = block_col + b_c < N;

    // Issue the copies of K-tile `tile` into ring slot `slot` (no commit).
    auto load_tile = [&](int slot, int tile) {
        const int k0 = tile * BK;
        const unsigned stage = smem_base + slot * STAGE_BYTES;
        if (K % 4 == 0) {
            const bool k_ok = k0 + 4 * a_c < K;
#pragma unroll
            for (int i = 0; i < A_COPIES; ++i) {
                const bool ok = k_ok && (a_row_ok >> i & 1u);
                cp_async_16(stage + a_dst + i * A_PASS_ROWS * ROW_BYTES, A + (ok ? a_src + i * a_pass + k0 : 0),
                            ok ? 16 : 0);
            }
        } else {
            cp_async_tile_4<BM, BK, NT>(A, K, block_row, k0, M, K, [&](int r, int k) {
                return stage + swizzled_offset<ROW_BYTES>(r, k / 4) + (k % 4) * 4;
            });
        }
        if (N % 4 == 0) {
            const int k0_rows = k0 * N;
#pragma unroll
            for (int i = 0; i < B_COPIES; ++i) {
                const bool ok = b_col_ok && k0 + b_r0 + i * B_PASS_ROWS < K;
                cp_async_16(stage + b_dst + i * B_PASS_ROWS * B_STRIDE * 4,
                            B + (ok ? b_src + k0_rows + i * B_PASS_ROWS * N : 0), ok ? 16 : 0);
            }
        } else {
            cp_async_tile_4<BK, BN, NT>(B, N, k0, block_col, K, N,
                                        [&](int r, int c) { return stage + A_BYTES + (r * B_STRIDE + c) * 4; });
        }
    };

    // The B^T fragments of every k step of the tile in `slot`.
    auto load_fragments = [&](unsigned (&frag)[KSTEPS][4], int slot) {
        const float* b_tile = smem + (slot * STAGE_BYTES + A_BYTES) / 4;
#pragma unroll
        for (int s = 0; s < KSTEPS; ++s) {
            const float* b = b_tile + (8 * s + t) * B_STRIDE + frag_col;
            frag[s][0] = __float_as_uint(b[0]);
            frag[s][1] = __float_as_uint(b[8]);
            frag[s][2] = __float_as_uint(b[4 * B_STRIDE]);
            frag[s][3] = __float_as_uint(b[4 * B_STRIDE + 8]);
        }
    };

    float acc[BM / 2];
#pragma unroll
    for (int i = 0; i < BM / 2; ++i) {
        acc[i] = 0.0f;
    }
    unsigned frag_even[KSTEPS][4], frag_odd[KSTEPS][4];   // fragments of even and odd K-tiles

    const int ktiles = (K + BK - 1) / BK;
    cp_async_first_tiles<STAGES - 1>(ktiles, load_tile);
    cp_async_wait<STAGES - 2>();
    fence_proxy_async();
    __syncthreads();
    load_fragments(frag_even, 0);

    // One K-tile: queue its wgmmas behind those of tile kt - 1, and while they run prepare
    // tile kt + 1. `now` holds tile kt's fragments; `other` held tile kt - 1's and receives
    // tile kt + 1's. Two named sets (not frag[kt % 2]) keep every index static: registers.
    auto multiply_tile = [&](int kt, unsigned (&now)[KSTEPS][4], unsigned (&other)[KSTEPS][4]) {
        const unsigned a_tile = smem_base + (kt % STAGES) * STAGE_BYTES;
        wgmma_fence();
#pragma unroll
        for (int s = 0; s < KSTEPS; ++s) {
            wgmma_tile<BM>(acc, now[s], swizzled_desc<ROW_BYTES>(a_tile + 32 * s));
        }
        wgmma_commit();

        wgmma_wait<1>();                // tile kt - 1's wgmmas are done: its fragments and slot are free
#pragma unroll
        for (int s = 0; s < KSTEPS; ++s) {
            hold_registers(other[s]);
        }
        if (kt + 1 < ktiles) {
            cp_async_wait<STAGES - 3>();
            fence_proxy_async();
            __syncthreads();            // every warpgroup is past tile kt - 1; tile kt + 1 is visible
            const int refill = kt + STAGES - 1;
            if (refill < ktiles) {
                load_tile(refill % STAGES, refill);
            }
            cp_async_commit();
            load_fragments(other, (kt + 1) % STAGES);
        }
    };

    for (int kt = 0; kt < ktiles; kt += 2) {
        multiply_tile(kt, frag_even, frag_odd);
        if (kt + 1 < ktiles) {
            multiply_tile(kt + 1, frag_odd, frag_even);
        }
    }
    wgmma_wait<0>();
    hold_registers(acc);
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s) {
        hold_registers(frag_even[s]);
        hold_registers(frag_odd[s]);
    }
    cp_async_wait<0>();

    // d[4 j + e]: C row m = block_row + 8 j + 2 t + e % 2, column n = block_col + frag_col + 8 (e / 2).
#pragma unroll
    for (int j = 0; j < BM / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int m = block_row + 8 * j + 2 * t + e % 2;
            const int n = block_col + frag_col + 8 * (e / 2);
            if (m < M && n < N) {
                C[m * N + n] = acc[4 * j + e];
            }
        }
    }
}
