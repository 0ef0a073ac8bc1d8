"""Every error driver-gemm raises.

Two families: mistakes of the user (a spec, a shape, a launch configuration, a command line, a
kernel that does not compile), which carry the place they were made, and failures of the machine
or the CUDA stack, which carry the call, the error's name and its description; the CLI turns either
into one line and an exit code. Every error raised on purpose is a `DriverGemmError` subclass; only
programming errors escape it (``assert``, ``ValueError`` for arguments no correct caller passes,
``AttributeError`` for a missing name). Any other exception in a case is recorded as its ERROR.
CUDA statuses become `CudaError` in `driver_gemm.cuda.check`.
"""

from __future__ import annotations

import numbers
import os
from typing import Union, cast

# A file's path as the public functions take it: text or any path object (pathlib's, or a rig's own os.PathLike)
FilePath = Union[str, "os.PathLike[str]"]


class DriverGemmError(Exception):
    """Base of every error driver-gemm raises on purpose.

    Every one pickles with its fields (a rig's process pool sends a worker's error back that way): rebuilt from its
    message and attributes, never by calling its ``__init__`` again with the message alone.
    """

    def __reduce__(self) -> tuple:
        return (rebuilt_error, (type(self), self.args), self.__dict__)


def rebuilt_error(error_class: type[BaseException], args: tuple) -> BaseException:
    """An error of `error_class` holding `args`, made without its ``__init__`` (pickle then restores its fields)."""
    error = error_class.__new__(error_class, *args)
    error.args = args
    return error


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
        if "\n" in self.message:
            # A message with details: the one-line cause first, then the hint, then the details (split in the
            # message, never in the place, whatever text the place holds).
            cause, details = self.message.split("\n", 1)
            cause = f"{place}: {cause}" if place else cause
            return f"{cause}\n  hint: {self.hint}\n{details}" if self.hint else text
        return f"{text} (hint: {self.hint})" if self.hint else text


class ConfigError(SpecError):
    """A launch configuration that cannot work, found before launching it."""


class ArgumentError(ConfigError):
    """A kernel argument that does not fit its declared C type (or a list of arguments of the wrong length)."""


class WrongArgumentType(DriverGemmError, TypeError):
    """A function of the library called with an argument of a kind it does not take: the message says what it
    takes (a `TypeError` too, as Python's own would be)."""


class WrongArgumentValue(DriverGemmError, ValueError):
    """An argument of the right kind with a value no caller means (a negative GPU ordinal, a NaN tolerance): the
    message names the function, the argument and the value (a `ValueError` too, as Python's own would be)."""


