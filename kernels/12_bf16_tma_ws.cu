// v12: BF16 inputs, FP32 accumulation, on v11's machinery (TMA producer warpgroup, consumer
// warpgroups on wgmma, a ring of stages handed back and forth through mbarriers).
// What changes from TF32: for 16-bit types wgmma reads BOTH operands from shared memory in
// either major order (the instruction's transpose bits), so the kernel computes C = A B
// directly: the A tile is K-major (A row-major), the B tile MN-major (B row-major, n
// contiguous), and no fragment passes through registers. A consumer's only instructions in
// the K loop are a barrier wait, four wgmma and a barrier arrive.
//
// Tiles: BM = 64 * CWG rows (one 64-row slab per consumer warpgroup), BN = 256 columns (one
// m64n256k16 wgmma per k step of 16), BK = 64 (one 128-byte swizzle row of bf16).
// - A tile: BM rows of 64 bf16, 128-byte swizzled by the TMA engine; descriptor as v10's
//   (K-major, 8-row groups 1024 bytes apart); a k step moves its start 32 bytes.
// - B tile: BN / 64 boxes of 64 k rows x 64 n, each 128-byte swizzled; in wgmma's MN-major
//   terms an atom is 8 k rows of 128 bytes (64 n); atoms follow along K every 1024 bytes and
//   along N every box (BK * 128 bytes). BDESC says which of the descriptor's two offset
//   fields holds which (0: leading = the step along N, stride = the step along K; 1: the
//   other way round): the kernel is built both ways and the checked run shows which one is
//   right; a k step of 16 rows moves the start 2048 bytes.
//
// Output C as fp32 (OUT 32) or bf16 (OUT 16, rounded to nearest even). TMA needs 16-byte
// row strides: K % 8 == 0 and N % 8 == 0. Launch: block 128 * (CWG + 1), grid
// (ceil(N / 256), ceil(M / (64 * CWG))), dynamic shared memory
// STAGES * (64 * CWG + 256) * 128 + 16 * STAGES + 1024, tensor maps A (bf16, box 64 x BM) and
// B (bf16, box 64 x 64), both with the 128-byte swizzle. Needs sm_90a.
//
// BDESC: which of a B descriptor's two byte offsets steps along N from one 64-column box to the next.
// With boxes of 64 columns laid one after another it is the leading offset (BDESC 0), which the specs
// use; BDESC 1 reads the boxes out of order wherever a tile holds more than one of them.
//
// Predicted (before it ran): a consumer's K loop is four wgmma and two mbarrier operations, no
// fragment loads at all, and BF16 wgmma does twice TF32's multiply-adds per cycle. With v11's
// TF32 loop already at cuBLAS's pace, we expected 90-95% of cuBLAS BF16 at 4096^3 and 8192^3.
//
// Measured on H200 (`driver-gemm run specs/tma-bf16.yaml` against driver-gemm's cuBLASLt BF16 rows of
// the same run and output type), CWG 2, STAGES 4, OUT 32 (fp32 C) / OUT 16 (bf16 C):
//   bench/results/nvidia-h200/bf16.json.gz       4096^3 84.0% / 80.7%     8192^3 91.7% / 88.3%
//   bench/results/nvidia-h200/checks/tma-bf16.jsonl.gz (a run stopped by its time limit before 8192^3):
//     4096^3 84.1% / 82.0% (0.2429 ms against 0.2042 ms; 0.2398 against 0.1966 ms); 1024x512x1024 37.0% /
//     35.6%, 1001x520x776 40.7% / 39.5%
// Short of the prediction at 4096^3: it is 16 x 32 = 512 tiles of 128 x 256 on 132 SMs, 3.9 waves of
// one block per SM, so every block fills its pipeline, drains it and writes its 128 KB of C with
// nothing else running on its SM, and the last wave leaves 16 SMs idle. At 8192^3 (15.5 waves, 128
// K-tiles per block against 64) those fixed costs weigh half as much. Sustained BF16 work held the
// SM clock at 1560-1755 MHz in these runs (each case records it).
//
// Small shapes: 1024x512x1024 is a 2 x 8 grid, 16 blocks for 132 SMs (as v11). 1001x513x777
// and 1000x516x780 are refused before launch: a bf16 row of K = 777 or 780 is 1554 or 1560
// bytes, not a multiple of 16; 1001x520x776 is the awkward shape that runs.
//
// v12p and v12pp: persistent forms (gemm_bf16_tma_ws_persistent, below; gemm_bf16_tma_ws above
// is unchanged, so the measurements above stay reproducible). What changes:
// - Grid min(sm_count, tiles): one block per SM takes tiles index, index + gridDim.x, ... in the
//   same GROUP-swizzled order v12's blocks take them. The producer never stops between tiles: it
//   counts K-tiles over all of its block's tiles, so when the consumers finish a tile's last
//   wgmma the next tile's first STAGES K-tiles are already loading or landed, and its fill no
//   longer adds to each tile. The consumers count the same way, and free a tile's last stage
//   (which v12 never frees) before they write C.
// - v12p (PINGPONG 0) keeps v12's cooperative 128 x 256 tile: while both consumer warpgroups
//   store C the tensor cores still wait, but the loads do not.
// - v12pp (PINGPONG 1): each of the two consumer warpgroups owns whole 64 x 256 tiles, taking the
//   block's tiles in turn: while one stores its C, the other's wgmmas run. The ring is filled in
//   tile order, so one warpgroup reaches its next tile's stages just as the other finishes its
//   K loop; a `turn` barrier makes that order a rule (a warpgroup that skipped ahead could wait on
//   a stage's parity two fills early). The price: a 64-row tile loads 1.67 times the bytes per
//   multiply-add from L2 that a 128-row tile does, with 5 stages of 40 KB in shared memory.
// - C stored in whole 32-byte sectors (store_tile): bf16 pairs of column groups swapped within a
//   quad by shuffles, 8 bytes a thread; fp32 as float2. v12's bf16 epilogue writes 2 bytes a
//   store, 16 scattered bytes of a row per warp instruction and row.
// Resources (NVRTC, sm_90a): 168 registers at compile time (setmaxnreg then gives the consumers
// 232 and the producer 40), no spills, no stack; dynamic shared memory 197,712 bytes (v12p,
// 4 stages) and 205,920 (v12pp, 5 stages). The barrier protocol (ring index and parities across
// tiles, the turn barriers, the tail tiles) is modelled by tests/test_v12p_barrier_model.py under
// random interleavings: no stage read before it landed or rewritten before its release, no
// deadlock, every tile computed once (and without the turn barrier, a stale read).
//
// Predicted (before they ran): v12 loses to cuBLASLt at 4096^3 mostly at the tile boundaries (3.9
// tiles per SM, each starting from an empty ring and ending in an epilogue with the tensor cores
// idle) and, in bf16, in its scattered 2-byte stores. v12p removes the fill from every tile but
// the first and halves or quarters the store instructions: from 84.1% / 82.0% (fp32 / bf16 out)
// to about 88-90% of cuBLASLt at 4096^3, bf16 out gaining more than fp32 (its stores were the
// worse); at 8192^3 bf16 out level with fp32 out. v12pp also
// hides the epilogue behind the other warpgroup's wgmmas: 90-93% at 4096^3 if L2 delivers the
// extra A traffic, below v12p if it does not; 8192^3 (A and B no longer fit in the 60 MB L2
// together) is where the smaller tile is most at risk.
//
// Measured on H200 by `scripts/gpu_check.sh v12p` (specs/tma-bf16-dev.yaml, against driver-gemm's
// cuBLASLt BF16 rows of the same run and output type; bench/results/nvidia-h200/checks/tma-bf16-dev.json.gz and
// tma-bf16-dev-8192.json.gz), % of cuBLASLt, fp32 out / bf16 out; every case PASS, 4104x1032x200 included:
//                          4096^3          8192^3           1024x512x1024   1001x520x776
//   v12                    83.0 / 81.8     (header above)   36.4 / 35.1     40.6 / 38.9
//   v12p                   93.6 / 95.3     108.6 / 107.2    48.4 / 47.5     56.7 / 55.0
//   v12pp                  91.1 / 87.8     101.9 /  92.3    69.4 / 65.4     68.8 / 65.5
// cuBLASLt there: 0.2024 / 0.1961 ms at 4096^3 (679 / 701 TFLOP/s), 1.643 / 1.601 ms at 8192^3;
// v12p 0.2163 / 0.2059 ms and 1.512 / 1.493 ms (727 and 736 TFLOP/s at 8192^3).
// The profile behind the step (`driver-gemm run specs/tma-bf16.yaml -k v12 -s 4096x4096x4096
// --profile`, bench/results/nvidia-h200/checks/profile-v12.json.gz; Nsight Compute, one launch): v12's tensor pipe
// was busy 71.7% of the time (v11's TF32, the same way: 93.7%), its top stall the barrier (5.1
// cycles per issue: consumers waiting on a ring stage), then LG throttle (2.8: the epilogue's global
// stores queueing), at 3.88 waves: the fill and the epilogue were where the tensor cores stood.
// The prediction held for v12p and was short: removing the per-tile fill gained 11-13 points at
// 4096^3, not 4-6, and at 8192^3 v12p passes cuBLASLt. v12pp wins where tiles are few (a 64-row
// tile doubles the blocks of work at the small shapes) and loses at 8192^3 with bf16 out, as
// feared: its smaller tile reads more of A and B from L2 per multiply-add. The SM clock is not
// held: each case records its median and lowest clock (sustained BF16 wgmma work pulls it from
// 1980 to 1470-1770 MHz), so single-point differences of a few % between cases are within what
// the clock alone moves.
//
// What is left: a 192-row tile (CWG 3) does not compile as written: a 512-thread block gets at
// most 128 registers a thread from ptxas, fewer than the 128 accumulators of a 64 x 256 wgmma
// need; clusters with TMA multicast of the shared A or B tile (halving v12p's L2 traffic for
// one of them); a TMA store epilogue through shared memory, which needs room the ring now takes;
// the small shapes (16 to 48 tiles for 132 SMs) want a split of K or a stream-K schedule.

