"""Step 4a of the data flow: kernel arguments packed once with exact C widths, and the launch itself.

`PackedArguments` lays every argument out in one host buffer at its natural
alignment, typed from the kernel's declared signature (never from Python's
types: a Python float would otherwise become a double), plus the array of
their addresses that cuLaunchKernel's ``kernelParams`` expects. `PreparedLaunch`
binds a kernel, a grid, a block, shared memory, a stream and packed arguments
once; calling it enqueues one launch at the cost of a single foreign call.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..argtypes import C_TYPES, CType, Layout, bfloat16_bits, float_value, scalar_layout, struct_layout
from .launch_attributes import LaunchAttributes, launch_config
from ..errors import ArgumentError, CudaError, WrongArgumentType, WrongArgumentValue
from .check import check, check_status_code
from .interop import device_pointer


def _type(ctype: "str | CType") -> CType | None:
    return ctype if isinstance(ctype, CType) else C_TYPES.get(ctype)


# NumPy's duration is one of its integer types, but no number: int() of one in seconds is a datetime.timedelta.
_NOT_NUMBERS = (bool, np.bool_, np.timedelta64)


def _convert(ctype: "str | CType", value: Any, name: str):
    known = _type(ctype)
    if known is None:
        raise ArgumentError(f"argument {name}: unknown C type {ctype!r} (known: {', '.join(C_TYPES)})")
    if isinstance(ctype, CType):
        ctype = ctype.name
    if ctype == "ptr" and not isinstance(value, (int, np.integer)):
        value = device_pointer(value, name)   # our buffers, torch/CuPy/cuda.core arrays (interop's protocols)
    if known.is_opaque:
        if not isinstance(value, (bytes, bytearray)) or len(value) != known.size:
            raise ArgumentError(f"argument {name}: {ctype} needs {known.size} bytes, got {value!r:.60}")
        return bytes(value)
    if known.is_float:
        if isinstance(value, _NOT_NUMBERS) or not isinstance(value, (int, float, np.floating, np.integer)):
            raise ArgumentError(f"argument {name}: {ctype} needs a number, got {value!r}")
        try:
            value = float_value(ctype, float(value))
        except (ValueError, OverflowError) as exc:   # OverflowError: an integer too large for a float at all
            raise ArgumentError(f"argument {name}: {exc}") from None
        return bfloat16_bits(value) if ctype == "bfloat16" else value   # its bits, packed as a uint16
    if ctype == "bool" and isinstance(value, (bool, np.bool_)):
        return int(value)   # C's bool is a byte of 0 or 1: Python's and NumPy's truth values are what it holds
    if isinstance(value, _NOT_NUMBERS) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"argument {name}: {ctype} needs a whole number, got {value!r}")
    if not C_TYPES[ctype].fits(int(value)):
        raise ArgumentError(f"argument {name}: {value} does not fit {ctype} "
                            f"[{C_TYPES[ctype].low}, {C_TYPES[ctype].high}]")
    return int(value)


# The most bytes of parameters one launch may pass: CUDA 12.1 raised the limit from 4,096 on Volta and later GPUs.
MAX_PARAMETER_BYTES = 32_764


def _size_and_alignment(ctype: "str | CType") -> tuple[int, int]:
    """Bytes and alignment of a parameter of C type `ctype` (1 and 1 for a type `_convert` will refuse)."""
    known = _type(ctype)
    return (known.size, known.alignment) if known else (1, 1)


def _checked_offsets(offsets: Sequence[int], ctypes_: Sequence["str | CType"], names: Sequence[str]) -> list[int]:
    """The compiled image's parameter offsets, checked: the driver reads each argument at the storage's address plus
    its offset, so an offset must keep the argument inside the parameters a launch may pass, apart from the others,
    and a scalar at its C type's alignment."""
    spans = []
    for at, ctype, name in zip(offsets, ctypes_, names):
        size, align = _size_and_alignment(ctype)
        if isinstance(at, _NOT_NUMBERS) or not isinstance(at, (int, np.integer)):
            raise ArgumentError(f"argument {name}: offset {at!r:.40} is not a whole number of bytes")
        if not 0 <= at <= MAX_PARAMETER_BYTES - size:
            raise ArgumentError(f"argument {name}: offset {at} puts its {size} bytes outside the "
                                f"{MAX_PARAMETER_BYTES:,} bytes of parameters a launch may pass")
        known = _type(ctype)
        # A struct's or tensor map's alignment is the compiler's (a map's depends on the header that declared it):
        # only its place among the others is checked.
        if known is not None and not known.is_opaque and at % align:
            raise ArgumentError(f"argument {name}: offset {at} is not a multiple of {align}, the alignment of "
                                f"{known.name}")
        spans.append((int(at), int(at) + size, name))
    spans.sort()
    for (start, end, name), (next_start, _, next_name) in zip(spans, spans[1:]):
        if next_start < end:
            raise ArgumentError(f"argument {next_name} at offset {next_start} overlaps argument {name} "
                                f"(bytes {start} to {end - 1})")
    return [int(at) for at in offsets]


