// Arguments gathered in a struct passed by value, as hand-written libraries often pass them
// (a "params" struct). The int sizes come first, so the C ABI puts 4 bytes of padding before A:
// M at 0, N at 4, K at 8, A at 16, B at 24, C at 32, alpha at 40, 48 bytes in all.
struct GemmArgs {
    int M, N, K;
    const float *A;
    const float *B;
    float *C;
    float alpha;
};

__global__ void sgemm_struct_args(GemmArgs args) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= args.M || col >= args.N) return;
    float sum = 0.0f;
    for (int k = 0; k < args.K; ++k) sum += args.A[row * args.K + k] * args.B[k * args.N + col];
    args.C[row * args.N + col] = args.alpha * sum;
}
