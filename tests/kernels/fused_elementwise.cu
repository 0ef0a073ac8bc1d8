// A fused Linear layer as KernelBench's level-2 problems write it: C = act(A @ B + bias[n]), bf16 A and B, the
// product accumulated in fp32, the bias added and the activation applied in fp32, C stored as OUT (float or bf16,
// rounded once, after the activation).
//
// ACT picks the activation: 0 none, 1 relu (max(x, 0)), 2 gelu (PyTorch's erf form, x / 2 * (1 + erf(x / sqrt 2))).
// A spec describes it with bias: N on the bias buffer and elementwise: [relu] or [gelu]; without elementwise: the
// check compares C with the product and bias alone, and the kernel fails wherever the activation changed a value.
//
// One thread per element of C: it shows what the check catches, not speed.
#include "../../kernels/types/element_types.cuh"

template <int ACT, typename OUT>
__global__ void linear_act(const dg::bfloat16_t* A, const dg::bfloat16_t* B, const float* bias, OUT* C, int M,
                           int N, int K)
{
    const int column = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || column >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += dg::to_float(A[static_cast<long long>(row) * K + k]) * dg::to_float(B[static_cast<long long>(k) * N
                                                                                    + column]);
    float x = sum + bias[column];
    if (ACT == 1)
        x = fmaxf(x, 0.0f);
    else if (ACT == 2)
        x = 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    C[static_cast<long long>(row) * N + column] = dg::from_float<OUT>(x);
}
