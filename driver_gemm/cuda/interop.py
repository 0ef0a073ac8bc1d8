"""The CUDA Python protocols, both ways: streams, device arrays and DLPack, read from other libraries and offered.

Read: `stream_handle` takes any stream (ours, one with ``__cuda_stream__`` as cuda.core, CuPy and
torch have it, a torch stream's ``.cuda_stream``, CuPy's ``.ptr``, a raw handle); `array_view` reads
an array's memory, shape, element type and strides from ``__cuda_array_interface__`` (version 3,
https://numba.readthedocs.io/en/stable/cuda/cuda_array_interface.html), else DLPack
(``__dlpack__``/``__dlpack_device__``, https://dmlc.github.io/dlpack/latest/), else torch's
``data_ptr()``; `device_pointer` is the address a kernel's ``ptr`` argument gets from any of them.

Offered: `ArrayExport` is a typed view of memory we own with both protocols. DLPack's capsule is
built here with ctypes (`DLManagedTensor`); its deleter drops the reference that keeps the view's
owner alive, so the consumer's tensor holds our buffer for as long as it lives (the memory itself
lasts until its `Device` closes). Nothing here calls the driver but an export's wait for its stream:
the protocol shapes are tested without a GPU.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import numbers
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError

# DLDeviceType (dlpack.h)
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
DEVICE_TYPE_NAMES = {KDL_CPU: "the host (CPU)", KDL_CUDA: "a CUDA GPU", KDL_CUDA_HOST: "pinned host memory",
                     KDL_CUDA_MANAGED: "CUDA managed memory"}
# Where a kernel may read and write through the pointer it is given.
KERNEL_ACCESSIBLE = (KDL_CUDA, KDL_CUDA_MANAGED)

# Element types both protocols can name: name -> (CUDA array interface typestr or None, DLPack code, bits).
# DLDataTypeCode (dlpack.h): kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12.
ELEMENTS: dict[str, tuple[str | None, int, int]] = {
    "float64": ("<f8", 2, 64), "float32": ("<f4", 2, 32), "float16": ("<f2", 2, 16), "bfloat16": (None, 4, 16),
    "float8_e4m3fn": (None, 10, 8), "float8_e5m2": (None, 12, 8),
    "int64": ("<i8", 0, 64), "int32": ("<i4", 0, 32), "int16": ("<i2", 0, 16), "int8": ("|i1", 0, 8),
    "uint64": ("<u8", 1, 64), "uint32": ("<u4", 1, 32), "uint16": ("<u2", 1, 16), "uint8": ("|u1", 1, 8),
}
_BY_TYPESTR = {typestr: name for name, (typestr, _, _) in ELEMENTS.items() if typestr}
_BY_TYPESTR.update({typestr.replace("<", "="): name for typestr, name in list(_BY_TYPESTR.items())})
_BY_TYPESTR.update({typestr.replace("|", "<"): name for typestr, name in list(_BY_TYPESTR.items())})
_BY_DLPACK = {(code, bits): name for name, (_, code, bits) in ELEMENTS.items()}

# CUDA's stream handles with a meaning of their own: the legacy default stream and the per-thread one.
CU_STREAM_LEGACY, CU_STREAM_PER_THREAD = 1, 2

ADDRESS_LIMIT = 2**64                  # a device address or a handle is a 64-bit unsigned number
INTERFACE_VERSIONS = (1, 2, 3)         # the versions of __cuda_array_interface__ read here


def element_size(name: str) -> int:
    return ELEMENTS[name][2] // 8


def dtype_name(dtype: Any) -> str:
    """The name in `ELEMENTS` of a NumPy dtype, a torch dtype, a typestr or a name (``float32``, ``bfloat16``)."""
    name = str(dtype).replace("torch.", "")
    if name in ELEMENTS:
        return name
    if name in _BY_TYPESTR:
        return _BY_TYPESTR[name]
    try:
        name = np.dtype(dtype).name
    except TypeError:
        pass
    if name not in ELEMENTS:
        raise ArgumentError(f"element type {dtype!r} is not supported (known: {', '.join(ELEMENTS)})")
    return name


# ------------------------------------------------------------------------------------------------ streams

def stream_handle(stream: Any) -> int | None:
    """The raw CUstream of `stream`: None stays None; our `Stream`, an object with ``__cuda_stream__``
    (protocol version 0: ``(0, handle)``), a torch stream's ``cuda_stream``, CuPy's ``ptr``, or an int."""
    if stream is None:
        return None
    if isinstance(stream, (bool, np.bool_)):    # NumPy's bool too: int() would take True as handle 1
        raise ArgumentError(f"a stream is a stream object or its handle, not {stream!r}")
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        answer = protocol() if callable(protocol) else protocol
        if (not isinstance(answer, tuple) or len(answer) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in answer)):
            raise ArgumentError(f"{type(stream).__name__}.__cuda_stream__() gave {answer!r}: the protocol "
                                "returns (version, handle), two ints")
        version, handle = answer
        if version != 0:
            raise ArgumentError(f"{type(stream).__name__}.__cuda_stream__() speaks version {version}: "
                                "driver-gemm reads version 0")
        return handle
    for attribute in ("address", "cuda_stream", "ptr"):     # ours; torch's; CuPy's
        value = getattr(stream, attribute, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    refusal = ArgumentError(f"{type(stream).__name__} {stream!r:.40} is no stream: give a driver_gemm Stream, an "
                            "object with __cuda_stream__ (cuda.core, CuPy, torch), a torch stream or a raw handle")
    # int() would take a float (1.5 as 1, the legacy default stream) or text as a handle
    if isinstance(stream, (numbers.Number, str, bytes)) and not isinstance(stream, numbers.Integral):
        raise refusal
    try:
        handle = int(stream)        # a raw handle: an int, a cuda.bindings CUstream
    except (TypeError, ValueError):
        raise refusal from None
    if not 0 <= handle < ADDRESS_LIMIT:
        raise ArgumentError(f"stream handle {handle} is no address (0 to 2**64 - 1)")
    return handle


# ------------------------------------------------------------------------------------------- array views

@dataclass(frozen=True)
class ArrayView:
    """Another library's array as its memory: address, shape, element type, strides in elements, where it is.

    `stream` is the stream its producer's work is ordered on (the CUDA array
    interface's ``stream``; None: nothing to wait for); `owner` the object
    whose life keeps the memory (and `keep`, a DLPack capsule read) valid.
    """

    address: int
    shape: tuple[int, ...]
    dtype: str
    strides: tuple[int, ...]
    device_type: int = KDL_CUDA
    device_id: int | None = None
    readonly: bool = False
    stream: int | None = None
    source: str = "__cuda_array_interface__"
    owner: Any = None
    keep: Any = None

    @property
    def itemsize(self) -> int:
        return element_size(self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def span_elements(self) -> int:
        """How many elements the memory from `address` to the last element spans (0 for an empty array)."""
        if any(extent == 0 for extent in self.shape):
            return 0
        return 1 + sum((extent - 1) * stride for extent, stride in zip(self.shape, self.strides))


def compact_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major (C) strides in elements."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def _describe(obj: Any) -> str:
    return type(obj).__module__.split(".")[0] + "." + type(obj).__name__


def _whole_numbers(values: Any, what: str, *, count: int | None = None, minimum: int | None = None) -> tuple[int, ...]:
    """`values`, a tuple or list of whole numbers (NumPy's too), as ints: `count` of them, each at least `minimum`
    where given; an `ArgumentError` naming `what` otherwise (rather than int() reading 64.7 as 64, or zip() cutting
    a list short)."""
    if not isinstance(values, (tuple, list)):
        raise ArgumentError(f"{what} is {values!r:.60}: a tuple of whole numbers")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ArgumentError(f"{what} {tuple(values)!r:.60} holds {value!r:.40}, not a whole number")
        if minimum is not None and value < minimum:
            raise ArgumentError(f"{what} {tuple(values)!r:.60} holds {value}, below {minimum}")
    if count is not None and len(values) != count:
        raise ArgumentError(f"{what} {tuple(values)!r:.60} has {len(values)} entries, not {count}")
    return tuple(int(value) for value in values)


def _address(value: Any, what: str) -> int:
    """`value` as a device address: a whole number, 0 to 2**64 - 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentError(f"{what} is {value!r:.40}: an address is a whole number")
    address = int(value)
    if not 0 <= address < ADDRESS_LIMIT:
        raise ArgumentError(f"{what} is {address}: an address is 0 to 2**64 - 1")
    return address


def _checked_memory(view: ArrayView, what: str) -> ArrayView:
    """`view`, if its address (`what`) can be that of its elements: not NULL while it holds any, and a multiple
    of their size (a kernel's loads would fault, or read the neighbour's bytes)."""
    elements = math.prod(view.shape)
    if view.address == 0 and elements:
        raise ArgumentError(f"{what} is 0 (NULL) for {elements:,} elements")
    if view.address % view.itemsize:
        raise ArgumentError(f"{what} is {view.address:#x}, not a multiple of {view.itemsize} bytes: its {view.dtype} "
                            "elements would be misaligned")
    return view


def from_cuda_array_interface(obj: Any, interface: dict) -> ArrayView:
    """An `ArrayView` of a ``__cuda_array_interface__`` dictionary (versions 1 to 3), each field checked."""
    what = _describe(obj)
    field = f"{what}.__cuda_array_interface__"
    if not isinstance(interface, dict) or "data" not in interface or "shape" not in interface:
        raise ArgumentError(f"{field} has no 'data' and 'shape'")
    version = interface.get("version")
    if version is not None and (isinstance(version, bool) or version not in INTERFACE_VERSIONS):
        raise ArgumentError(f"{field}['version'] is {version!r:.40}: driver-gemm reads versions 1 to 3")
    if interface.get("mask") is not None:
        raise ArgumentError(f"{what}: a masked array (__cuda_array_interface__['mask']) is not supported")
    typestr = interface.get("typestr")
    dtype = _BY_TYPESTR.get(typestr) if isinstance(typestr, str) else None
    if dtype is None:
        raise ArgumentError(f"{what}: element type {typestr!r:.40} is not supported "
                            f"(known: {', '.join(sorted(set(_BY_TYPESTR)))})")
    shape = _whole_numbers(interface["shape"], f"{field}['shape']", minimum=0)
    itemsize = element_size(dtype)
    strides_bytes = interface.get("strides")
    if strides_bytes is None:
        strides = compact_strides(shape)
    else:
        strides_bytes = _whole_numbers(strides_bytes, f"{field}['strides']", count=len(shape))
        if any(s % itemsize for s in strides_bytes):
            raise ArgumentError(f"{what}: strides {strides_bytes} bytes are not whole {dtype} elements")
        strides = tuple(s // itemsize for s in strides_bytes)
    data = interface["data"]
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise ArgumentError(f"{field}['data'] is {data!r:.60}: the protocol gives (address, read-only flag)")
    address, readonly = _address(data[0], f"{field}['data'][0]"), data[1]
    stream = interface.get("stream")
    if stream is not None and (isinstance(stream, bool) or not isinstance(stream, numbers.Integral)):
        raise ArgumentError(f"{field}['stream'] is {stream!r:.40}: a stream's handle (an int) or None")
    if stream == 0:
        raise ArgumentError(f"{field}['stream'] is 0, which the protocol forbids "
                            "(ambiguous): 1 is the legacy default stream, 2 the per-thread one")
    view = ArrayView(address, shape, dtype, strides, KDL_CUDA, None, bool(readonly),
                     None if stream is None else int(stream), "__cuda_array_interface__", obj)
    return _checked_memory(view, f"{field}['data'][0]")


def array_view(obj: Any, *, stream: int | None = None) -> ArrayView:
    """The memory of `obj`: an object with ``__cuda_array_interface__``, DLPack, or torch's ``data_ptr()``.

    The CUDA array interface is read first (it costs nothing); DLPack next,
    its producer asked to order its work before `stream` (a raw handle; None:
    no wait asked); a torch tensor's own attributes last. An object with
    none of them is refused with what is expected.
    """
    unreadable: Exception | None = None   # what reading the interface raised, said where nothing else is read
    try:
        interface = getattr(obj, "__cuda_array_interface__", None)
    # torch raises for a dtype the interface cannot name (bfloat16), or a tensor needing grad: DLPack is next
    except (TypeError, ValueError, RuntimeError) as exc:
        interface, unreadable = None, exc
    # An element type the interface spells only as raw bytes (torch gives bfloat16 as '<V2') is DLPack's to name.
    untyped = isinstance(interface, dict) and interface.get("typestr") not in _BY_TYPESTR
    if interface is not None and not (untyped and hasattr(obj, "__dlpack__")):
        return from_cuda_array_interface(obj, interface)
    if hasattr(obj, "__dlpack__"):
        return from_dlpack(obj, stream=stream)
    if callable(getattr(obj, "data_ptr", None)):
        return _from_torch_attributes(obj)
    if unreadable is not None:
        raise ArgumentError(f"{_describe(obj)}: reading its __cuda_array_interface__ raised "
                            f"{type(unreadable).__name__}: {unreadable}")
    if hasattr(obj, "__array_interface__") or hasattr(obj, "__array__"):
        raise ArgumentError(f"{_describe(obj)} is host memory: give a tensor on the GPU (torch .cuda(), "
                            "cupy.asarray, or device.upload for NumPy)")
    raise ArgumentError(f"{_describe(obj)} is no device array: it has neither __cuda_array_interface__, "
                        "__dlpack__ nor data_ptr()")


def _from_torch_attributes(tensor: Any) -> ArrayView:
    """A torch-style tensor read through ``data_ptr()``, ``shape``, ``stride()``, ``dtype`` and ``is_cuda``."""
    what = _describe(tensor)
    if getattr(tensor, "is_cuda", True) is False:
        raise ArgumentError(f"{what} is on the host (is_cuda is False): give a tensor on the GPU")
    dtype = str(getattr(tensor, "dtype", "")).replace("torch.", "")
    if dtype not in ELEMENTS:
        raise ArgumentError(f"{what}: element type {dtype!r} is not supported")
    shape = _whole_numbers(getattr(tensor, "shape", None), f"{what}.shape", minimum=0)
    stride = getattr(tensor, "stride", None)
    if not callable(stride):
        raise ArgumentError(f"{what} has data_ptr() but no stride(): give a tensor on the GPU")
    strides = _whole_numbers(stride(), f"{what}.stride()", count=len(shape))
    device = getattr(tensor, "device", None)
    view = ArrayView(_address(tensor.data_ptr(), f"{what}.data_ptr()"), shape, dtype, strides, KDL_CUDA,
                     getattr(device, "index", None), False, None, "data_ptr()", tensor)
    return _checked_memory(view, f"{what}.data_ptr()")


def device_pointer(value: Any, name: str = "pointer") -> int:
    """The device address a kernel's ``ptr`` argument gets from `value`: an int, an object with ``address``
    (our buffers), or any array `array_view` reads; host memory is refused."""
    if isinstance(value, bool):
        raise ArgumentError(f"argument {name}: ptr needs a device pointer, got {value!r}")
    if isinstance(value, int):
        return value
    address = getattr(value, "address", None)
    if isinstance(address, int) and not isinstance(address, bool):
        return address
    try:
        view = array_view(value)
    except ArgumentError as exc:
        raise ArgumentError(f"argument {name}: {exc}") from None
    if view.device_type not in KERNEL_ACCESSIBLE:
        raise ArgumentError(f"argument {name}: {_describe(value)} is in "
                            f"{DEVICE_TYPE_NAMES.get(view.device_type, f'device type {view.device_type}')}, "
                            "where a kernel cannot use it: give a tensor on the GPU")
    return view.address


# ------------------------------------------------------------------------------------------------- DLPack

class ExportRefused(ArgumentError, BufferError):
    """A DLPack export asked for what it cannot give (a copy, another device): a BufferError, as the protocol says."""


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DLPACK_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DLPACK_DELETER)]

