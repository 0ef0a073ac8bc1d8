"""Step 3a of the data flow: the GPU, the context we work in on it, and the handles that live in it.

`Device` works in the GPU's primary context by default (the one torch, CuPy and cuda.core use, so
a kernel runs beside their tensors), in a context of its own where asked (``own_context=True``: the
isolated GPU workers), or in one the caller lends. It owns everything created there (streams, events,
buffers, modules, graphs, cuBLAS handles, as `Owned` handles), released newest first by
`Device.close()` or ``with`` exit, before the context is released. A handle's own ``close()`` may come earlier;
a ``weakref.finalize`` is only the safety net, and warns rather than raises. Every release makes the
owning context current first, so a handle freed from another thread goes to the right place. One
module because the device, its properties and its handles are one ownership story.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import interop
from .check import check
from ..errors import CudaError, NoGpuError, WrongArgumentType, WrongArgumentValue, flag_argument, ordinal_argument
from .occupancy import FP32_LANES_PER_SM


def device_argument(function: str, device: object) -> "Device":
    """`device` where `function` takes our `Device`, else `WrongArgumentType` naming it (rather than an
    AttributeError on ``device.driver`` from inside)."""
    if not isinstance(device, Device):
        raise WrongArgumentType(f"{function}: device is a Device (such as dg.Device(0)), got {device!r:.40} "
                                f"({type(device).__name__})")
    return device


def context_argument(function: str, context: object) -> int:
    """`context` where `function` adopts a caller's CUDA context: its handle as an int (a whole number, or a handle
    object such as cuda.bindings' CUcontext that converts to one), never NULL."""
    if isinstance(context, (bool, np.bool_, float, np.floating, str, bytes)) or not hasattr(context, "__int__"):
        raise WrongArgumentType(f"{function}: context is a CUDA context's handle (a CUcontext or its address), got "
                                f"{context!r:.40} ({type(context).__name__})")
    handle = int(context)   # has __int__, checked just above
    if handle <= 0:
        raise WrongArgumentValue(f"{function}: context is a CUDA context's handle, got {handle} (NULL or negative)")
    return handle


def driver_module():
    """`cuda.bindings.driver`, once `cuInit` has succeeded; `NoGpuError` when there is no driver or GPU."""
    # cuda.bindings: heavy, imported when the driver is first used
    from cuda.bindings import driver

    try:
        status, = driver.cuInit(0)
    except RuntimeError as exc:  # cuda.pathfinder's DynamicLibNotFoundError: no libcuda on this machine
        raise NoGpuError(f"no CUDA driver on this machine ({type(exc).__name__}); "
                         "compiling and planning still work (driver-gemm plan --arch sm_90)") from None
    if status == driver.CUresult.CUDA_ERROR_NO_DEVICE:
        raise NoGpuError("the CUDA driver is installed but sees no GPU")
    check((status,), "cuInit")
    return driver


def initialise_in_background() -> None:
    """Start cuInit on a thread of its own and return at once (the call releases the GIL).

    A command that will ask the driver later (``driver-gemm run``, after reading its specs) then finds
    it answered: cuInit overlaps its imports and spec reading. What fails here is raised again, and
    reported, by the first real call.
    """
    def initialise() -> None:
        try:
            driver_module()
        except Exception:  # noqa: BLE001 - the command's own call raises it again, where it is reported
            pass

    threading.Thread(target=initialise, name="driver-gemm cuInit", daemon=True).start()


def device_count() -> int:
    driver = driver_module()
    return check(driver.cuDeviceGetCount(), "cuDeviceGetCount")



