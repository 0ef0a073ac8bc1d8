// v2: shared-memory tiles.
//
// v1 reads every element of A N times and every element of B M times from
// global memory (mostly from cache, but still one load instruction per
// multiply-add). Here a TILE x TILE block of threads computes a TILE x TILE
// tile of C and walks K in steps of TILE: at each step the block copies one
// TILE x TILE tile of A and one of B into shared memory (each thread copies
// one element of each, coalesced), waits at a barrier, and then every thread
// does TILE multiply-adds from shared memory. Global traffic falls by a
// factor of TILE. Elements past the edge of A or B are stored as zeros, so
// the tail tiles of shapes that are not multiples of TILE add nothing, and
// only threads inside C write.
//
// Launch: block (TILE, TILE), grid (ceil(N / TILE), ceil(M / TILE)).

template <int TILE>
__global__ void sgemm_smem_tiles(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float a_tile[TILE][TILE];
    __shared__ float b_tile[TILE][TILE];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float dot = 0.0f;
    const int steps = (K + TILE - 1) / TILE;
    for (int step = 0; step < steps; ++step) {
        const int a_col = step * TILE + tx;
        const int b_row = step * TILE + ty;
        a_tile[ty][tx] = (row < M && a_col < K) ? A[row * K + a_col] : 0.0f;
        b_tile[ty][tx] = (b_row < K && col < N) ? B[b_row * N + col] : 0.0f;
        __syncthreads();

        for (int k = 0; k < TILE; ++k) {
            dot += a_tile[ty][k] * b_tile[k][tx];
        }
        __syncthreads();  // the next step overwrites the tiles others may still be reading
    }

    if (row < M && col < N) {
        C[row * N + col] = dot;
    }
}
