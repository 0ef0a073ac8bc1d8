"""The cuBLASLt baseline: one matmul with the kernel's types, layouts, batch, alpha and beta, on our buffers.

`plan_matmul` (pure, tested without a GPU) maps a GEMM's types and layouts to what cuBLASLt is told,
or refuses with the reason; `CublasLtMatmul` owns a handle and a workspace in our context and turns a
plan into a callable on our stream. cuBLASLt is column-major and a row-major M x N matrix read
column-major is its transpose, so C = A @ B is asked for as C^T = B^T A^T (m = N, n = M, cuBLASLt's
A' is our B); a column-major C needs no swap. cuBLASLt's "TN", which fp8 requires on sm_89 and
sm_90, is then our A row-major and B column-major (layout NT in `operands`' spelling).

cuBLASLt's strided batch has one stride per operand. A batch of two levels whose outer stride is count[1] inner
strides for every operand is one strided batch of count[0] x count[1] matrices; any other is count[0] calls
(`MatmulPlan.calls`), call i with every pointer moved by i x its outer stride and count[1] matrices an inner stride
apart, enqueued together as one launch (one sample times them all).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .baseline import CublasUnavailable
from .vendor_choice import AlgorithmChoice, enum_suffix
from ..gemm.dtypes import ELEMENT_TYPES, GemmTypes
from ..gemm.operands import GemmOperands, MatrixLayout
from ..cuda.device import Device, DeviceBuffer, Stream
from ..errors import CudaError, DriverGemmError

NAME = "cublaslt"
WORKSPACE_BYTES = 32 * 1024 * 1024   # what cuBLAS recommends for Hopper (cuBLAS docs, cublasSetWorkspace)

# cublasComputeType_t and cublasOperation_t values (cublas_api.h); the tests compare them with nvmath's enums.
COMPUTE_TYPES = {"COMPUTE_16F": 64, "COMPUTE_32F": 68, "COMPUTE_32F_FAST_TF32": 77, "COMPUTE_32I": 72}
OPERATIONS = {"N": 0, "T": 1}
ORDER_COL = 0
FP8_ALIGNMENT_BYTES = 16


class CublasLtUnsupported(DriverGemmError):
    """cuBLASLt has no matmul for this combination; the baseline row says so, with the reason."""

    def __init__(self, label: str, reason: str):
        self.label = label
        self.reason = reason
        super().__init__(f"no cuBLASLt baseline for this combination ({label}): {reason}")


@dataclass(frozen=True)
class LayoutPlan:
    """One cublasLtMatrixLayout: a column-major view of one of our operands."""

    role: str             # cuBLASLt's name: A, B, C or D
    operand: str          # ours: A, B or C
    data_type: int        # cudaDataType_t
    rows: int
    cols: int
    ld: int
    batch_count: int
    batch_offset: int     # elements between matrices (CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET)
    outer_offset: int = 0     # elements between two calls' first matrices (a batch of two levels in several calls)
    element_bytes: int = 0    # bytes of one element, for the calls' pointers

    def attributes(self) -> dict[str, int]:
        return {"TYPE": self.data_type, "ORDER": ORDER_COL, "ROWS": self.rows, "COLS": self.cols, "LD": self.ld,
                "BATCH_COUNT": self.batch_count, "STRIDED_BATCH_OFFSET": self.batch_offset}


@dataclass(frozen=True)
class MatmulPlan:
    """Everything cuBLASLt is told for one baseline matmul, decided before any library call."""

    label: str
    m: int
    n: int
    k: int
    compute_type: str                 # a key of COMPUTE_TYPES
    scale_dtype: str                  # NumPy dtype of alpha and beta (cuBLASLt's scale type)
    scale_data_type: int              # cudaDataType_t of the scale type
    transa: str
    transb: str
    swapped: bool                     # cuBLASLt's A is our B (C row-major)
    a: LayoutPlan
    b: LayoutPlan
    c: LayoutPlan
    alpha: float
    beta: float
    operand_scales: tuple[float, float] | None = None   # fp8: (scale_a, scale_b) behind device pointers
    workspace_bytes: int = WORKSPACE_BYTES
    key: tuple = field(default=(), compare=False)
    calls: int = 1                    # a batch of two levels that is no single strided batch: count[0] calls

    def call_offsets(self) -> list[dict[str, int]]:
        """The byte offset of each call's pointer from its buffer, by our operand (A, B, C), call by call: all 0 for
        one call, call i of a batch of two levels moved by i x each operand's outer stride."""
        return [{layout.operand: index * layout.outer_offset * layout.element_bytes
                 for layout in (self.a, self.b, self.c)} for index in range(self.calls)]

    def descriptor_attributes(self) -> dict[str, Any]:
        """The matmul descriptor's attributes as they will be set (pointers by name)."""
        attributes: dict[str, Any] = {
            "COMPUTE_TYPE": COMPUTE_TYPES[self.compute_type], "SCALE_TYPE": self.scale_data_type,
            "POINTER_MODE": 0, "TRANSA": OPERATIONS[self.transa], "TRANSB": OPERATIONS[self.transb]}
        if self.operand_scales is not None:
            attributes["A_SCALE_POINTER"] = "scale_a" if not self.swapped else "scale_b"
            attributes["B_SCALE_POINTER"] = "scale_b" if not self.swapped else "scale_a"
        return attributes

    @property
    def layouts(self) -> dict[str, LayoutPlan]:
        """cuBLASLt's A, B, C and D (D is C: the product is written in place, as a kernel does)."""
        return {"A": self.a, "B": self.b, "C": self.c, "D": self.c}