CAPSULE_NAME = b"dltensor"
USED_CAPSULE_NAME = b"used_dltensor"
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_python = ctypes.pythonapi
_python.PyCapsule_New.restype = ctypes.py_object
_python.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR]
_python.PyCapsule_IsValid.restype = ctypes.c_int
_python.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_python.PyCapsule_GetPointer.restype = ctypes.c_void_p
_python.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# Exports not yet deleted, by the key in their manager_ctx: what keeps each struct and its owner alive.
_EXPORTS: dict[int, tuple] = {}
_EXPORTS_LOCK = threading.Lock()
_export_keys = itertools.count(1)
_NAME_BUFFER = ctypes.create_string_buffer(CAPSULE_NAME)    # the capsule keeps a pointer to its name


@DLPACK_DELETER
def _delete_export(managed) -> None:
    """The DLManagedTensor's deleter: the consumer is done, so the export lets go of its owner."""
    with _EXPORTS_LOCK:
        _EXPORTS.pop(int(managed.contents.manager_ctx or 0), None)


@_CAPSULE_DESTRUCTOR
def _destroy_capsule(capsule) -> None:
    """A capsule no consumer took (still named ``dltensor``): call the deleter, as the DLPack protocol says."""
    if _python.PyCapsule_IsValid(capsule, CAPSULE_NAME):
        pointer = _python.PyCapsule_GetPointer(capsule, CAPSULE_NAME)
        managed = ctypes.cast(pointer, ctypes.POINTER(DLManagedTensor))
        managed.contents.deleter(managed)


