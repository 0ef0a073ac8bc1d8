// driver-gemm's stand-in for the C++ library headers that device code uses (<utility>, <type_traits>,
// <limits>, ...) under NVRTC, which ships none: each includes CCCL's <cuda/std/...> of its name, and
// this file makes cuda::std's names visible as std:: too, so that std::move, std::is_same_v or
// std::numeric_limits<float> in a kernel compile as they do under nvcc. Qualified lookup of std::X
// finds a name std itself declares first, so nothing NVRTC declares in std is shadowed. Without CCCL
// on the search path the include fails, naming the <cuda/std/...> header that is missing.
#ifndef DRIVER_GEMM_CCCL_STD_H
#define DRIVER_GEMM_CCCL_STD_H
namespace std { using namespace ::cuda::std; }
#endif
