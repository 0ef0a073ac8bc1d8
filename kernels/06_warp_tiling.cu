// v6: warp tiling: the block tile is split into warp tiles, and the threads of a warp are
// laid out so that every shared-memory load is conflict-free.
//
// In v5 thread (tx, ty) owns an 8 x 8 block of C, so a warp (16 x 2 threads)
// covers a 16 x 128 strip of the block tile: per k it reads 512 bytes of
// b_tile (with a 2-way bank conflict, 8 threads 32 bytes apart) and only 64
// bytes of a_tile. Here the BM x BN block tile is cut into (BM / WM) x (BN / WN)
// warp tiles of WM x WN, one per warp, and inside a warp tile the 32 lanes form
// an LR x LC grid (LR = WM / TM, LC = WN / TN, LR * LC = 32). A thread's TM x TN
// results are (TM / 4) x (TN / 4) sub-tiles of 4 x 4, spread over the warp tile
// with strides LR * 4 rows and LC * 4 columns, so that for one k:
//   - the warp's lanes read TM / 4 float4s of A each, at 4 * lr + i * 4 * LR:
//     LR distinct consecutive float4s per load, the rest broadcasts;
//   - likewise TN / 4 float4s of B at 4 * lc + j * 4 * LC.
// Every LDS.128 of the inner loop touches at most 8 distinct consecutive
// float4s (128 bytes), so no quarter-warp ever has a bank conflict, and with
// 64 x 32 warp tiles a warp reads 384 bytes of shared memory per k (256 of A,
// 128 of B) against 576 in v5: shared-memory bandwidth per FFMA drops by a
// third. The lane mapping is lane = lr * LC + lc.
//
// Shared layouts: a_tile is transposed (a_tile[k][row]) and padded to BM + 4
// floats per k-row, b_tile is a_tile's row-major [k][col]. A is copied as
// float4s along k, two consecutive float4s per row and 16 rows per warp:
// c4 = idx % 2 + 2 * (idx / (2 * BM)), r = (idx / 2) % BM. The transposed
// scalar stores a_tile[4 * c4 + j][r] of a warp then fall on 16 * c4 + 4 * j + r
// (mod 32): 32 distinct banks with the padding of 4 (BM a multiple of 32),
// while the global reads stay one full 32-byte sector per row.
//
// As in v5, float4 global loads of A need K % 4 == 0, of B and stores of C
// N % 4 == 0, decided once per launch; otherwise each element of a float4 is
// loaded and stored on its own, checked against M, N and K. Tiles are
// zero-filled past the edges of A and B; only elements inside C are written.
// Still one tile in flight: load, barrier, compute, barrier (v7 pipelines it).
//
// Launch: BM = BN = 128, BK = 8, WM = 64, WN = 32, TM = TN = 8: 8 warps
// (2 x 4) of 8 x 4 lanes, 256 threads, block (256), grid (ceil(N / 128),
// ceil(M / 128)), 8.3 KB of static shared memory (BK = 16: 16.6 KB).
// Index arithmetic is 32-bit: M * K, K * N and M * N must stay below 2^31.
//
// Measured on H200 (bench/results/nvidia-h200/fp32.json.gz, cold L2): 3.87 ms at 4096^3 = 35.5 TFLOP/s,
// 69.1% of cuBLAS (1.09x over v5).

#include "tile_io.cuh"

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
sgemm_warp_tiling(const float* A, const float* B, float* C, int M, int N, int K)
{
    constexpr int NT = (BM / WM) * (BN / WN) * 32;   // threads per block (blockDim.x)
    constexpr int LR = WM / TM;                      // lanes along the rows of a warp tile
    constexpr int LC = WN / TN;                      // lanes along its columns
    constexpr int APAD = 4;
    static_assert(LR * LC == 32, "a warp tile must hold exactly 32 thread tiles");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 8 == 0, "float4 fragments, two float4s of A per row");
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must cover the block tile");
    static_assert((BM * BK / 4) % NT == 0 && (BK * BN / 4) % NT == 0, "threads must divide the tile loads");

    __shared__ __align__(16) float a_tile[BK][BM + APAD];   // transposed: a_tile[k][row]
    __shared__ __align__(16) float b_tile[BK][BN];

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int warp_row = (warp / (BN / WN)) * WM;    // warp tile origin inside the block tile
    const int warp_col = (warp % (BN / WN)) * WN;
    const int lr = lane / LC;
    const int lc = lane % LC;
    const int thread_row = warp_row + lr * 4;        // first row of the thread's first 4 x 4 sub-tile
    const int thread_col = warp_col + lc * 4;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const bool a_vec = (K & 3) == 0;
    const bool b_vec = (N & 3) == 0;

    float acc[TM][TN] = {};
    float a_frag[TM];
    float b_frag[TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int i = 0; i < BM * BK / 4 / NT; ++i) {
            const int idx = i * NT + tid;
            const int c = (idx % 2 + 2 * (idx / (2 * BM))) * 4;
            const int r = (idx / 2) % BM;
            const float4 v = load_float4_guarded(A, M, K, block_row + r, k0 + c, a_vec);
            a_tile[c + 0][r] = v.x;
            a_tile[c + 1][r] = v.y;
            a_tile[c + 2][r] = v.z;
            a_tile[c + 3][r] = v.w;
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 4 / NT; ++i) {
            const int idx = i * NT + tid;
            const int r = idx / (BN / 4);
            const int c = (idx % (BN / 4)) * 4;
            const float4 v = load_float4_guarded(B, K, N, k0 + r, block_col + c, b_vec);
            *reinterpret_cast<float4*>(&b_tile[r][c]) = v;
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM / 4; ++i) {
                const float4 a = *reinterpret_cast<const float4*>(&a_tile[k][thread_row + i * 4 * LR]);
                a_frag[4 * i + 0] = a.x;
                a_frag[4 * i + 1] = a.y;
                a_frag[4 * i + 2] = a.z;
                a_frag[4 * i + 3] = a.w;
            }
#pragma unroll
            for (int j = 0; j < TN / 4; ++j) {
                const float4 b = *reinterpret_cast<const float4*>(&b_tile[k][thread_col + j * 4 * LC]);
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
        __syncthreads();
    }

    store_c_tile<TM, TN, LR, LC>(C, M, N, block_row + thread_row, block_col + thread_col, acc, b_vec);
}
