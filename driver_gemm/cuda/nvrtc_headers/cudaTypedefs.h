// driver-gemm stand-in for <cudaTypedefs.h> under NVRTC: see _host_only.h (it declares the driver API's
// function pointer types, for host code that fetches cuTensorMapEncodeTiled at run time).
#include "_host_only.h"
