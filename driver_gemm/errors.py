"""Every error driver-gemm raises, and the one funnel every CUDA status goes through.

Two families: mistakes of the user (a spec, a shape, a launch configuration, a
kernel that does not compile), which carry the place they were made, and
failures of the CUDA stack, which carry the call, the error's name and its
description. The CLI turns any of them into one line and an exit code.
"""

from __future__ import annotations


class DriverGemmError(Exception):
    """Base of every error driver-gemm raises on purpose."""


class SpecError(DriverGemmError):
    """A spec (or an equivalent Python description) is wrong.

    `where` is ``file:line`` when known; `field` the dotted path of the
    offending entry, e.g. ``kernels[2].grid[0]``.
    """

    def __init__(self, message: str, where: str | None = None, field: str | None = None,
                 hint: str | None = None):
        self.message = message
        self.where = where
        self.field = field
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        place = ": ".join(part for part in (self.where, self.field) if part)
        text = f"{place}: {self.message}" if place else self.message
        return f"{text} (hint: {self.hint})" if self.hint else text


class ConfigError(SpecError):
    """A launch configuration that cannot work, found before launching it."""


class CompileError(DriverGemmError):
    """NVRTC rejected a kernel source; the message quotes file, line and source."""

    def __init__(self, message: str, log: str = "", options: tuple[str, ...] = ()):
        self.log = log
        self.options = options
        super().__init__(message)


class CudaError(DriverGemmError):
    """A CUDA driver, NVRTC or cuBLAS call returned an error status."""

    def __init__(self, call: str, name: str, description: str = "", code: int | None = None):
        self.call = call
        self.name = name
        self.description = description
        self.code = code
        detail = f": {description}" if description and description != name else ""
        super().__init__(f"{call} failed with {name}{detail}")

    @property
    def is_sticky(self) -> bool:
        """True when the error poisons the context (a kernel fault): only a new context recovers."""
        return self.name in STICKY_ERRORS


class NoGpuError(DriverGemmError):
    """No CUDA driver or no CUDA device on this machine."""


class UsageError(DriverGemmError):
    """The command line, or an input that is not a spec (a results file), is wrong.

    `where` is the file (``file:line`` for a line of a JSON-lines file) and
    `field` the option or the JSON path of the bad value, when known.
    """

    def __init__(self, message: str, where: str | None = None, field: str | None = None):
        self.message = message
        self.where = where
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        place = ": ".join(part for part in (self.where, self.field) if part)
        return f"{place}: {self.message}" if place else self.message


class ToolMissingError(DriverGemmError):
    """A tool a command needs is not installed: compute-sanitizer, ncu, matplotlib."""


# Errors after which the CUDA context is unusable (CUDA driver API documentation,
# "the context cannot be used ... must be destroyed"). A run recovers from them by
# recording the case and opening a fresh context.
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


def _driver_error_text(status) -> tuple[str, str]:
    from cuda.bindings import driver

    err, name = driver.cuGetErrorName(status)
    name_text = name.decode() if err == driver.CUresult.CUDA_SUCCESS else getattr(status, "name", str(status))
    err, description = driver.cuGetErrorString(status)
    description_text = description.decode() if err == driver.CUresult.CUDA_SUCCESS else ""
    return name_text, description_text


def _nvrtc_error_text(status) -> tuple[str, str]:
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
        raise CudaError(call, name, description, int(status))
    if not outputs:
        return None
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def check_status_code(code: int, call: str) -> None:
    """Check a raw driver status integer (from a call made without the bindings' wrapper)."""
    if code != 0:
        from cuda.bindings import driver

        raise CudaError(call, *_driver_error_text(driver.CUresult(code)), code)
