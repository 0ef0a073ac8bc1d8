// driver-gemm stand-in for <sys/types.h> under NVRTC: see _host_only.h.
#include "../_host_only.h"