def exports_alive() -> int:
    """How many DLPack exports a consumer still holds (their deleters not yet called)."""
    with _EXPORTS_LOCK:
        return len(_EXPORTS)


def dlpack_capsule(address: int, shape: tuple[int, ...], dtype: str, strides: tuple[int, ...] | None,
                   device_type: int, device_id: int, owner: Any) -> Any:
    """A ``dltensor`` PyCapsule describing memory at `address`; `owner` stays alive until its deleter runs."""
    _, code, bits = ELEMENTS[dtype]
    ndim = len(shape)
    shape_array = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides_array = None if strides is None else (ctypes.c_int64 * max(ndim, 1))(*strides)
    managed = DLManagedTensor()
    managed.dl_tensor.data = address or None
    managed.dl_tensor.device = DLDevice(device_type, device_id)
    managed.dl_tensor.ndim = ndim
    managed.dl_tensor.dtype = DLDataType(code, bits, 1)
    managed.dl_tensor.shape = ctypes.cast(shape_array, ctypes.POINTER(ctypes.c_int64))
    managed.dl_tensor.strides = (ctypes.cast(strides_array, ctypes.POINTER(ctypes.c_int64))
                                 if strides_array is not None else None)
    managed.dl_tensor.byte_offset = 0
    key = next(_export_keys)
    managed.manager_ctx = key
    managed.deleter = _delete_export
    with _EXPORTS_LOCK:
        _EXPORTS[key] = (managed, shape_array, strides_array, owner)
    return _python.PyCapsule_New(ctypes.addressof(managed), _NAME_BUFFER, _destroy_capsule)


