"""driver-gemm: compile, launch, check and time CUDA GEMM kernels from Python, with no C++ harness."""

__version__ = "0.1.0"
