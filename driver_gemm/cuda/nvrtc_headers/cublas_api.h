// driver-gemm stand-in for <cublas_api.h> under NVRTC: see _host_only.h.
#include "_host_only.h"
