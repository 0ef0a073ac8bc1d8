"""A rig's own A, B and C read as a GEMM: sizes, element types, storage orders and leading dimensions.

`rig_operands` takes the `interop.ArrayView` of each tensor and answers what a spec would have said
(M, N, K, ``types``, ``layouts``, ``ld``), or refuses with the operand and what is wrong: a tensor
on the host, an element type driver-gemm does not check, strides no kernel's leading dimension can
describe, shapes that do not make a product, a C that shares memory with A or B. `matrix_values`
decodes a matrix read back as raw bytes. `rig_tensor` reads one of the rig's other tensors (a bias, a
residual, a second weight) as the memory a kernel's pointer argument is given, and `pointee_problem` judges its
element type against what the kernel's parameter points to. Plain functions over plain values: all of it is
tested without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cuda.interop import DEVICE_TYPE_NAMES, KERNEL_ACCESSIBLE, ArrayView, compact_strides
from ..cuda.mangling import BUILTIN_TYPES, ParamType
from ..cuda.signature_check import ELEMENT_POINTEES, pointee_of
from ..errors import ArgumentError
from ..gemm import dtypes

# The element types of the protocols (interop's names) that driver-gemm's element types store.
RIG_TYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float8_e4m3fn": "e4m3",
             "float8_e5m2": "e5m2", "int8": "int8", "uint8": "uint8", "int32": "int32"}


@dataclass(frozen=True)
class RigMatrix:
    """One operand as a kernel sees it: rows x cols, ``row`` or ``col`` order, leading dimension, element type."""

    name: str
    view: ArrayView
    rows: int
    cols: int
    order: str
    ld: int
    element: str

    @property
    def strides(self) -> tuple[int, int]:
        """Element (i, j) is at ``i * strides[0] + j * strides[1]``."""
        return (self.ld, 1) if self.order == "row" else (1, self.ld)

    @property
    def span_elements(self) -> int:
        """The elements from the first to the last, padding between included."""
        if self.rows == 0 or self.cols == 0:
            return 0
        return (self.rows - 1) * self.strides[0] + (self.cols - 1) * self.strides[1] + 1

    @property
    def span_bytes(self) -> int:
        return self.span_elements * dtypes.element_type(self.element).storage_bytes

    @property
    def padded(self) -> bool:
        return self.ld != (self.cols if self.order == "row" else self.rows)


@dataclass(frozen=True)
class RigOperands:
    """A, B and C of the rig, with the spec fields they amount to."""

    a: RigMatrix
    b: RigMatrix
    c: RigMatrix

    @property
    def shape(self) -> tuple[int, int, int]:
        """M, N, K."""
        return self.a.rows, self.b.cols, self.a.cols

    def spec_fields(self) -> dict:
        """The ``types``, ``layouts`` and ``ld`` of a spec's kernel entry for these operands."""
        matrices = {"a": self.a, "b": self.b, "c": self.c}
        return {"types": {key: matrix.element for key, matrix in matrices.items()},
                "layouts": {key: matrix.order for key, matrix in matrices.items()},
                "ld": {key: matrix.ld for key, matrix in matrices.items()}}


def element_of(name: str, view: ArrayView) -> str:
    """The driver-gemm element type of `view`; a refusal naming the supported ones otherwise."""
    element = RIG_TYPES.get(view.dtype)
    if element is None:
        raise ArgumentError(f"{name} holds {view.dtype}: driver-gemm checks kernels on "
                            f"{', '.join(RIG_TYPES)} tensors")
    return element


