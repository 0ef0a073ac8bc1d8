// driver-gemm stand-in for <curand.h> under NVRTC: see _host_only.h.
#include "_host_only.h"
