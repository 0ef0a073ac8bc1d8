// Element types for the typed GEMM kernels, and their conversions, without NVIDIA's headers.
//
// cuda_fp16.h, cuda_bf16.h and cuda_fp8.h are not part of the NVRTC wheel (it
// ships only nvrtc.h): NVRTC finds them only when given --include-path to a
// CUDA toolkit's include directory, which a machine with just the Python
// wheels lacks. These kernels need no more than storage types and a
// conversion to and from float, so each type here is a struct holding its
// bits, and each conversion is the one PTX instruction the headers would
// emit (PTX ISA, "cvt"): fp16 and bf16 from sm_80, fp8 from sm_89.
//
// The structs are layout-compatible with __half, __nv_bfloat16,
// __nv_fp8_e4m3 and __nv_fp8_e5m2 (same size and bits), so buffers are
// interchangeable with code that uses the headers and with cuBLASLt.

#pragma once

namespace dg {

struct half_t     { unsigned short bits; };   // IEEE binary16
struct bfloat16_t { unsigned short bits; };   // the top half of a float32
struct e4m3_t     { unsigned char bits; };    // OCP FP8 E4M3 ("fn": no infinity, max 448)
struct e5m2_t     { unsigned char bits; };    // OCP FP8 E5M2 (IEEE-like)

// Storage order of an operand. Element (i, j) of a matrix with leading dimension ld.
struct Row {
    static constexpr bool row_major = true;
    __device__ static long long at(int i, int j, int ld) { return (long long)i * ld + j; }
};
struct Col {
    static constexpr bool row_major = false;
    __device__ static long long at(int i, int j, int ld) { return (long long)j * ld + i; }
};

__device__ inline float half_bits_to_float(unsigned short bits)
{
    float value;
    asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(bits));
    return value;
}

// Widening to float is exact for every type here.
__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(half_t x) { return half_bits_to_float(x.bits); }
__device__ inline float to_float(bfloat16_t x) { return __uint_as_float((unsigned int)x.bits << 16); }
__device__ inline float to_float(e4m3_t x)
{
    // cvt converts a pair of fp8 values to a pair of halves; the low byte lands in the low half.
    unsigned int pair;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(pair) : "h"((unsigned short)x.bits));
    return half_bits_to_float((unsigned short)(pair & 0xFFFFu));
}
__device__ inline float to_float(e5m2_t x)
{
    unsigned int pair;
    asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(pair) : "h"((unsigned short)x.bits));
    return half_bits_to_float((unsigned short)(pair & 0xFFFFu));
}

// Narrowing from float rounds to nearest, ties to even (cvt.rn), as the Python side's encode does.
template <typename T> __device__ T from_float(float x);
template <> __device__ inline float from_float<float>(float x) { return x; }
template <> __device__ inline half_t from_float<half_t>(float x)
{
    half_t out;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(out.bits) : "f"(x));
    return out;
}
template <> __device__ inline bfloat16_t from_float<bfloat16_t>(float x)
{
    bfloat16_t out;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(out.bits) : "f"(x));
    return out;
}

}  // namespace dg
