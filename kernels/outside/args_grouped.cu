// Grouped GEMMs (a mixture of experts' layers) in the layouts outside kernels take them: group g computes
// C[rows of g] = A[rows of g] @ B[g], every group with its own B (K x N) and its own rows of A and C.
//
// - args_grouped_ends: contiguous groups, the rows of each after the last's, as torch's grouped mm takes them:
//   ends[g] is the row after group g's last (the cumulative row counts), B is [G, K, N]. A row past the last
//   group's end is left alone. SAME_B reads group 0's B for every group: the bug of a kernel that forgets the
//   group's matrix, which the check fails.
// - args_grouped_row_index: contiguous groups each starting at a multiple of 128 rows, as DeepGEMM's contiguous
//   layout pads them: row_group[i] is row i's group, -1 for the padding rows between groups, which are left alone.
// - args_grouped_masked: masked groups, as DeepGEMM's masked layout: A is [G, M, K], C [G, M, N], B [G, N, K]
//   (K-major: B's columns contiguous), and group g holds the first rows[g] rows of its matrices.
// - args_grouped_pointers: CUTLASS's grouped-GEMM arguments: an array of pointers per operand, one to each
//   group's first element, and each group's (rows, N, K) in problems; grid z is the group.
//
// One thread per element of C, accumulating in fp32: they show the layouts and the check, not speed.
#include "../types/element_types.cuh"

using dg::bfloat16_t;

template <bool SAME_B>
__global__ void args_grouped_ends(const bfloat16_t* A, const bfloat16_t* B, bfloat16_t* C, const int* ends,
                                  int groups, int M, int N, int K)
{
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || column >= N)
        return;
    int group = 0;
    while (group < groups && row >= ends[group])
        ++group;
    if (group == groups)
        return;                    // a row past the last group's
    const bfloat16_t* b = B + (SAME_B ? 0 : static_cast<long long>(group) * K * N);
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += dg::to_float(A[static_cast<long long>(row) * K + k]) * dg::to_float(b[static_cast<long long>(k) * N
                                                                                    + column]);
    C[static_cast<long long>(row) * N + column] = dg::from_float<bfloat16_t>(sum);
}

__global__ void args_grouped_row_index(const bfloat16_t* A, const bfloat16_t* B, bfloat16_t* C,
                                       const int* row_group, int M, int N, int K)
{
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || column >= N || row_group[row] < 0)
        return;
    const bfloat16_t* b = B + static_cast<long long>(row_group[row]) * K * N;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += dg::to_float(A[static_cast<long long>(row) * K + k]) * dg::to_float(b[static_cast<long long>(k) * N
                                                                                    + column]);
    C[static_cast<long long>(row) * N + column] = dg::from_float<bfloat16_t>(sum);
}

__global__ void args_grouped_masked(const bfloat16_t* A, const bfloat16_t* B, float* C, const int* rows, int M,
                                    int N, int K)
{
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    const int group = blockIdx.z;
    if (row >= rows[group] || column >= N)
        return;
    const bfloat16_t* a = A + (static_cast<long long>(group) * M + row) * K;
    const bfloat16_t* b = B + (static_cast<long long>(group) * N + column) * K;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += dg::to_float(a[k]) * dg::to_float(b[k]);
    C[(static_cast<long long>(group) * M + row) * N + column] = sum;
}

__global__ void args_grouped_pointers(const bfloat16_t* const* A, const bfloat16_t* const* B, bfloat16_t* const* C,
                                      const int* problems, const long long* lda, const long long* ldb,
                                      const long long* ldc)
{
    const int group = blockIdx.z;
    const int rows = problems[3 * group], N = problems[3 * group + 1], K = problems[3 * group + 2];
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= rows || column >= N)
        return;
    const bfloat16_t* a = A[group];
    const bfloat16_t* b = B[group];
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += dg::to_float(a[row * lda[group] + k]) * dg::to_float(b[k * ldb[group] + column]);
    C[group][row * ldc[group] + column] = dg::from_float<bfloat16_t>(sum);
}