def matrix_of(name: str, view: ArrayView) -> RigMatrix:
    """`view` as a row- or column-major matrix with a leading dimension, or a refusal that says why not."""
    if view.device_type not in KERNEL_ACCESSIBLE:
        where = DEVICE_TYPE_NAMES.get(view.device_type, f"DLPack device type {view.device_type}")
        raise ArgumentError(f"{name} is in {where}: give a tensor on the GPU (no copy is made for you)")
    if view.ndim != 2:
        raise ArgumentError(f"{name} has {view.ndim} dimensions (shape {view.shape}): a matrix has 2")
    element = element_of(name, view)
    rows, cols = view.shape
    if rows == 0 or cols == 0:
        raise ArgumentError(f"{name} is {rows} x {cols}: a GEMM's M, N and K are at least 1")
    row_stride, col_stride = view.strides
    # A dimension of extent 1 has no meaningful stride (frameworks give it any value): it takes part in no test.
    if (col_stride == 1 or cols == 1) and (rows == 1 or row_stride >= max(cols, 1)):
        return RigMatrix(name, view, rows, cols, "row", max(cols, 1) if rows == 1 else row_stride, element)
    if (row_stride == 1 or rows == 1) and (cols == 1 or col_stride >= max(rows, 1)):
        return RigMatrix(name, view, rows, cols, "col", max(rows, 1) if cols == 1 else col_stride, element)
    raise ArgumentError(f"{name} ({rows} x {cols}) has strides {view.strides} (in elements): a kernel takes a "
                        "row-major matrix (stride 1 along a row) or a column-major one (stride 1 along a column) "
                        "with a leading dimension; make it contiguous first (torch .contiguous(), "
                        "cupy.ascontiguousarray)")


def rig_operands(a: ArrayView, b: ArrayView, c: ArrayView) -> RigOperands:
    """A (M x K), B (K x N) and C (M x N) read from their views, their sizes checked against each other."""
    A, B, C = matrix_of("A", a), matrix_of("B", b), matrix_of("C", c)
    if A.cols != B.rows:
        raise ArgumentError(f"A is {A.rows} x {A.cols} and B is {B.rows} x {B.cols}: A's columns (K = {A.cols}) "
                            f"must equal B's rows")
    if (C.rows, C.cols) != (A.rows, B.cols):
        raise ArgumentError(f"C is {C.rows} x {C.cols}: it must be M x N = {A.rows} x {B.cols} "
                            f"(A is {A.rows} x {A.cols}, B {B.rows} x {B.cols})")
    if C.view.readonly:
        raise ArgumentError("C is read-only (its __cuda_array_interface__ says so): the kernel writes it")
    devices = {matrix.name: matrix.view.device_id for matrix in (A, B, C) if matrix.view.device_id is not None}
    if len(set(devices.values())) > 1:
        raise ArgumentError("the operands are on different GPUs: "
                            + ", ".join(f"{name} on GPU {ordinal}" for name, ordinal in devices.items()))
    for source in (A, B):
        # C is poisoned before the checked launch and written by it: memory it shares with A or B would be
        # overwritten under the kernel, and the rig's own input lost.
        if _overlap(C, source):
            raise ArgumentError(f"C ({_span_text(C)}) overlaps {source.name} ({_span_text(source)}): the kernel "
                                f"writes C while it reads {source.name}; give C memory of its own")
    return RigOperands(A, B, C)


@dataclass(frozen=True)
class RigTensor:
    """One of the rig's own tensors that a kernel's pointer argument of the same name is given (a bias, a residual,
    BatchNorm's factors, a second weight): contiguous memory from `address` on, `nbytes` long."""

    name: str
    view: ArrayView

    @property
    def address(self) -> int:
        return self.view.address

    @property
    def nbytes(self) -> int:
        return self.view.span_elements() * self.view.itemsize


def rig_tensor(name: str, view: ArrayView, output: RigMatrix) -> RigTensor:
    """`view` as the memory a kernel's pointer `name` is given, or a refusal naming it and what is wrong: memory no
    kernel can reach, strides that are not one contiguous run of elements, or bytes of C (`output`), which the
    checked launch poisons and writes."""
    if view.device_type not in KERNEL_ACCESSIBLE:
        where = DEVICE_TYPE_NAMES.get(view.device_type, f"DLPack device type {view.device_type}")
        raise ArgumentError(f"{name} is in {where}: give a tensor on the GPU (no copy is made for you)")
    tight = compact_strides(view.shape)
    # An extent of 1 has no meaningful stride (frameworks give it any value): it takes part in no test.
    if any(extent > 1 and stride != expected for extent, stride, expected in zip(view.shape, view.strides, tight)):
        raise ArgumentError(f"{name} (shape {view.shape}) has strides {view.strides} (in elements), not "
                            f"{tight}: a kernel's pointer reads one contiguous row-major run of elements; make it "
                            "contiguous first (torch .contiguous(), cupy.ascontiguousarray)")
    tensor = RigTensor(name, view)
    if tensor.nbytes and output.span_bytes and (tensor.address < output.view.address + output.span_bytes
                                                 and output.view.address < tensor.address + tensor.nbytes):
        raise ArgumentError(f"{name} (bytes {tensor.address:#x} to {tensor.address + tensor.nbytes - 1:#x}) overlaps "
                            f"C ({_span_text(output)}): C is poisoned before the checked launch and written by it, "
                            f"so {name} would not hold what the rig put there; give it memory of its own, or pass "
                            f"C itself as {{name: {name}, type: ptr, value: C}} in signature= (and {name} not in "
                            "tensors=)")
    return tensor