def baseline_label(types: GemmTypes, operands: GemmOperands, alpha: float, beta: float) -> str:
    """The row name, e.g. ``cublaslt-bf16-TN``, with ``-x4`` for a batch of 4, ``-ld`` for padded leading
    dimensions or strides, ``-a2b0.5`` when alpha and beta are not 1 and 0, and ``-gramA`` (``-gramB``) for the
    GEMM of a Gram product's one buffer with itself (C = A A^T, or B^T B), then ``-plusA`` where its C0 is that
    input (``c0: input``)."""
    parts = [NAME, types.label, operands.layout_code]
    if operands.levels is not None:
        parts.append(f"x{operands.levels[0]}x{operands.levels[1]}")
    elif operands.batch > 1:
        parts.append(f"x{operands.batch}")
    padded = any(layout.ld != max(layout.tight_ld, 1) or
                 (layout.levels is not None and layout.level_strides != (layout.levels[1] * layout.matrix_elements,
                                                                         layout.matrix_elements)) or
                 (layout.levels is None and layout.batch > 1 and layout.batch_stride != layout.matrix_elements)
                 for layout in (operands.a, operands.b, operands.c))
    if padded:
        parts.append("ld")
    if (alpha, beta) != (1.0, 0.0):
        parts.append(f"a{alpha:g}b{beta:g}")
    if operands.gram is not None:
        parts.append(f"gram{operands.gram.of.upper()}")
        if operands.gram.adds_input and beta != 0.0:
            parts.append(f"plus{operands.gram.of.upper()}")
    return "-".join(parts)


def _view(role: str, layout: MatrixLayout, data_type: int, element_bytes: int = 0,
          one_call: bool = True) -> tuple[LayoutPlan, bool]:
    """`layout` read column-major: (its cuBLASLt layout, whether it is the transpose of the logical matrix). A batch
    of two levels is one strided batch of all its matrices where `one_call` (its levels collapse to one stride),
    else the count[1] matrices of one call, the calls an outer stride apart."""
    rows, cols = (layout.cols, layout.rows) if layout.order == "row" else (layout.rows, layout.cols)
    transposed = layout.order == "row"
    if layout.levels is not None and not one_call:
        inner = layout.levels[1]
        return LayoutPlan(role, layout.operand, data_type, rows, cols, layout.ld, inner,
                          layout.batch_stride if inner > 1 else 0, layout.outer_stride, element_bytes), transposed
    batch_offset = layout.batch_stride if layout.batch > 1 else 0
    return LayoutPlan(role, layout.operand, data_type, rows, cols, layout.ld, layout.batch, batch_offset,
                      element_bytes=element_bytes), transposed


def one_strided_batch(operands: GemmOperands) -> bool:
    """Whether cuBLASLt's one strided batch holds the operands' batch: one level, or two whose outer stride is
    count[1] inner strides for every operand (matrix (i, j) then at z x the inner stride)."""
    if operands.levels is None:
        return True
    inner = operands.levels[1]
    return all(layout.outer_stride == inner * layout.batch_stride for layout in (operands.a, operands.b, operands.c))


