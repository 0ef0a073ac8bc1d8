// Gram products of one input matrix X (M x K, row-major): C = X X^T, as Muon's Newton-Schulz step computes it,
// or one triangle of it, as cuBLAS's SYRK writes it. One thread per element of C, the simplest correct kernels.

// C = X X^T, all of it: element (row, col) is the dot product of rows row and col of X.
extern "C" __global__ void gram_full(const float* X, float* C, int n, int k) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n || col >= n) return;
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += X[row * k + i] * X[col * k + i];
    C[row * n + col] = sum;
}

// The lower triangle of C = X X^T, diagonal included; the upper triangle is left as it was.
extern "C" __global__ void gram_naive(const float* X, float* C, int n, int k) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n || col >= n || col > row) return;
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += X[row * k + i] * X[col * k + i];
    C[row * n + col] = sum;
}

// A GEMM that takes A (M x K, row-major) and B (K x N, column-major: element (i, col) at col * K + i): given the same
// buffer for both, it computes A A^T.
extern "C" __global__ void gemm_a_bt(const float* A, const float* B, float* C, int m, int n, int k) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= m || col >= n) return;
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += A[row * k + i] * B[col * k + i];
    C[row * n + col] = sum;
}

// C = alpha X X^T + beta X for a square X (n x n), as a Newton-Schulz step adds its input back: all of C.
extern "C" __global__ void gram_plus_input(const float* X, float* C, int n, float alpha, float beta) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n || col >= n) return;
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) sum += X[row * n + i] * X[col * n + i];
    C[row * n + col] = alpha * sum + beta * X[row * n + col];
}

// The same product from the lower triangle alone, each element also stored at its mirror image: right only where X
// is symmetric (as a Newton-Schulz step's X X^T is), since beta X[row][col] lands at (col, row) too.
extern "C" __global__ void gram_plus_input_mirrored(const float* X, float* C, int n, float alpha, float beta) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n || col >= n || col > row) return;
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) sum += X[row * n + i] * X[col * n + i];
    float value = alpha * sum + beta * X[row * n + col];
    C[row * n + col] = value;
    C[col * n + row] = value;
}
