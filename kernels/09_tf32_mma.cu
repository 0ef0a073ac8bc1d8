// v9: the tensor cores, in TF32. Every kernel up to v8 issues one FFMA per multiply-add on
// the SM's FP32 pipes, whose peak on the H200 is about 67 TFLOP/s. A warp-wide
// mma.sync.m16n8k8 TF32 instruction does 16 x 8 x 8 = 1,024 multiply-adds on the tensor
// cores instead, where the dense TF32 peak is several times higher. The price is
// precision: each input is rounded to TF32 (8-bit exponent, 10-bit mantissa, unit
// roundoff 2^-11 ~ 4.9e-4) before the multiply; products are accumulated in FP32. So this
// kernel is checked with a TF32 tolerance (the spec's `precision: tf32`) and timed against
// cuBLAS SGEMM in its TF32 tensor-op math mode, not against FP32 SGEMM.
//
// Layout (BM = 128, BN = 128, BK = 32, WM = 64, WN = 32: 8 warps, 256 threads):
// - the block tile is split into 2 x 4 warp tiles of 64 x 32; a warp covers its tile with
//   4 x 4 mma tiles of 16 x 8, so it holds 4 x 4 x 4 = 64 FP32 accumulators a thread.
// - per k step of 8, a thread loads its A fragments (4 values per m16 tile) and B
//   fragments (2 per n8 tile) from shared memory, rounds them to TF32 (cvt.rna) and issues
//   16 mma.sync; BK / 8 steps per K-tile.
// - fragment ownership (PTX ISA, m16n8k8 .tf32): lane = 4 g + t;
//     A: a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
//     B: b0 (k = t, n = g), b1 (k = t + 4, n = g)
//     C: c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1)
// - shared memory: A as [BM][BK + 4] (k contiguous), B as [BK][BN + 8] (n contiguous).
//   A fragment loads of a warp read rows g = 0..7 at k = t: bank (4 g + t) mod 32, all
//   different; B loads read k = t at columns g: bank (8 t + g) mod 32, all different.
// - a STAGES-deep cp.async ring (v7's scheme: STAGES - 1 tiles in flight while one is
//   multiplied); 16-byte copies when K and N are multiples of 4 (then a 4-float chunk is
//   either wholly inside the matrix or wholly outside), 4-byte copies otherwise; outside
//   the matrix the copies write zeros (src-size 0), so any M, N, K is right.
//
// Launch: block ((BM / WM) * (BN / WN) * 32), grid (ceil(N / BN), ceil(M / BM)), dynamic
// shared memory STAGES * (BM * (BK + 4) + BK * (BN + 8)) * 4 bytes (107,520 for 3 stages).
// Index arithmetic is 32-bit: M * K, K * N and M * N must stay below 2^31.
//
// Measured on H200 (tests/data/results/tf32-h200.json, `driver-gemm run specs/tf32.yaml`, cold L2):
// 1.083 ms at 4096^3 = 127 TFLOP/s,
// 2.7 times v8 but 34.3% of cuBLAS TF32 (0.372 ms); with a 128 x 256 tile (WN = 64) 1.016 ms
// (36.6%). Where the rest goes was not profiled. The likely limit is feeding the tensor
// cores: per k step a thread issues 24 scalar shared loads and 24 cvt for 16 mma, where
// cuBLAS feeds Hopper's wgmma from shared memory filled by the TMA.

#include "cp_async.cuh"