@dataclass(frozen=True)
class DeviceProperties:
    """What we need to know about a GPU: identity, limits, and the figures its peaks come from."""

    ordinal: int
    name: str
    uuid: str
    compute_capability: tuple[int, int]
    sm_count: int
    clock_khz: int
    memory_clock_khz: int
    memory_bus_bits: int
    total_memory_bytes: int
    l2_bytes: int
    warp_size: int
    max_threads_per_block: int
    max_block_dims: tuple[int, int, int]
    max_grid_dims: tuple[int, int, int]
    max_shared_per_block: int
    max_shared_per_block_optin: int
    shared_per_sm: int
    reserved_shared_per_block: int
    registers_per_block: int
    registers_per_sm: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    driver_version: int
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def arch(self) -> str:
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    @property
    def fp32_lanes_per_sm(self) -> int | None:
        return FP32_LANES_PER_SM.get(self.compute_capability)

    @property
    def fp32_peak_gflops(self) -> float | None:
        """SMs x FP32 lanes per SM x 2 FLOP per FMA x the clock the driver reports (its maximum boost clock)."""
        lanes = self.fp32_lanes_per_sm
        return None if lanes is None else self.sm_count * lanes * 2 * self.clock_khz / 1e6

    @property
    def memory_bandwidth_gbs(self) -> float:
        """Theoretical DRAM bandwidth: 2 transfers per memory clock x bus width (double data rate)."""
        return 2 * self.memory_clock_khz * 1e3 * self.memory_bus_bits / 8 / 1e9

    def as_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "extra"}
        out.update(arch=self.arch, fp32_lanes_per_sm=self.fp32_lanes_per_sm,
                   fp32_peak_gflops=self.fp32_peak_gflops,
                   fp32_peak_source="SM count x FP32 lanes per SM (by compute capability) x 2 x "
                                    "CU_DEVICE_ATTRIBUTE_CLOCK_RATE (the maximum SM clock)",
                   memory_bandwidth_gbs=self.memory_bandwidth_gbs)
        return out