class PackedArguments:
    """Kernel arguments in one host buffer, each at its C size and alignment, with their address array.

    ``storage`` holds the values exactly as the kernel reads them; ``pointers``
    holds one 64-bit host address per argument, pointing into ``storage``;
    ``address`` is what cuLaunchKernel takes as ``kernelParams``. Both arrays
    live as long as this object, which must outlive every launch using it.
    `names` (one per value) name the arguments in errors; `offsets` (one per
    value) place them where the compiled image says, else as the C ABI lays them out.
    """

    def __init__(self, ctypes_: Sequence[str | CType], values: Sequence[Any], names: Sequence[str] | None = None,
                 offsets: Sequence[int] | None = None):
        for argument, given in (("ctypes_", ctypes_), ("values", values)):
            if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
                raise WrongArgumentType(f"PackedArguments: {argument} is a list (one per kernel argument), got "
                                        f"{given!r:.40} ({type(given).__name__})")
        wrong = [ctype for ctype in ctypes_ if not isinstance(ctype, (str, CType))]
        if wrong:
            raise WrongArgumentType(f"PackedArguments: ctypes_ are C type names (str, such as 'int32') or CType "
                                    f"layouts, got {wrong[0]!r:.40} ({type(wrong[0]).__name__})")
        if len(ctypes_) != len(values):
            raise ArgumentError(f"{len(values)} values for {len(ctypes_)} arguments")
        if names is not None and len(names) != len(values):
            # each value is packed with its name: the values past a short list would be left as zeros
            raise ArgumentError(f"{len(names)} names for {len(values)} arguments")
        names = list(names) if names is not None else [f"#{i}" for i in range(len(values))]
        self.ctypes = tuple(ctypes_)
        self.offsets: list[int] = []
        offset = 0
        for ctype in self.ctypes:
            size, align = _size_and_alignment(ctype)
            offset = (offset + align - 1) // align * align   # as the C ABI lays out parameters
            self.offsets.append(offset)
            offset += size
        if offsets is not None:
            # The compiled image's own parameter offsets (a kernel may over-align a parameter).
            if len(offsets) != len(self.ctypes):
                raise ArgumentError(f"{len(offsets)} offsets for {len(self.ctypes)} arguments")
            self.offsets = _checked_offsets(offsets, self.ctypes, names)
            offset = max((at + _size_and_alignment(c)[0] for at, c in zip(self.offsets, self.ctypes)), default=0)
        if offset > MAX_PARAMETER_BYTES:
            raise ArgumentError(f"the arguments take {offset:,} bytes, more than the {MAX_PARAMETER_BYTES:,} a "
                                "launch may pass")
        self.storage = np.zeros(max(offset, 8), dtype=np.uint8)
        for ctype, value, name, at in zip(self.ctypes, values, names, self.offsets):
            converted = _convert(ctype, value, name)
            # an ndarray is a writable buffer; numpy's stubs do not declare the buffer protocol before Python 3.12
            struct.pack_into("<" + _type(ctype).format, self.storage, at, converted)  # type: ignore[arg-type]
        base = self.storage.ctypes.data
        self.pointers = np.array([base + at for at in self.offsets] or [0], dtype=np.uint64)

    @property
    def address(self) -> int:
        return int(self.pointers.ctypes.data)

    def value_bytes(self, index: int) -> bytes:
        """The bytes the kernel will read for argument `index`."""
        size = _type(self.ctypes[index]).size
        return self.storage[self.offsets[index]:self.offsets[index] + size].tobytes()


def pack_struct(field_types: list[str] | tuple[str, ...], values: Sequence[Any], names: Sequence[str]) -> bytes:
    """The bytes of a struct passed by value: each field converted to its C type at its C ABI offset."""
    layout, _ = struct_layout([scalar_layout(ctype) for ctype in field_types])
    return pack_layout(layout, values, names)


