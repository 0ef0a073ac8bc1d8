// C = A @ B where each 16 x 16 tile of C is computed by a cluster of two blocks that split K:
// rank 0 sums the first half of K, rank 1 the second, and rank 0 adds its partner's partial
// from the partner's shared memory (distributed shared memory) before writing C.
//
// Launched with cluster [2, 1, 1] and grid [2 * ceil(N / 16), ceil(M / 16)] it is right. Launched
// without the cluster attribute every block is a cluster of one: it takes %clusterid.x for its
// tile column (twice as many as exist) and sums only the first half of K, so C comes out wrong.
// That is the point: a test that passes only when the launcher really sets the cluster.
extern "C" __global__ void __launch_bounds__(256)
cluster_split_k(const float* A, const float* B, float* C, int M, int N, int K)
{
    constexpr int TILE = 16;
    __shared__ float partial[TILE][TILE];
    unsigned rank, ranks, cluster_x;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(ranks));
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(cluster_x));
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = cluster_x * TILE + threadIdx.x;
    const int half = (K + 1) / 2;
    const int k_begin = rank == 0 ? 0 : half;
    const int k_end = rank == 0 ? half : K;
    float sum = 0.0f;
    if (row < M && col < N)
        for (int k = k_begin; k < k_end; ++k)
            sum += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    partial[threadIdx.y][threadIdx.x] = sum;
    // Every block's partial is written before any block reads its partner's.
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    if (rank == 0 && row < M && col < N) {
        float other = 0.0f;
        if (ranks > 1) {
            unsigned local = (unsigned)__cvta_generic_to_shared(&partial[threadIdx.y][threadIdx.x]);
            unsigned remote;
            asm volatile("mapa.shared::cluster.u32 %0, %1, 1;" : "=r"(remote) : "r"(local));
            asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(other) : "r"(remote) : "memory");
        }
        C[(size_t)row * N + col] = sum + other;
    }
    // Rank 1's shared memory must outlive rank 0's read of it.
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
