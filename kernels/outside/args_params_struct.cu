// A BF16 GEMM that takes one CUTLASS-style Params struct: structs inside a struct, fixed arrays of
// strides, and alpha and beta by device pointer.
//
// CUTLASS 3's kernels take `Params` by value: the problem shape, the mainloop's arguments (operand
// pointers with their strides as arrays) and the epilogue's (C, its strides, the scalars or pointers
// to them), each a struct of its own. What reaches the kernel is their C layout: every member at its
// natural alignment, each struct padded to its widest member (here ProblemShape is 12 bytes and the
// mainloop starts at byte 16; Params ends at byte 108 and is padded to 112). The spec describes the
// same tree and driver-gemm packs it at the same offsets; the signature check compares the
// struct's size with the compiled parameter's. Reading alpha and beta through pointers is what a
// kernel does when the scalars live on the device (computed by an earlier kernel, or kept in
// a graph). The tile itself is args_tile.cuh's.
//
// C (M x N, FP32, strides epilogue.stride_C) = *alpha_ptr * A @ B + *beta_ptr * C.
// Launch: block 256, grid (ceil(N / 64), ceil(M / 64)) with raster_order 0, (ceil(M / 64), ceil(N / 64))
// with raster_order 1.

#include "args_tile.cuh"

struct ProblemShape {
    int m, n, k;
};

struct MainloopParams {
    const dg::bfloat16_t* ptr_A;
    long long stride_A[2];          // between rows, between columns (elements)
    const dg::bfloat16_t* ptr_B;
    long long stride_B[2];
};

struct EpilogueParams {
    float* ptr_C;
    long long stride_C[2];
    const float* alpha_ptr;
    const float* beta_ptr;
};

struct Params {
    ProblemShape problem;
    MainloopParams mainloop;
    EpilogueParams epilogue;
    int raster_order;               // 0: blockIdx (x, y) is (column, row) of tiles of C; 1: (row, column)
};

// Kept at the sizes the spec's struct makes: a change to either shows here first.
static_assert(sizeof(ProblemShape) == 12, "ProblemShape layout");
static_assert(sizeof(MainloopParams) == 48, "MainloopParams layout");
static_assert(sizeof(EpilogueParams) == 40, "EpilogueParams layout");
static_assert(sizeof(Params) == 112, "Params layout");

__global__ void __launch_bounds__(args::THREADS) args_params_struct(const Params params)
{
    const int M = params.problem.m, N = params.problem.n, K = params.problem.k;
    const int tile_x = params.raster_order == 0 ? blockIdx.x : blockIdx.y;
    const int tile_y = params.raster_order == 0 ? blockIdx.y : blockIdx.x;
    const int row0 = tile_y * args::TILE_M;
    const int col0 = tile_x * args::TILE_N;
    const MainloopParams& mainloop = params.mainloop;
    const args::Strided a{mainloop.ptr_A, mainloop.stride_A[0], mainloop.stride_A[1]};
    const args::Strided b{mainloop.ptr_B, mainloop.stride_B[0], mainloop.stride_B[1]};
    float sums[4][4];
    args::tile_product(a, b, M, N, K, row0, col0, sums);

    const EpilogueParams& epilogue = params.epilogue;
    const float alpha = *epilogue.alpha_ptr;
    const float beta = *epilogue.beta_ptr;
    for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) {
            const int row = args::tile_row(row0, i), col = args::tile_col(col0, j);
            if (row < M && col < N) {
                float* out = epilogue.ptr_C + row * epilogue.stride_C[0] + col * epilogue.stride_C[1];
                *out = alpha * sums[i][j] + (beta != 0.0f ? beta * *out : 0.0f);
            }
        }
    }
}
