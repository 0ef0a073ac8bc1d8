// driver-gemm stand-in for <sys/time.h> under NVRTC: see _host_only.h.
#include "../_host_only.h"