def pointee_problem(tensor: RigTensor, kernel_type: ParamType, parameter: str) -> str | None:
    """What is wrong with passing `tensor` to a kernel `parameter` (``parameter 3 of gemm``) of type `kernel_type`,
    judged as A's, B's and C's pointers are: a floating pointee (``const float*``, ``__half*``) must be the tensor's
    element type; an integer one of two bytes or more must be as wide as its elements (an int64 index tensor read
    through ``const int*`` is read wrong from its second element). Raw bytes (``uint8_t*``), ``void*``, vectors
    (``float4*``) and pointers to pointers say nothing about the element, and are not judged. None: nothing is
    wrong."""
    text = kernel_type.text
    pointee = pointee_of(kernel_type) if kernel_type.kind == "pointer" else None
    if pointee is None:
        return None
    dtype = tensor.view.dtype
    holds = ELEMENT_POINTEES.get(pointee)
    if holds is not None:
        reads = ["float64"] if pointee == "double" else [name for name, element in RIG_TYPES.items()
                                                         if element in holds]
        if dtype in reads:
            return None
        return (f"{tensor.name} holds {dtype}, and {parameter} is {text}, which reads {' or '.join(reads)}: give a "
                f"{reads[0]} tensor, or a kernel that reads {dtype}")
    kind, size = BUILTIN_TYPES.get(pointee, (None, None))
    if kind == "int" and size is not None and size >= 2 and size != tensor.view.itemsize:
        return (f"{tensor.name} holds {dtype} ({tensor.view.itemsize}-byte elements), and {parameter} is {text}, "
                f"which reads {size}-byte integers: give a tensor of {size}-byte elements")
    return None


def _overlap(first: RigMatrix, second: RigMatrix) -> bool:
    """Whether the spans of two matrices (from their first element to their last, padding included) share a byte."""
    return (first.view.address < second.view.address + second.span_bytes
            and second.view.address < first.view.address + first.span_bytes)


def _span_text(matrix: RigMatrix) -> str:
    return f"bytes {matrix.view.address:#x} to {matrix.view.address + matrix.span_bytes - 1:#x}"


def raw_values(raw: bytes | np.ndarray, dtype: str) -> np.ndarray:
    """The float64 values of raw little-endian bytes of a protocol element type (`interop.ELEMENTS`' names)."""
    raw = raw.tobytes() if isinstance(raw, np.ndarray) else bytes(raw)
    if dtype in RIG_TYPES:
        element = dtypes.element_type(RIG_TYPES[dtype])
        return dtypes.decode(np.frombuffer(raw, dtype=element.storage_dtype.newbyteorder("<")), element)
    return np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).astype(np.float64)


def matrix_values(flat: np.ndarray, rows: int, cols: int, strides: tuple[int, int]) -> np.ndarray:
    """The rows x cols matrix whose element (i, j) is ``flat[i * strides[0] + j * strides[1]]``."""
    i = np.arange(rows, dtype=np.int64)[:, None]
    j = np.arange(cols, dtype=np.int64)[None, :]
    return np.asarray(flat)[i * strides[0] + j * strides[1]]


def matrix_codes(flat: np.ndarray, matrix: RigMatrix) -> np.ndarray:
    """The storage codes of `matrix`'s elements (rows x cols) from its span's codes."""
    return matrix_values(flat, matrix.rows, matrix.cols, matrix.strides)
