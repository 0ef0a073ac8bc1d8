// The order in which blocks take their tiles of C, shared by v8 and v10.
#pragma once

// Block swizzle: consecutive block ids walk down GROUP block rows before moving one block
// column right, so the blocks resident at one time share GROUP row panels of A and a few
// column panels of B in L2, instead of one row panel of A and all of B. Returns the
// (column, row) of the C tile this block computes; GROUP 1 keeps the launch order.
template <int GROUP>
__device__ __forceinline__ int2 swizzled_tile()
{
    if (GROUP <= 1) {
        return make_int2(blockIdx.x, blockIdx.y);
    }
    const int per_group = GROUP * gridDim.x;
    const int bid = blockIdx.y * gridDim.x + blockIdx.x;
    const int first = (bid / per_group) * GROUP;
    const int rows = min(static_cast<int>(gridDim.y) - first, GROUP);
    return make_int2((bid % per_group) / rows, first + (bid % per_group) % rows);
}
