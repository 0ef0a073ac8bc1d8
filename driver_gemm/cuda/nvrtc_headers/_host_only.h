// driver-gemm's stand-in for headers that only host code can use (the C++ containers and streams,
// cuBLAS, timers). NVRTC has none of them, yet kernel files often include them for the host code
// of their own benchmark runner. Under NVRTC such a header is empty, so that the kernels of the
// file compile; device code that uses what it declares fails to compile, naming the identifier.
// Host code itself (main, launchers, cudaMalloc) cannot be compiled by NVRTC: build such a file
// with `compiler: nvcc`, or keep its host code inside #ifndef __CUDACC_RTC__.