def pack_layout(layout: Layout, values: Sequence[Any], names: Sequence[str]) -> bytes:
    """The bytes of a C object of `layout` (a struct of structs and arrays): each of its scalars, in the
    order of ``layout.leaves``, converted to its C type at its offset; padding is zero."""
    if len(values) != len(layout.leaves) or len(names) != len(layout.leaves):
        raise ArgumentError(f"{len(values)} values for the {len(layout.leaves)} scalars of a "
                            f"{layout.size}-byte struct")
    data = bytearray(layout.size)
    for (at, ctype), value, name in zip(layout.leaves, values, names):
        struct.pack_into("<" + C_TYPES[ctype].format, data, at, _convert(ctype, value, name))
    return bytes(data)


def _dims(values: Sequence[int], what: str, function: str = "LaunchConfig.of") -> tuple[int, int, int]:
    """`values` as three extents of at least 1, else `WrongArgumentType`/`WrongArgumentValue` naming `function`: a
    string would be read character by character ("12" as 1 and 2), a float cut short (31.9 as 31)."""
    if not isinstance(values, (list, tuple, np.ndarray)):
        raise WrongArgumentType(f"{function}: {what} is a list of 1 to 3 whole numbers, got {values!r:.40} "
                                f"({type(values).__name__})")
    if not 1 <= len(values) <= 3:
        raise WrongArgumentValue(f"{function}: {what} has 1 to 3 dimensions, got {len(values)}")
    extents = []
    for axis, value in zip("xyz", values):
        if isinstance(value, _NOT_NUMBERS) or not isinstance(value, (int, np.integer)):
            raise WrongArgumentType(f"{function}: {what} {axis} is a whole number, got {value!r:.40} "
                                    f"({type(value).__name__})")
        if value < 1:
            raise WrongArgumentValue(f"{function}: {what} {axis} is at least 1, got {value}")
        extents.append(int(value))
    return tuple(extents) + (1,) * (3 - len(extents))  # type: ignore[return-value]


def _shared_bytes(value: int, function: str) -> int:
    if isinstance(value, _NOT_NUMBERS) or not isinstance(value, (int, np.integer)):
        raise WrongArgumentType(f"{function}: shared_bytes is a whole number of bytes, got {value!r:.40} "
                                f"({type(value).__name__})")
    if value < 0:
        raise WrongArgumentValue(f"{function}: shared_bytes is 0 or more, got {value}")
    return int(value)


