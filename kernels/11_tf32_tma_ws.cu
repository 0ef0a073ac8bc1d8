// v11: v10's warpgroup MMA fed by the tensor memory accelerator, with the warps specialised.
// In v10 every thread both copies and multiplies: each K-tile it computes copy addresses and
// bounds, issues cp.async, waits, and the whole block meets at a barrier before the next
// tile. Its profile (v10's header) showed the tensor pipe idle a third of the time while
// warps waited on that integer work and on the barrier.
//
// Here one warpgroup only copies and the others only multiply:
// - the producer (warpgroup 0; one thread of it) asks the TMA engine for each K-tile: the A
//   tile (BM rows of 32 floats, 128-byte swizzled, exactly the layout wgmma's descriptor
//   reads) and the B tile (32 rows of BN floats, as BN / 32 boxes of 32 columns, each
//   128-byte swizzled so the fragment loads below spread over the banks). The engine
//   computes every address, fills what lies past the matrix with zeros, and counts the
//   bytes against the stage's "full" mbarrier. No thread spends an instruction on a copy
//   address.
// - the consumers (warpgroups 1 .. CWG) wait on a stage's "full" barrier, load their B^T
//   fragments (v10's operand rule: TF32 wgmma reads only K-major operands from shared
//   memory, so C^T = B^T A^T with B^T in registers), queue the tile's wgmmas behind the
//   previous tile's, and when a tile's wgmmas are done, arrive on its stage's "empty"
//   barrier, which is what the producer waits for before refilling it. There is no
//   block-wide barrier in the K loop.
// - setmaxnreg moves registers from the producer (40 a thread) to the consumers (the
//   accumulators of a 64 x 256 wgmma are 128 floats a thread).
//
// Swizzled B fragment addresses: element (k, n) of a B tile lives in box n / 32, row k,
// 16-byte chunk ((n % 32) / 4) ^ (k % 8), word n % 4. A thread's k % 8 is t or t + 4 in every
// k step, so its four fragment offsets are fixed and a k step adds 8 rows (1024 bytes).
//
// TMA needs the byte stride of every row to be a multiple of 16: K % 4 == 0 and N % 4 == 0
// (the spec's require: says so; padded leading dimensions would lift it). M, N and K need no
// other alignment: the zero fill covers the tails, and the stores are guarded.
//
// Launch: block 128 * (CWG + 1), grid (ceil(N / (64 * CWG)), ceil(M / BM)), dynamic shared
// memory STAGES * (BM + 64 * CWG) * 128 + 16 * STAGES + 1024, tensor maps A (box 32 x BM) and
// B (box 32 x 32), both fp32 with the 128-byte swizzle. Needs sm_90a. 32-bit indices in the
// epilogue: M * N below 2^31.
//
// Predicted (before it ran): v10's profile showed the tensor pipe busy 65% of the time, its
// warps stalled on about 300 integer instructions per thread and K-tile of copy addresses and
// bounds, and the whole block meeting at a barrier every K-tile. v11 removes both from the
// consumers: per K-tile a consumer thread waits on one mbarrier, issues 16 shared loads (its
// B^T fragments) and 4 wgmma, and arrives on one mbarrier. With the copies off the
// multiplying warps we expected the tensor pipe to stay fed the way cuBLAS keeps it: from
// v10's 83% of cuBLAS TF32 to 90-95% at 4096^3 and 8192^3, the rest being the fragment loads
// that the TF32 operand rule still puts in the K loop.
//
// Measured on H200 (`driver-gemm run specs/tma.yaml`, bench/results/nvidia-h200/checks/tma.json.gz: nvbench-style
// sampling for seconds, L2 flushed, against driver-gemm's cuBLAS TF32 row of the same run):
//                          4096^3                       8192^3
//   v11                    0.4108 ms  95.4% of cuBLAS   3.178 ms  97.6%
//   v10                    0.4603 ms  85.2%             3.646 ms  85.0%
//   cuBLAS TF32            0.3920 ms                    3.100 ms
// 1.12 times v10 at 4096^3 and 1.15 at 8192^3: more than predicted, so the fragment loads cost less than
// feared once no barrier serialises them with the copies. Relative error 6.9e-4 (truncation to TF32, as
// v10). The headline run (bench/results/nvidia-h200/tf32.json.gz) has it at 95.5% and 96.7%, and the
// shape suite, timed in rounds alternating with the vendor row, at 98.5% and 108.7% (checks/suite-tf32*).
// Profile (`scripts/gpu_check.sh profile-tma`, checks/profile-v11.json.gz; Nsight Compute, one launch at
// 4096^3): the tensor pipe busy 93.7% of the time; top stalls barrier (4.3 cycles per issue), long
// scoreboard (2.2: the B^T fragment loads), MIO throttle.
// The halving sweep (`scripts/gpu_check.sh sweeps`, checks/tune-v11-halving.json.gz) keeps the shipped
// configuration at 4096^3 (96.4% of cuBLAS TF32); at 8192^3 GROUP 16 leads (96.9%).
// Sustained, the tensor cores pull the SM clock down from 1980 MHz to 1500-1635 MHz (the clock
// each case records through NVML), and every kernel of these rows, cuBLAS included, is timed at the
// clock the load leaves it.
//
// Small shapes: at 1024x512x1024 the 256 x 128 tile makes a 4 x 4 grid, 16 blocks for 132
// SMs, each running 32 K-tiles alone: the GPU is 88% idle whatever feeds the tensor cores.
// Measured: 55.1% of cuBLAS TF32 there (v10 50.6%) and 63.7% at 1000x516x780 (20 blocks). 1001x513x777 is refused
// before launch: with tight leading dimensions a row of A is 777 x 4 = 3108 bytes and of B
// 2052, and TMA needs every row to start on a 16-byte boundary (the plan says
// "map_a: dimension 1 stride 3108 bytes must be a positive multiple of 16"); v10 runs it.
//
// What is left: small shapes want smaller tiles, a split of K or a persistent (stream-K)
// schedule; B^T still passes through registers (a transposed copy of B made once would let
// both operands come from shared memory, as v12's BF16 does); pairs of blocks that share an
// A or B tile could fetch it once with a cluster and TMA multicast; the epilogue stores C
// from registers, where a TMA store from shared memory would overlap it; padded leading
// dimensions would lift the 16-byte rule for shapes like 1001x513x777.