class UnknownInstance(WrongArgumentValue, KeyError):
    """A compiled image asked for an instance it was not compiled for: a `WrongArgumentValue` naming those it holds,
    and a `KeyError`, as any lookup that misses is, which the callers that then try another image (a session's
    loaded module serving several builds of one source) catch."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""   # the message, not KeyError's repr of it


class WrongSpecArgument(SpecError, WrongArgumentType):
    """A function that reads a spec given an argument of a kind it does not take (`spec_from_dict` given text):
    a `SpecError`, as every mistake in a spec is, and a `WrongArgumentType` (a `TypeError`), as a wrong argument is."""


def path_argument(function: str, name: str, value: object) -> str:
    """`value` where `function` takes the path of a file, as text: a str or any str path object (`os.fspath`), else
    `WrongArgumentType` saying so (rather than the TypeError pathlib would raise from inside). A rig's own path
    class is read through `os.fspath`, never `str()`, which may be its repr."""
    if isinstance(value, (str, os.PathLike)):
        try:
            text = os.fspath(cast("str | os.PathLike[str]", value))   # as checked just above
        except TypeError as exc:   # a path class whose __fspath__ returns neither text nor bytes
            raise WrongArgumentType(f"{function}: {name} is a path (a str or a pathlib.Path), got a "
                                    f"{type(value).__name__} whose __fspath__ gives no path: {exc}") from None
        if not isinstance(text, str):   # a bytes path: pathlib and the messages here are text
            raise WrongArgumentType(f"{function}: {name} is a path as text (a str or a pathlib.Path), got a bytes "
                                    f"path {text!r:.80}")
        if "\x00" in text:
            # the operating system reads a path as a C string: it would stop there, and Python refuses it from
            # inside with "embedded null byte", naming neither the function nor the argument
            raise WrongArgumentValue(f"{function}: {name} {text!r} holds a NUL character, which no file's path can")
        return text
    raise WrongArgumentType(f"{function}: {name} is a path (a str or a pathlib.Path), "
                            f"got {type(value).__name__}")


def flag_argument(function: str, name: str, value: object) -> bool:
    """`value` where `function` takes a yes or no: True or False only, else `WrongArgumentType`. A permission read
    from text ("no", "false") is truthy, and would be taken as given. NumPy's bool is taken as Python's (a rig's
    settings read from an array hold them)."""
    if isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy":
        import numpy   # only for a value that is NumPy's already: the module is loaded

        if isinstance(value, numpy.bool_):
            return bool(value)
    raise WrongArgumentType(f"{function}: {name} is True or False, got {value!r:.60} ({type(value).__name__})")


def callback_argument(function: str, name: str, value: object, called: str = "a function") -> None:
    """A callback argument of `function`: None or something callable, else `WrongArgumentType` now, rather than a
    TypeError once the first case has finished (after the workers, the plan and the compiles)."""
    if value is not None and not callable(value):
        raise WrongArgumentType(f"{function}: {name} is {called}, or None, got {value!r:.40} ({type(value).__name__})")


def ordinal_argument(function: str, name: str, value: object) -> int:
    """`value` where `function` takes a GPU's ordinal: a whole number (NumPy's too) of at least 0, as an int;
    `WrongArgumentType` for another kind, `WrongArgumentValue` below 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise WrongArgumentType(f"{function}: {name} is a GPU's ordinal (a whole number), got {value!r:.60} "
                                f"({type(value).__name__})")
    if value < 0:
        raise WrongArgumentValue(f"{function}: {name} is a GPU's ordinal (0 or more), got {value}")
    return int(value)


class UsageError(SpecError):
    """A mistake on the command line: an option's value that cannot be used; `field` names the option."""


class CompileError(DriverGemmError):
    """NVRTC rejected a kernel source; the message quotes file, line and source."""

    def __init__(self, message: str, log: str = "", options: tuple[str, ...] = ()):
        self.log = log
        self.options = options
        super().__init__(message)


class SourceDidNotBuild(CompileError):
    """A kernel source that does not compile, met before its kernel's own compile: while sizing a type it defines
    for a ``sizeof`` in the spec. The plan leaves it to that compile to report, at the kernel's source."""


class ImageError(DriverGemmError):
    """A prebuilt kernel image (CUBIN, fatbin or PTX) that cannot be read, or lacks what was asked of it."""


class CudaError(DriverGemmError):
    """A CUDA driver, NVRTC or cuBLAS call returned an error status.

    `sticky` is True for a fault that leaves the context unusable (see
    `driver_gemm.cuda.check.STICKY_ERRORS`): only a new process recovers.
    """

    def __init__(self, call: str, name: str, description: str = "", code: int | None = None,
                 sticky: bool = False):
        self.call = call
        self.name = name
        self.description = description
        self.code = code
        self.sticky = sticky
        detail = f": {description}" if description and description != name else ""
        super().__init__(f"{call} failed with {name}{detail}")

    @property
    def is_sticky(self) -> bool:
        """True when the error poisons the context (a kernel fault): only a new context recovers."""
        return self.sticky


class NoGpuError(DriverGemmError):
    """No CUDA driver or no CUDA device on this machine (exit code 3)."""


class ToolMissingError(NoGpuError):
    """A tool the command needs (compute-sanitizer, ncu) is not installed: like a missing driver, exit code 3.

    Also an optional package asked for by name (optuna for the TPE search).
    """
