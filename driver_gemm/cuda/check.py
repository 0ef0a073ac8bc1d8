"""The one funnel every CUDA status goes through: a failed call becomes a `CudaError` with its name.

`check` takes the tuple a `cuda.bindings` call returns (status first, then the
outputs); `check_status_code` a raw status integer from a call made through
ctypes. Both name the call, the error and the driver's description, and mark
the errors after which the context is unusable.
"""

from __future__ import annotations

from ..errors import CudaError

# Errors after which the CUDA context is unusable (CUDA driver API documentation,
# "the context cannot be used ... must be destroyed"). A run recovers from them by
# recording the case and opening a fresh context in a new process.
STICKY_ERRORS = frozenset({
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_ASSERT",
    "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_ECC_UNCORRECTABLE",
    "CUDA_ERROR_CONTEXT_IS_DESTROYED",
})


def cuda_error(call: str, name: str, description: str = "", code: int | None = None) -> CudaError:
    """A `CudaError` for `call`, marked sticky when `name` is one of `STICKY_ERRORS`."""
    return CudaError(call, name, description, code, sticky=name in STICKY_ERRORS)


def _driver_error_text(status) -> tuple[str, str]:
    # cuda.bindings: heavy, imported only when a call has failed
    from cuda.bindings import driver

    err, name = driver.cuGetErrorName(status)
    name_text = name.decode() if err == driver.CUresult.CUDA_SUCCESS else getattr(status, "name", str(status))
    err, description = driver.cuGetErrorString(status)
    description_text = description.decode() if err == driver.CUresult.CUDA_SUCCESS else ""
    return name_text, description_text


def _nvrtc_error_text(status) -> tuple[str, str]:
    # cuda.bindings: heavy, imported only when a call has failed
    from cuda.bindings import nvrtc

    err, text = nvrtc.nvrtcGetErrorString(status)
    name = getattr(status, "name", str(status))
    return name, text.decode() if isinstance(text, bytes) else str(text)


def check(result, call: str):
    """Check the status of a cuda.bindings call and return its outputs.

    `result` is the tuple a `cuda.bindings.driver` or `cuda.bindings.nvrtc`
    function returns: a status enum first, then the outputs. On success the
    outputs are returned (none: ``None``; one: the value; several: a tuple).
    On failure a `CudaError` names `call`, the error and its description.
    """
    status, *outputs = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        module = type(status).__module__ or ""
        name, description = _nvrtc_error_text(status) if "nvrtc" in module else _driver_error_text(status)
        raise cuda_error(call, name, description, int(status))
    if not outputs:
        return None
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def check_status_code(code: int, call: str) -> None:
    """Check a raw driver status integer (from a call made without the bindings' wrapper)."""
    if code != 0:
        # cuda.bindings: heavy, imported only when a call has failed
        from cuda.bindings import driver

        raise cuda_error(call, *_driver_error_text(driver.CUresult(code)), code)