def read_properties(ordinal: int) -> DeviceProperties:
    ordinal = ordinal_argument("read_properties", "ordinal", ordinal)   # before the driver: see Device
    driver = driver_module()
    device = check(driver.cuDeviceGet(ordinal), "cuDeviceGet")
    attribute = driver.CUdevice_attribute

    def get(name: str) -> int:
        return int(check(driver.cuDeviceGetAttribute(getattr(attribute, f"CU_DEVICE_ATTRIBUTE_{name}"), device),
                         f"cuDeviceGetAttribute({name})"))

    raw_name = check(driver.cuDeviceGetName(256, device), "cuDeviceGetName")
    uuid_bytes = bytes(check(driver.cuDeviceGetUuid(device), "cuDeviceGetUuid").bytes)
    hex_uuid = uuid_bytes.hex()
    uuid = f"GPU-{hex_uuid[:8]}-{hex_uuid[8:12]}-{hex_uuid[12:16]}-{hex_uuid[16:20]}-{hex_uuid[20:]}"
    return DeviceProperties(
        ordinal=ordinal,
        name=raw_name.split(b"\x00", 1)[0].decode(),
        uuid=uuid,
        compute_capability=(get("COMPUTE_CAPABILITY_MAJOR"), get("COMPUTE_CAPABILITY_MINOR")),
        sm_count=get("MULTIPROCESSOR_COUNT"),
        clock_khz=get("CLOCK_RATE"),
        memory_clock_khz=get("MEMORY_CLOCK_RATE"),
        memory_bus_bits=get("GLOBAL_MEMORY_BUS_WIDTH"),
        total_memory_bytes=int(check(driver.cuDeviceTotalMem(device), "cuDeviceTotalMem")),
        l2_bytes=get("L2_CACHE_SIZE"),
        warp_size=get("WARP_SIZE"),
        max_threads_per_block=get("MAX_THREADS_PER_BLOCK"),
        max_block_dims=(get("MAX_BLOCK_DIM_X"), get("MAX_BLOCK_DIM_Y"), get("MAX_BLOCK_DIM_Z")),
        max_grid_dims=(get("MAX_GRID_DIM_X"), get("MAX_GRID_DIM_Y"), get("MAX_GRID_DIM_Z")),
        max_shared_per_block=get("MAX_SHARED_MEMORY_PER_BLOCK"),
        max_shared_per_block_optin=get("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        shared_per_sm=get("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        reserved_shared_per_block=get("RESERVED_SHARED_MEMORY_PER_BLOCK"),
        registers_per_block=get("MAX_REGISTERS_PER_BLOCK"),
        registers_per_sm=get("MAX_REGISTERS_PER_MULTIPROCESSOR"),
        max_threads_per_sm=get("MAX_THREADS_PER_MULTIPROCESSOR"),
        max_blocks_per_sm=get("MAX_BLOCKS_PER_MULTIPROCESSOR"),
        driver_version=int(check(driver.cuDriverGetVersion(), "cuDriverGetVersion")),
    )


class Owned:
    """A handle owned by a `Device`: closed by its owner at the latest, by a finalizer as a last resort.

    `release` frees the handle (it should make the owning context current: see
    `releaser`). Called by `close()`, its errors are raised; called by the
    garbage collector's finalizer, they become a `ResourceWarning`.
    """

    def __init__(self, device: "Device", release: Callable[[], None]):
        self._device = device
        self._release = release
        self._finalizer = weakref.finalize(self, _release_quietly, release, type(self).__name__)
        self._finalizer.atexit = False  # at exit the driver frees everything with the process
        device.adopt(self)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        """Release the handle now (idempotent); after a fault in the context, just forget it."""
        if self._finalizer.detach() is None:
            return
        if not self._device.poisoned:
            self._release()

    def forget(self) -> None:
        """Drop the handle without releasing it (its context is gone or unusable)."""
        self._finalizer.detach()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _release_quietly(release: Callable[[], None], what: str) -> None:
    try:
        release()
    except Exception as exc:  # noqa: BLE001 - a finalizer must not raise: say what leaked instead
        warnings.warn(f"releasing a {what} that was never closed failed: {exc}", ResourceWarning, stacklevel=1)


def releaser(device: "Device", driver_call: Callable, handle, name: str) -> Callable[[], None]:
    """A release function for `handle`: `driver_call(handle)` checked, with `device`'s context current."""
    def release():
        with device.current():
            check(driver_call(handle), name)
    return release


class Stream(Owned):
    """A non-blocking stream (it never synchronises with the legacy default stream)."""

    def __init__(self, device: "Device", *, handle=None):
        driver = device_argument("Stream", device).driver
        self.owned = handle is None
        if self.owned:
            handle = check(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate")
            release = releaser(device, driver.cuStreamDestroy, handle, "cuStreamDestroy")
        else:  # a stream somebody else owns (CuPy, PyTorch, cuda.core): we use it, we never destroy it
            handle = driver.CUstream(interop.stream_handle(handle))
            release = lambda: None  # noqa: E731
        self.handle = handle
        super().__init__(device, release)

    @property
    def address(self) -> int:
        return int(self.handle)

    def __cuda_stream__(self) -> tuple[int, int]:
        """The CUDA stream protocol (version 0), as cuda.core, CuPy and torch read it."""
        return 0, int(self.handle)

    def synchronize(self) -> None:
        check(self._device.driver.cuStreamSynchronize(self.handle), "cuStreamSynchronize")


class Event(Owned):
    """A timing event (resolution about half a microsecond)."""

    def __init__(self, device: "Device"):
        driver = device_argument("Event", device).driver
        self.handle = check(driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")
        super().__init__(device, releaser(device, driver.cuEventDestroy, self.handle, "cuEventDestroy"))

    def record(self, stream: Stream) -> None:
        check(self._device.driver.cuEventRecord(self.handle, stream.handle), "cuEventRecord")

    def synchronize(self) -> None:
        check(self._device.driver.cuEventSynchronize(self.handle), "cuEventSynchronize")

    def elapsed_ms_since(self, start: "Event") -> float:
        return float(check(self._device.driver.cuEventElapsedTime(start.handle, self.handle), "cuEventElapsedTime"))


class DeviceBuffer(Owned):
    """Device memory from cuMemAlloc (256-byte aligned), with copies to and from NumPy on a stream.

    It is offered to torch, CuPy and others as an array of `shape` and `dtype`
    (those of the array it was uploaded from; bytes for `alloc`) through
    ``__cuda_array_interface__`` and DLPack: ``torch.from_dlpack(buffer)``,
    ``cupy.asarray(buffer)``. `view` offers it with another shape, type or
    strides, and the stream its writes were enqueued on. The memory lives until
    the buffer or its `Device` is closed, whoever holds the view.
    """

    def __init__(self, device: "Device", nbytes: int, *, shape: tuple[int, ...] | None = None,
                 dtype: str = "uint8"):
        device_argument("DeviceBuffer", device)
        if isinstance(nbytes, (bool, np.bool_)) or not isinstance(nbytes, (int, np.integer)):
            raise WrongArgumentType(f"DeviceBuffer: nbytes is a whole number of bytes, got {nbytes!r:.40} "
                                    f"({type(nbytes).__name__})")
        if nbytes <= 0:
            raise WrongArgumentValue(f"DeviceBuffer: nbytes is a positive size, got {nbytes}")
        driver = device.driver
        self.nbytes = int(nbytes)
        self.dtype = dtype
        self.shape = tuple(shape) if shape is not None else (self.nbytes // interop.element_size(dtype),)
        self.handle = check(driver.cuMemAlloc(self.nbytes), f"cuMemAlloc({self.nbytes})")
        super().__init__(device, releaser(device, driver.cuMemFree, self.handle, "cuMemFree"))

    @property
    def address(self) -> int:
        return int(self.handle)

    def view(self, shape: tuple[int, ...] | None = None, dtype: str | None = None, *,
             strides: tuple[int, ...] | None = None, stream: "Stream | None" = None) -> interop.ArrayExport:
        """This buffer as a typed array for other libraries (both protocols); `strides` in elements (None:
        row-major), `stream` where its writes were enqueued (None: it is ready)."""
        dtype = interop.dtype_name(dtype or self.dtype)
        shape = tuple(shape) if shape is not None else self.shape
        view = interop.ArrayExport(self.address, shape, dtype, strides=strides, device_id=self._device.ordinal,
                                   owner=self, stream=stream)
        span = interop.ArrayView(view.address, view.shape, view.dtype,
                                 view.strides or interop.compact_strides(view.shape)).span_elements()
        if span * interop.element_size(view.dtype) > self.nbytes:
            raise ValueError(f"a {view.dtype} view of shape {view.shape} spans {span} elements: more than this "
                             f"{self.nbytes}-byte buffer holds")
        return view

    @property
    def __cuda_array_interface__(self) -> dict:
        return self.view().__cuda_array_interface__

    def __dlpack__(self, **kwargs):
        return self.view().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return interop.KDL_CUDA, self._device.ordinal

    def upload(self, array: np.ndarray, stream: Stream) -> None:
        """Copy a C-contiguous array into the start of this buffer, ordered on `stream`."""
        array = np.ascontiguousarray(array)
        if array.nbytes > self.nbytes:
            raise ValueError(f"array of {array.nbytes} bytes does not fit a buffer of {self.nbytes}")
        check(self._device.driver.cuMemcpyHtoDAsync(self.handle, array.ctypes.data, array.nbytes, stream.handle),
              "cuMemcpyHtoDAsync")
        stream.synchronize()  # the host array may be pageable and short-lived

    def download(self, shape, dtype, stream: Stream) -> np.ndarray:
        """A new array of `shape` and `dtype` copied from the start of this buffer after `stream`'s work."""
        return self.download_into(np.empty(shape, dtype=dtype), stream)

    def download_into(self, out: np.ndarray, stream: Stream) -> np.ndarray:
        """`out` (C-contiguous) overwritten with the start of this buffer after `stream`'s work, and returned."""
        if not out.flags.c_contiguous or out.nbytes > self.nbytes:
            raise ValueError(f"cannot read {out.nbytes} bytes of a {self.nbytes}-byte buffer into this array")
        check(self._device.driver.cuMemcpyDtoHAsync(out.ctypes.data, self.handle, out.nbytes, stream.handle),
              "cuMemcpyDtoHAsync")
        stream.synchronize()
        return out

    def fill_u32(self, word: int, stream: Stream, nbytes: int | None = None) -> None:
        """Set every 32-bit word (of the first `nbytes`) to `word`: a NaN pattern for poisoning, any for flushing."""
        count = (self.nbytes if nbytes is None else nbytes) // 4
        check(self._device.driver.cuMemsetD32Async(self.handle, word, count, stream.handle), "cuMemsetD32Async")

    def copy_from(self, source: "DeviceBuffer", nbytes: int, stream: Stream) -> None:
        """Copy the first `nbytes` of `source` into the start of this buffer, ordered on `stream` (no wait:
        both are device memory, so nothing on the host must outlive the copy)."""
        if nbytes > min(self.nbytes, source.nbytes):
            raise ValueError(f"cannot copy {nbytes} bytes between buffers of {source.nbytes} and {self.nbytes}")
        check(self._device.driver.cuMemcpyDtoDAsync(self.handle, source.handle, nbytes, stream.handle),
              "cuMemcpyDtoDAsync")


class PageLocked(Owned):
    """A NumPy array's memory page-locked (cuMemHostRegister) until closed, for copies at the link's full speed.

    Copies from pageable memory go through a staging buffer, several times
    slower. The registration holds the array, so its memory cannot be freed
    while it is registered.
    """

    def __init__(self, device: "Device", array: np.ndarray):
        if not array.flags.c_contiguous or array.nbytes == 0:
            raise ValueError("only a non-empty C-contiguous array can be page-locked")
        driver = device.driver
        self.array = array
        check(driver.cuMemHostRegister(array.ctypes.data, array.nbytes, 0), f"cuMemHostRegister({array.nbytes})")

        def release(array=array):      # the closure keeps the array alive until it is unregistered
            with device.current():
                check(driver.cuMemHostUnregister(array.ctypes.data), "cuMemHostUnregister")
        super().__init__(device, release)


class MappedHostWord(Owned):
    """A 32-bit word of pinned host memory that kernels can read: the host flips it, the GPU sees it."""

    def __init__(self, device: "Device"):
        driver = device.driver
        self.host_address = int(check(driver.cuMemHostAlloc(4, driver.CU_MEMHOSTALLOC_DEVICEMAP),
                                      "cuMemHostAlloc(DEVICEMAP)"))
        self.address = int(check(driver.cuMemHostGetDevicePointer(self.host_address, 0), "cuMemHostGetDevicePointer"))
        self._value = ctypes.c_int32.from_address(self.host_address)
        self._value.value = 0
        super().__init__(device, releaser(device, driver.cuMemFreeHost, self.host_address, "cuMemFreeHost"))

    def set(self, value: int) -> None:
        self._value.value = value


class GraphExec(Owned):
    """An instantiated CUDA graph (cuGraphInstantiate), replayed on a stream; destroyed by its device at the latest."""

    def __init__(self, device: "Device", graph):
        driver = device.driver
        self.handle = check(driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        super().__init__(device, releaser(device, driver.cuGraphExecDestroy, self.handle, "cuGraphExecDestroy"))

    def launch(self, stream: Stream) -> None:
        check(self._device.driver.cuGraphLaunch(self.handle, stream.handle), "cuGraphLaunch")


class Device:
    """One GPU, the CUDA context we work in on it, and all that lives in it.

    ``Device(0)`` retains the GPU's primary context (cuDevicePrimaryCtxRetain:
    the context torch, CuPy and cuda.core share) and makes it current; closing
    releases that hold. ``Device(0, own_context=True)`` creates a context of
    its own with cuCtxCreate and destroys it at the end (what the isolated
    GPU workers use: docs/embedding.md says why). ``Device(0, context=handle)``
    adopts an existing context without releasing or destroying it.
    """

    def __init__(self, ordinal: int = 0, *, context=None, own_context: bool = False):
        # The arguments first, before the driver is asked for: a machine without a GPU still catches a mistake, and
        # Device("0") or Device(True) never opens a GPU it was not meant to.
        ordinal = ordinal_argument("Device", "ordinal", ordinal)
        own_context = flag_argument("Device", "own_context", own_context)
        if context is not None:
            if own_context:
                raise WrongArgumentValue("Device: context= adopts a caller's context, own_context=True makes a new "
                                         "one: give one of them")
            context = context_argument("Device", context)
        self.driver = driver_module()
        count = check(self.driver.cuDeviceGetCount(), "cuDeviceGetCount")
        if not 0 <= ordinal < count:
            raise NoGpuError(f"there is no GPU {ordinal}: this machine has {count} "
                             f"(valid: {', '.join(map(str, range(count))) or 'none'})")
        self.ordinal = ordinal
        self.poisoned = False
        self._children: list[weakref.ref] = []
        self.properties = read_properties(ordinal)
        handle = check(self.driver.cuDeviceGet(ordinal), "cuDeviceGet")
        self._device_handle = handle
        self.owns_context = False        # True: ours, destroyed by close()
        self.retains_primary = False     # True: the primary context, held until close()
        if context is not None:
            self.context = self.driver.CUcontext(context)
        elif own_context:
            self.context = check(self.driver.cuCtxCreate(None, 0, handle), "cuCtxCreate")
            self.owns_context = True
        else:
            self.context = check(self.driver.cuDevicePrimaryCtxRetain(handle), "cuDevicePrimaryCtxRetain")
            self.retains_primary = True
        self._closed = False
        try:
            self.make_current()
        except CudaError:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"Device({self.ordinal}, {self.properties.name!r})"

    def make_current(self) -> None:
        check(self.driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    @contextlib.contextmanager
    def current(self):
        """Make this device's context current for the block, then restore whatever was current before."""
        check(self.driver.cuCtxPushCurrent(self.context), "cuCtxPushCurrent")
        try:
            yield self
        finally:
            check(self.driver.cuCtxPopCurrent(), "cuCtxPopCurrent")

    def synchronize(self) -> None:
        check(self.driver.cuCtxSynchronize(), "cuCtxSynchronize")

    def adopt(self, child: Owned) -> None:
        """Take ownership of `child`: `close()` releases it, newest first, before the context."""
        self._children = [ref for ref in self._children if ref() is not None and not ref().closed]
        self._children.append(weakref.ref(child))

    def stream(self, handle=None) -> Stream:
        """A new stream of ours, or `handle` used as it is: any stream `interop.stream_handle` reads (an object
        with ``__cuda_stream__``, a torch or CuPy stream, a raw handle)."""
        return Stream(self, handle=handle)

    def event(self) -> Event:
        return Event(self)

    def alloc(self, nbytes: int) -> DeviceBuffer:
        return DeviceBuffer(self, nbytes)

    def upload(self, array: np.ndarray, stream: Stream) -> DeviceBuffer:
        """A new device buffer holding a copy of `array`."""
        array = np.ascontiguousarray(array)
        named = array.dtype.name in interop.ELEMENTS and array.nbytes > 0
        buffer = DeviceBuffer(self, max(array.nbytes, 1), shape=array.shape if named else None,
                              dtype=array.dtype.name if named else "uint8")
        buffer.upload(array, stream)
        return buffer

    def page_lock(self, array: np.ndarray) -> PageLocked:
        return PageLocked(self, array)

    def mapped_word(self) -> MappedHostWord:
        return MappedHostWord(self)

    def instantiate_graph(self, graph) -> GraphExec:
        """An executable of a captured graph (`graph` itself stays the caller's to destroy)."""
        return GraphExec(self, graph)

    def mark_poisoned(self, error: CudaError) -> None:
        """Note a fault that killed the context: closing then only destroys the context."""
        if error.is_sticky:
            self.poisoned = True

    @property
    def context_kind(self) -> str:
        """``primary`` (the GPU's shared context), ``own`` (made with cuCtxCreate) or ``adopted`` (the caller's)."""
        return "own" if self.owns_context else "primary" if self.retains_primary else "adopted"

    def close(self) -> None:
        """Release every handle made here, newest first, then the context: destroyed if ours, released if primary."""
        if self._closed:
            return
        self._closed = True
        for ref in reversed(self._children):
            child = ref()
            if child is not None:
                try:
                    child.close()
                except CudaError:
                    child.forget()  # the context is going away; nothing else to do
        self._children.clear()
        if self.owns_context:
            status = self.driver.cuCtxDestroy(self.context)
            if not self.poisoned:  # after a fault the context is going anyway; its status says nothing new
                check(status, "cuCtxDestroy")
        elif self.retains_primary:
            # Our hold only: the context lives on while torch, CuPy or another Device still retains it.
            status = self.driver.cuDevicePrimaryCtxRelease(self._device_handle)
            if not self.poisoned:
                check(status, "cuDevicePrimaryCtxRelease")

    def __enter__(self) -> "Device":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class OpeningDevice:
    """`Device(ordinal, own_context=True)` being opened on a thread of its own, for the caller to take when it needs it.

    cuInit and the context take a noticeable time with the GIL released: a GPU worker process opens
    its device this way first, so that the driver's work hides behind the worker's imports. `take`
    waits for it and makes its context current in the calling thread (or raises what opening it
    raised); `close` closes a device nobody took.
    """

    def __init__(self, ordinal: int, *, own_context: bool = True):
        self._own_context = own_context
        self._device: Device | None = None
        self._error: BaseException | None = None
        self._taken = False
        self._thread = threading.Thread(target=self._open, args=(ordinal,), name=f"driver-gemm GPU {ordinal} opener",
                                        daemon=True)
        self._thread.start()

    def _open(self, ordinal: int) -> None:
        try:
            self._device = Device(ordinal, own_context=self._own_context)
        except BaseException as exc:  # noqa: BLE001 - raised again, in the caller's thread, by `take`
            self._error = exc

    def take(self) -> Device:
        """The opened device, its context current here; it is then the caller's to close."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        self._taken = True
        self._device.make_current()
        return self._device

    def close(self) -> None:
        """Close the device if it was opened and never taken (a worker ended before it made its session)."""
        self._thread.join()
        if self._device is not None and not self._taken:
            self._device.close()
