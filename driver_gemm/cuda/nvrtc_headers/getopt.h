// driver-gemm stand-in for <getopt.h> under NVRTC: see _host_only.h.
#include "_host_only.h"
