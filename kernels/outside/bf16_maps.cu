// BF16 GEMMs in the styles kernels from outside this project take their tensor maps: a
// `const CUtensorMap*` to a map the host copied to device memory, a rank-3 map of B that cuts it
// into 64-column panels, and a compile-time cluster (`__cluster_dims__`). The machinery is v12p's
// (kernels/12_bf16_tma_ws.cu, whose header explains it): a persistent grid, a TMA producer
// warpgroup and two consumer warpgroups on wgmma.m64n256k16 sharing a 128 x 256 tile, a ring of
// stages across tiles, fp32 C stored in whole 32-byte sectors. What changes is only how the maps
// arrive and how B's boxes are asked for:
//
// - gemm_bf16_maps_by_pointer: `const CUtensorMap* map_a, const CUtensorMap* map_b`. The TMA
//   instruction takes the map's generic address wherever it lies (parameter space, constant or
//   global memory), so the kernel passes the pointer on unchanged; driver-gemm encodes the map,
//   copies it to a small device buffer before the timed launches and passes its address.
// - B_PANELS 0: B (K x N, row-major) as a rank-2 map {N, K} with a 64 x 64 box: four boxes per
//   stage, at columns col, col + 64, col + 128, col + 192 (as v12p).
//   B_PANELS 1: B as a rank-3 map {64, K, N / 64}, strides {N * 2, 128} bytes: element (n, k, p)
//   is B[k][64 p + n], so dimension 2 steps 128 bytes, less than dimension 1's row: the dimensions
//   overlap in memory, which cuTensorMapEncodeTiled allows. One box {64, 64, 4} is the whole
//   stage's B tile, four 64-column panels one after another (8 KB each, the layout v12p's four
//   boxes leave), asked for by one instruction at (0, k, col / 64). Needs N % 64 == 0 (the last
//   panel would otherwise run past B's end).
// - gemm_bf16_maps_cluster: the same with the maps by value (`const __grid_constant__
//   CUtensorMap`) and `__cluster_dims__(2, 1, 1)`: launched in clusters of two blocks whatever the
//   launch asks, so its grid must be even. The blocks of a cluster do not cooperate here; the
//   kernel shows that a compiled cluster is read from the image and its grid checked.
//
// Launch (all three): block 384, grid "min(sm_count, tiles)" (even for the cluster form),
// dynamic shared memory STAGES * (128 + 256) * 128 + 16 * STAGES + 16 + 1024 bytes; A's map box
// {64, 128} (64 k, 128 rows), 128-byte swizzle; K % 8 == 0 and N % 8 == 0 (16-byte rows). Needs sm_90a.
//
// <cassert>, <cstdio> and <cuda/barrier> are included as outside kernels include them: under
// NVRTC driver-gemm's stand-ins for the C headers must declare int64_t as CCCL does.

#include <cassert>
#include <cstdio>
#include <cuda/barrier>

#include "../block_order.cuh"
#include "../tma.cuh"
#include "../wgmma.cuh"

// What <cuda.h> declares; NVRTC has no <cuda.h> of its own, so the type is spelt here, with the
// same name (the mangled names say CUtensorMap_st) and alignment.
struct alignas(64) CUtensorMap_st {
    unsigned long long opaque[16];
};
typedef CUtensorMap_st CUtensorMap;

namespace outside {

__device__ __forceinline__ void tma_load(unsigned dst, const CUtensorMap* map, int x, int y, unsigned barrier)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(barrier)
                 : "memory");
}

__device__ __forceinline__ void tma_load(unsigned dst, const CUtensorMap* map, int x, int y, int z, unsigned barrier)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(z), "r"(barrier)
                 : "memory");
}

// D (64 x 256) += A (64 x 16) * B (16 x 256), both from shared memory; B MN-major (transposed).
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], unsigned long long a_desc, unsigned long long b_desc)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" WGMMA_D_0_63 ", " WGMMA_D_64_127 "}, "
                 "%128, %129, 1, 1, 1, 0, 1;\n"
                 : WGMMA_D64(0), WGMMA_D64(64)
                 : "l"(a_desc), "l"(b_desc));
}

// A 128-byte-swizzled MN-major operand: leading offset = the step along N (one 64-column box),
// stride offset = the step along K (8 rows of 128 bytes), as v12 (BDESC 0).
__device__ __forceinline__ unsigned long long b_desc(unsigned smem_byte_addr)
{
    constexpr unsigned ALONG_N = 64 * 64 * 2;
    constexpr unsigned ALONG_K = 1024;
    return static_cast<unsigned long long>((smem_byte_addr >> 4) & 0x3FFF)
         | (static_cast<unsigned long long>((ALONG_N >> 4) & 0x3FFF) << 16)
         | (static_cast<unsigned long long>((ALONG_K >> 4) & 0x3FFF) << 32)
         | (1ull << 62);
}

// A consumer warpgroup's 64 x 256 fp32 accumulators, stored as float2 so that each warp store
// writes whole 32-byte sectors (v12p's store_tile<32>).
__device__ __forceinline__ void store_tile(const float (&acc)[128], float* C, int M, int N, int row0, int col0)
{
    const int lane = threadIdx.x % 32;
    const int warp = (threadIdx.x / 32) % 4;
    const int g = lane / 4;
    const int t = lane % 4;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int m = row0 + 16 * warp + g + 8 * half;
            const int n = col0 + 8 * j + 2 * t;
            if (m >= M || n >= N) {
                continue;
            }
            const float x = acc[4 * j + 2 * half], y = acc[4 * j + 2 * half + 1];
            const size_t at = static_cast<size_t>(m) * N + n;
            if (n + 1 < N) {
                *reinterpret_cast<float2*>(C + at) = make_float2(x, y);
            } else {
                C[at] = x;
            }
        }
    }
}

