"""The cuBLAS baseline: SGEMM through nvmath-python's cuBLAS bindings on our buffers and stream.

cuBLAS is column-major, so row-major C = A @ B is asked for as C^T = B^T A^T (B first, m = N, n = M,
no transposes): the bytes it writes are row-major C. The handle is created with our context current
(a handle and a stream of different contexts fail with CUBLAS_STATUS_INTERNAL_ERROR) and owned by
the `Device`, like every other handle.
"""

from __future__ import annotations

import numpy as np

from ..cuda.device import Device, DeviceBuffer, Owned, Stream
from ..errors import CudaError, DriverGemmError, WrongArgumentType, flag_argument
from ..specfile.model import Shape

NAME = "cublas"


class CublasUnavailable(DriverGemmError):
    """nvmath-python (or the cuBLAS library it loads) is not installed."""


class CublasSgemm(Owned):
    """A cuBLAS handle bound to our context and stream; ``prepare(...)`` gives a launch callable."""

    def __init__(self, device: Device, stream: Stream, *, tf32: bool = False):
        if not isinstance(device, Device):
            raise WrongArgumentType(f"CublasSgemm: device is a Device (such as dg.Device(0)), got {device!r:.40} "
                                    f"({type(device).__name__})")
        if not isinstance(stream, Stream):
            raise WrongArgumentType(f"CublasSgemm: stream is a Stream of the device (device.stream(), or "
                                    f"device.stream(handle=...) for another library's), got {stream!r:.40} "
                                    f"({type(stream).__name__})")
        flag_argument("CublasSgemm", "tf32", tf32)
        try:
            # nvmath-python (cuBLAS): heavy, loaded when the first handle is made
            from nvmath.bindings import cublas
        except ImportError as exc:
            raise CublasUnavailable(f"the cuBLAS baseline needs nvmath-python ({exc})") from None
        self._cublas = cublas
        with device.current():
            try:
                self.handle = cublas.create()
            except Exception as exc:  # noqa: BLE001 - cuBLASError, or the library missing at load time
                raise _cuda_error("cublasCreate", exc) from None
        super().__init__(device, self._releaser(device, cublas, self.handle))
        self._call("cublasSetStream", cublas.set_stream, self.handle, stream.address)
        self._call("cublasSetPointerMode", cublas.set_pointer_mode, self.handle, cublas.PointerMode.HOST)
        math_mode = cublas.Math.TF32_TENSOR_OP_MATH if tf32 else cublas.Math.DEFAULT_MATH
        self._call("cublasSetMathMode", cublas.set_math_mode, self.handle, math_mode)
        # alpha and beta are read from host memory at each call: keep them alive here.
        self._scalars = np.array([1.0, 0.0], dtype=np.float32)
        self.label = "cublas-tf32" if tf32 else NAME

    @staticmethod
    def _releaser(device: Device, cublas, handle):
        def release() -> None:
            try:
                with device.current():
                    cublas.destroy(handle)
            except cublas.cuBLASError as exc:
                raise _cuda_error("cublasDestroy", exc) from None
        return release

    def _call(self, name, function, *args):
        try:
            return function(*args)
        except self._cublas.cuBLASError as exc:
            raise _cuda_error(name, exc) from None

    def prepare(self, A: DeviceBuffer, B: DeviceBuffer, C: DeviceBuffer, shape: Shape):
        """A callable that enqueues C = A @ B (row-major, float32) once."""
        cublas = self._cublas
        M, N, K = shape.M, shape.N, shape.K
        alpha = self._scalars.ctypes.data
        beta = alpha + 4
        args = (self.handle, cublas.Operation.N, cublas.Operation.N, N, M, K,
                alpha, B.address, N, A.address, K, beta, C.address, N)
        sgemm = cublas.sgemm

        def launch() -> None:
            self._call("cublasSgemm", sgemm, *args)

        return launch

    def __call__(self, A: DeviceBuffer, B: DeviceBuffer, C: DeviceBuffer, shape: Shape) -> None:
        """Enqueue C = A @ B once."""
        self.prepare(A, B, C, shape)()


def _cuda_error(call: str, exc: Exception) -> CudaError:
    """A cuBLAS failure in the package's terms: the call, the status's name and the library's message."""
    status = getattr(exc, "status", None)
    name = getattr(status, "name", None) or type(exc).__name__
    return CudaError(call, name, str(exc))
