// Hopper's warpgroup MMA (wgmma) in TF32: the instructions, their shared-memory descriptors, the
// 128- and 64-byte swizzled layouts they read, and the fences around them. Shared by v10 and v11.
// Needs sm_90a.
#pragma once

// The accumulator operands of a wgmma: "%0, ..., %63" in its text, d[0 .. 63] bound to them
// (and the next 64 for N = 256; the first 32 alone for N = 64), each read and written ("+f").
#define WGMMA_D_0_63 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WGMMA_D_64_127 \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define WGMMA_D_0_31 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WGMMA_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
                    "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define WGMMA_D32(i) WGMMA_D8(i), WGMMA_D8(i + 8), WGMMA_D8(i + 16), WGMMA_D8(i + 24)
#define WGMMA_D64(i) WGMMA_D8(i), WGMMA_D8(i + 8), WGMMA_D8(i + 16), WGMMA_D8(i + 24), \
                     WGMMA_D8(i + 32), WGMMA_D8(i + 40), WGMMA_D8(i + 48), WGMMA_D8(i + 56)

// D (64 x 128) += A (64 x 8, registers) * B (8 x 128, shared memory, described by b_desc).
__device__ __forceinline__ void wgmma_m64n128k8(float (&d)[64], const unsigned (&a)[4], unsigned long long b_desc)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {" WGMMA_D_0_63 "}, "
                 "{%64, %65, %66, %67}, %68, 1, 1, 1;\n"
                 : WGMMA_D64(0)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
}

// D (64 x 256) += A (64 x 8, registers) * B (8 x 256, shared memory, described by b_desc).
__device__ __forceinline__ void wgmma_m64n256k8(float (&d)[128], const unsigned (&a)[4], unsigned long long b_desc)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {" WGMMA_D_0_63 ", " WGMMA_D_64_127 "}, "
                 "{%128, %129, %130, %131}, %132, 1, 1, 1;\n"
                 : WGMMA_D64(0), WGMMA_D64(64)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
}

// Descriptor of an MN-major operand in ROW_BYTES-swizzled panels (ROW_BYTES / 2 bf16 columns by its K rows), the
// panels `leading` bytes apart along M or N and each panel's groups of 8 K rows 8 * ROW_BYTES apart.
template <int ROW_BYTES>
__device__ __forceinline__ unsigned long long swizzled_desc_mn(unsigned smem_byte_addr, unsigned leading)
{
    constexpr unsigned long long mode = ROW_BYTES == 128 ? 1 : 2;
    return static_cast<unsigned long long>((smem_byte_addr >> 4) & 0x3FFF)
         | (static_cast<unsigned long long>((leading >> 4) & 0x3FFF) << 16)
         | (static_cast<unsigned long long>(8 * ROW_BYTES >> 4) << 32)
         | (mode << 62);
}

// Shared-memory matrix descriptor of a K-major operand whose rows are ROW_BYTES long (128 or
// 64) and swizzled to match: start address, leading-dimension offset (unused with these
// swizzles, 1 by convention), stride between 8-row groups (8 rows), swizzle mode in bits
// 62-63 (1: 128-byte, 2: 64-byte). Addresses and offsets are in units of 16 bytes.
template <int ROW_BYTES>
__device__ __forceinline__ unsigned long long swizzled_desc(unsigned smem_byte_addr)
{
    return swizzled_desc_mn<ROW_BYTES>(smem_byte_addr, 16);
}

// The descriptor of the same operand `bytes` (a multiple of 16) further on in shared memory: its start address
// field moved by bytes / 16, in the low word only. The field cannot carry into the next one: shared addresses stay
// below 2^18 bytes. A k loop computes one descriptor an operand and moves it, instead of building each anew.
__device__ __forceinline__ unsigned long long desc_advance(unsigned long long desc, unsigned bytes)
{
    return (desc & 0xFFFFFFFF00000000ull) | (static_cast<unsigned>(desc) + (bytes >> 4));
}

// Byte offset of 16-byte chunk c of row r in a tile of ROW_BYTES-long rows, in the layout the
// 128- and 64-byte swizzles expect: bits 4.. of the offset are XORed with bits 7.. (as many
// bits as a row has chunks), so the eight rows the tensor cores read together, or a warp's
// copies of one column of chunks, fall in different bank groups.
template <int ROW_BYTES>
__device__ __forceinline__ unsigned swizzled_offset(int r, int c)
{
    constexpr int CHUNKS = ROW_BYTES / 16;
    const unsigned row = r * ROW_BYTES;
    return row + ((c ^ ((row >> 7) & (CHUNKS - 1))) * 16);
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int PENDING>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}

__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Registers a wgmma in flight reads or writes must not be reused or read by the compiler
// until the wgmma has been waited for; an empty asm that "uses and redefines" them after
// the wait keeps them live and in place until then.
template <int COUNT>
__device__ __forceinline__ void hold_registers(float (&r)[COUNT])
{
#pragma unroll
    for (int i = 0; i < COUNT; ++i) {
        asm volatile("" : "+f"(r[i])::"memory");
    }
}

template <int COUNT>
__device__ __forceinline__ void hold_registers(unsigned (&r)[COUNT])
{
#pragma unroll
    for (int i = 0; i < COUNT; ++i) {
        asm volatile("" : "+r"(r[i])::"memory");
    }
}

template <int BM>
__device__ __forceinline__ void wgmma_tile(float (&d)[BM / 2], const unsigned (&a)[4], unsigned long long b_desc)
{
    if constexpr (BM == 256) {
        wgmma_m64n256k8(d, a, b_desc);
    } else {
        wgmma_m64n128k8(d, a, b_desc);
    }
}
