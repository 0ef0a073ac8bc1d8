// A library's shared header, found through the spec's `options: [-I../common]` (not beside the kernel).
#pragma once
#include <cstdint>
#include <cassert>

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

namespace tp {
enum class Order { Row = 0, Col = 1 };

// Element (i, j) of a matrix with leading dimension ld, in either storage order.
template <Order ORDER>
__device__ __forceinline__ int64_t at(int64_t i, int64_t j, int64_t ld) {
    return ORDER == Order::Row ? i * ld + j : j * ld + i;
}
}  // namespace tp
