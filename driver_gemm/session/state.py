"""The CUDA state of a run on one GPU: device, stream, L2 flusher, launch gate, cuBLAS, modules, buffers.

A `Session` is made once per process that runs cases (the calling process, or
each worker) and closed at its end. Every handle in it is owned by its
`Device`, so closing the device releases them all, newest first; a session
whose construction fails halfway closes what it had made before raising.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, TypeVar

import numpy as np

from ..cuda.compile import Cubin
from ..cuda.device import Device, DeviceBuffer, OpeningDevice, Owned, PageLocked
from ..cuda.module import Module
from ..errors import CudaError
from ..gemm.operands import TypedInputs
from ..measure.baseline import CublasSgemm, CublasUnavailable
from ..measure.clocks import NvmlClocks, open_device_clocks
from ..measure.inputs import ShapeOperands
from ..measure.cublaslt import CublasLtMatmul
from ..measure.cupti_timer import CuptiRecorder
from ..measure.timing import L2Flusher, LaunchGate
from ..planning.quantized_layouts import QuantizedDraw
from ..specfile.model import Shape
from .options import RunOptions

# Host arrays at least this large are page-locked while the session uses them (a shape's operands, its output's
# copy): below it, a pageable copy costs little more than locking the pages would.
PAGE_LOCK_MIN_BYTES = 64 << 20


def _held_operands_budget() -> int:
    """Bytes of operands and references a session keeps for shapes it may come back to: an eighth of the host's
    memory (a GPU of a run on several takes tasks of several shapes in turn), at least 1 GiB."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        memory = 0
    return max(1 << 30, memory // 8)


HELD_OPERANDS_BYTES = _held_operands_budget()


@dataclass
class HeldOperands:
    """A shape's operands kept by a session, and the page locks of its large arrays."""

    operands: ShapeOperands
    locks: dict[int, PageLocked] = field(default_factory=dict)    # by the array's id

    @property
    def shape(self) -> Shape:
        return self.operands.shape

    @property
    def nbytes(self) -> int:
        return self.operands.nbytes

    def release(self) -> None:
        for lock in self.locks.values():
            lock.close()
        self.locks.clear()


@dataclass
class HeldTypedInputs:
    """The inputs of one typed matmul (types, layouts, batch) on one shape, drawn by its first case and kept for the
    others, the vendor row's among them: their float64 values, their uploads as laid out, and the references worked
    out from them, by (alpha, beta)."""

    shape: Shape
    inputs: TypedInputs
    uploads: dict[str, bytes]
    references: dict = field(default_factory=dict)
    quantized: QuantizedDraw | None = None   # a quantized B's codes, scales and zero points, which B is made of

    @property
    def nbytes(self) -> int:
        """Host bytes held: the values, their uploads, the references and a quantized B's codes."""
        arrays = [self.inputs.a, self.inputs.b, self.inputs.c0, *(expected for expected, _ in self.references.values())]
        return (sum(array.nbytes for array in arrays if array is not None) + sum(map(len, self.uploads.values()))
                + (self.quantized.nbytes if self.quantized is not None else 0))

    def release(self) -> None:
        pass                       # nothing page-locked: typed uploads go from their bytes


_Held = TypeVar("_Held", HeldOperands, HeldTypedInputs)


@dataclass
class VendorRow:
    """A timed vendor row's launch, kept for the kernels of its shape to be timed against in rounds
    (``measure.rounds``), with the buffers it reads and writes: they are the row's own from then on."""

    launch: Callable[[], None]
    buffers: dict[str, DeviceBuffer]

    def release(self) -> None:
        for buffer in self.buffers.values():
            buffer.close()
        self.buffers.clear()


def _imports_cannot_race() -> bool:
    """Whether nvmath-python can be imported on a thread of our own while the caller's threads go on. It imports
    torch and CuPy where they are installed; if a caller's thread imports one of them at the same time, Python's
    import locks can hand one thread a half-made module ("partially initialized module 'torch'"). So it is safe
    only where both are imported already or absent."""
    try:
        return all(name in sys.modules or importlib.util.find_spec(name) is None for name in ("torch", "cupy"))
    except (ImportError, ValueError):     # a broken install: load in the caller's thread, as if present
        return False


def _load_cublas_library_in_background() -> threading.Thread:
    """A thread that imports nvmath-python's cuBLAS bindings and loads the library (asking for its version needs
    no context). Whatever fails here fails again, and is reported, when the handle is made."""
    def load() -> None:
        try:
            # nvmath-python (cuBLAS): heavy, loaded on a thread of its own
            from nvmath.bindings import cublas

            cublas.get_property(0)
        except Exception:  # noqa: BLE001 - reported by `CublasSgemm`, in the session's thread
            pass

    thread = threading.Thread(target=load, name="driver-gemm cuBLAS loader", daemon=True)
    thread.start()
    return thread


class Session:
    """What the cases of a run on one GPU share; see the module's docstring."""

    def __init__(self, ordinal: int, want_cublas: bool, options: RunOptions = RunOptions(), *,
                 context=None, stream=None, opening: OpeningDevice | None = None):
        self.ordinal = ordinal
        self.options = options
        self.want_cublas = want_cublas
        self.baselines: dict[str, CublasSgemm | None] = {}     # per precision; None: unavailable
        self.baseline_errors: dict[str, str] = {}
        self.modules: dict[tuple[str, bytes], Module] = {}     # by image: a worker gets a fresh copy per batch
        self.buffers: dict[str, DeviceBuffer] = {}
        self.buffer_shape: Shape | None = None
        # The host inputs and references of the shapes run last, the most recent last: FP32 operands by (shape,
        # seed), typed ones by `typed_inputs_for`'s key. One byte budget for both.
        self.held: OrderedDict[tuple, HeldOperands | HeldTypedInputs] = OrderedDict()
        self.host_output: tuple[np.ndarray, PageLocked | None] | None = None   # C's copy on the host, reused
        self.clocks: NvmlClocks | None = None
        self.typed_buffers: dict[str, DeviceBuffer] = {}        # A, B, C of typed cases, by byte size
        self.lt: CublasLtMatmul | None = None
        self.lt_error: str | None = None
        self.lt_owner: Owned | None = None
        self.cupti: CuptiRecorder | None = None                 # run --timer cupti: made when first timing
        self.vendor_rows: dict[tuple[Shape, str], VendorRow] = {}   # by shape and label: `keep_vendor_row`
        # Seconds of each part of making the session (a worker's start-up, where a run's first seconds go).
        self.start_steps: dict[str, float] = {}
        mark = time.monotonic()

        def step_done(name: str) -> None:
            nonlocal mark
            self.start_steps[name] = round(time.monotonic() - mark, 3)
            mark = time.monotonic()

        # nvmath-python's cuBLAS module and library load on a thread of their own (slow, mostly under the
        # GIL), while the context, stream and flusher are made and, the session
        # made, while the first case draws its operands: its handle is made where a case first needs it
        # (`baseline`), and no case is timed while the loading may still compete with it (`wait_for_cublas`).
        # That thread runs only where no caller's thread can import what nvmath imports at the same time: in
        # a worker process of our own (`opening`), or where torch and CuPy are imported already or absent.
        in_background = want_cublas and (opening is not None or _imports_cannot_race())
        self._cublas_loading = _load_cublas_library_in_background() if in_background else None
        self.device = opening.take() if opening is not None else Device(ordinal, context=context)
        step_done("driver_and_context_s")
        try:
            self.stream = self.device.stream(handle=stream)
            self.flusher = L2Flusher(self.device, self.stream)
            self.gate = LaunchGate(self.device, self.stream)
            step_done("stream_flush_gate_s")
            # The SM clock of every sample batch, where NVML is installed (the 'nvml' extra).
            self.clocks = open_device_clocks(self.device)
            step_done("nvml_s")
        except BaseException:
            self.close()
            raise

    @property
    def cublas(self) -> CublasSgemm | None:
        """cuBLAS in FP32 math, when the run has it: the reference for shapes too large for the CPU."""
        return self.baseline("fp32") if self.want_cublas else self.baselines.get("fp32")

    def wait_for_cublas(self) -> None:
        """Wait for the cuBLAS library's loading, where it is still under way: nothing then competes with what
        follows (a timing loop) for this process's GIL."""
        if self._cublas_loading is not None:
            self._cublas_loading.join()
            self._cublas_loading = None

    def baseline(self, precision: str) -> CublasSgemm | None:
        """cuBLAS SGEMM in FP32 math, or in TF32 tensor-op math (made on first use); None if unavailable."""
        self.wait_for_cublas()
        if precision not in self.baselines:
            try:
                self.baselines[precision] = CublasSgemm(self.device, self.stream, tf32=precision == "tf32")
            except (CublasUnavailable, CudaError) as exc:
                self.baselines[precision] = None
                self.baseline_errors[precision] = str(exc)
        return self.baselines[precision]

    def module(self, cubin: Cubin) -> Module:
        """`cubin` loaded into the session's context, once per image (however many copies of it arrive)."""
        key = (cubin.image_format, cubin.image)
        if key not in self.modules:
            self.modules[key] = Module(self.device, cubin)
        return self.modules[key]

    def operands_for(self, shape: Shape, seed: int, draw: Callable[[], ShapeOperands]) -> ShapeOperands:
        """The operands of `shape` from `seed`: those kept from an earlier case, else `draw()`n now.

        Shapes are kept, most recent last, while their arrays together stay
        within `HELD_OPERANDS_BYTES`; older ones are let go (their pages
        unlocked first) before a new shape is drawn.
        """
        held = self._kept((shape, seed), HeldOperands, lambda: HeldOperands(draw()),
                           4 * (shape.M * shape.K + shape.K * shape.N))
        return held.operands

    def typed_inputs_for(self, key: tuple, draw: Callable[[], HeldTypedInputs], draw_bytes: int) -> HeldTypedInputs:
        """The typed inputs under `key` (what they depend on: shape, seed, types, layouts, whether C0 is drawn):
        those kept from an earlier case, else `draw()`n now, once older ones are let go to leave `draw_bytes`
        (about what the draw holds) within the budget, as `operands_for` does."""
        return self._kept(("typed", *key), HeldTypedInputs, draw, draw_bytes)

    def _kept(self, key: tuple, kind: type[_Held], draw: Callable[[], _Held], draw_bytes: int) -> _Held:
        """What is held under `key` (made most recent), else `draw()`n now and held, once the oldest are let go to
        leave `draw_bytes` within the budget."""
        held = self.held.get(key)
        if isinstance(held, kind):
            self.held.move_to_end(key)
            return held
        self._let_go(keep_bytes=HELD_OPERANDS_BYTES - draw_bytes)
        fresh = self.held[key] = draw()
        return fresh

    def held_bytes(self, shape: Shape) -> int:
        """Host bytes held for `shape`'s inputs and references, FP32 and typed: a case of that shape reuses them."""
        return sum(held.nbytes for held in self.held.values() if held.shape == shape)

    def _let_go(self, keep_bytes: int) -> None:
        """Release the oldest inputs (FP32 or typed) until the rest fit in `keep_bytes`."""
        while self.held and sum(held.nbytes for held in self.held.values()) > max(keep_bytes, 0):
            _, oldest = self.held.popitem(last=False)
            oldest.release()

    def lock_operand(self, operands: ShapeOperands, array: np.ndarray | None) -> None:
        """Page-lock one of the held `operands`' arrays for its uploads, where it is large enough to gain.

        Best effort: where the driver refuses (locked memory exhausted), the
        copies go from pageable memory.
        """
        held = next((held for held in self.held.values() if isinstance(held, HeldOperands) and held.operands is operands),
                    None)
        if held is None or array is None or array.nbytes < PAGE_LOCK_MIN_BYTES or id(array) in held.locks:
            return
        try:
            held.locks[id(array)] = self.device.page_lock(array)
        except CudaError:
            pass

    def output_array(self, shape: Shape) -> np.ndarray:
        """A float32 host array for C of `shape`, reused from case to case (page-locked where large): a case's
        output is only read before the next case runs."""
        if self.host_output is None or self.host_output[0].shape != (shape.M, shape.N):
            self._drop_host_output()
            array, lock = np.empty((shape.M, shape.N), dtype=np.float32), None
            if array.nbytes >= PAGE_LOCK_MIN_BYTES:
                try:
                    lock = self.device.page_lock(array)
                except CudaError:
                    pass
            self.host_output = array, lock
        return self.host_output[0]

    def _drop_host_output(self) -> None:
        if self.host_output is not None and self.host_output[1] is not None:
            self.host_output[1].close()
        self.host_output = None

    def buffers_for(self, shape: Shape) -> dict[str, DeviceBuffer]:
        """A, B, C and a cuBLAS reference output sized for `shape` (kept while the shape stays the same)."""
        if self.buffer_shape != shape:
            for buffer in self.buffers.values():
                buffer.close()
            self.buffers, self.buffer_shape = {}, None
            self._drop_host_output()
            sizes = {"A": shape.M * shape.K, "B": shape.K * shape.N, "C": shape.M * shape.N,
                     "C_ref": shape.M * shape.N}
            self.buffers = {name: self.device.alloc(4 * count) for name, count in sizes.items()}
            self.buffer_shape = shape
        return self.buffers

    def buffers_of_sizes(self, sizes: dict[str, int]) -> dict[str, DeviceBuffer]:
        """Buffers of at least `sizes` bytes by name (typed cases: A, B and C as laid out), kept while they fit."""
        for name, nbytes in sizes.items():
            held = self.typed_buffers.get(name)
            if held is None or held.nbytes < max(nbytes, 1):
                if held is not None:
                    held.close()
                self.typed_buffers[name] = self.device.alloc(max(nbytes, 1))
        return self.typed_buffers

    def keep_vendor_row(self, shape: Shape, label: str, launch: Callable[[], None], typed: bool) -> None:
        """Keep a timed vendor row's `launch` for the kernels of `shape` to be timed against (`vendor_row`).

        The buffers it runs on (the typed buffers for a cuBLASLt row, else the shape's) leave the session's
        working set with it, so that later cases get buffers of their own and none can free or resize the row's.
        The rows kept for other shapes are let go first: a shape's kernels follow its vendor rows.
        """
        for key in [key for key in self.vendor_rows if key[0] != shape or key[1] == label]:
            self.vendor_rows.pop(key).release()
        if typed:
            buffers, self.typed_buffers = self.typed_buffers, {}
        else:
            buffers, self.buffers, self.buffer_shape = self.buffers, {}, None
        self.vendor_rows[shape, label] = VendorRow(launch, buffers)

    def vendor_row(self, shape: Shape, label: str | None) -> VendorRow | None:
        """The vendor row `label` kept for `shape`, if this session timed it (a resumed run, a worker that
        replaced a faulted one, or a run whose GPUs split the shape may not have)."""
        return self.vendor_rows.get((shape, label)) if label is not None else None

    def cublaslt(self) -> CublasLtMatmul | None:
        """The cuBLASLt handle and its workspace (made on first use, owned by the device); None if unavailable."""
        if self.lt is None and self.lt_error is None:
            try:
                self.lt = CublasLtMatmul(self.device, self.stream)
            except (CublasUnavailable, CudaError) as exc:
                self.lt_error = str(exc)
                return None
            # Released with the device's other handles, newest first (the device holds only a weak reference).
            self.lt_owner = Owned(self.device, self.lt.close)
        return self.lt

    def kernel_timer(self) -> CuptiRecorder | None:
        """What times samples when not their events: CUPTI's recorder for ``--timer cupti`` (made on first use,
        closed with the session; `cupti_timer.CuptiUnavailable` without cupti-python); None for events."""
        if self.options.timer != "cupti":
            return None
        if self.cupti is None:
            self.cupti = CuptiRecorder()
        return self.cupti

    @property
    def poisoned(self) -> bool:
        """True after a fault that left this process's CUDA unusable."""
        return self.device.poisoned

    def close(self) -> None:
        """Release every handle of the session (the device owns them all), then the context if it is ours."""
        if self.clocks is not None:
            self.clocks.close()
            self.clocks = None
        if self.cupti is not None:
            self.cupti.close()
            self.cupti = None
        self.device.close()
        self.held.clear()              # their page locks went with the device's other handles
        self.vendor_rows.clear()       # and their buffers
