// driver-gemm stand-in for <unistd.h> under NVRTC: see _host_only.h.
#include "_host_only.h"
