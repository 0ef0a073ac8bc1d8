// v3: 1D register coarsening: each thread computes TN consecutive elements of one row of C.
//
// In v2 every multiply-add costs two shared-memory loads. Here a block of
// (BN / TN, BM) threads computes a BM x BN tile of C; each thread keeps TN
// accumulators in registers and, for every k of the shared tile, loads one
// value of A and TN values of B and does TN multiply-adds: the value of A
// is reused TN times from a register. Shared-memory loads per multiply-add
// drop from 2 to (1 + TN) / TN. The BM x BK tile of A and the BK x BN tile of
// B are copied cooperatively by all threads, each a fixed number of elements
// (so the block's thread count must divide both tile sizes), zero-filled past the edges of A and B. The write-back
// checks every one of the TN columns, so a row of C whose width is not a
// multiple of TN is written up to its last column and no further.
//
// Launch (seed): BM = BN = 64, BK = 16, TN = 4, block (16, 64), grid (ceil(N / 64), ceil(M / 64)).

template <int BM, int BN, int BK, int TN>
__global__ void sgemm_coarsen_1d(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float a_tile[BM * BK];
    __shared__ float b_tile[BK * BN];

    const int threads = blockDim.x * blockDim.y;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    float acc[TN] = {};

    const int steps = (K + BK - 1) / BK;
    for (int step = 0; step < steps; ++step) {
        const int k0 = step * BK;
        // Each thread copies BM*BK/threads elements of A and BK*BN/threads of B; the
        // spec's require: checks that these divide exactly, or part of a tile stays stale.
        for (int i = 0; i < BM * BK / threads; ++i) {
            const int idx = i * threads + tid;
            const int r = idx / BK, c = idx % BK;
            a_tile[idx] = (block_row + r < M && k0 + c < K) ? A[(block_row + r) * K + k0 + c] : 0.0f;
        }
        for (int i = 0; i < BK * BN / threads; ++i) {
            const int idx = i * threads + tid;
            const int r = idx / BN, c = idx % BN;
            b_tile[idx] = (k0 + r < K && block_col + c < N) ? B[(k0 + r) * N + block_col + c] : 0.0f;
        }
        __syncthreads();

        // Unrolled in full, as nvcc does by itself for this loop; some NVRTC
        // versions unroll it only 4 times, which costs about a third of the speed.
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float a = a_tile[threadIdx.y * BK + k];
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                acc[j] += a * b_tile[k * BN + threadIdx.x * TN + j];
            }
        }
        __syncthreads();
    }

    const int row = block_row + threadIdx.y;
    const int col0 = block_col + threadIdx.x * TN;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
        if (row < M && col0 + j < N) {
            C[row * N + col0 + j] = acc[j];
        }
    }
}