#include "block_order.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

// D (64 x 256) += A (64 x 16) * B (16 x 256), both from shared memory; B MN-major (transposed).
__device__ __forceinline__ void wgmma_bf16_m64n256k16(float (&d)[128], unsigned long long a_desc,
                                                      unsigned long long b_desc)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" WGMMA_D_0_63 ", " WGMMA_D_64_127 "}, "
                 "%128, %129, 1, 1, 1, 0, 1;\n"
                 : WGMMA_D64(0), WGMMA_D64(64)
                 : "l"(a_desc), "l"(b_desc));
}

// Descriptor of a 128-byte-swizzled operand with explicit leading and stride byte offsets.
__device__ __forceinline__ unsigned long long desc_128b(unsigned smem_byte_addr, unsigned leading, unsigned stride)
{
    return static_cast<unsigned long long>((smem_byte_addr >> 4) & 0x3FFF)
         | (static_cast<unsigned long long>((leading >> 4) & 0x3FFF) << 16)
         | (static_cast<unsigned long long>((stride >> 4) & 0x3FFF) << 32)
         | (1ull << 62);
}

__device__ __forceinline__ unsigned bf16_bits(float x)
{
    const unsigned bits = __float_as_uint(x);
    return (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
}

template <int CWG, int STAGES, int GROUP, int OUT, int BDESC>
__global__ void __launch_bounds__(128 * (CWG + 1), 1)
gemm_bf16_tma_ws(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                 void* C, int M, int N, int K)
{
    constexpr int BK = 64;
    constexpr int BM = 64 * CWG;
    constexpr int BN = 256;
    constexpr int A_BYTES = BM * BK * 2;
    constexpr int B_BOX_BYTES = BK * 64 * 2;
    constexpr int STAGE_BYTES = A_BYTES + (BN / 64) * B_BOX_BYTES;
    constexpr int KSTEPS = BK / 16;
    constexpr int PRODUCER_REGISTERS = 40;
    constexpr int CONSUMER_REGISTERS = consumer_registers<CWG, PRODUCER_REGISTERS>();
    constexpr unsigned B_ALONG_N = B_BOX_BYTES;      // next 64 columns: the next box
    constexpr unsigned B_ALONG_K = 1024;             // next 8 k rows inside a box
    static_assert(CWG >= 1 && CWG <= 3, "1 to 3 consumer warpgroups");
    static_assert(STAGES >= 2, "a ring of at least two stages");
    static_assert(OUT == 32 || OUT == 16, "fp32 or bf16 output");

    extern __shared__ unsigned char smem_raw[];
    const RingLayout<STAGES, STAGE_BYTES> ring(shared_address(smem_raw));

    const int tid = threadIdx.x;
    const int warpgroup = tid / 128;
    const int2 tile = swizzled_tile<GROUP>();
    const int block_row = tile.y * BM;
    const int block_col = tile.x * BN;
    const int ktiles = (K + BK - 1) / BK;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(ring.full_bar(s), 1);
            mbarrier_init(ring.empty_bar(s), 4 * CWG);
        }
        mbarrier_init_fence();
    }
    __syncthreads();

    if (warpgroup == 0) {
        if constexpr (CWG > 1) {
            registers_decrease<PRODUCER_REGISTERS>();
        }
        if (tid == 0) {
            for (int kt = 0; kt < ktiles; ++kt) {
                const int slot = kt % STAGES;
                ring_wait_free<STAGES>(ring.empty, kt);
                tma_fill_stage<A_BYTES, BN / 64, B_BOX_BYTES, 64>(ring.stage(slot), ring.full_bar(slot),
                                                                  map_a, map_b, kt * BK, block_row, block_col);
            }
        }
        return;
    }
    if constexpr (CWG > 1) {
        registers_increase<CONSUMER_REGISTERS>();
    }

    const int consumer = warpgroup - 1;
    const int warp = (tid / 32) % 4;
    const int lane = tid % 32;
    const int g = lane / 4;
    const int t = lane % 4;

    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) {
        acc[i] = 0.0f;
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        const int slot = kt % STAGES;
        mbarrier_wait(ring.full_bar(slot), (kt / STAGES) & 1);
        const unsigned a_tile = ring.stage(slot) + consumer * 64 * 128;
        const unsigned b_tile = ring.stage(slot) + A_BYTES;
        wgmma_fence();
#pragma unroll
        for (int s = 0; s < KSTEPS; ++s) {
            const unsigned long long a_desc = swizzled_desc<128>(a_tile + 32 * s);
            const unsigned long long b_desc = BDESC == 0 ? desc_128b(b_tile + 2048 * s, B_ALONG_N, B_ALONG_K)
                                                         : desc_128b(b_tile + 2048 * s, B_ALONG_K, B_ALONG_N);
            wgmma_bf16_m64n256k16(acc, a_desc, b_desc);
        }
        wgmma_commit();
        wgmma_wait<1>();               // tile kt - 1's wgmmas are done: its stage can be refilled
        if (kt >= 1 && lane == 0) {
            mbarrier_arrive(ring.empty_bar((kt - 1) % STAGES));
        }
    }
    wgmma_wait<0>();
    hold_registers(acc);

    // d[4 j + e]: row m = block_row + 64 consumer + 16 warp + g + 8 (e / 2), column n = block_col + 8 j + 2 t + e % 2.
