// The tensor-core collections' first step: one warp per 16 x 16 tile of C through the WMMA API of
// <mma.h> (a toolkit header NVRTC finds through driver-gemm's search path). fp16 A (row-major) and
// B (column-major, K contiguous), fp32 C; M, N and K must be multiples of 16 (the spec's require:).
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

__global__ void wmma_tiles(const half *__restrict__ A, const half *__restrict__ B, float *__restrict__ C,
                           int M, int N, int K) {
    const int tile_row = blockIdx.y, tile_col = blockIdx.x;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + (size_t)tile_row * 16 * K + k, K);
        wmma::load_matrix_sync(b, B + (size_t)tile_col * 16 * K + k, K);
        wmma::mma_sync(c, a, b, c);
    }
    wmma::store_matrix_sync(C + (size_t)tile_row * 16 * N + tile_col * 16, c, N, wmma::mem_row_major);
}
