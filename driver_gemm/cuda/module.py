"""Step 3b of the data flow: a compiled image loaded into our context, and its kernels with their attributes.

The image is what `compile.Cubin` holds: NVRTC's or nvcc's CUBIN, or a
prebuilt CUBIN, fatbin or PTX as the spec's file has it. Each kernel knows
its parameter layout from the image (the offsets its arguments are packed
at) and can cross-check it with the driver's ``cuFuncGetParamInfo``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .check import check
from .compile import Cubin, compile_source, compile_text, source_is_path
from .cubin import ParamSlot
from .device import Device, Owned, device_argument, releaser
from .resources import KernelResources
from ..errors import ConfigError, CudaError, ImageError, WrongArgumentType
from .launch import LaunchConfig, PackedArguments, PreparedLaunch
from .launch_attributes import launch_config


@dataclass(frozen=True)
class FunctionAttributes:
    """What the driver says about a loaded kernel (cuFuncGetAttribute)."""

    registers: int
    static_shared_bytes: int
    local_bytes: int
    max_threads_per_block: int
    max_dynamic_shared_bytes: int
    binary_version: int

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


class Module(Owned):
    """A CUBIN loaded with cuModuleLoadData; unloaded by `close()` or by its device."""

    def __init__(self, device: Device, cubin: Cubin):
        device_argument("Module", device)
        if not isinstance(cubin, Cubin):
            raise WrongArgumentType(f"Module: cubin is a compiled image (a Cubin from compile_source or compile_text), "
                                    f"got {cubin!r:.40} ({type(cubin).__name__})")
        driver = device.driver
        self.cubin = cubin
        try:
            self.handle = check(driver.cuModuleLoadData(cubin.image), "cuModuleLoadData")
        except CudaError as exc:
            if cubin.image_format != "ptx":
                raise
            raise CudaError(exc.call, exc.name, f"{exc.description}; {ptx_load_advice(cubin.image)}",
                            exc.code) from None
        super().__init__(device, releaser(device, driver.cuModuleUnload, self.handle, "cuModuleUnload"))
        self._kernels: dict[str, Kernel] = {}

    @property
    def device(self) -> Device:
        return self._device

    def write_constant(self, symbol: str, data: bytes, stream) -> None:
        """Copy `data` into the module's ``__constant__`` variable `symbol` (its mangled name), ordered on `stream`
        after the work already there, as a host program's cudaMemcpyToSymbol would before its launch. The image was
        checked to hold the variable at this size; the driver's own size is checked again."""
        driver = self._device.driver
        try:
            address, size = check(driver.cuModuleGetGlobal(self.handle, symbol.encode()),
                                  f"cuModuleGetGlobal({symbol})")
        except CudaError as exc:     # a PTX image's variables are first known here
            raise ConfigError(f"the loaded module holds no __constant__ variable {symbol} ({exc.name}): name it as "
                              "the source does (constants:)") from None
        if size != len(data):
            raise ConfigError(f"__constant__ {symbol} is {size} bytes in the loaded module; {len(data)} were given")
        array = np.frombuffer(data, dtype=np.uint8).copy()
        check(driver.cuMemcpyHtoDAsync(address, array.ctypes.data, array.nbytes, stream.handle), "cuMemcpyHtoDAsync")
        stream.synchronize()   # the host copy is short-lived

    def kernel(self, instance: str, build: Cubin | None = None) -> "Kernel":
        """The kernel for a name expression compiled into this module (``f`` or ``f<64, 4>``).

        `build` is the compile that named `instance`, when it is not the one
        this module was loaded from: one source compiled as several programs
        (a program per instance) gives byte-identical images when its kernels
        are not templates, so a session loads the image once, but each
        program's names cover only the instances it was given.
        """
        if instance not in self._kernels:
            names = build or self.cubin
            symbol = names.symbol(instance)
            handle = check(self._device.driver.cuModuleGetFunction(self.handle, symbol.encode()),
                           f"cuModuleGetFunction({instance})")
            self._kernels[instance] = Kernel(self, handle, instance, names.resources_of(instance))
        return self._kernels[instance]


