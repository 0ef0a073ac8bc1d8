// The order in which blocks take their tiles of C, shared by v8, v10, v11 and v12.
#pragma once

// Block swizzle: consecutive tile indices walk down GROUP tile rows before moving one tile
// column right, so the tiles computed at one time share GROUP row panels of A and a few
// column panels of B in L2, instead of one row panel of A and all of B. Returns the
// (column, row) of tile `index` of a grid of `columns` x `rows_total` tiles; GROUP 1 keeps
// row-major order. A persistent kernel, whose blocks each take several tiles, asks for its
// tiles by index.
template <int GROUP>
__device__ __forceinline__ int2 swizzled_tile_of(int index, int columns, int rows_total)
{
    if (GROUP <= 1) {
        return make_int2(index % columns, index / columns);
    }
    const int per_group = GROUP * columns;
    const int first = (index / per_group) * GROUP;
    const int rows = min(rows_total - first, GROUP);
    return make_int2((index % per_group) / rows, first + (index % per_group) % rows);
}

// The tile of a block of a one-tile-per-block launch: its block id's, in the launch's grid.
template <int GROUP>
__device__ __forceinline__ int2 swizzled_tile()
{
    if (GROUP <= 1) {
        return make_int2(blockIdx.x, blockIdx.y);
    }
    return swizzled_tile_of<GROUP>(blockIdx.y * gridDim.x + blockIdx.x, gridDim.x, gridDim.y);
}
