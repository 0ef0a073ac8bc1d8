// Hopper's wgmma with both operands in shared memory, in every shape v13, v14 and v15 use: SmemWgmma<ELEM, TA, TB,
// N>::run(d, a_desc, b_desc) adds A (64 x K, described by a_desc) times B (K x N, by b_desc) into the N / 2
// fp32 accumulators d of a consumer thread (one k step: 32 bytes of K). ELEM is the input's bits (16 bf16, 8
// e4m3, 32 tf32); TA and TB say A and B are MN-major (transposed, 1) or K-major (0), which only bf16 may
// choose. A shape no kernel asks for is left undeclared, so asking for one fails to compile. Needs sm_90a.
#pragma once

#include "wgmma.cuh"

template <int ELEM, int TA, int TB, int N>
struct SmemWgmma;

// Per N: the accumulators in the instruction's text, their constraints, and the two descriptors after them.
#define WGMMA_SMEM_D_8 "%0, %1, %2, %3"
#define WGMMA_SMEM_D_16 "%0, %1, %2, %3, %4, %5, %6, %7"
#define WGMMA_SMEM_D_32 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define WGMMA_SMEM_D_64 WGMMA_D_0_31
#define WGMMA_SMEM_D_96 WGMMA_D_0_31 ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define WGMMA_SMEM_D_112 WGMMA_D_0_31 ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55"
#define WGMMA_SMEM_D_128 WGMMA_D_0_63
#define WGMMA_SMEM_D_136 WGMMA_D_0_63 ", %64, %65, %66, %67"
#define WGMMA_SMEM_D_160 WGMMA_D_0_63 ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define WGMMA_SMEM_D_192 WGMMA_D_0_63 ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define WGMMA_SMEM_D_256 WGMMA_D_0_63 ", " WGMMA_D_64_127
#define WGMMA_SMEM_BIND_8 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
#define WGMMA_SMEM_BIND_16 WGMMA_D8(0)
#define WGMMA_SMEM_BIND_32 WGMMA_D8(0), WGMMA_D8(8)
#define WGMMA_SMEM_BIND_64 WGMMA_D32(0)
#define WGMMA_SMEM_BIND_96 WGMMA_D32(0), WGMMA_D8(32), WGMMA_D8(40)
#define WGMMA_SMEM_BIND_112 WGMMA_D32(0), WGMMA_D8(32), WGMMA_D8(40), WGMMA_D8(48)
#define WGMMA_SMEM_BIND_128 WGMMA_D64(0)
#define WGMMA_SMEM_BIND_136 WGMMA_D64(0), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67])
#define WGMMA_SMEM_BIND_160 WGMMA_D64(0), WGMMA_D8(64), WGMMA_D8(72)
#define WGMMA_SMEM_BIND_192 WGMMA_D64(0), WGMMA_D32(64)
#define WGMMA_SMEM_BIND_256 WGMMA_D64(0), WGMMA_D64(64)
#define WGMMA_SMEM_DESC_8 "%4, %5"
#define WGMMA_SMEM_DESC_16 "%8, %9"
#define WGMMA_SMEM_DESC_32 "%16, %17"
#define WGMMA_SMEM_DESC_64 "%32, %33"
#define WGMMA_SMEM_DESC_96 "%48, %49"
#define WGMMA_SMEM_DESC_112 "%56, %57"
#define WGMMA_SMEM_DESC_128 "%64, %65"
#define WGMMA_SMEM_DESC_136 "%68, %69"
#define WGMMA_SMEM_DESC_160 "%80, %81"
#define WGMMA_SMEM_DESC_192 "%96, %97"
#define WGMMA_SMEM_DESC_256 "%128, %129"

