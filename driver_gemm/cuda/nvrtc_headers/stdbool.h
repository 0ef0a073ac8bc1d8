// driver-gemm stand-in for <stdbool.h> under NVRTC: C's bool, true and false are C++'s own keywords, so the
// header defines only its feature macro, as a C++ compiler's does.
#ifndef DRIVER_GEMM_STDBOOL_H
#define DRIVER_GEMM_STDBOOL_H
#define __bool_true_false_are_defined 1
#endif