def _compute_and_scale(types: GemmTypes) -> tuple[str, str, int] | str:
    """(compute type, scale dtype, scale cudaDataType) for `types`, or why cuBLASLt has no such matmul."""
    a, b, c, acc = types.a.name, types.b.name, types.c.name, types.accumulate.name
    fp32, fp16, int32 = (ELEMENT_TYPES[name].cuda_data_type for name in ("fp32", "fp16", "int32"))
    fp8 = {"e4m3", "e5m2"}
    if a in fp8 or b in fp8:
        if not (a in fp8 and b in fp8):
            return "fp8 inputs go together: A and B both e4m3 or e5m2"
        if a == b == "e5m2":
            return "e5m2 x e5m2 has no cuBLASLt kernel (one input must be e4m3)"
        return ("COMPUTE_32F", "float32", fp32) if acc == "fp32" else "fp8 accumulates in fp32"
    if "uint8" in (a, b):
        return "cuBLASLt has no matmul of unsigned 8-bit inputs"
    if a != b:
        return f"A ({a}) and B ({b}) must have one type outside fp8"
    if a == "int8":
        return ("COMPUTE_32I", "int32", int32) if c == "int32" else "int8 computes into int32 C"
    if a in ("fp32", "tf32"):
        if c != "fp32":
            return f"{a} inputs give an fp32 C, not {c}"
        return ("COMPUTE_32F_FAST_TF32" if a == "tf32" else "COMPUTE_32F"), "float32", fp32
    if acc == "fp16":
        return ("COMPUTE_16F", "float16", fp16) if a == c == "fp16" else "fp16 accumulation needs fp16 A, B and C"
    if c not in (a, "fp32"):
        return f"{a} inputs give a {a} or fp32 C, not {c}"
    return "COMPUTE_32F", "float32", fp32