// One specialisation: the instruction `SHAPE_TYPES` with the immediates IMM (scale-d 1 accumulates; the scales
// of A and B; for bf16 the transposes).
#define WGMMA_SMEM(ELEM, TA, TB, N, SHAPE_TYPES, IMM)                                                      \
    template <>                                                                                         \
    struct SmemWgmma<ELEM, TA, TB, N> {                                                                 \
        static __device__ __forceinline__ void run(float (&d)[N / 2], unsigned long long a_desc,       \
                                                   unsigned long long b_desc)                          \
        {                                                                                               \
            asm volatile("wgmma.mma_async.sync.aligned." SHAPE_TYPES " {" WGMMA_SMEM_D_##N "}, "         \
                         WGMMA_SMEM_DESC_##N ", " IMM ";\n"                                            \
                         : WGMMA_SMEM_BIND_##N                                                          \
                         : "l"(a_desc), "l"(b_desc));                                                   \
        }                                                                                               \
    };
#define WGMMA_SMEM_BF16(TA, TB, N) WGMMA_SMEM(16, TA, TB, N, "m64n" #N "k16.f32.bf16.bf16", "1, 1, 1, " #TA ", " #TB)
#define WGMMA_SMEM_E4M3(N) WGMMA_SMEM(8, 0, 0, N, "m64n" #N "k32.f32.e4m3.e4m3", "1, 1, 1")
#define WGMMA_SMEM_TF32(N) WGMMA_SMEM(32, 0, 0, N, "m64n" #N "k8.f32.tf32.tf32", "1, 1, 1")

// v13: bf16 with B row-major (B MN-major) at its tile widths, and v15's 192; both K-major for B column-major,
// v14's too (its 160 among them, for its tiles of 160 rows of C).
WGMMA_SMEM_BF16(0, 1, 256)
WGMMA_SMEM_BF16(0, 1, 192)
WGMMA_SMEM_BF16(0, 1, 128)
WGMMA_SMEM_BF16(0, 1, 96)
WGMMA_SMEM_BF16(0, 1, 64)
WGMMA_SMEM_BF16(0, 0, 256)
WGMMA_SMEM_BF16(0, 0, 192)
WGMMA_SMEM_BF16(0, 0, 160)
WGMMA_SMEM_BF16(0, 0, 128)
WGMMA_SMEM_BF16(0, 0, 96)
WGMMA_SMEM_BF16(0, 0, 64)
WGMMA_SMEM_BF16(0, 0, 32)
WGMMA_SMEM_BF16(0, 0, 16)
WGMMA_SMEM_BF16(0, 0, 8)
// v14: bf16 with B row-major is the wgmma's A (B^T), MN-major; N is its tile's rows of C (MT), 112 and 136 among
// them so that two row tiles cover M of 193 to 224 and 225 to 272 nearly full.
WGMMA_SMEM_BF16(1, 0, 256)
WGMMA_SMEM_BF16(1, 0, 192)
WGMMA_SMEM_BF16(1, 0, 160)
WGMMA_SMEM_BF16(1, 0, 136)
WGMMA_SMEM_BF16(1, 0, 128)
WGMMA_SMEM_BF16(1, 0, 112)
WGMMA_SMEM_BF16(1, 0, 96)
WGMMA_SMEM_BF16(1, 0, 64)
WGMMA_SMEM_BF16(1, 0, 32)
WGMMA_SMEM_BF16(1, 0, 16)
WGMMA_SMEM_BF16(1, 0, 8)
// e4m3 and tf32 read both operands K-major only.
WGMMA_SMEM_E4M3(256)
WGMMA_SMEM_E4M3(192)
WGMMA_SMEM_E4M3(160)
WGMMA_SMEM_E4M3(136)
WGMMA_SMEM_E4M3(128)
WGMMA_SMEM_E4M3(112)
WGMMA_SMEM_E4M3(96)
WGMMA_SMEM_E4M3(64)
WGMMA_SMEM_E4M3(32)
WGMMA_SMEM_E4M3(16)
WGMMA_SMEM_E4M3(8)
WGMMA_SMEM_TF32(256)
WGMMA_SMEM_TF32(192)
WGMMA_SMEM_TF32(160)
WGMMA_SMEM_TF32(136)
WGMMA_SMEM_TF32(128)
WGMMA_SMEM_TF32(112)
WGMMA_SMEM_TF32(96)
WGMMA_SMEM_TF32(64)
WGMMA_SMEM_TF32(32)
WGMMA_SMEM_TF32(16)
WGMMA_SMEM_TF32(8)
