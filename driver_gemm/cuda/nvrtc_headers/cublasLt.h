// driver-gemm stand-in for <cublasLt.h> under NVRTC: see _host_only.h.
#include "_host_only.h"