#pragma unroll
    for (int j = 0; j < 32; ++j) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int m = block_row + 64 * consumer + 16 * warp + g + 8 * half;
            const int n = block_col + 8 * j + 2 * t;
            if (m >= M || n >= N) {
                continue;
            }
            const float x = acc[4 * j + 2 * half], y = acc[4 * j + 2 * half + 1];
            const size_t at = static_cast<size_t>(m) * N + n;
            if constexpr (OUT == 32) {
                float* out = static_cast<float*>(C);
                out[at] = x;
                if (n + 1 < N) {
                    out[at + 1] = y;
                }
            } else {
                unsigned short* out = static_cast<unsigned short*>(C);
                out[at] = static_cast<unsigned short>(bf16_bits(x));
                if (n + 1 < N) {
                    out[at + 1] = static_cast<unsigned short>(bf16_bits(y));
                }
            }
        }
    }
}

// The persistent kernels' epilogue: a consumer warpgroup's 64 x 256 (or 64 x 128) accumulators (d[4 j + e]:
// row row0 + 16 warp + g + 8 (e / 2), column col0 + 8 j + 2 t + e % 2) stored so that each store
// instruction of a warp writes whole 32-byte sectors: 8 rows x 32 contiguous bytes.
// - fp32: the four threads of a quad (same g) hold 8 contiguous columns of a row for each j, two
//   each: one float2 store per thread writes the row's 32 bytes. (v12 stores the two floats apart.)
// - bf16: for each j the quad holds only 16 bytes of a row, half a sector; v12 writes them as eight
//   2-byte stores. Here a quad swaps its words for columns j and j + 1 (j even) with four shuffles
//   so that thread t holds columns 16 (j / 2) + 4 t .. + 3 (8 bytes) and stores them in one go.
// Every store is aligned to its size: col0 is a multiple of the tile width and N of 8 (the tensor map of B
// needs 16-byte rows); a group of columns that would cross N (no shape passing the maps has one)
// is stored element by element. Rows past M hold zeros (TMA's fill) and are not stored.
template <int OUT, int ACC>
__device__ __forceinline__ void store_tile(const float (&acc)[ACC], void* C, int M, int N, int row0, int col0)
{
    constexpr int GROUPS = ACC / 4;                   // column groups of 8: 32 for a 64 x 256 tile, 16 for 64 x 128
    static_assert(GROUPS % 2 == 0, "bf16 pairs column groups j and j + 1");
    const int lane = threadIdx.x % 32;
    const int warp = (threadIdx.x / 32) % 4;
    const int g = lane / 4;
    const int t = lane % 4;
    if constexpr (OUT == 32) {
        float* out = static_cast<float*>(C);
#pragma unroll
        for (int j = 0; j < GROUPS; ++j) {
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
                    *reinterpret_cast<float2*>(out + at) = make_float2(x, y);
                } else {
                    out[at] = x;
                }
            }
        }
    } else {
        unsigned short* out = static_cast<unsigned short*>(C);
        const int quad = lane & ~3;
        const int from_low = quad + (2 * t) % 4;      // the thread holding word 2 t of the 16 columns
        const int from_high = quad + (2 * t + 1) % 4; // ... and word 2 t + 1
#pragma unroll
        for (int j = 0; j < GROUPS; j += 2) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                // Word w (columns 2 w, 2 w + 1 of the 16) is held by thread w % 4, in p0 (w < 4) or p1.
                const unsigned p0 = bf16_bits(acc[4 * j + 2 * half]) | (bf16_bits(acc[4 * j + 2 * half + 1]) << 16);
                const unsigned p1 = bf16_bits(acc[4 * j + 4 + 2 * half])
                                  | (bf16_bits(acc[4 * j + 4 + 2 * half + 1]) << 16);
                const unsigned low0 = __shfl_sync(0xFFFFFFFFu, p0, from_low);
                const unsigned low1 = __shfl_sync(0xFFFFFFFFu, p1, from_low);
                const unsigned high0 = __shfl_sync(0xFFFFFFFFu, p0, from_high);
                const unsigned high1 = __shfl_sync(0xFFFFFFFFu, p1, from_high);
                const unsigned low = t < 2 ? low0 : low1;
                const unsigned high = t < 2 ? high0 : high1;
                const int m = row0 + 16 * warp + g + 8 * half;
                const int n = col0 + 8 * j + 4 * t;
                if (m >= M || n >= N) {
                    continue;
                }
                const size_t at = static_cast<size_t>(m) * N + n;
                if (n + 3 < N) {
                    *reinterpret_cast<uint2*>(out + at) = make_uint2(low, high);
                } else {
                    const unsigned short parts[4] = {static_cast<unsigned short>(low), static_cast<unsigned short>(low >> 16),
                                                     static_cast<unsigned short>(high),
                                                     static_cast<unsigned short>(high >> 16)};
                    for (int e = 0; e < 4 && n + e < N; ++e) {
                        out[at + e] = parts[e];
                    }
                }
            }
        }
    }
}