@dataclass(frozen=True)
class LaunchConfig:
    """Grid and block extents (x, y, z) and dynamic shared memory of one launch."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0

    def __post_init__(self):
        # Built directly, it is held to what `of` makes: three extents each (threads_per_block reads all three).
        for what in ("grid", "block"):
            value = getattr(self, what)
            if not isinstance(value, tuple) or len(value) != 3:
                raise WrongArgumentValue(f"LaunchConfig: {what} is a tuple of 3 extents (LaunchConfig.of takes 1 to "
                                         f"3), got {value!r:.60}")
            object.__setattr__(self, what, _dims(value, what, "LaunchConfig"))
        object.__setattr__(self, "shared_bytes", _shared_bytes(self.shared_bytes, "LaunchConfig"))

    @classmethod
    def of(cls, grid: Sequence[int], block: Sequence[int], shared_bytes: int = 0,
           function: str = "LaunchConfig.of") -> "LaunchConfig":
        """The launch of `grid` and `block` (1 to 3 whole numbers of at least 1 each) and `shared_bytes`; a mistake
        is named as an argument of `function` (the public call that was given them)."""
        return cls(_dims(grid, "grid", function), _dims(block, "block", function),
                   _shared_bytes(shared_bytes, function))

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def total_blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    def as_dict(self) -> dict[str, Any]:
        return {"grid": list(self.grid), "block": list(self.block), "shared_bytes": self.shared_bytes,
                "threads_per_block": self.threads_per_block, "total_blocks": self.total_blocks}


# cuLaunchKernel's C prototype (cuda.h): CUresult (CUfunction, 6 x unsigned grid/block,
# unsigned sharedMemBytes, CUstream, void **kernelParams, void **extra).
_LAUNCH_PROTOTYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *([ctypes.c_uint] * 7),
                                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_launch_entries: dict[int, Any] = {}


def launch_entry(driver) -> Any:
    """The driver's cuLaunchKernel, fetched with cuGetProcAddress and called through ctypes.

    The bindings' Python wrapper costs several microseconds per call converting
    its arguments; with every argument already an integer, a direct call of the
    same driver entry point costs about one. Status codes still go through the
    error funnel.
    """
    version = int(check(driver.cuDriverGetVersion(), "cuDriverGetVersion"))
    if version not in _launch_entries:
        address, _status = check(driver.cuGetProcAddress(
            b"cuLaunchKernel", version, driver.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT),
            "cuGetProcAddress(cuLaunchKernel)")
        if not address:
            raise CudaError("cuGetProcAddress(cuLaunchKernel)", "CUDA_ERROR_NOT_FOUND",
                            "the CUDA driver has no cuLaunchKernel entry point for its own version")
        _launch_entries[version] = _LAUNCH_PROTOTYPE(int(address))
    return _launch_entries[version]


def _check_launch_parts(kernel, config, arguments, stream, attributes) -> None:
    """`WrongArgumentType` naming the first of PreparedLaunch's arguments of another kind than it takes (rather than
    an AttributeError from inside)."""
    from .device import Stream   # the device's module, loaded by then: no import cycle at start-up

    # A kernel is known by what a launch reads of it: cuda.module, which defines Kernel, imports this module.
    if not all(hasattr(kernel, part) for part in ("device", "instance", "address", "handle")):
        raise WrongArgumentType(f"PreparedLaunch: kernel is a Kernel (load_kernel(...) or module.kernel(name)), got "
                                f"{kernel!r:.40} ({type(kernel).__name__})")
    for name, value, kind, takes in (
            ("config", config, LaunchConfig, "a LaunchConfig (LaunchConfig.of(grid, block))"),
            ("arguments", arguments, PackedArguments, "a PackedArguments (PackedArguments(ctypes, values))"),
            ("stream", stream, Stream, "a Stream of the kernel's device (device.stream())"),
            ("attributes", attributes, (LaunchAttributes, type(None)), "a LaunchAttributes or None")):
        if not isinstance(value, kind):
            raise WrongArgumentType(f"PreparedLaunch: {name} is {takes}, got {value!r:.40} ({type(value).__name__})")


class PreparedLaunch:
    """One kernel launch with everything bound; ``launch()`` enqueues it on the stream.

    A launch with attributes (a cluster, programmatic dependent launch) goes
    through cuLaunchKernelEx with its ``CUlaunchConfig`` built once here;
    one without keeps the cheaper direct cuLaunchKernel entry point.
    `owned` holds device buffers only this launch's arguments point to (a
    tensor map passed by pointer, a kernel's workspace): kept as long as the
    launch, released with it.
    """

    def __init__(self, kernel, config: LaunchConfig, arguments: PackedArguments, stream,
                 attributes: LaunchAttributes | None = None, owned: tuple = ()):
        _check_launch_parts(kernel, config, arguments, stream, attributes)
        self.kernel = kernel
        self.config = config
        self.arguments = arguments   # kept alive: the driver reads it at every launch
        self.owned = tuple(owned)
        self.stream = stream
        self.attributes = attributes or LaunchAttributes()
        self.resets: list = []       # what `reset` enqueues: set by whoever made the buffers they reset
        driver = kernel.device.driver
        if self.attributes.any:
            self._ex_config = launch_config(driver, config.grid, config.block, config.shared_bytes, stream.handle,
                                            self.attributes)
            self._ex_call = driver.cuLaunchKernelEx
            self._name = f"cuLaunchKernelEx({kernel.instance})"
        else:
            self._entry = launch_entry(driver)
            self._call = (kernel.address, *config.grid, *config.block, config.shared_bytes, stream.address,
                          arguments.address, None)
            self._name = f"cuLaunchKernel({kernel.instance})"

    def reset(self) -> None:
        """Enqueue the resets of the case's own device buffers (a workspace zeroed, a pattern copied back) on
        the stream; the timing calls it before each sample's start event, so it is never timed."""
        for reset in self.resets:
            reset()

    def launch(self) -> None:
        if self.attributes.any:
            check(self._ex_call(self._ex_config, self.kernel.handle, self.arguments.address, 0), self._name)
            return
        status = self._entry(*self._call)
        if status:
            check_status_code(status, self._name)

    __call__ = launch


class LaunchSequence:
    """A case's launches as one: its kernel's (`first`, whose resets, config and attributes the timing reads) and
    those that follow it (``then:``), enqueued in order on the same stream at every call, so that a sample, a
    graph's capture or the checked launch holds them all."""

    def __init__(self, first: PreparedLaunch, following: Sequence[PreparedLaunch]):
        self.first = first
        self.following = tuple(following)
        self.kernel = first.kernel
        self.config = first.config
        self.attributes = first.attributes
        self.stream = first.stream

    @property
    def resets(self) -> list:
        return self.first.resets

    @resets.setter
    def resets(self, value: list) -> None:
        self.first.resets = value

    def reset(self) -> None:
        self.first.reset()

    def launch(self) -> None:
        self.first.launch()
        for launch in self.following:
            launch.launch()

    __call__ = launch