// v12p's persistent cooperative body (CWG 2, PINGPONG 0, fp32 out), the maps by address.
template <int STAGES, int GROUP, int B_PANELS>
__device__ __forceinline__ void gemm_body(const CUtensorMap* map_a, const CUtensorMap* map_b, float* C, int M, int N,
                                          int K)
{
    constexpr int CWG = 2;
    constexpr int BK = 64;
    constexpr int TM = 64 * CWG;
    constexpr int BN = 256;
    constexpr int A_BYTES = TM * BK * 2;
    constexpr int B_BOX_BYTES = BK * 64 * 2;
    constexpr int STAGE_BYTES = A_BYTES + (BN / 64) * B_BOX_BYTES;
    constexpr int KSTEPS = BK / 16;
    constexpr int PRODUCER_REGISTERS = 40;
    constexpr int CONSUMER_REGISTERS = consumer_registers<CWG, PRODUCER_REGISTERS>();
    constexpr int RELEASES = 4 * CWG;
    static_assert(STAGES >= 2, "a ring of at least two stages");
    static_assert(B_PANELS == 0 || B_PANELS == 1, "B as four rank-2 boxes or one rank-3 box");

    extern __shared__ unsigned char smem_raw[];
    const RingLayout<STAGES, STAGE_BYTES> ring(shared_address(smem_raw));

    const int tid = threadIdx.x;
    const int warpgroup = tid / 128;
    const int tile_columns = (N + BN - 1) / BN;
    const int tile_rows = (M + TM - 1) / TM;
    const int tiles = tile_columns * tile_rows;
    const int ktiles = (K + BK - 1) / BK;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(ring.full_bar(s), 1);
            mbarrier_init(ring.empty_bar(s), RELEASES);
        }
        mbarrier_init_fence();
    }
    __syncthreads();

    if (warpgroup == 0) {
        registers_decrease<PRODUCER_REGISTERS>();
        if (tid == 0) {
            int it = 0;
            for (int index = blockIdx.x; index < tiles; index += gridDim.x) {
                const int2 tile = swizzled_tile_of<GROUP>(index, tile_columns, tile_rows);
                const int tile_row = tile.y * TM;
                const int tile_col = tile.x * BN;
                for (int kt = 0; kt < ktiles; ++kt, ++it) {
                    const int slot = it % STAGES;
                    const unsigned stage = ring.stage(slot);
                    const unsigned barrier = ring.full_bar(slot);
                    ring_wait_free<STAGES>(ring.empty, it);
                    mbarrier_arrive_expect_tx(barrier, STAGE_BYTES);
                    tma_load(stage, map_a, kt * BK, tile_row, barrier);
                    if constexpr (B_PANELS == 1) {
                        tma_load(stage + A_BYTES, map_b, 0, kt * BK, tile_col / 64, barrier);
                    } else {
#pragma unroll
                        for (int j = 0; j < BN / 64; ++j) {
                            tma_load(stage + A_BYTES + j * B_BOX_BYTES, map_b, tile_col + 64 * j, kt * BK, barrier);
                        }
                    }
                }
            }
        }
        return;
    }
    registers_increase<CONSUMER_REGISTERS>();

    const int consumer = warpgroup - 1;
    const int lane = tid % 32;
    int local = 0;
    for (int index = blockIdx.x; index < tiles; index += gridDim.x, ++local) {
        const int2 tile = swizzled_tile_of<GROUP>(index, tile_columns, tile_rows);
        float acc[128];
#pragma unroll
        for (int i = 0; i < 128; ++i) {
            acc[i] = 0.0f;
        }
        int it = local * ktiles;
        for (int kt = 0; kt < ktiles; ++kt, ++it) {
            const int slot = it % STAGES;
            mbarrier_wait(ring.full_bar(slot), (it / STAGES) & 1);
            const unsigned a_tile = ring.stage(slot) + consumer * 64 * 128;
            const unsigned b_tile = ring.stage(slot) + A_BYTES;
            wgmma_fence();
#pragma unroll
            for (int s = 0; s < KSTEPS; ++s) {
                wgmma_m64n256k16(acc, swizzled_desc<128>(a_tile + 32 * s), b_desc(b_tile + 2048 * s));
            }
            wgmma_commit();
            wgmma_wait<1>();           // K-tile it - 1's wgmmas are done: its stage can be refilled
            if (kt >= 1 && lane == 0) {
                mbarrier_arrive(ring.empty_bar((it - 1) % STAGES));
            }
        }
        wgmma_wait<0>();
        hold_registers(acc);
        if (ktiles >= 1 && lane == 0) {  // the tile's last stage: free for the next tile's loads
            mbarrier_arrive(ring.empty_bar((it - 1) % STAGES));
        }
        store_tile(acc, C, M, N, tile.y * TM + 64 * consumer, tile.x * BN);
    }
}

}  // namespace outside

template <int STAGES, int GROUP, int B_PANELS>
__global__ void __launch_bounds__(384, 1)
gemm_bf16_maps_by_pointer(const CUtensorMap* map_a, const CUtensorMap* map_b, float* C, int M, int N, int K)
{
    outside::gemm_body<STAGES, GROUP, B_PANELS>(map_a, map_b, C, M, N, K);
}

template <int STAGES, int GROUP, int B_PANELS>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)
gemm_bf16_maps_cluster(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, float* C,
                       int M, int N, int K)
{
    outside::gemm_body<STAGES, GROUP, B_PANELS>(&map_a, &map_b, C, M, N, K);
}