def plan_matmul(types: GemmTypes, operands: GemmOperands, alpha: float = 1.0, beta: float = 0.0, *,
                scale_a: float = 1.0, scale_b: float = 1.0,
                workspace_bytes: int = WORKSPACE_BYTES) -> MatmulPlan:
    """What to ask cuBLASLt for C = alpha * A @ B + beta * C with these types and layouts, or `CublasLtUnsupported`.

    The support table is cuBLASLt's for sm_90 (cuBLAS documentation,
    cublasLtMatmul: "Datatypes supported"; FP8 requirements): same-type
    fp16/bf16 inputs with a C of that type or fp32, fp16 accumulation only
    all-fp16, fp32/tf32 into fp32, int8 into int32; fp8 e4m3/e5m2 inputs
    (not both e5m2) into fp32, fp16 or bf16, in cuBLASLt's TN layout, with
    16-byte aligned leading dimensions and batch strides and 16-byte aligned
    matrix dimensions: K, and C's contiguous extent, a whole number of 16
    bytes (cuBLAS documentation, cublasLtMatmul, "To use FP8 kernels": "pointers
    and matrix dimension must support 16-byte alignment"). fp8's per-tensor scales go behind the
    A and B scale pointers, each in its own allocation; alpha and beta are
    read from host memory. The module docstring explains the transposes.
    """
    label = baseline_label(types, operands, alpha, beta)
    decided = _compute_and_scale(types)
    if isinstance(decided, str):
        raise CublasLtUnsupported(label, decided)
    compute_type, scale_dtype, scale_data_type = decided
    swapped = operands.c.order == "row"
    first, second = (operands.b, operands.a) if swapped else (operands.a, operands.b)
    first_type, second_type = (types.b, types.a) if swapped else (types.a, types.b)
    # op(A') must be m x k: with the swap that is B^T, which a row-major B read column-major already is.
    one_call = one_strided_batch(operands)
    calls = 1 if one_call or operands.levels is None else operands.levels[0]
    a_plan, a_is_transpose = _view("A", first, first_type.cuda_data_type, first_type.storage_bytes, one_call)
    b_plan, b_is_transpose = _view("B", second, second_type.cuda_data_type, second_type.storage_bytes, one_call)
    transa = "N" if a_is_transpose == swapped else "T"
    transb = "N" if b_is_transpose == swapped else "T"
    # a row-major C read column-major is C^T
    c_plan, _ = _view("C", operands.c, types.c.cuda_data_type, types.c.storage_bytes, one_call)
    m, n = (operands.N, operands.M) if swapped else (operands.M, operands.N)

    scales = None
    if types.is_fp8:
        if (transa, transb) != ("T", "N"):
            raise CublasLtUnsupported(label, "fp8 needs cuBLASLt's TN layout on sm_90: A row-major and B "
                                      f"column-major (layout NT), not {operands.layout_code}")
        for layout, element in ((operands.a, types.a), (operands.b, types.b), (operands.c, types.c)):
            for what, count in (("ld", layout.ld), ("batch stride", layout.batch_stride if layout.batch > 1 else 0),
                                ("outer batch stride", layout.outer_stride if calls > 1 else 0)):
                if count * element.storage_bytes % FP8_ALIGNMENT_BYTES:
                    raise CublasLtUnsupported(label, f"fp8 needs 16-byte aligned leading dimensions and batch "
                                              f"strides: {layout.operand}'s {what} is {count} {element.name} "
                                              f"elements (pad it to a multiple of "
                                              f"{FP8_ALIGNMENT_BYTES // element.storage_bytes})")
        for what, count, element in (("K", operands.K, types.a),          # A and B are K-contiguous in TN
                                     (f"C's contiguous extent ({'N' if swapped else 'M'})",
                                      operands.N if swapped else operands.M, types.c)):
            if count * element.storage_bytes % FP8_ALIGNMENT_BYTES:
                raise CublasLtUnsupported(label, f"fp8 needs 16-byte aligned matrix dimensions (cuBLAS, FP8 "
                                          f"requirements): {what} = {count} {element.name} elements is not a "
                                          f"multiple of {FP8_ALIGNMENT_BYTES // element.storage_bytes}")
        scales = (float(scale_a), float(scale_b))
    elif (scale_a, scale_b) != (1.0, 1.0):
        raise CublasLtUnsupported(label, "per-tensor scale factors are for fp8 inputs")
    if scale_dtype != "float32":
        for name, value in (("alpha", alpha), ("beta", beta)):
            if float(np.array(value).astype(scale_dtype)) != value:
                raise CublasLtUnsupported(label, f"{name} = {value} is not exact in the scale type {scale_dtype}")
    # A batch of two levels adds its outer strides and counts: a one-level row's key stays (ld, stride).
    layouts = tuple((layout.ld, layout.batch_stride)
                    + ((layout.outer_stride, layout.levels) if layout.two_level else ())
                    for layout in (operands.a, operands.b, operands.c))
    # A Gram product's inputs are one matrix and its transpose, not two drawn apart: a row of its own.
    gram = (operands.gram.of, operands.gram.adds_input) if operands.gram is not None else None
    key = (types, tuple(sorted(operands.orders.items())), operands.batch, layouts, float(alpha), float(beta), scales,
           gram)
    return MatmulPlan(label, m, n, operands.K, compute_type, scale_dtype, scale_data_type, transa, transb, swapped,
                      a_plan, b_plan, c_plan, float(alpha), float(beta), scales, workspace_bytes, key, calls)


def simulate(plan: MatmulPlan, a_flat: np.ndarray, b_flat: np.ndarray, c_flat: np.ndarray) -> np.ndarray:
    """What cuBLASLt computes from `plan` on flat float64 buffers of our A, B and C: the new C buffer.

    A reading of cuBLASLt's column-major definition, for checking plans
    without a GPU: each matrix is gathered from its buffer by its
    LayoutPlan, multiplied as cuBLASLt would, and written back.
    """
    buffers = {"A": a_flat, "B": b_flat, "C": np.array(c_flat, dtype=np.float64)}

    def gather(layout: LayoutPlan, batch: int, call: int = 0) -> np.ndarray:
        i = np.arange(layout.rows)[:, None]
        j = np.arange(layout.cols)[None, :]
        return buffers[layout.operand][call * layout.outer_offset + batch * layout.batch_offset + j * layout.ld + i]

    out = buffers["C"]
    for call, batch in ((call, batch) for call in range(plan.calls) for batch in range(plan.c.batch_count)):
        a = gather(plan.a, batch, call)
        b = gather(plan.b, batch, call)
        a, b = (a.T if plan.transa == "T" else a), (b.T if plan.transb == "T" else b)
        assert a.shape == (plan.m, plan.k) and b.shape == (plan.k, plan.n), (a.shape, b.shape)
        scale = np.prod(plan.operand_scales) if plan.operand_scales else 1.0
        d = plan.alpha * scale * (a @ b)
        if plan.beta != 0.0:
            d = d + plan.beta * gather(plan.c, batch, call)
        i = np.arange(plan.c.rows)[:, None]
        j = np.arange(plan.c.cols)[None, :]
        out[call * plan.c.outer_offset + batch * plan.c.batch_offset + j * plan.c.ld + i] = d
    return out


