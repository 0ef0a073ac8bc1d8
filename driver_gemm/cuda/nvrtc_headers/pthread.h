// driver-gemm stand-in for <pthread.h> under NVRTC: see _host_only.h.
#include "_host_only.h"
