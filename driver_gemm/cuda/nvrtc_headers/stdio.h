// driver-gemm stand-in for <stdio.h> under NVRTC: see _c_library.h.
#include "_c_library.h"