# ------------------------------------------------------------------------------------- the algorithms

# What is read of each candidate (cublasLtMatmulAlgoConfigAttributes_t), by our name.
ALGORITHM_ATTRIBUTES = {"algo_id": "ID", "tile": "TILE_ID", "stages": "STAGES_ID", "split_k": "SPLITK_NUM",
                        "reduction": "REDUCTION_SCHEME", "swizzle": "CTA_SWIZZLING", "cluster": "CLUSTER_SHAPE_ID"}


@dataclass
class Candidate:
    """One of the heuristic's algorithms, ready to launch, and what it is."""

    launch: object                  # a callable: enqueue the matmul once with this algorithm
    algorithm: AlgorithmChoice


def usable_results(results: np.ndarray, found: int) -> list[int]:
    """The indices of the heuristic's results that it filled and marked CUBLAS_STATUS_SUCCESS (the others' fields
    are not valid: cublasLtMatmulHeuristicResult_t), in its order."""
    return [index for index in range(min(found, len(results))) if int(results[index]["state"]) == 0]


def read_algorithm(lt, algo: int, call) -> dict[str, int | None]:
    """The configuration attributes of the cublasLtMatmulAlgo_t at address `algo`, by our name; None for one this
    library does not have. `call(name, function, *args)` is the error-checking caller."""
    out: dict[str, int | None] = {}
    written = np.zeros(1, dtype=np.uint64)
    attributes = getattr(lt, "MatmulAlgoConfigAttribute", None)
    for ours, theirs in ALGORITHM_ATTRIBUTES.items():
        kind = getattr(attributes, theirs, None)
        if kind is None:
            out[ours] = None
            continue
        value = np.zeros(1, dtype=lt.get_matmul_algo_config_attribute_dtype(kind))
        call("cublasLtMatmulAlgoConfigGetAttribute", lt.matmul_algo_config_get_attribute, algo, int(kind),
             value.ctypes.data, value.nbytes, written.ctypes.data)
        out[ours] = int(value[0])
    return out


def _enum_name(enum, value: int | None) -> str | None:
    if enum is None or value is None:
        return None
    try:
        return enum(value).name
    except ValueError:
        return str(value)


def algorithm_choice(rank: int, config: dict[str, int | None], lt, *, workspace_bytes: int | None = None,
                     waves: float | None = None, candidates: int = 1) -> AlgorithmChoice:
    """The record of one candidate: its rank in the heuristic's list (1 first) and its attributes, the enums
    (tile, stages, reduction, cluster) by name as cuBLASLt's headers spell them without their prefix."""
    return AlgorithmChoice(
        rank=rank, algo_id=config.get("algo_id"),
        tile=enum_suffix(_enum_name(getattr(lt, "MatmulTile", None), config.get("tile")), "TILE_"),
        stages=enum_suffix(_enum_name(getattr(lt, "MatmulStages", None), config.get("stages")), "STAGES_"),
        split_k=config.get("split_k"),
        reduction=enum_suffix(_enum_name(getattr(lt, "ReductionScheme", None), config.get("reduction")), ""),
        swizzle=config.get("swizzle"),
        cluster=enum_suffix(_enum_name(getattr(lt, "ClusterShape", None), config.get("cluster")), "SHAPE_"),
        workspace_bytes=workspace_bytes, waves=waves if waves is None or math.isfinite(waves) else None,
        candidates=candidates)


# -------------------------------------------------------------------------------------------- running

