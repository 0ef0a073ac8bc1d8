// Kernels with known parameter layouts, for reading signatures and resources back from compiled images.
// Compiles with NVRTC and with nvcc alike (no CUDA headers: CUtensorMap is declared as cuda.h lays it out).

struct alignas(64) CUtensorMap_st { unsigned long long opaque[16]; };
typedef CUtensorMap_st CUtensorMap;

// The seed GEMM signature, with a static shared tile and a barrier.
extern "C" __global__ void gemm_plain(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float tile[256];
    tile[threadIdx.x] = A[threadIdx.x];
    __syncthreads();
    C[threadIdx.x] = tile[255 - threadIdx.x] * B[0] + M + N + K;
}

// An 8-byte double and long long after 4- and 1-byte parameters: padding before each.
extern "C" __global__ void __launch_bounds__(128) padded(int n, double alpha, char c, long long big, float* out) {
    out[threadIdx.x] = alpha * n + c + big;
}

// A 128-byte tensor map passed by value, 64-byte aligned.
extern "C" __global__ void with_tensor_map(const __grid_constant__ CUtensorMap map, float* out, int n) {
    out[threadIdx.x] = n + static_cast<float>(map.opaque[threadIdx.x % 16]);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) clustered(float* out) {
    out[threadIdx.x] = 1.0f;
}

// A per-thread array indexed at run time lives in local memory (a stack frame).
extern "C" __global__ void uses_local(float* p, int n) {
    float scratch[256];
    for (int i = 0; i < 256; ++i) scratch[(i * n) & 255] = p[i * n];
    p[0] = scratch[n & 255];
}

template <int TILE>
__global__ void gemm_tiles(const float* A, const float* B, float* C, int M, int N, int K) {
    C[threadIdx.x] = A[TILE] + B[0] + M + N + K;
}
template __global__ void gemm_tiles<32>(const float*, const float*, float*, int, int, int);
template __global__ void gemm_tiles<64>(const float*, const float*, float*, int, int, int);

// Same sizes as the seed signature but K is a float: only the mangled types tell.
__global__ void float_k(const float* A, const float* B, float* C, int M, int N, float K) {
    C[threadIdx.x] = A[0] + B[0] + M + N + K;
}