// Round to nearest (ties away) to TF32; the result is a 32-bit pattern with the low 13 bits clear.
__device__ __forceinline__ unsigned to_tf32(float x)
{
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2])
{
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
sgemm_tf32_mma(const float* A, const float* B, float* C, int M, int N, int K)
{
    constexpr int NT = (BM / WM) * (BN / WN) * 32;
    constexpr int MT = WM / 16;                     // m16 tiles per warp
    constexpr int NTL = WN / 8;                     // n8 tiles per warp
    constexpr int A_STRIDE = BK + 4;
    constexpr int B_STRIDE = BN + 8;
    constexpr int A_FLOATS = BM * A_STRIDE;
    constexpr int STAGE_FLOATS = A_FLOATS + BK * B_STRIDE;
    static_assert(WM % 16 == 0 && WN % 8 == 0 && BK % 8 == 0, "warp tiles of whole m16n8k8 tiles");
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must cover the block tile");
    static_assert((BM * BK / 4) % NT == 0 && (BK * BN / 4) % NT == 0, "16-byte copies: whole passes");
    static_assert(BK % 4 == 0 && BN % 4 == 0, "4-float chunks");
    static_assert(STAGES >= 2, "at least double buffering");

    extern __shared__ __align__(16) float smem[];    // STAGES x { a_tile[BM][BK + 4], b_tile[BK][BN + 8] }

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int g = lane / 4;
    const int t = lane % 4;
    const int warp_row = (warp / (BN / WN)) * WM;
    const int warp_col = (warp % (BN / WN)) * WN;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const bool vec = (K % 4 == 0) && (N % 4 == 0);
    const unsigned smem_base = smem_addr(smem);

    // Issue the copies of K-tile `tile` into ring slot `slot` (no commit).
    auto load_tile = [&](int slot, int tile) {
        const int k0 = tile * BK;
        const unsigned a_base = smem_base + slot * STAGE_FLOATS * 4;
        const unsigned b_base = a_base + A_FLOATS * 4;
        if (vec) {
#pragma unroll
            for (int i = 0; i < BM * BK / 4 / NT; ++i) {
                const int chunk = tid + i * NT;
                const int r = chunk / (BK / 4), c = (chunk % (BK / 4)) * 4;
                const bool ok = block_row + r < M && k0 + c < K;
                const float* src = ok ? A + (block_row + r) * K + k0 + c : A;
                cp_async_16(a_base + (r * A_STRIDE + c) * 4, src, ok ? 16 : 0);
            }
#pragma unroll
            for (int i = 0; i < BK * BN / 4 / NT; ++i) {
                const int chunk = tid + i * NT;
                const int r = chunk / (BN / 4), c = (chunk % (BN / 4)) * 4;
                const bool ok = k0 + r < K && block_col + c < N;
                const float* src = ok ? B + (k0 + r) * N + block_col + c : B;
                cp_async_16(b_base + (r * B_STRIDE + c) * 4, src, ok ? 16 : 0);
            }
        } else {
            cp_async_tile_4<BM, BK, NT>(A, K, block_row, k0, M, K,
                                        [&](int r, int c) { return a_base + (r * A_STRIDE + c) * 4; });
            cp_async_tile_4<BK, BN, NT>(B, N, k0, block_col, K, N,
                                        [&](int r, int c) { return b_base + (r * B_STRIDE + c) * 4; });
        }
    };

    float acc[MT][NTL][4] = {};

    const int ktiles = (K + BK - 1) / BK;
    cp_async_first_tiles<STAGES - 1>(ktiles, load_tile);

    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<STAGES - 2>();   // tile kt has landed (for this thread's copies) ...
        __syncthreads();               // ... and for everyone's; slot (kt - 1) % STAGES is free again
        const int refill = kt + STAGES - 1;
        if (refill < ktiles) {
            load_tile(refill % STAGES, refill);
        }
        cp_async_commit();

        const float* a_tile = smem + (kt % STAGES) * STAGE_FLOATS;
        const float* b_tile = a_tile + A_FLOATS;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            unsigned a_frag[MT][4];
            unsigned b_frag[NTL][2];
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const float* a = a_tile + (warp_row + i * 16 + g) * A_STRIDE + kk + t;
                a_frag[i][0] = to_tf32(a[0]);
                a_frag[i][1] = to_tf32(a[8 * A_STRIDE]);
                a_frag[i][2] = to_tf32(a[4]);
                a_frag[i][3] = to_tf32(a[8 * A_STRIDE + 4]);
            }
#pragma unroll
            for (int j = 0; j < NTL; ++j) {
                const float* b = b_tile + (kk + t) * B_STRIDE + warp_col + j * 8 + g;
                b_frag[j][0] = to_tf32(b[0]);
                b_frag[j][1] = to_tf32(b[4 * B_STRIDE]);
            }
#pragma unroll
            for (int i = 0; i < MT; ++i) {
#pragma unroll
                for (int j = 0; j < NTL; ++j) {
                    mma_tf32(acc[i][j], a_frag[i], b_frag[j]);
                }
            }
        }
    }
    cp_async_wait<0>();

    // Each thread writes pairs of adjacent columns: 8-byte stores when N is even.
    const bool pairs = (N % 2) == 0;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int row = block_row + warp_row + i * 16 + g + half * 8;
            if (row >= M) {
                continue;
            }
#pragma unroll
            for (int j = 0; j < NTL; ++j) {
                const int col = block_col + warp_col + j * 8 + 2 * t;
                const float v0 = acc[i][j][2 * half];
                const float v1 = acc[i][j][2 * half + 1];
                float* dst = C + row * N + col;
                if (pairs && col + 1 < N) {
                    *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
                } else {
                    if (col < N) dst[0] = v0;
                    if (col + 1 < N) dst[1] = v1;
                }
            }
        }
    }
}
