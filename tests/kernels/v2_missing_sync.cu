// v2 (shared-memory tiles) without the barrier after the multiply-adds: fast
// threads overwrite a tile for the next step while slow ones still read it
// (racecheck must report the hazard).
template <int TILE>
__global__ void sgemm_tiles_missing_sync(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float a_tile[TILE][TILE];
    __shared__ float b_tile[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    float dot = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        a_tile[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        b_tile[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) {
            dot += a_tile[ty][k] * b_tile[k][tx];
        }
        // missing: __syncthreads();
    }
    if (row < M && col < N) {
        C[row * N + col] = dot;
    }
}
