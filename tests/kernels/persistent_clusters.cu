// C = A @ B (fp32, row-major) by a persistent grid of clusters of four blocks: each thread computes one element
// of C at a time, striding over C by the threads of `clusters` clusters. It writes C only when `clusters` is the
// number of clusters launched, so a case passes only if its argument and its grid were planned with the same
// count of the clusters that fit (a spec gives both as max_active_clusters).
extern "C" __global__ void __launch_bounds__(128)
persistent_clusters(const float* A, const float* B, float* C, int M, int N, int K, int clusters)
{
    if (clusters < 1 || static_cast<unsigned>(clusters) * 4u != gridDim.x)
        return;   // C keeps the harness's poison: FAIL, with where it went wrong
    const long long threads = static_cast<long long>(clusters) * 4 * blockDim.x;
    const long long elements = static_cast<long long>(M) * N;
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < elements; i += threads) {
        const long long row = i / N, col = i % N;
        float sum = 0.0f;
        for (int k = 0; k < K; ++k)
            sum += A[row * K + k] * B[static_cast<long long>(k) * N + col];
        C[i] = sum;
    }
}
