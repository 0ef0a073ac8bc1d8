// A kernel that does not compile: it uses a variable it never declared.
extern "C" __global__ void broken(const float* A, float* C, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        C[i] = A[i] + undeclared_accumulator;
    }
}