#include "block_order.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

template <int BM, int CWG, int STAGES, int GROUP>
__global__ void __launch_bounds__(128 * (CWG + 1), 1)
sgemm_tf32_tma_ws(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                  float* C, int M, int N, int K)
{
    constexpr int BK = 32;                           // one 128-byte swizzle row of floats
    constexpr int BN = 64 * CWG;                     // a 64-column slab of C per consumer warpgroup
    constexpr int A_BYTES = BM * BK * 4;
    constexpr int B_BOX_BYTES = BK * 32 * 4;         // one 32-column box of the B tile
    constexpr int STAGE_BYTES = A_BYTES + (BN / 32) * B_BOX_BYTES;
    constexpr int KSTEPS = BK / 8;
    constexpr int PRODUCER_REGISTERS = 40;
    constexpr int CONSUMER_REGISTERS = consumer_registers<CWG, PRODUCER_REGISTERS>();
    static_assert(BM == 128 || BM == 256, "wgmma N of 128 or 256");
    static_assert(CWG >= 1 && CWG <= 3, "1 to 3 consumer warpgroups");
    static_assert(STAGES >= 2, "a ring of at least two stages");

    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = shared_address(smem_raw);
    const unsigned base = (raw + 1023u) & ~1023u;     // swizzle atoms are 1024-byte aligned
    const unsigned char* smem = smem_raw + (base - raw);
    const unsigned full = base + STAGES * STAGE_BYTES;   // STAGES barriers, then STAGES more
    const unsigned empty = full + 8 * STAGES;

    const int tid = threadIdx.x;
    const int warpgroup = tid / 128;
    const int2 tile = swizzled_tile<GROUP>();
    const int block_row = tile.y * BM;
    const int block_col = tile.x * BN;
    const int ktiles = (K + BK - 1) / BK;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(full + 8 * s, 1);
            mbarrier_init(empty + 8 * s, 4 * CWG);   // lane 0 of every consumer warp
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
                ring_wait_free<STAGES>(empty, kt);
                tma_fill_stage<A_BYTES, BN / 32, B_BOX_BYTES, 32>(base + slot * STAGE_BYTES, full + 8 * slot,
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
    const int frag_col = consumer * 64 + warp * 16 + g;  // this thread's column n of the B tile

    // Byte offsets in a stage of this thread's fragment elements (n, k) for k step 0.
    auto b_offset = [&](int n, int k) {
        return A_BYTES + (n / 32) * B_BOX_BYTES + k * 128 + ((((n % 32) / 4) ^ (k % 8)) * 16) + (n % 4) * 4;
    };
    const int o0 = b_offset(frag_col, t), o1 = b_offset(frag_col + 8, t);
    const int o2 = b_offset(frag_col, t + 4), o3 = b_offset(frag_col + 8, t + 4);

    auto load_fragments = [&](unsigned (&frag)[KSTEPS][4], int slot) {
        const unsigned char* stage = smem + slot * STAGE_BYTES;
#pragma unroll
        for (int s = 0; s < KSTEPS; ++s) {
            frag[s][0] = *reinterpret_cast<const unsigned*>(stage + o0 + 1024 * s);
            frag[s][1] = *reinterpret_cast<const unsigned*>(stage + o1 + 1024 * s);
            frag[s][2] = *reinterpret_cast<const unsigned*>(stage + o2 + 1024 * s);
            frag[s][3] = *reinterpret_cast<const unsigned*>(stage + o3 + 1024 * s);
        }
    };

    float acc[BM / 2];
#pragma unroll
    for (int i = 0; i < BM / 2; ++i) {
        acc[i] = 0.0f;
    }
    unsigned frag_even[KSTEPS][4], frag_odd[KSTEPS][4];

    mbarrier_wait(full, 0);
    load_fragments(frag_even, 0);

    // Queue tile kt's wgmmas behind tile kt - 1's; once kt - 1's are done, hand its stage back
    // and load tile kt + 1's fragments into the registers kt - 1 used.
    auto multiply_tile = [&](int kt, unsigned (&now)[KSTEPS][4], unsigned (&other)[KSTEPS][4]) {
        const int slot = kt % STAGES;
        wgmma_fence();
#pragma unroll
        for (int s = 0; s < KSTEPS; ++s) {
            wgmma_tile<BM>(acc, now[s], swizzled_desc<128>(base + slot * STAGE_BYTES + 32 * s));
        }
        wgmma_commit();
        wgmma_wait<1>();
#pragma unroll
        for (int s = 0; s < KSTEPS; ++s) {
            hold_registers(other[s]);
        }
        if (kt >= 1 && lane == 0) {
            mbarrier_arrive(empty + 8 * ((kt - 1) % STAGES));
        }
        if (kt + 1 < ktiles) {
            const int next = (kt + 1) % STAGES;
            mbarrier_wait(full + 8 * next, ((kt + 1) / STAGES) & 1);
            load_fragments(other, next);
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
