// Kernels whose TMA copies name their maps' ranks, for the offline rank and cluster checks
// (tests/test_outside_maps.py): no GPU runs them. copy_3d reads a rank-3 map by pointer and a
// rank-2 map by value; pair_cluster is compiled with __cluster_dims__(2, 1, 1).
struct alignas(64) CUtensorMap_st {
    unsigned long long opaque[16];
};
typedef CUtensorMap_st CUtensorMap;

__device__ __forceinline__ void load_2d(unsigned dst, const CUtensorMap* map, int x, int y, unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory");
}

__device__ __forceinline__ void load_3d(unsigned dst, const CUtensorMap* map, int x, int y, int z, unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
                 ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(z), "r"(bar) : "memory");
}

extern "C" __global__ void copy_3d(const CUtensorMap* map_b, const __grid_constant__ CUtensorMap map_a, float* C,
                                   int M, int N, int K)
{
    __shared__ alignas(1024) unsigned char tile[16384];
    __shared__ unsigned long long bar;
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(tile));
    const unsigned barrier = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
    load_3d(dst, map_b, 0, blockIdx.x, blockIdx.y, barrier);
    load_2d(dst + 8192, &map_a, blockIdx.x, 0, barrier);
    C[threadIdx.x] = M + N + K;
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) pair_cluster(const float* A, const float* B, float* C, int M, int N,
                                                                  int K)
{
    C[blockIdx.x] = A[0] + B[0] + M + N + K;
}
