// v5: 16-byte memory accesses: float4 global loads, A transposed in shared memory, float4 C stores.
//
// v4 moves every value one float at a time: each element of the A and B tiles
// is a separate 4-byte global load, and the inner loop reads its TM values of
// A with TM scalar shared loads down a column of a_tile (a stride of BK
// floats). Here a thread copies whole float4s of A and B (one 16-byte load
// instead of four 4-byte ones, a quarter of the load instructions), and stores
// the A tile transposed, a_tile[k][row], so that for one k the TM values of A
// a thread needs are contiguous, like its TN values of B: the inner loop does
// TM / 4 + TN / 4 LDS.128 per k for TM * TN FFMAs (4 loads for 64 FFMAs with
// TM = TN = 8, against 16 scalar loads in v4 at the same tile). The larger
// thread tile (8 x 8) and block tile (128 x 128) also halve the global and
// shared traffic per FLOP compared with v4's 4 x 4 and 64 x 64.
//
// The transposed tile is padded by 4 floats per k-row (BM + 4): the 32 threads
// of a warp write a_tile[c + j][r] for 16 rows r and c in {0, 4}; without the
// padding the two values of c fall in the same bank (a 2-way conflict); with
// it they are 16 banks apart, and each k-row still starts 16-byte aligned.
//
// Vector paths only where the data allows them, decided once per launch:
// float4 loads of A rows need K % 4 == 0 (every row then starts 16-byte aligned
// and a float4 at a multiple of 4 is either wholly inside the row or wholly
// past its end); float4 loads of B rows and float4 stores of C rows need
// N % 4 == 0. Otherwise the same float4 of the tile is gathered element by
// element, each checked against M, N and K. Elements outside A and B are
// zero-filled; only elements inside C are written.
//
// Thread (tx, ty) = (tid % (BN / TN), tid / (BN / TN)) computes rows
// ty * TM .. + TM and columns tx * TN .. + TN of the block tile. Known
// weakness (fixed by v6): a warp's 16 threads in x read 8-float chunks 32 bytes
// apart from b_tile, so each quarter-warp of an LDS.128 spans 256 bytes, a
// 2-way bank conflict.
//
// Launch: BM = BN = 128, BK = 8, TM = TN = 8: 256 threads, block (256),
// grid (ceil(N / 128), ceil(M / 128)), 8.3 KB of static shared memory.
// Index arithmetic is 32-bit: M * K, K * N and M * N must stay below 2^31.
//
// Measured on H200 (bench/results/nvidia-h200/fp32.json.gz, cold L2): 4.23 ms at 4096^3 = 32.5 TFLOP/s,
// 63.2% of cuBLAS, against 5.50 ms for v4 (1.30x). At the seed's small shapes its 128 x 128 tiles leave
// most SMs idle (32 blocks for 1024 x 512).

#include "tile_io.cuh"

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_vec4(const float* A, const float* B, float* C, int M, int N, int K)
{
    constexpr int NT = (BM / TM) * (BN / TN);        // threads per block (blockDim.x)
    constexpr int APAD = 4;
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 fragments");
    static_assert((BM * BK / 4) % NT == 0 && (BK * BN / 4) % NT == 0, "threads must divide the tile loads");

    __shared__ __align__(16) float a_tile[BK][BM + APAD];   // transposed: a_tile[k][row]
    __shared__ __align__(16) float b_tile[BK][BN];

    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN);
    const int ty = tid / (BN / TN);
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const bool a_vec = (K & 3) == 0;
    const bool b_vec = (N & 3) == 0;

    float acc[TM][TN] = {};
    float a_frag[TM];
    float b_frag[TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
        // A tile: BM rows x BK/4 float4s; consecutive threads take consecutive float4s of a row.
#pragma unroll
        for (int i = 0; i < BM * BK / 4 / NT; ++i) {
            const int idx = i * NT + tid;
            const int r = idx / (BK / 4);
            const int c = (idx % (BK / 4)) * 4;
            const float4 v = load_float4_guarded(A, M, K, block_row + r, k0 + c, a_vec);
            a_tile[c + 0][r] = v.x;
            a_tile[c + 1][r] = v.y;
            a_tile[c + 2][r] = v.z;
            a_tile[c + 3][r] = v.w;
        }
        // B tile: BK rows x BN/4 float4s, stored as they are.
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
            for (int i = 0; i < TM; i += 4) {
                const float4 a = *reinterpret_cast<const float4*>(&a_tile[k][ty * TM + i]);
                a_frag[i + 0] = a.x;
                a_frag[i + 1] = a.y;
                a_frag[i + 2] = a.z;
                a_frag[i + 3] = a.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 b = *reinterpret_cast<const float4*>(&b_tile[k][tx * TN + j]);
                b_frag[j + 0] = b.x;
                b_frag[j + 1] = b.y;
                b_frag[j + 2] = b.z;
                b_frag[j + 3] = b.w;
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

    store_c_tile<TM, TN, 1, 1>(C, M, N, block_row + ty * TM, block_col + tx * TN, acc, b_vec);
}
