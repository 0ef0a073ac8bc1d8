// driver-gemm stand-in for <stdint.h> under NVRTC: see _c_library.h.
#include "_c_library.h"
