// driver-gemm's stand-in for the C library headers under NVRTC (NVRTC ships none of them).
// Device code gets printf, assert, malloc/free, memcpy/memset, size_t and the math functions from
// NVRTC itself; what a kernel can still need from these headers is the fixed-width integer types
// and the limits. Where CCCL is on the search path they are CCCL's own (<cuda/std/cstdint> and
// <cuda/std/climits> declare them at global scope under NVRTC), so that a kernel including both
// these headers and CCCL's (<cuda/barrier>, <cuda/std/...>) compiles; without CCCL they are defined
// here with the same types (int64_t is long long, where glibc's is long). A parameter declared
// int64_t is therefore mangled as long long under NVRTC and as long under nvcc: both are 8 bytes.
#ifndef DRIVER_GEMM_C_LIBRARY_H
#define DRIVER_GEMM_C_LIBRARY_H
#if __has_include(<cuda/std/cstdint>) && __has_include(<cuda/std/climits>)
#include <cuda/std/cstdint>
#include <cuda/std/climits>
#define DRIVER_GEMM_CCCL_TYPES 1
#else
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long intptr_t;
typedef unsigned long long uintptr_t;
typedef long long intmax_t;
typedef unsigned long long uintmax_t;
#endif
typedef long ptrdiff_t;
// glibc's <stdlib.h>, <stdio.h> and <math.h> bring these in under g++ (which defines _GNU_SOURCE),
// and kernels written for nvcc use them unawares.
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned long ulong;
namespace std {
using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t;
using ::intptr_t; using ::uintptr_t; using ::intmax_t; using ::uintmax_t;
using ::size_t; using ::ptrdiff_t;
}
#ifndef DRIVER_GEMM_CCCL_TYPES
#define INT8_MIN (-128)
#define INT8_MAX 127
#define UINT8_MAX 255
#define INT16_MIN (-32767 - 1)
#define INT16_MAX 32767
#define UINT16_MAX 65535
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define UINT32_MAX 4294967295U
#define INT64_MIN (-9223372036854775807LL - 1)
#define INT64_MAX 9223372036854775807LL
#define UINT64_MAX 18446744073709551615ULL
#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define SHRT_MIN (-32768)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#define INT_MIN (-2147483647 - 1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295U
#define LONG_MIN (-9223372036854775807L - 1)
#define LONG_MAX 9223372036854775807L
#define ULONG_MAX 18446744073709551615UL
#define LLONG_MIN (-9223372036854775807LL - 1)
#define LLONG_MAX 9223372036854775807LL
#define ULLONG_MAX 18446744073709551615ULL
#endif
#ifndef FLT_MAX
#define FLT_MAX 3.402823466e+38F
#endif
#ifndef FLT_MIN
#define FLT_MIN 1.175494351e-38F
#endif
#ifndef FLT_EPSILON
#define FLT_EPSILON 1.192092896e-07F
#endif
#ifndef DBL_MAX
#define DBL_MAX 1.7976931348623158e+308
#endif
#ifndef DBL_MIN
#define DBL_MIN 2.2250738585072014e-308
#endif
#ifndef DBL_EPSILON
#define DBL_EPSILON 2.2204460492503131e-016
#endif
#endif
