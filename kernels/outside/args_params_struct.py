"""The Params of args_params_struct.cu made by host code, as a library's own launcher would make it.

A spec names a function here as a struct's ``builder:``; driver-gemm calls it with the struct's
field values by name (pointers as device addresses) and passes the bytes it returns as the
kernel's parameter. ctypes lays the structures out as the C compiler does, so they mirror the
kernel's declarations member for member.
"""

import ctypes


class ProblemShape(ctypes.Structure):
    _fields_ = [("m", ctypes.c_int32), ("n", ctypes.c_int32), ("k", ctypes.c_int32)]


class MainloopParams(ctypes.Structure):
    _fields_ = [("ptr_A", ctypes.c_uint64), ("stride_A", ctypes.c_int64 * 2),
                ("ptr_B", ctypes.c_uint64), ("stride_B", ctypes.c_int64 * 2)]


class EpilogueParams(ctypes.Structure):
    _fields_ = [("ptr_C", ctypes.c_uint64), ("stride_C", ctypes.c_int64 * 2),
                ("alpha_ptr", ctypes.c_uint64), ("beta_ptr", ctypes.c_uint64)]


class Params(ctypes.Structure):
    _fields_ = [("problem", ProblemShape), ("mainloop", MainloopParams), ("epilogue", EpilogueParams),
                ("raster_order", ctypes.c_int32)]


def params(values):
    """Row-major A, B and C with the leading dimensions the case gives; tiles rastered along rows
    (raster_order 1), as the spec's grid is laid out."""
    return Params(ProblemShape(values["M"], values["N"], values["K"]),
                  MainloopParams(values["A"], (values["lda"], 1), values["B"], (values["ldb"], 1)),
                  EpilogueParams(values["C"], (values["ldc"], 1), values["alpha"], values["beta"]),
                  1)


def params_columns_swapped(values):
    """The same with A's strides swapped: the kernel then multiplies A transposed, and the check says
    where C went wrong."""
    built = params(values)
    built.mainloop.stride_A[0], built.mainloop.stride_A[1] = 1, values["lda"]
    return built