def read_capsule(capsule: Any) -> DLTensor:
    """The DLTensor of an unconsumed ``dltensor`` capsule (the capsule keeps it valid while it lives)."""
    if not _python.PyCapsule_IsValid(id(capsule), CAPSULE_NAME):
        raise ArgumentError("not a DLPack capsule named 'dltensor' (a versioned or consumed one is not read)")
    pointer = _python.PyCapsule_GetPointer(id(capsule), CAPSULE_NAME)
    return ctypes.cast(pointer, ctypes.POINTER(DLManagedTensor)).contents.dl_tensor


def from_dlpack(obj: Any, *, stream: int | None = None) -> ArrayView:
    """An `ArrayView` of an object with ``__dlpack__``: its capsule read (not consumed) and kept with the view."""
    what = _describe(obj)
    if hasattr(obj, "__dlpack_device__"):
        device_type, _ = _whole_numbers(obj.__dlpack_device__(), f"{what}.__dlpack_device__()", count=2)
        if device_type == KDL_CPU:
            raise ArgumentError(f"{what} is on the host (DLPack device CPU): give a tensor on the GPU")
    try:
        try:
            capsule = obj.__dlpack__(stream=-1 if stream is None else stream)
        except TypeError:                  # a producer that takes no stream
            capsule = obj.__dlpack__()
    # BufferError is the protocol's refusal; torch raises RuntimeError for a tensor that needs its gradient
    except (BufferError, RuntimeError, ValueError) as exc:
        raise ArgumentError(f"{what}.__dlpack__() refused to export it: {exc}") from None
    tensor = read_capsule(capsule)
    key = (int(tensor.dtype.code), int(tensor.dtype.bits))
    dtype = _BY_DLPACK.get(key)
    if dtype is None or tensor.dtype.lanes != 1:
        raise ArgumentError(f"{what}: DLPack element type (code {key[0]}, {key[1]} bits, "
                            f"{tensor.dtype.lanes} lanes) is not supported")
    shape = _whole_numbers([int(tensor.shape[i]) for i in range(tensor.ndim)], f"{what}'s DLPack shape", minimum=0)
    strides = (tuple(int(tensor.strides[i]) for i in range(tensor.ndim)) if tensor.strides
               else compact_strides(shape))
    address = _address(int(tensor.data or 0) + int(tensor.byte_offset), f"{what}'s DLPack data + byte_offset")
    if int(tensor.device.device_id) < 0:   # the producer's word for its GPU, which would be taken as an ordinal
        raise ArgumentError(f"{what}: its DLPack device id is {int(tensor.device.device_id)}: not a GPU's ordinal "
                            "(0 or more)")
    view = ArrayView(address, shape, dtype, strides, int(tensor.device.device_type), int(tensor.device.device_id),
                     False, None, "__dlpack__", obj, capsule)
    return _checked_memory(view, f"{what}'s DLPack data + byte_offset")


