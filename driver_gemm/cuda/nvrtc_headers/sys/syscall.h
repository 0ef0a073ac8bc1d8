// driver-gemm stand-in for <sys/syscall.h> under NVRTC: see _host_only.h.
#include "../_host_only.h"