class Kernel:
    """A launchable function: its driver handle, the compiler's report and the driver's attributes.

    It keeps its module alive: a function handle is valid only while its module is loaded.
    """

    def __init__(self, module: Module, handle, instance: str, resources: KernelResources):
        self.module = module
        self.device = module.device
        self.handle = handle
        self.address = int(handle)
        self.instance = instance
        self.resources = resources
        self.attributes = self._read_attributes()

    def image_params(self) -> tuple[ParamSlot, ...] | None:
        """The parameter layout the image declares; None when it cannot be read."""
        try:
            return self.module.cubin.param_slots(self.instance)
        except (ImageError, KeyError):
            return None

    def param_offsets(self, count: int) -> list[int] | None:
        """Where the image puts each of `count` arguments (an over-aligned tensor map is not where the C ABI
        would put it); None when the image's layout is unknown or has another count (the plan says why)."""
        slots = self.image_params()
        if slots is None or len(slots) != count:
            return None
        return [slot.offset for slot in sorted(slots, key=lambda slot: slot.ordinal)]

    def param_layout_check(self) -> str:
        """The driver's parameter layout (cuFuncGetParamInfo) against the image's, in words; never raises.

        ``"agrees"`` when both list the same offsets and sizes; otherwise what
        differs, or why the driver could not be asked (an older driver).
        """
        # the image readers (mangling), kept out of a GPU worker's start-up: only this check needs them
        from .signature_check import param_slots_from_function

        image_slots = self.image_params()
        if image_slots is None:
            return "not checked: the image's parameters could not be read"
        try:
            driver_slots = param_slots_from_function(self.handle, len(image_slots))
        except CudaError as exc:
            return f"not checked: cuFuncGetParamInfo failed ({exc.name})"
        except AttributeError:
            return "not checked: these bindings have no cuFuncGetParamInfo"
        if tuple(driver_slots) == tuple(image_slots):
            return "agrees"
        return (f"disagrees: image {[tuple(slot) for slot in image_slots]}, "
                f"driver {[tuple(slot) for slot in driver_slots]} (ordinal, offset, size)")

    def _read_attributes(self) -> FunctionAttributes:
        driver = self.device.driver
        attribute = driver.CUfunction_attribute

        def get(name: str) -> int:
            return int(check(driver.cuFuncGetAttribute(getattr(attribute, f"CU_FUNC_ATTRIBUTE_{name}"), self.handle),
                             f"cuFuncGetAttribute({name})"))

        return FunctionAttributes(
            registers=get("NUM_REGS"),
            static_shared_bytes=get("SHARED_SIZE_BYTES"),
            local_bytes=get("LOCAL_SIZE_BYTES"),
            max_threads_per_block=get("MAX_THREADS_PER_BLOCK"),
            max_dynamic_shared_bytes=get("MAX_DYNAMIC_SHARED_SIZE_BYTES"),
            binary_version=get("BINARY_VERSION"),
        )

    def allow_dynamic_shared(self, nbytes: int) -> None:
        """Opt in to `nbytes` of dynamic shared memory; needed above the default 48 KB per block."""
        if nbytes <= self.attributes.max_dynamic_shared_bytes:
            return
        limit = self.device.properties.max_shared_per_block_optin - self.attributes.static_shared_bytes
        if nbytes > limit:
            raise ConfigError(f"{self.instance} asks for {nbytes} bytes of dynamic shared memory; with "
                              f"{self.attributes.static_shared_bytes} static bytes this GPU allows at most {limit}")
        driver = self.device.driver
        check(driver.cuFuncSetAttribute(self.handle,
                                        driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        nbytes), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
        self.attributes = self._read_attributes()

    def prepare(self, grid, block, arguments, stream, shared_bytes: int = 0, attributes=None):
        """Bind a launch: `arguments` is a sequence of (C type, value) pairs, e.g. ``("ptr", buffer)``,
        ``("int32", 1024)``, ``("float32", 0.5)``, ``("tensormap", 128 bytes)``; `attributes` a
        `LaunchAttributes` (cluster, PDL); calling the result enqueues it on `stream`."""
        config = LaunchConfig.of(grid, block, shared_bytes, function="Kernel.prepare")
        self.allow_dynamic_shared(config.shared_bytes)
        if attributes is not None and attributes.non_portable:
            self.allow_non_portable_cluster()
        packed = PackedArguments([ctype for ctype, _ in arguments], [value for _, value in arguments])
        return PreparedLaunch(self, config, packed, stream, attributes)

    def launch(self, grid, block, arguments, stream, shared_bytes: int = 0, attributes=None) -> None:
        """Enqueue one launch (see `prepare`)."""
        self.prepare(grid, block, arguments, stream, shared_bytes, attributes).launch()

    def allow_non_portable_cluster(self) -> None:
        """Opt in to clusters above the portable 8 blocks (up to 16 on Hopper)."""
        driver = self.device.driver
        check(driver.cuFuncSetAttribute(self.handle,
                                        driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                                        1), "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)")

    def max_active_clusters(self, config, attributes, stream) -> int:
        """The driver's count of clusters of `attributes.cluster` that fit on the GPU at once."""
        driver = self.device.driver
        return int(check(driver.cuOccupancyMaxActiveClusters(
            self.handle, launch_config(driver, config.grid, config.block, config.shared_bytes, stream.handle,
                                       attributes)), "cuOccupancyMaxActiveClusters"))

    def max_active_blocks_per_sm(self, threads_per_block: int, dynamic_shared_bytes: int) -> int:
        """The driver's occupancy figure, to cross-check our own calculation."""
        return int(check(self.device.driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            self.handle, threads_per_block, dynamic_shared_bytes), "cuOccupancyMaxActiveBlocksPerMultiprocessor"))