class ArrayExport:
    """Typed memory we own, offered through ``__cuda_array_interface__`` (version 3) and DLPack.

    `owner` (a `DeviceBuffer`) is kept alive by the view and by every DLPack
    capsule taken from it. `stream` is where work writing the memory was
    enqueued: the CUDA array interface names it for the consumer to wait on,
    and ``__dlpack__(stream=...)`` waits for it before handing the memory to
    another stream. None: the memory is ready (synchronise first).
    """

    def __init__(self, address: int, shape: tuple[int, ...], dtype: str, *, strides: tuple[int, ...] | None = None,
                 device_type: int = KDL_CUDA, device_id: int = 0, owner: Any = None, stream: Any = None,
                 readonly: bool = False):
        dtype = dtype_name(dtype)
        self.address, self.shape, self.dtype = int(address), tuple(int(n) for n in shape), dtype
        self.strides = None if strides is None else tuple(int(s) for s in strides)
        if self.strides is not None and len(self.strides) != len(self.shape):
            raise ArgumentError(f"{len(self.strides)} strides for {len(self.shape)} dimensions")
        self.device_type, self.device_id = device_type, int(device_id)
        self.owner, self.stream, self.readonly = owner, stream, readonly

    @property
    def __cuda_array_interface__(self) -> dict:
        if self.device_type not in KERNEL_ACCESSIBLE:
            raise AttributeError("host memory has no __cuda_array_interface__")
        typestr = ELEMENTS[self.dtype][0]
        if typestr is None:
            # No typestr names it: the interface is absent (hasattr is False), and consumers turn to DLPack.
            raise AttributeError(f"the CUDA array interface cannot name {self.dtype}: use DLPack (__dlpack__)")
        itemsize = element_size(self.dtype)
        strides = None if self.strides is None else tuple(s * itemsize for s in self.strides)
        stream = stream_handle(self.stream)
        return {"version": 3, "shape": self.shape, "typestr": typestr, "data": (self.address, self.readonly),
                "strides": strides, "descr": [("", typestr)], "stream": stream or None}

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device_type, self.device_id

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: bool | None = None) -> Any:
        """A ``dltensor`` capsule of this memory. `stream` is the consumer's (-1: no wait wanted); the memory is
        made ready for it first. No copy is ever made (``copy=True`` is refused)."""
        if copy:
            raise ExportRefused("driver-gemm offers its memory without a copy (copy=True is not supported)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise ExportRefused(f"this memory is on DLPack device {self.__dlpack_device__()}, not {tuple(dl_device)}")
        if self.stream is not None and stream != -1 and hasattr(self.stream, "synchronize"):
            if stream is None or stream_handle(stream) != stream_handle(self.stream):
                self.stream.synchronize()     # simple and always right: the writes are done before anyone reads
        return dlpack_capsule(self.address, self.shape, self.dtype, self.strides, self.device_type, self.device_id,
                              self)