// v12p: the persistent form of v12. Same ring, same wgmma, same B tile (256 columns); the
// grid is (at most) one block per SM and block b computes tiles b, b + gridDim.x, ... of the
// tile grid ceil(N / 256) x ceil(M / TM), in its GROUP-swizzled order. The ring does not
// restart at a tile boundary: the block's j-th tile uses K-tiles it = j * ktiles + kt of the
// ring, so a stage's slot is it % STAGES and the parity of its n-th fill (it / STAGES) & 1
// whichever tile it belongs to. While C of one tile is written, the producer already fills the
// free stages with the next tile's first K-tiles.
//
// PINGPONG 0 (cooperative): a tile is TM = 64 * CWG rows and every consumer warpgroup takes
// its 64-row slab of every tile, as v12. The consumers release a tile's last stage after its
// final wgmma_wait<0> (v12 never releases it: its block ends there), then write C: while they
// do, the tensor cores are idle, but the next tile's loads are in flight.
// PINGPONG 1: two consumer warpgroups, each owning whole 64 x 256 tiles (TM = 64), taking the
// block's tiles in turn; one warpgroup's epilogue runs while the other's wgmmas run. A
// warpgroup skips the other's tiles, so on its own it could wait on a stage's parity two fills
// early and read the other's data: before its j-th tile it waits on its `turn` barrier until
// the other warpgroup has waited on every stage of the tile before (the other's lane 0 of
// each warp arrives after its K loop). Then each stage is at most one fill behind the one it
// wants, and the parity is unambiguous. A tile is half the rows of the cooperative one: per
// multiply-add it loads 1.67 times the bytes from L2 (A 64 + B 256 rows per 64 x 256 outputs,
// against 128 + 256 per 128 x 256).
//
// Launch: block 128 * (CWG + 1) (CWG 2 with PINGPONG), grid min(SMs, tiles) (any grid is
// correct; more blocks than fit at once lose the overlap), dynamic shared memory
// STAGES * (TM + 256) * 128 + 16 * STAGES + 16 + 1024 bytes, tensor maps A (box 64 x TM) and B
// (box 64 x 64) with the 128-byte swizzle. Needs sm_90a.
template <int CWG, int STAGES, int GROUP, int OUT, int BDESC, int PINGPONG>
__global__ void __launch_bounds__(128 * (CWG + 1), 1)
gemm_bf16_tma_ws_persistent(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                            void* C, int M, int N, int K)
{
    constexpr int BK = 64;
    constexpr int TM = PINGPONG ? 64 : 64 * CWG;        // rows of C per tile
    constexpr int BN = 256;
    constexpr int A_BYTES = TM * BK * 2;
    constexpr int B_BOX_BYTES = BK * 64 * 2;
    constexpr int STAGE_BYTES = A_BYTES + (BN / 64) * B_BOX_BYTES;
    constexpr int KSTEPS = BK / 16;
    constexpr int PRODUCER_REGISTERS = 40;
    constexpr int CONSUMER_REGISTERS = consumer_registers<CWG, PRODUCER_REGISTERS>();
    constexpr int RELEASES = PINGPONG ? 4 : 4 * CWG;    // lane 0 of each warp that reads a stage
    constexpr unsigned B_ALONG_N = B_BOX_BYTES;
    constexpr unsigned B_ALONG_K = 1024;
    static_assert(CWG >= 1 && CWG <= 2, "1 or 2 consumer warpgroups");
    static_assert(PINGPONG == 0 || CWG == 2, "ping-pong takes two consumer warpgroups");
    static_assert(STAGES >= 2, "a ring of at least two stages");
    static_assert(OUT == 32 || OUT == 16, "fp32 or bf16 output");

    extern __shared__ unsigned char smem_raw[];
    const RingLayout<STAGES, STAGE_BYTES> ring(shared_address(smem_raw));
    const unsigned turn = ring.after_barriers();        // PINGPONG: one barrier per consumer warpgroup

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
        mbarrier_init(turn, 4);
        mbarrier_init(turn + 8, 4);
        mbarrier_init_fence();
    }
    __syncthreads();

    if (warpgroup == 0) {
        if constexpr (CWG > 1) {
            registers_decrease<PRODUCER_REGISTERS>();
        }
        if (tid == 0) {
            int it = 0;                                  // K-tiles loaded by this block so far
            for (int index = blockIdx.x; index < tiles; index += gridDim.x) {
                const int2 tile = swizzled_tile_of<GROUP>(index, tile_columns, tile_rows);
                const int tile_row = tile.y * TM;
                const int tile_col = tile.x * BN;
                for (int kt = 0; kt < ktiles; ++kt, ++it) {
                    const int slot = it % STAGES;
                    ring_wait_free<STAGES>(ring.empty, it);
                    tma_fill_stage<A_BYTES, BN / 64, B_BOX_BYTES, 64>(ring.stage(slot), ring.full_bar(slot),
                                                                      map_a, map_b, kt * BK, tile_row, tile_col);
                }
            }
        }
        return;
    }
    if constexpr (CWG > 1) {
        registers_increase<CONSUMER_REGISTERS>();
    }

    const int consumer = warpgroup - 1;
    const int lane = tid % 32;
    const int slab = PINGPONG ? 0 : consumer;            // this warpgroup's 64 rows of a tile

    int local = 0;                                       // the block's tiles so far
    int turns = 0;                                       // PINGPONG: this warpgroup's tiles so far
    for (int index = blockIdx.x; index < tiles; index += gridDim.x, ++local) {
        if (PINGPONG && local % 2 != consumer) {
            continue;
        }
        if (PINGPONG && local >= 1) {
            // The other warpgroup has waited on every stage of tile local - 1: this is its
            // turns-th (consumer 1) or turns - 1-th (consumer 0) arrival on our barrier.
            mbarrier_wait(turn + 8 * consumer, (turns - 1 + consumer) & 1);
        }
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
            const unsigned a_tile = ring.stage(slot) + slab * 64 * 128;
            const unsigned b_tile = ring.stage(slot) + A_BYTES;
            wgmma_fence();
#pragma unroll
            for (int s = 0; s < KSTEPS; ++s) {
                const unsigned long long a_desc = swizzled_desc<128>(a_tile + 32 * s);
                const unsigned long long b_desc = BDESC == 0 ? desc_128b(b_tile + 2048 * s, B_ALONG_N, B_ALONG_K)
                                                             : desc_128b(b_tile + 2048 * s, B_ALONG_K, B_ALONG_N);
                wgmma_bf16_m64n256k16(acc, a_desc, b_desc);
            }
            wgmma_commit();
            wgmma_wait<1>();           // K-tile it - 1's wgmmas are done: its stage can be refilled
            if (kt >= 1 && lane == 0) {
                mbarrier_arrive(ring.empty_bar((it - 1) % STAGES));
            }
        }
        if (PINGPONG && lane == 0) {
            mbarrier_arrive(turn + 8 * (1 - consumer));  // the other warpgroup's next tile may start
        }
        wgmma_wait<0>();
        hold_registers(acc);
        if (ktiles >= 1 && lane == 0) {  // the tile's last stage: free for the next tile's loads
            mbarrier_arrive(ring.empty_bar((it - 1) % STAGES));
        }
        store_tile<OUT>(acc, C, M, N, tile.y * TM + 64 * slab, tile.x * BN);
        ++turns;
    }
}