def ptx_load_advice(ptx: bytes) -> str:
    """Why a driver may refuse PTX, with the PTX's own ISA version and target to compare against."""
    # the image readers (mangling), kept out of a GPU worker's start-up: only a refused PTX needs them
    from .prebuilt import ptx_target

    version, target = ptx_target(ptx)
    return (f"this PTX is ISA {version or '?'} for {target or '?'}; a driver JIT-compiles only PTX up to its own "
            "ISA (a CUDA 13.0 driver: ISA 9.0), so PTX from a newer compiler does not load: rebuild it with "
            "an older toolkit or ship a CUBIN (-cubin -arch=sm_XX) instead")


def load_kernel(device: Device, source, instance: str, *, options=(), arch: str | None = None) -> Kernel:
    """Compile `source` (a path to a .cu file, or CUDA C++ text) for `device` and load `instance` from it.

    `instance` is the function's name, or a template instance such as
    ``"sgemm<64, 4>"``. The CUBIN comes from the disk cache when it can.
    """
    if not isinstance(device, Device):
        raise WrongArgumentType(f"load_kernel: device is a Device (such as dg.Device(0)), got {device!r:.40} "
                                f"({type(device).__name__})")
    if not isinstance(source, (str, os.PathLike)):
        raise WrongArgumentType(f"load_kernel: source is the path of a kernel source or its text (a str or a "
                                f"pathlib.Path), got {type(source).__name__}")
    if not isinstance(instance, str):
        raise WrongArgumentType(f"load_kernel: instance is the kernel's name (a str such as 'sgemm<64, 4>'), got "
                                f"{type(instance).__name__}")
    # the rule check_kernel reads its source by (every path object is a path), before the device is asked for its
    # architecture
    is_text = isinstance(source, str) and not source_is_path("load_kernel", source)
    arch = arch or device.properties.arch
    if isinstance(source, str) and is_text:
        cubin = compile_text(source, "kernel.cu", [instance], arch, options)
    else:
        cubin = compile_source(Path(source), [instance], arch, options)
    return Module(device, cubin).kernel(instance)