class CublasLtMatmul:
    """A cuBLASLt handle and workspace bound to our context and stream; ``prepare(plan, A, B, C)`` gives a launch
    callable. Descriptors, layouts, preferences and fp8 scale buffers live until `close()`."""

    def __init__(self, device: Device, stream: Stream, *, workspace_bytes: int = WORKSPACE_BYTES):
        try:
            # nvmath-python (cuBLASLt): heavy, loaded when the first handle is made
            from nvmath.bindings import cublasLt
        except ImportError as exc:
            raise CublasUnavailable(f"the cuBLASLt baseline needs nvmath-python ({exc})") from None
        self._lt = cublasLt
        self._device = device
        self._stream = stream
        self.closed = True
        device.make_current()
        try:
            self.handle = cublasLt.create()
        except Exception as exc:  # cuBLASLtError, or the library missing at load time
            raise self._error("cublasLtCreate", exc) from None
        self.closed = False
        self.workspace_bytes = workspace_bytes
        self.workspace: DeviceBuffer = device.alloc(workspace_bytes)
        self._owned: list[tuple[str, object, int]] = []    # (destroy call name, function, handle), in creation order
        self._keep_alive: list[object] = []                 # host scalars and device scale buffers read at launch

    @staticmethod
    def _error(call: str, exc: Exception) -> CudaError:
        status = getattr(exc, "status", None)
        name = getattr(status, "name", None) or type(exc).__name__
        return CudaError(call, name, str(exc))

    def _call(self, name, function, *args):
        try:
            return function(*args)
        except (self._lt.cuBLASLtError, RuntimeError) as exc:
            raise self._error(name, exc) from None

    def _set(self, call: str, setter, handle, attribute, value, dtype) -> None:
        buffer = np.array(value, dtype=dtype)
        self._call(call, setter, handle, int(attribute), buffer.ctypes.data, buffer.nbytes)

    def _create(self, call: str, destroy_call: str, create, destroy, *args) -> int:
        handle = self._call(call, create, *args)
        self._owned.append((destroy_call, destroy, handle))
        return handle

    def prepare(self, plan: MatmulPlan, A: DeviceBuffer, B: DeviceBuffer, C: DeviceBuffer):
        """A callable that enqueues the planned matmul once on our A, B and C (C is read when beta != 0, and
        overwritten) with the heuristic's first algorithm; `CublasLtUnsupported` when it finds none."""
        return self.prepare_candidates(plan, A, B, C, 1)[0].launch

    def prepare_candidates(self, plan: MatmulPlan, A: DeviceBuffer, B: DeviceBuffer, C: DeviceBuffer,
                           count: int) -> list["Candidate"]:
        """The heuristic's first `count` algorithms for the planned matmul (fewer where it offers fewer), each
        as a `Candidate` whose launch enqueues the matmul once on our A, B and C with that algorithm;
        `CublasLtUnsupported` when it offers none. The workspace covers the largest candidate's."""
        lt = self._lt
        self._device.make_current()
        desc = self._create("cublasLtMatmulDescCreate", "cublasLtMatmulDescDestroy", lt.matmul_desc_create,
                            lt.matmul_desc_destroy, COMPUTE_TYPES[plan.compute_type], plan.scale_data_type)
        attribute = lt.MatmulDescAttribute
        for name, value in plan.descriptor_attributes().items():
            if name.endswith("_SCALE_POINTER"):
                continue
            self._set("cublasLtMatmulDescSetAttribute", lt.matmul_desc_set_attribute, desc, getattr(attribute, name),
                      value, lt.get_matmul_desc_attribute_dtype(getattr(attribute, name)))
        if plan.operand_scales is not None:
            # Each scale in an allocation of its own (256-byte aligned): cuBLASLt refuses fp8 matmuls whose scales
            # share one buffer; torch, nvmath-python and NVIDIA's fp8 sample pass separately allocated scalars.
            ours = {}
            for which, value in zip(("scale_a", "scale_b"), plan.operand_scales):
                scale = self._device.upload(np.array([value], dtype=np.float32), self._stream)
                self._keep_alive.append(scale)
                ours[which] = scale.address
            for name, which in plan.descriptor_attributes().items():
                if name.endswith("_SCALE_POINTER"):
                    self._set("cublasLtMatmulDescSetAttribute", lt.matmul_desc_set_attribute, desc,
                              getattr(attribute, name), ours[which], np.int64)
        layouts = {}
        for role, layout in (("A", plan.a), ("B", plan.b), ("C", plan.c)):
            handle = self._create("cublasLtMatrixLayoutCreate", "cublasLtMatrixLayoutDestroy",
                                  lt.matrix_layout_create, lt.matrix_layout_destroy, layout.data_type, layout.rows,
                                  layout.cols, layout.ld)
            for name in ("BATCH_COUNT", "STRIDED_BATCH_OFFSET"):
                kind = getattr(lt.MatrixLayoutAttribute, name)
                self._set("cublasLtMatrixLayoutSetAttribute", lt.matrix_layout_set_attribute, handle, kind,
                          layout.attributes()[name], lt.get_matrix_layout_attribute_dtype(kind))
            layouts[role] = handle
        preference = self._create("cublasLtMatmulPreferenceCreate", "cublasLtMatmulPreferenceDestroy",
                                  lt.matmul_preference_create, lt.matmul_preference_destroy)
        kind = lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES
        self._set("cublasLtMatmulPreferenceSetAttribute", lt.matmul_preference_set_attribute, preference, kind,
                  min(plan.workspace_bytes, self.workspace_bytes), lt.get_matmul_preference_attribute_dtype(kind))
        results = np.zeros(max(count, 1), dtype=lt.matmul_heuristic_result_dtype)
        found = np.zeros(1, dtype=np.int32)
        try:
            lt.matmul_algo_get_heuristic(self.handle, desc, layouts["A"], layouts["B"], layouts["C"], layouts["C"],
                                         preference, len(results), results.ctypes.data, found.ctypes.data)
        except lt.cuBLASLtError as exc:
            raise CublasLtUnsupported(plan.label, f"cublasLtMatmulAlgoGetHeuristic: {self._error('', exc).name}") \
                from None
        offered = usable_results(results, int(found[0]))
        if not offered:
            raise CublasLtUnsupported(plan.label, "cuBLASLt's heuristic offers no algorithm")
        workspace = min(plan.workspace_bytes, self.workspace_bytes)
        needed = max(int(results[index]["workspace_size"]) for index in offered)
        if needed > workspace:       # the preference caps it: a library that ignored the cap is refused here
            raise CublasLtUnsupported(plan.label, f"the heuristic's algorithms need {needed} bytes of workspace, "
                                      f"more than the {workspace} offered")
        scalars = np.array([plan.alpha, plan.beta], dtype=plan.scale_dtype)
        self._keep_alive += [results, scalars]
        alpha, beta = scalars.ctypes.data, scalars.ctypes.data + scalars.itemsize
        ours = {"A": A.address, "B": B.address, "C": C.address}      # with the swap, cuBLASLt's A is our B
        candidates = []
        for index in offered:
            algo = results.ctypes.data + index * results.itemsize    # the algo is the result's first field
            # One call per outer index of a batch of two levels that is no single strided batch (`plan.calls`).
            args = [(self.handle, desc, alpha, ours[plan.a.operand] + moved[plan.a.operand], layouts["A"],
                     ours[plan.b.operand] + moved[plan.b.operand], layouts["B"], beta, C.address + moved["C"],
                     layouts["C"], C.address + moved["C"], layouts["C"], algo, self.workspace.address, workspace,
                     self._stream.address) for moved in plan.call_offsets()]
            config = read_algorithm(lt, algo, self._call)
            algorithm = algorithm_choice(index + 1, config, lt, workspace_bytes=int(results[index]["workspace_size"]),
                                         waves=float(results[index]["waves_count"]), candidates=len(offered))
            candidates.append(Candidate(self._launcher(plan, args), algorithm))
        return candidates

    def _launcher(self, plan: MatmulPlan, calls: list[tuple]):
        matmul = self._lt.matmul

        def launch() -> None:
            try:
                for args in calls:
                    self._call("cublasLtMatmul", matmul, *args)
            except CudaError as exc:
                if "NOT_SUPPORTED" not in str(exc):
                    raise
                # The heuristic offered an algorithm, the matmul refused it: no baseline for this combination.
                raise CublasLtUnsupported(plan.label, "cublasLtMatmul refused the heuristic's algorithm "
                                          "(CUBLAS_STATUS_NOT_SUPPORTED)") from None

        return launch

    def close(self) -> None:
        """Destroy descriptors, layouts and preferences (newest first), then the handle; free the workspace."""
        if self.closed:
            return
        self.closed = True
        self._device.make_current()
        while self._owned:
            call, destroy, handle = self._owned.pop()
            self._call(call, destroy, handle)
        self._call("cublasLtDestroy", self._lt.destroy, self.handle)
        for buffer in [self.workspace, *self._keep_alive]:
            if isinstance(buffer, DeviceBuffer):
                buffer.close()
        self._keep_alive.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
