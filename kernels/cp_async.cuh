// Asynchronous global -> shared copies (sm_80+), shared by the pipelined kernels (v7 to v10).
// A copy names its bytes; those past src_bytes are written as zeros, so a copy from outside
// the matrix passes src_bytes 0 and fills its slot with zeros instead of branching around it.
#pragma once

__device__ __forceinline__ unsigned smem_addr(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; src_bytes is 0 or 16 here.
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

// 4 bytes global -> shared; src_bytes 0 writes a zero.
__device__ __forceinline__ void cp_async_4(unsigned dst, const void* src, int src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Wait until at most PENDING of this thread's committed groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

// Issue the first COUNT K-tiles of a ring, one commit group each. A group is committed even
// past the last tile (empty), so that group g always holds tile g and a wait_group count
// means the same number of tiles at every K.
template <int COUNT, typename LoadTile>
__device__ __forceinline__ void cp_async_first_tiles(int ktiles, LoadTile load_tile)
{
#pragma unroll
    for (int s = 0; s < COUNT; ++s) {
        if (s < ktiles) {
            load_tile(s, s);
        }
        cp_async_commit();
    }
}

// Copy the ROWS x COLS tile at (row0, col0) of a row-major matrix (rows x cols, leading
// dimension ld) element by element, zero-filling what lies outside the matrix: the path
// for rows that are not 16-byte aligned. dst(r, c) is the shared byte address of element
// (r, c) of the tile; NT threads share the work.
template <int ROWS, int COLS, int NT, typename Dst>
__device__ __forceinline__ void cp_async_tile_4(const float* src, int ld, int row0, int col0, int rows, int cols,
                                                Dst dst)
{
#pragma unroll 4
    for (int i = 0; i < ROWS * COLS / NT; ++i) {
        const int e = threadIdx.x + i * NT;
        const int r = e / COLS, c = e % COLS;
        const bool ok = row0 + r < rows && col0 + c < cols;
        cp_async_4(dst(r, c), ok ? src + (row0 + r) * ld + col0 + c : src, ok ? 4 : 0);
    }
}
