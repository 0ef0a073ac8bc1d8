// driver-gemm stand-in for <string.h> under NVRTC: see _c_library.h.
#include "_c_library.h"
