// driver-gemm stand-in for <stdlib.h> under NVRTC: see _c_library.h.
#include "_c_library.h"
