"""Step 1 of the data flow: the checked, immutable description of a spec.

A spec says which kernels to run (source, function or template instance,
template parameters, launch grid and block as expressions of the shape and the
parameters, dynamic shared memory, argument signature), on which shapes, how to
measure and how to verify. The classes here hold what `driver_gemm.specfile.load`
made of a YAML file or a dictionary; nothing here touches CUDA or YAML.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, NoReturn, SupportsIndex

from . import expr
from ..argtypes import TENSOR_MAP_ALIGNMENTS, Layout, array_layout, scalar_layout, struct_layout
from ..bundled import default_spec_path
from ..gemm.dtypes import GemmTypes
from ..gemm.elementwise import ElementwiseFunction
from ..errors import SpecError, WrongArgumentType, WrongArgumentValue, flag_argument
from ..kernel_names import overload_expression, split_overload
from .archs import arch_problem
from .limits import INT64_MAX, MAX_CASES, MAX_DIMENSION, MAX_NAME_CHARS
from .sample_patterns import SamplePattern

if TYPE_CHECKING:
    # for annotations only: gemm.operands imports NumPy, which reading a spec's model does not need
    from ..gemm.operands import Gram

DEFAULT_SPEC = default_spec_path()
PRECISIONS = ("fp32", "tf32")
COMPILERS = ("nvrtc", "nvcc")            # what builds a kernel's source
EPILOGUES = ("overwrite", "accumulate")   # C = A @ B, C += A @ B: a kernel that takes no alpha or beta
ROWS_ON = ("x", "y")                      # the block index a kernel reads its row of C from
MIN_PCT_RULE = "must be above 0 (a % of cuBLAS)"

# Names become file names (results/NAME-TIMESTAMP.json) and table cells: no separators, no leading dot.
SAFE_NAME = re.compile(r"[A-Za-z0-9_+=,\[\]-][A-Za-z0-9._+=,\[\]-]*")


def template_argument(value: Any) -> str:
    """A template parameter's value as C++ spells it: ``64``, ``true``, ``float``, ``lib::Order::Col``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and value == -2**63:   # 9223372036854775808 alone is unsigned, and so its negation
        return "(-9223372036854775807LL - 1)"
    return str(value)


def is_safe_name(name: str) -> bool:
    """True when `name` can be a file name on any system and printed as it is."""
    return len(name) <= MAX_NAME_CHARS and SAFE_NAME.fullmatch(name) is not None


def safe_file_stem(text: str) -> str:
    """`text` with every character a file name should not hold replaced by ``-`` (``spec`` if none is left)."""
    stem = re.sub(r"[^A-Za-z0-9._+=,\[\]-]", "-", text)[:MAX_NAME_CHARS].lstrip(".")
    return stem or "spec"


# --------------------------------------------------------------------------- descriptions


class FrozenDict(dict):
    """A dict that refuses changes: the mappings of the model's frozen classes (a kernel's params, a spec's scalars).

    A kernel's instance, label and launch checks are worked out once from its params, so a params changed in place
    would be compiled as one configuration and planned as another. A dict rather than a Mapping of its own, so that
    what took the plain dict still does (``json.dumps``, ``isinstance(x, dict)``, ``dict(...)``, ``==`` a dict);
    hashable where its values are (a frozen class's hash reads it); a changed copy is ``{**d, key: value}``.
    """

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise WrongArgumentType("this mapping of a spec is read-only: make a changed copy with "
                                "dataclasses.replace(owner, field={**old, key: value})")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple:
        # Pickle's and copy's default for a dict subclass fills the new object through __setitem__, refused here.
        return (type(self), (dict(self),))


def freeze_fields(owner: Any, *names: str) -> None:
    """Make the mapping fields `names` of a frozen dataclass read-only (`FrozenDict`); None and a FrozenDict stay."""
    for name in names:
        value = getattr(owner, name)
        if isinstance(value, Mapping) and not isinstance(value, FrozenDict):
            object.__setattr__(owner, name, FrozenDict(value))


@dataclass(frozen=True)
class Shape:
    """One GEMM problem: C (M x N) = A (M x K) @ B (K x N), all row-major."""

    M: int
    N: int
    K: int

    if TYPE_CHECKING:
        # The signature a type checker sees: any whole number, NumPy's too (an array's .shape holds them), which
        # __post_init__ makes an int; the fields stay ints. The dataclass's own __init__ runs.
        def __init__(self, M: SupportsIndex, N: SupportsIndex, K: SupportsIndex) -> None: ...

    def __post_init__(self) -> None:
        # A shape made in Python is held to what a spec's shapes are: whole numbers of at least 1.
        for name in ("M", "N", "K"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                try:
                    whole = operator.index(value)          # NumPy's integers are whole numbers too
                except TypeError:
                    raise WrongArgumentType(f"Shape: {name} must be a whole number, got {value!r} "
                                            f"({type(value).__name__})") from None
                if isinstance(value, bool):
                    raise WrongArgumentType(f"Shape: {name} must be a whole number, got {value!r} (bool)")
                object.__setattr__(self, name, int(whole))
                value = int(whole)
            if value < 1:   # a ValueError too, for code that catches those
                raise WrongArgumentValue(f"Shape: {name} must be at least 1, got {value}")

    @property
    def label(self) -> str:
        return f"{self.M}x{self.N}x{self.K}"

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    def as_env(self) -> dict[str, int]:
        return {"M": self.M, "N": self.N, "K": self.K}


@dataclass(frozen=True)
class TensorMapArgument:
    """How a ``tensormap`` argument describes one operand to the TMA engine.

    Without `dims`, the map is the operand's matrix as stored and `box` is the
    (rows, cols) of it, row-major, that one copy moves. With `dims` (rank 1 to
    5), every list is innermost first, as cuTensorMapEncodeTiled takes it:
    `dims` in elements, `strides` in bytes (every dimension but the first),
    `box` and `element_strides` per dimension. All are expressions of the shape
    and the parameters; `element` is the element type the map declares (None:
    the operand's storage type); `passing` is ``value``, ``pointer`` (the map
    copied to device memory, its address passed) or None: as the kernel's
    parameter is declared (128 bytes by value, an 8-byte pointer). `count`
    (``batch`` or ``groups``; None: one map) makes it one map per matrix of
    the operand, each at its matrix (a batch stride apart), written one after
    another: the array of maps a batched or grouped kernel indexes by its
    matrix (``&maps[blockIdx.z]``).
    """

    tensor: str                                          # A, B or C
    box: tuple[expr.Expression, ...]
    swizzle: str = "none"
    l2_promotion: str = "none"
    oob_fill: str = "zero"
    element: str | None = None
    dims: tuple[expr.Expression, ...] | None = None
    strides: tuple[expr.Expression, ...] | None = None
    element_strides: tuple[expr.Expression, ...] | None = None
    interleave: str = "none"
    passing: str | None = None
    count: str | None = None

    def expressions(self) -> dict[str, tuple[expr.Expression, ...]]:
        """Every expression list of the description, by its key."""
        lists = {"box": self.box, "dims": self.dims, "strides": self.strides, "element_strides": self.element_strides}
        return {key: value for key, value in lists.items() if value is not None}


BUFFER_FILLS = ("zero", "iota", "values", "file", "built", "scales", "bias")


@dataclass(frozen=True)
class BlockScales:
    """A buffer of scale factors, one per block of A or B (block-scaled FP8, as DeepGEMM's kernels take them).

    `operand` is ``a`` (M x K) or ``b`` (K x N); `block` the (rows, cols) of that matrix one factor multiplies;
    the factors form a grid of ceil(rows / block) x ceil(cols / block), stored in `order` (``row``: grid row
    after grid row; ``col``: grid column after grid column) with leading dimension `ld` (None: tight). The
    reference multiplies each element of A and B by its block's factor before the product. `storage` is how a
    factor is stored when not as the buffer's floating element: ``ue8m0`` (an 8-bit exponent, 2^(code - 127)) or
    ``e4m3`` (`gemm.dtypes.SCALE_STORAGES`), one to a byte of a uint8 buffer.
    """

    operand: str
    block: tuple[expr.Expression, expr.Expression]
    order: str = "row"
    ld: expr.Expression | None = None
    storage: str | None = None


# The parts of a quantized B a buffer may hold, and the code widths that pack evenly into a 32-bit word.
QUANTIZED_PARTS = ("codes", "scales", "zeros", "codebook")
QUANTIZED_BITS = (2, 4, 8)


@dataclass(frozen=True)
class QuantizedWeights:
    """One part of B given to the kernel quantized (weight-only quantization, as AWQ, GPTQ and Marlin kernels take
    their weights): B = (q - z) * s, q an integer code in [0, 2^bits) per element, s a scale and z a zero point per
    `group` rows of B (along K) and column.

    `part` is ``codes`` (q: K x N), ``scales`` (s: K / group x N, row-major) or ``zeros`` (z, as s is laid out). A
    part of codes or zeros packs 32 / bits of them into a 32-bit element along `along` (``K`` or ``N``; None: one
    to an element); bit field i of a word (bits i * bits up) holds position ``order[i]`` of its run (None: i).
    `builder` (with no `along`) lays the buffer out instead. `bits` and `group` are the codes part's; the other
    parts may repeat them (None: inherited). `major` is ``row`` (the grid of values or words row after row) or
    ``col`` (column after column: a scale per group of W = B^T's rows, [N, K / group] row-major). `codebook`, on
    the codes part, makes B = codebook[q] * s (NF4, FP4: a table of 2^bits values, `codebook_name` ``nf4``, ``fp4``
    or None for a listed one); part ``codebook`` holds that table.
    """

    part: str
    bits: int | None = None
    group: expr.Expression | None = None
    along: str | None = None
    order: tuple[int, ...] | None = None
    builder: HostBuilder | None = None
    major: str = "row"
    codebook: tuple[float, ...] | None = None
    codebook_name: str | None = None


@dataclass(frozen=True)
class DeviceBufferArgument:
    """A device buffer the kernel takes besides A, B and C (a scheduler's workspace, alpha by pointer).

    `size` is its length in elements of `element` (a C type of `argtypes`);
    `fill` says what it holds before every launch and every sample: ``zero``,
    ``iota`` (0, 1, 2, ...), ``values``, the expressions of `values` repeated
    over its length, or ``file``: the array of a NumPy ``.npy`` file, whose
    name `file` may hold ``{M}``, ``{N}``, ``{K}`` and the params' names (a
    table the host computes per shape, such as a tile order), relative to
    `file_folder` and inside `file_root` (None: anywhere, with the user's
    leave), ``built``: the numbers `builder`, a Python function, returns for the
    shape and the params (the same table, computed rather than saved),
    ``scales``: a factor per block of A or B (`scales`), ``bias``: a
    value per column (`bias` ``N``) or row (``M``) of C added to it, or
    ``quantized``: a part of a quantized B (`quantized`), or ``groups``: what
    a grouped GEMM's kernel reads about its groups (`groups`, a key of
    `gemm.groups.METADATA`). A buffer with `tensor_scale` (``a`` or ``b``) holds
    that fp8 per-tensor scale (``{name: scale_a, type: ptr}``), as one value. A
    `read_only` buffer (alpha, beta or a per-tensor scale by pointer, a
    quantized part, the groups') is filled once per case; any other is reset
    before every sample too.
    """

    element: str
    size: expr.Expression
    fill: str = "zero"
    values: tuple[expr.Expression, ...] = ()
    read_only: bool = False
    file: str | None = None
    file_folder: Path | None = None
    file_root: Path | None = None
    # False (pass: none): allocated and filled for the case but no parameter of the kernel, which reads it only
    # through a tensor map over it (DeepGEMM's scale factors); it is then in `KernelSpec.memory`.
    passed: bool = True
    scales: BlockScales | None = None     # fill "scales": factors the case draws, which the reference applies
    # fill "bias": a value per column (N) or row (M) of C the case draws, which the reference adds to C
    bias: str | None = None
    builder: HostBuilder | None = None   # fill "built" (or a quantized part's pack): the function that lays it out
    quantized: QuantizedWeights | None = None   # fill "quantized": a part of B as codes, scales or zero points
    groups: str | None = None     # fill "groups": what it holds about a grouped GEMM's groups (rows, ends, ...)
    tensor_scale: str | None = None   # "a" or "b": that fp8 per-tensor scale by pointer, its value in `values`


@dataclass(frozen=True)
class HostBuilder:
    """A Python function that makes a struct parameter's bytes from its fields' values: ``function`` of the file
    ``path`` (a ``.py`` file the spec names, relative to the spec), for parameters no field list can lay out (a
    CUTLASS Params of CuTe layouts, a layout a library's host code computes)."""

    path: Path
    function: str

    @property
    def text(self) -> str:
        """As the spec writes it: ``params.py:build``."""
        return f"{self.path.name}:{self.function}"


@dataclass(frozen=True)
class Argument:
    """One kernel parameter: its name, its exact C type, and (for scalars) the expression of its value.

    A ``tensormap`` argument has no value but a `tensor_map` description: the
    map is encoded at launch from the operand's device buffer. A ``struct``
    argument (a struct passed by value) has `fields`, arguments themselves
    (scalars, pointers, buffers, arrays, structs), laid out by the C ABI
    (`layout`), or by its `builder`, which is given their values by name and returns the parameter's bytes.
    A field with `array` is a fixed array (``int stride[3]``), one
    expression per element. A ``ptr`` with `buffer` is a device buffer of the
    case's own, filled as it says (alpha and beta by pointer are such buffers,
    with the scalar's expression as `value` too); a ``ptr`` with `null` is passed as nullptr, one with `alias`
    the address of that matrix, one with `pointers_to` the address of a device array holding the address of each
    of that matrix's batch (the arrays of pointers a batched GEMM of cuBLAS's kind takes).
    """

    name: str
    ctype: str
    value: expr.Expression | None = None
    tensor_map: TensorMapArgument | None = None
    fields: tuple["Argument", ...] = ()
    array: tuple[expr.Expression, ...] = ()
    buffer: DeviceBufferArgument | None = None
    null: bool = False            # a ptr passed as nullptr: an optional input the kernel tests for and skips
    alias: str | None = None      # a ptr passed the address of this matrix (D = C: the output written in place)
    builder: HostBuilder | None = None   # a struct whose bytes a Python function makes from its fields' values
    pointers_to: str | None = None   # a ptr to a device array of the addresses of this matrix's batch (T** A)

    def layout(self, tensor_map_alignment: int | None = None) -> Layout:
        """Its size, alignment and scalars' offsets as the C compiler lays it out, with a tensor map it holds at
        `tensor_map_alignment` (default: CUDA 13's, the first of `TENSOR_MAP_ALIGNMENTS`)."""
        if self.fields:
            return struct_layout([field.layout(tensor_map_alignment) for field in self.fields])[0]
        if self.array:
            return array_layout(scalar_layout(self.ctype, tensor_map_alignment), len(self.array))
        return scalar_layout(self.ctype, tensor_map_alignment)

    def holds_tensor_map(self) -> bool:
        return self.tensor_map is not None or any(field.holds_tensor_map() for field in self.fields)

    def layout_for(self, size: int | None) -> Layout:
        """Its layout with a tensor map it holds at the alignment that makes the kernel's parameter `size` bytes
        (CUDA 13's headers or CUDA 12's built it); the default layout where none does or `size` is unknown."""
        if size is not None and self.fields and self.holds_tensor_map():
            for alignment in TENSOR_MAP_ALIGNMENTS:
                layout = self.layout(alignment)
                if layout.size == size:
                    return layout
        return self.layout()

    def scalar_leaves(self) -> tuple[tuple["Argument", int | None], ...]:
        """Every scalar it holds in the order of `layout().leaves`: (argument, element index of an array or
        None)."""
        if self.fields:
            return tuple(leaf for field in self.fields for leaf in field.scalar_leaves())
        if self.array:
            return tuple((self, index) for index in range(len(self.array)))
        return ((self, None),)


@dataclass(frozen=True)
class FollowingLaunch:
    """A launch that follows the kernel's own in every one of its cases (``then:``): another ``__global__``
    function of the same source, given the same params, with its own launch and signature; the case's work is
    the whole sequence (a split of K's partial products, then the kernel that adds them into C; a GEMM, then an
    epilogue of its own). Its signature names the case's matrices, scalars and the kernel's own buffers."""

    function: str                       # as written: a template-id naming params (reduce<SPLITS>) has them put in
    block: tuple[expr.Expression, ...]
    grid: tuple[expr.Expression, ...]
    shared_bytes: expr.Expression
    signature: tuple["Argument", ...]
    index: int = 0                      # its place in then: (then[0] is the first launch after the kernel's)


@dataclass(frozen=True)
class LaunchAttributeSpec:
    """What a kernel's launches ask for beyond grid and block: a thread-block cluster, PDL, a cooperative launch.

    `cluster` holds the cluster's extents in blocks as expressions (None: no cluster).
    """

    cluster: tuple[expr.Expression, expr.Expression, expr.Expression] | None = None
    non_portable: bool = False
    scheduling: str | None = None
    pdl: bool = False
    cooperative: bool = False


@dataclass(frozen=True)
class GroupsSpec:
    """A grouped GEMM's ``groups:`` as the spec writes it: the layout (`gemm.groups.LAYOUTS`), the group count, each
    group's rows (a rule of `gemm.groups.ROW_RULES`, or an expression per group), the contiguous groups' row
    alignment, and, where the groups share weights, how many (`weights`) and which each group takes (a rule of
    `gemm.groups.WEIGHT_RULES`, or an expression per group). Laid out per shape by
    `driver_gemm.specfile.typed.evaluate_operands`."""

    layout: str = "contiguous"
    count: expr.Expression | None = None
    rows: str | tuple[expr.Expression, ...] = "even"
    align: expr.Expression = field(default_factory=lambda: expr.parse(1))
    weights: expr.Expression | None = None
    weight_index: str | tuple[expr.Expression, ...] | None = None


@dataclass(frozen=True)
class OperandSpec:
    """A typed kernel's operands: element types, storage orders, leading dimensions, batch, fp8 scales, groups, the
    inputs' structure and the element-wise functions the kernel applies to its product.

    `orders` maps ``a``, ``b``, ``c`` to ``row`` or ``col``; `ld` and
    `strides` hold the expressions the spec gave (an operand left out is
    tight); `batch` is the number of matrices. A batch of two levels
    (``count: [B, H]``) has `levels`, the two counts, `batch` their product,
    and each of `strides` a pair (outer, inner), or 0 for one matrix for
    every (i, j). Evaluated per shape by
    `driver_gemm.specfile.typed.evaluate_operands`.
    """

    types: GemmTypes
    orders: Mapping[str, str]
    ld: Mapping[str, expr.Expression] = field(default_factory=dict)
    batch: expr.Expression = field(default_factory=lambda: expr.parse(1))
    strides: Mapping[str, expr.Expression | tuple[expr.Expression, expr.Expression]] = field(default_factory=dict)
    scales: tuple[float, float] = (1.0, 1.0)
    groups: GroupsSpec | None = None
    # ``structure: {a: upper, b: symmetric}``: what the drawn inputs are made (`gemm.operands.STRUCTURES`).
    structure: Mapping[str, str] = field(default_factory=dict)
    # ``elementwise: [relu, {mul: 1.5}]``: what the kernel applies, in order, to each element of its product before
    # it stores C, so what the reference applies (`gemm.elementwise`); the vendor row computes the product alone.
    elementwise: tuple[ElementwiseFunction, ...] = ()
    # ``gram: {of: A, triangle: lower}``: a Gram product of one input, the other operand it transposed (`Gram`).
    gram: Gram | None = None
    # ``batch: {count: [B, H]}``: the counts of a batch of two levels (outer, inner); None for one level.
    levels: tuple[expr.Expression, expr.Expression] | None = None

    def __post_init__(self) -> None:
        freeze_fields(self, "orders", "ld", "strides", "structure")


# A kernel's instance and label, worked out once per kernel rather than each time a plan of a million shapes asks.
@functools.lru_cache(maxsize=1 << 14)
def _instance(function: str, params: tuple) -> str:
    function, parameter_types = split_overload(function)
    if params and "<" in function:      # a template-id naming the params (k<config<BM, BN>>): put in their place
        function = put_params(function, params)
    elif params:
        function = f"{function}<{', '.join(_with_params(template_argument(v), params) for _, v in params)}>"
    if parameter_types is None:
        return function
    return overload_expression(function, parameter_types)


def _with_params(argument: str, params: tuple) -> str:
    """A template-id argument (``config<BM, BN>``) with the names of the kernel's other params that are numbers or
    true/false replaced by their values (``config<64, 128>``); any other argument as it is."""
    if "<" not in argument:
        return argument
    return put_params(argument, tuple((key, value) for key, value in params if not isinstance(value, str)))


# A C character literal as a template argument: one printable ASCII character in single quotes ('N', 'T', as a
# BLAS-style kernel is templated on its transposes), passed to the compiler as written. Not ' and \ (C escapes
# them), nor the brackets and comma that delimit a template-id's arguments and a label's params.
CHARACTER_LITERAL = re.compile(r"'[ !\"#$%&*+\-./0-9:;=?@A-Z^_`a-z{|}~]'")
# A name inside a template-id that may be a param's: an identifier not part of a qualified name (lib::BM stays)
# nor the letter of a character literal ('N').
PARAM_NAME = re.compile(r"(?<![\w:'])[A-Za-z_]\w*(?![\w:'])")


def put_params(text: str, params) -> str:
    """`text` (a template-id, a C++ type) with each name of `params` ((key, value) pairs) put in its place as C++
    spells the value: ``SMem<BM, BN>`` is ``SMem<128, 256>`` for BM = 128, BN = 256."""
    values = {key: template_argument(value) for key, value in params}
    return PARAM_NAME.sub(lambda match: values.get(match.group(), match.group()), text)


@functools.lru_cache(maxsize=1 << 14)
def _label(name: str, params: tuple) -> str:
    # Types are left out (the kernel's name and types: say them), and so is a template-id made of other params.
    shown = [(key, value) for key, value in params if not isinstance(value, str) or is_character_literal(value)
             or "<" in value and _with_params(value, params) == value]
    if not shown:
        return name
    return f"{name}[{','.join(f'{key}={_label_value(value)}' for key, value in shown)}]"


def _label_value(value: Any) -> str:
    return value.strip() if is_character_literal(value) else _compact(template_argument(value))


def is_character_literal(value: Any) -> bool:
    """True for a param's value that is a C character literal (``'N'``): passed as written, shown in the label."""
    return isinstance(value, str) and CHARACTER_LITERAL.fullmatch(value.strip()) is not None


def _compact(argument: str) -> str:
    return argument.replace(" ", "")


# `KernelSpec._kept`: by kernel id, (the kernel, its derived values by name); emptied past a sweep's worth.
_KEPT: dict[int, tuple[Any, dict[str, Any]]] = {}
_KEPT_KERNELS = 4096


@dataclass(frozen=True)
class KernelSpec:
    """One kernel configuration: everything needed to compile, plan and launch it for any shape."""

    name: str
    source: Path
    function: str
    params: Mapping[str, int | str]
    block: tuple[expr.Expression, ...]
    grid: tuple[expr.Expression, ...]
    shared_bytes: expr.Expression
    signature: tuple[Argument, ...]
    tile: tuple[expr.Expression, expr.Expression] | None = None
    require: tuple[expr.Expression, ...] = ()
    options: tuple[str, ...] = ()
    precision: str = "fp32"          # tf32: multiplies in TF32 (checked and compared as such)
    arch: str | None = None          # e.g. sm_90a: built for exactly this target (arch-specific instructions)
    launch_attributes: LaunchAttributeSpec | None = None   # cluster, PDL, cooperative: cuLaunchKernelEx
    operands: OperandSpec | None = None   # typed kernels (types, layout, ld, batch, scales); None: FP32, tight NN
    compiler: str = "nvrtc"          # nvrtc or nvcc: what builds `source`
    binary: Path | None = None       # a prebuilt .cubin/.fatbin/.ptx loaded as it is (then `source` is the same path)
    min_pct: float | None = None     # performance gate: each case must reach this % of cuBLAS (run --min-pct)
    epilogue: str | None = None      # overwrite (C = A @ B) or accumulate (C += A @ B): no alpha or beta taken
    rows_on: str | None = None       # x or y: the block index the kernel reads its row of C from; None: not said
    # The spec was read with --allow-outside-sources, so its headers may be outside too: how it was read, not
    # what it says, so it takes no part in comparing kernels.
    allow_outside_headers: bool = field(default=False, compare=False)
    # The tree the spec's sources must stay in (`project.project_root` of the spec's folder): its headers may be
    # anywhere in it too. None: the source's own project.
    project: Path | None = field(default=None, compare=False)
    # The kernel's entry as the spec wrote it (plain values, params as swept): what `tune` writes back
    # with the params of a winner, so that a winners spec describes the kernel with every field it had.
    entry: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    where: str = ""
    field_path: str = ""
    field_lines: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)
    # shared_bytes: sizeof(SMem<BM, BN>): the name its expression reads for each sizeof, with the type it sizes
    # as written (params by name), which the kernel's compiler sizes per configuration (planning.type_sizes).
    sizeofs: Mapping[str, str] = field(default_factory=dict)
    # Buffers of the case that are no parameter (pass: none), each with its field path: read through tensor maps.
    memory: tuple[tuple[str, "Argument"], ...] = ()
    # The names of `params` the spec gave under values: (numbers the launch reads, a block side its launcher
    # picks at run time): swept and labelled as params are, never template arguments.
    launch_values: frozenset[str] = frozenset()
    # The __constant__ variables written into the loaded module when a case is bound (typed scalars and arrays,
    # and tensor maps encoded for the case's buffers).
    constants: tuple[Argument, ...] = ()
    # The launches after the kernel's own in each case (then:), in order.
    then: tuple[FollowingLaunch, ...] = ()

    def __post_init__(self) -> None:
        # A copy changed with dataclasses.replace is checked too: the plan would otherwise meet a wrong kind deep
        # inside (a list of params as an unhashable key, a grid of text as an object with no evaluate).
        _check_kernel_fields(self)
        # Read-only: the derived values `_kept` holds are worked out once from them (`FrozenDict`). The entry is
        # left as written (nested lists and mappings, copied before tune writes it back): nothing is planned from it.
        freeze_fields(self, "params", "field_lines", "sizeofs")

    @property
    def sizeof_fields(self) -> tuple[str, ...]:
        """The launch fields whose expressions read a sizeof (where a type that cannot be sized is reported), in the
        order block, grid, shared_bytes: ``block[0]``, ``shared_bytes``."""
        return self.fields_reading(self.sizeofs)

    def fields_reading(self, names: Iterable[str]) -> tuple[str, ...]:
        """The launch fields (block, grid, shared_bytes, tile, require, then those of the launches of then:, in that
        order) whose expressions read any of `names`."""
        wanted = set(names)
        fields = [*(f"block[{axis}]" for axis, extent in enumerate(self.block)),
                  *(f"grid[{axis}]" for axis, extent in enumerate(self.grid)), "shared_bytes",
                  *(f"tile[{side}]" for side in range(len(self.tile or ()))),
                  *(f"require[{index}]" for index in range(len(self.require)))]
        extents = [*self.block, *self.grid, self.shared_bytes, *(self.tile or ()), *self.require]
        for launch in self.then:
            fields += [*(f"then[{launch.index}].block[{axis}]" for axis in range(len(launch.block))),
                       *(f"then[{launch.index}].grid[{axis}]" for axis in range(len(launch.grid))),
                       f"then[{launch.index}].shared_bytes"]
            extents += [*launch.block, *launch.grid, launch.shared_bytes]
        return tuple(name for name, extent in zip(fields, extents) if extent.names & wanted)

    def with_params(self, text: str) -> str:
        """`text` (a C++ type) with the names of the kernel's params put in their place: ``SMem<BM, BN>`` is
        ``SMem<128, 256>`` for BM = 128, BN = 256."""
        return put_params(text, self.params.items())

    @property
    def instance(self) -> str:
        """The C++ name expression NVRTC compiles: ``function`` or ``function<p1, p2>`` (values: left out)."""
        return self._kept("instance", lambda: _instance(self.function, tuple(
            (name, value) for name, value in self.params.items() if name not in self.launch_values)))

    def following_instance(self, launch: FollowingLaunch) -> str:
        """The C++ name expression of a following launch's function: as written, with the kernel's params put in
        the place of those its template-id names (``reduce<SPLITS>`` is ``reduce<4>``)."""
        return put_params(launch.function, self.params.items()) if "<" in launch.function else launch.function

    @property
    def instances(self) -> tuple[str, ...]:
        """Every function a case of this kernel launches, its own first: what its program compiles."""
        return (self.instance, *(self.following_instance(launch) for launch in self.then))

    def target(self, device_arch: str) -> str:
        """The architecture to compile for: the kernel's own ``arch`` when it names one, else the device's."""
        return self.arch or device_arch

    @property
    def label(self) -> str:
        """A readable id: ``v4[BM=64,BN=64,BK=16,TM=4,TN=4]``. Parameters that are C++ type names are left out:
        a typed kernel's name and ``types`` say them."""
        return self._kept("label", lambda: _label(self.name, tuple(self.params.items())))

    def _kept(self, name: str, make):
        """What `make` gives, made once per kernel: a plan asks for the same derived values once per shape, a
        million times in a large plan. Kept by the kernel's id beside the kernel itself (its fields are frozen, and
        `__dict__` stays the fields alone)."""
        found = _KEPT.get(id(self))
        if found is None or found[0] is not self:
            if len(_KEPT) >= _KEPT_KERNELS:
                _KEPT.clear()
            found = _KEPT[id(self)] = (self, {})
        values = found[1]
        if name not in values:
            values[name] = make()
        return values[name]

    def where_field(self, name: str) -> str:
        """``file:line`` of a field (``grid``, ``grid[1]``, ``signature[0].box``, a struct's
        ``signature[0].fields[1].box``: its nearest line); the kernel's own line if the field is absent."""
        parts = name.split(".")
        line = next((self.field_lines[prefix] for prefix in (".".join(parts[:end]) for end in range(len(parts), 0, -1))
                     if prefix in self.field_lines), None) or self.field_lines.get(name.split("[")[0])
        return f"{self.where.rsplit(':', 1)[0]}:{line}" if line else self.where

    def tensor_maps(self) -> tuple[tuple[int, Argument], ...]:
        """The (position, argument) of every ``tensormap`` argument of the signature, those inside a struct with
        the struct's position."""
        return tuple((position, argument) for position, _, argument in self.tensor_map_fields())

    def tensor_map_fields(self) -> tuple[tuple[int, str, Argument], ...]:
        """`tensor_maps` with each map's field path (``signature[0].fields[2]`` for one inside a struct)."""
        def fields():
            for path, argument in self.leaf_arguments():
                if argument.tensor_map is not None:
                    yield int(path.split("]", 1)[0].removeprefix("signature[")), path, argument
        return self._kept("tensor_map_fields", lambda: tuple(fields()))

    def encoded_tensor_maps(self) -> tuple[tuple[int | None, str, Argument], ...]:
        """Every tensor map a case encodes, with its position (None for a constant), field path and argument: those
        of the signature (`tensor_map_fields`), then those of ``constants:`` (``constants[1]``), which are written
        into the module's ``__constant__`` variables rather than passed."""
        constant_maps = tuple((None, f"constants[{index}]", constant) for index, constant in enumerate(self.constants)
                              if constant.tensor_map is not None)
        return self.tensor_map_fields() + constant_maps

    @property
    def is_typed(self) -> bool:
        """True for a kernel that declares its operands (types, layout, ld, batch): checked and timed as such."""
        return self.operands is not None

    @property
    def numeric_params(self) -> dict[str, int]:
        """The template parameters that are numbers (those expressions may use); C++ type names are left out."""
        return dict(self._kept("numeric_params", lambda: {name: value for name, value in self.params.items()
                                                          if not isinstance(value, str)}))

    def grid_or_signature_reads(self, name: str) -> bool:
        """True when a grid extent (the kernel's or a launch's of then:), an argument's or a constant's value or a
        device buffer's size or fill reads `name` (such as the clusters that fit, which only those may read)."""
        def names() -> frozenset[str]:
            read: set[str] = set()
            for expression in (*self.grid, *(extent for launch in self.then for extent in launch.grid)):
                read |= expression.names
            for constant in self.constants:
                for value in (constant.value, *constant.array):
                    if value is not None:
                        read |= value.names
            for _, argument in (*self.leaf_arguments(), *self.memory):
                buffer = argument.buffer
                for value in (argument.value, *argument.array, *((buffer.size, *buffer.values) if buffer else ())):
                    if value is not None:
                        read |= value.names
            return frozenset(read)
        return name in self._kept("grid_and_signature_names", names)

    def reads_c(self) -> bool:
        """True when the kernel reads C before writing it: it takes ``beta``, or its epilogue accumulates."""
        return self._kept("reads_c", lambda: self.epilogue == "accumulate"
                          or any(arg.name == "beta" for _, arg in self.leaf_arguments()))

    def epilogue_scalars(self) -> dict[str, float]:
        """The alpha and beta a kernel without them computes with: C = A @ B (overwrite) or C += A @ B
        (accumulate); empty for a kernel whose signature takes its scalars."""
        if self.epilogue == "overwrite":
            return {"alpha": 1.0, "beta": 0.0}
        if self.epilogue == "accumulate":
            return {"alpha": 1.0, "beta": 1.0}
        return {}

    def leaf_arguments(self) -> tuple[tuple[str, Argument], ...]:
        """Every value the kernel receives, with its field path: the signature's arguments, and the fields of
        its structs (of structs) in their place (``signature[2].fields[0].fields[1]``); then the arguments of the
        launches that follow it (``then[0].signature[1]``)."""
        return self._kept("leaf_arguments", self._leaf_arguments)

    def _leaf_arguments(self) -> tuple[tuple[str, Argument], ...]:
        leaves: list[tuple[str, Argument]] = []

        def add(path: str, argument: Argument) -> None:
            if argument.fields:
                for position, inner in enumerate(argument.fields):
                    add(f"{path}.fields[{position}]", inner)
            else:
                leaves.append((path, argument))

        for index, argument in enumerate(self.signature):
            add(f"signature[{index}]", argument)
        for launch in self.then:
            for index, argument in enumerate(launch.signature):
                add(f"then[{launch.index}].signature[{index}]", argument)
        return tuple(leaves)

    @property
    def builder_files(self) -> tuple[Path, ...]:
        """The Python files whose functions make the kernel's inputs: its parameters' builders and its buffers'
        (``fill: {builder: ...}``), each once, in signature order."""
        paths = [argument.builder.path for argument in self.signature if argument.builder is not None]
        paths += [argument.buffer.builder.path for _, argument in self.device_buffers()
                  if argument.buffer is not None and argument.buffer.builder is not None]
        return tuple(dict.fromkeys(paths))

    def device_buffers(self) -> tuple[tuple[str, Argument], ...]:
        """The (field path, argument) of every device buffer of the kernel's own (workspaces, scalars by
        pointer), wherever it is in the signature, and those passed to no parameter (`memory`)."""
        return self._kept("device_buffers", lambda: tuple(
            [(path, argument) for path, argument in self.leaf_arguments() if argument.buffer is not None]
            + list(self.memory)))


def _check_kernel_fields(kernel: KernelSpec) -> None:
    """`WrongArgumentType`/`WrongArgumentValue` naming the first field of `kernel` of a kind the reader never makes:
    what a copy changed with `dataclasses.replace` is held to (the reader's own kernels pass at once)."""
    def refuse(name: str, takes: str, value: Any) -> WrongArgumentType:
        return WrongArgumentType(f"KernelSpec.{name}: {takes}, got {value!r:.60} ({type(value).__name__})")

    if not isinstance(kernel.name, str):
        raise refuse("name", "a kernel name (a str)", kernel.name)
    if not is_safe_name(kernel.name):
        raise WrongArgumentValue(f"KernelSpec.name: a kernel name is letters, digits and . _ - + = , [ ] (not first "
                                 f"a dot), at most {MAX_NAME_CHARS} characters, got {kernel.name!r:.60}: names "
                                 "become file names and table labels")
    if not isinstance(kernel.function, str):
        raise refuse("function", "the kernel's function name (a str)", kernel.function)
    if not isinstance(kernel.source, Path):
        raise refuse("source", "the kernel source's path (a pathlib.Path)", kernel.source)
    if not isinstance(kernel.params, Mapping):
        raise refuse("params", "a mapping of each param's name to one value (such as {'TILE': 16})", kernel.params)
    for key, value in kernel.params.items():
        if not isinstance(key, str):
            raise refuse("params", "a mapping whose names are text", key)
        if isinstance(value, (list, tuple, Mapping, set)):
            raise WrongArgumentType(f"KernelSpec.params[{key!r}]: one configuration's value (a whole number, true "
                                    f"or false, or a C++ type name), got {value!r:.60}: a list sweeps only in a "
                                    "spec; make one copy per value")
        if not isinstance(value, (numbers.Integral, str)):
            raise refuse(f"params[{key!r}]", "a whole number, true or false, or a C++ type name", value)
    expressions = {"block": kernel.block, "grid": kernel.grid, "require": kernel.require}
    if kernel.tile is not None:
        expressions["tile"] = kernel.tile
    for name, extents in expressions.items():
        if not isinstance(extents, tuple) or not all(isinstance(extent, expr.Expression) for extent in extents):
            raise refuse(name, "a tuple of parsed expressions (driver_gemm.specfile.expr.parse('ceil(N / 16)'))",
                         extents)
    if kernel.shared_bytes is not None and not isinstance(kernel.shared_bytes, expr.Expression):
        raise refuse("shared_bytes", "a parsed expression (driver_gemm.specfile.expr.parse('0'))", kernel.shared_bytes)
    if not isinstance(kernel.signature, tuple) or not all(isinstance(item, Argument) for item in kernel.signature):
        raise refuse("signature", "a tuple of Argument", kernel.signature)
    if not isinstance(kernel.options, tuple) or not all(isinstance(option, str) for option in kernel.options):
        raise refuse("options", "a tuple of compiler options (str)", kernel.options)
    _check_kernel_settings(kernel, refuse)
    _check_kernel_parts(kernel, refuse)


def _check_kernel_settings(kernel: KernelSpec, refuse: Callable[[str, str, Any], WrongArgumentType]) -> None:
    """The words and numbers of `kernel` (precision, compiler, arch, epilogue, rows_on, min_pct) held to the spec
    reader's rules; min_pct is kept as a plain float, as the reader gives it."""
    for name, choices, optional in (("precision", PRECISIONS, False), ("compiler", COMPILERS, False),
                                    ("epilogue", EPILOGUES, True), ("rows_on", ROWS_ON, True)):
        value = getattr(kernel, name)
        if value is None and optional:
            continue
        if not isinstance(value, str):
            raise refuse(name, " or ".join(choices) + (" or None" if optional else ""), value)
        if value not in choices:
            raise WrongArgumentValue(f"KernelSpec.{name}: {' or '.join(choices)}"
                                     f"{' or None' if optional else ''}, got {value!r:.60}")
    if kernel.arch is not None:
        if not isinstance(kernel.arch, str):
            raise refuse("arch", "None (the GPU's own) or an architecture such as 'sm_90a'", kernel.arch)
        problem = arch_problem(kernel.arch)
        if problem is not None:
            message, hint = problem
            raise WrongArgumentValue(f"KernelSpec.arch: {message} ({hint})")
    if kernel.min_pct is not None:
        value = kernel.min_pct
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise refuse("min_pct", "None (no gate) or a number above 0, the % of cuBLAS each case must reach", value)
        if not math.isfinite(value):
            raise WrongArgumentValue(f"KernelSpec.min_pct: must be a finite number, got {value!r}")
        if not value > 0:
            raise WrongArgumentValue(f"KernelSpec.min_pct: {MIN_PCT_RULE}, got {value!r}")
        object.__setattr__(kernel, "min_pct", float(value))   # np.float64 or an int as the reader's float


def _check_kernel_parts(kernel: KernelSpec, refuse: Callable[[str, str, Any], WrongArgumentType]) -> None:
    """The parts of `kernel` that are objects of this module (or paths, text, flags) each of its kind."""
    for name, kind, takes in (("binary", Path, "None or the prebuilt binary's path (a pathlib.Path)"),
                              ("project", Path, "None or the project folder (a pathlib.Path)"),
                              ("launch_attributes", LaunchAttributeSpec, "None or a LaunchAttributeSpec"),
                              ("operands", OperandSpec, "None or an OperandSpec"),
                              ("entry", Mapping, "None or the kernel's entry as written (a mapping)")):
        value = getattr(kernel, name)
        if value is not None and not isinstance(value, kind):
            raise refuse(name, takes, value)
    object.__setattr__(kernel, "allow_outside_headers",
                       flag_argument("KernelSpec", "allow_outside_headers", kernel.allow_outside_headers))
    for name in ("where", "field_path"):
        if not isinstance(getattr(kernel, name), str):
            raise refuse(name, "text (the kernel's file:line, its field path), '' for none", getattr(kernel, name))
    if not isinstance(kernel.constants, tuple) or not all(isinstance(item, Argument) for item in kernel.constants):
        raise refuse("constants", "a tuple of Argument (the __constant__ variables' values)", kernel.constants)
    if not isinstance(kernel.then, tuple) or not all(isinstance(item, FollowingLaunch) for item in kernel.then):
        raise refuse("then", "a tuple of FollowingLaunch (the launches after the kernel's own)", kernel.then)
    if not isinstance(kernel.memory, tuple) or not all(
            isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], Argument)
            and item[1].buffer is not None for item in kernel.memory):
        raise refuse("memory", "a tuple of (field path, Argument with a buffer) pairs: the buffers passed to no "
                     "parameter", kernel.memory)
    if not isinstance(kernel.launch_values, (frozenset, set)) or not all(
            isinstance(name, str) for name in kernel.launch_values):
        raise refuse("launch_values", "a frozenset of the names of params given under values:",
                     kernel.launch_values)
    if not isinstance(kernel.sizeofs, Mapping) or not all(
            isinstance(name, str) and isinstance(text, str) for name, text in kernel.sizeofs.items()):
        raise refuse("sizeofs", "a mapping of each sizeof's name to the type it sizes (text)", kernel.sizeofs)


def _check_spec_fields(spec: Spec) -> None:
    """As `_check_kernel_fields`, for a whole `Spec`: its kernels (each label once, as the reader requires), shapes
    and settings."""
    def refuse(name: str, takes: str, value: Any) -> WrongArgumentType:
        return WrongArgumentType(f"Spec.{name}: {takes}, got {value!r:.60} ({type(value).__name__})")

    if not isinstance(spec.name, str):
        raise refuse("name", "the spec's name (a str)", spec.name)
    for name in ("kernels", "shapes"):   # a list is taken as the tuple it would be
        if isinstance(getattr(spec, name), list):
            object.__setattr__(spec, name, tuple(getattr(spec, name)))
    if not isinstance(spec.kernels, tuple) or not all(isinstance(kernel, KernelSpec) for kernel in spec.kernels):
        raise refuse("kernels", "a tuple of KernelSpec", spec.kernels)
    labels: set[str] = set()
    for kernel in spec.kernels:
        if kernel.label in labels:
            raise WrongArgumentValue(f"Spec.kernels: kernel {kernel.label} appears twice; give one a different name "
                                     "(dataclasses.replace(kernel, name=...))")
        labels.add(kernel.label)
    if not isinstance(spec.shapes, tuple) or not all(isinstance(shape, Shape) for shape in spec.shapes):
        raise refuse("shapes", "a tuple of Shape(M, N, K)", spec.shapes)
    if not isinstance(spec.measure, MeasureSettings):
        raise refuse("measure", "a MeasureSettings", spec.measure)
    if not isinstance(spec.verify, VerifySettings):
        raise refuse("verify", "a VerifySettings", spec.verify)
    object.__setattr__(spec, "baseline", flag_argument("Spec", "baseline", spec.baseline))
    if not isinstance(spec.scalars, Mapping) or not all(
            isinstance(name, str) and isinstance(value, numbers.Real) and not isinstance(value, bool)
            for name, value in spec.scalars.items()):
        raise refuse("scalars", "a mapping of names to numbers (such as {'alpha': 1.0, 'beta': 0.0})", spec.scalars)
    if spec.written_scalars is not None and not (isinstance(spec.written_scalars, frozenset) and all(
            isinstance(name, str) for name in spec.written_scalars)):
        raise refuse("written_scalars", "None or a frozenset of the names of scalars the spec wrote",
                     spec.written_scalars)


# What the spec reader takes for ``measure:`` and ``verify:``, and what a rig's own settings are held to.
MEASURE_MODES = ("events", "graph")
MAX_ROUNDS = 100          # measure.rounds: each round takes at least a few samples of both sides
REFERENCES = ("auto", "cpu", "cublas")


@dataclass(frozen=True)
class MeasureSettings:
    """How samples are taken (nvbench's cold-measurement recipe; defaults follow it)."""

    warmup: int = 3
    min_samples: int = 10
    max_samples: int = 100_000
    max_noise: float = 0.005
    min_time_s: float = 0.5
    timeout_s: float = 3.0
    flush_l2: bool = True
    case_timeout_s: float = 300.0     # a case still running after this is stopped (isolated runs only)
    mode: str = "events"              # events: one launch per sample; graph: a CUDA graph of graph_launches
    graph_launches: int = 20          # launches captured in the graph of graph mode (per-launch time = sample / this)
    samples: str = "flush"            # what runs between samples (`sample_patterns.SamplePattern`): flush, do-bench...
    rounds: int = 1                   # > 1: each kernel timed in this many rounds alternating with its vendor row

    def __post_init__(self):
        # What the spec reader refuses, refused for a rig that builds the settings itself: a setting the run only
        # compares with one value (mode == "graph") would otherwise quietly mean the other.
        owner = "MeasureSettings"
        _whole_number(owner, self, 0, "warmup")
        _whole_number(owner, self, 1, "min_samples", "graph_launches")
        _whole_number(owner, self, 1, "rounds", highest=MAX_ROUNDS)
        _whole_number(owner, self, 0, "max_samples")
        _finite_number(owner, self, "max_noise", "min_time_s", "timeout_s", "case_timeout_s")
        object.__setattr__(self, "flush_l2", flag_argument(owner, "flush_l2", self.flush_l2))   # np.bool_: a bool
        _one_of(owner, self, "mode", MEASURE_MODES)
        if self.max_samples < self.min_samples:
            raise WrongArgumentValue(f"MeasureSettings.max_samples: {self.max_samples} is below min_samples "
                                     f"({self.min_samples})")
        if not self.case_timeout_s > 0:
            raise WrongArgumentValue(f"MeasureSettings.case_timeout_s: above 0 seconds, got "
                                     f"{self.case_timeout_s!r}")
        if not isinstance(self.samples, str):
            raise WrongArgumentType(f"MeasureSettings.samples: text, got {type(self.samples).__name__}")
        try:
            pattern = SamplePattern.parse(self.samples)
        except ValueError as exc:
            raise WrongArgumentValue(f"MeasureSettings.samples: {exc}") from None
        if self.mode == "graph" and pattern.label != "flush":
            raise WrongArgumentValue(f"MeasureSettings.samples: graph mode replays its launches back to back: it "
                                     f"takes samples='flush' only, got {self.samples!r}")

    @property
    def pattern(self) -> SamplePattern:
        """`samples` read (`sample_patterns.SamplePattern.parse`)."""
        return SamplePattern.parse(self.samples)


def _whole_number(owner: str, settings, low: int, *names: str, highest: int = INT64_MAX) -> None:
    """`WrongArgumentType` for the first of `names` that is no whole number, `WrongArgumentValue` for one outside
    `low` to `highest`; NumPy's whole numbers are kept as plain ones (a results file writes the settings)."""
    for name in names:
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise WrongArgumentType(f"{owner}.{name}: a whole number, got {type(value).__name__} {value!r:.40}")
        number = int(value)
        if not low <= number <= highest:
            highest_text = f" and at most {highest}" if number > highest else ""
            raise WrongArgumentValue(f"{owner}.{name}: at least {low}{highest_text}, got {number}")
        object.__setattr__(settings, name, number)


def _finite_number(owner: str, settings, *names: str) -> None:
    """As `_whole_number` for finite numbers of at least 0 (NaN and infinity never are)."""
    for name in names:
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise WrongArgumentType(f"{owner}.{name}: a number, got {type(value).__name__} {value!r:.40}")
        # NumPy's numbers as plain ones (np.float64 is a float, and would keep its type and repr)
        number = int(value) if isinstance(value, numbers.Integral) else float(value)
        if isinstance(number, int) and number > INT64_MAX:   # the spec reader's bound on a whole number
            raise WrongArgumentValue(f"{owner}.{name}: {number} does not fit a 64-bit integer")
        if not number >= 0:
            raise WrongArgumentValue(f"{owner}.{name}: at least 0, got {number!r}")
        if not math.isfinite(number):
            raise WrongArgumentValue(f"{owner}.{name}: a finite number, got {number!r}")
        object.__setattr__(settings, name, number)


def _one_of(owner: str, settings, name: str, choices: tuple[str, ...]) -> None:
    """`WrongArgumentType` where setting `name` is not text, a `WrongArgumentValue` where it is none of `choices`."""
    value = getattr(settings, name)
    if not isinstance(value, str):
        raise WrongArgumentType(f"{owner}.{name}: one of {', '.join(choices)}, got {type(value).__name__}")
    if value not in choices:
        raise WrongArgumentValue(f"{owner}.{name}: one of {', '.join(choices)}, got {value!r}")


# A relative error of 1 is what a C of zeros has: a tolerance of 1 or more passes a kernel that writes zeros, unless an
# absolute bound checks the elements instead. The spec reader's ``verify:`` and `VerifySettings` both ask this.
ZEROS_PASS_HINT = "for instance 1.0e-3; or bound the absolute error alone with {rel: 1.0, abs: ...}"


def zeros_pass(relative: float, absolute: float | None) -> str | None:
    """Why a relative tolerance `relative` (with the absolute one, `absolute`) cannot check a kernel, or None."""
    if relative >= 1 and absolute is None:
        return (f"a relative error of {relative:g} allowed passes a kernel that writes zeros (whose relative error "
                "is 1): a relative tolerance is below 1")
    return None


@dataclass(frozen=True)
class VerifySettings:
    """How results are checked against a float64 reference."""

    # None: the kernel's own (`measure.reference.tolerance` for untyped kernels, `dtypes.error_bound` for typed ones)
    rel_tolerance: float | None = None
    abs_tolerance: float | None = None
    # TF32 rounds each input to 10 mantissa bits (unit roundoff 2^-11 ~ 4.9e-4): a K-long dot
    # product of such inputs is off by ~4e-4 relative to the exact one; 2e-3 leaves a factor of 5.
    tf32_rel_tolerance: float = 2e-3
    seed: int = 2026
    reference: str = "auto"           # auto | cpu | cublas
    cpu_reference_max_gflop: float = 40.0   # above this, "auto" checks against cuBLAS instead of NumPy

    def __post_init__(self):
        # What the spec reader refuses, refused for a rig that builds the settings itself: an unknown reference
        # would otherwise quietly mean auto.
        owner = "VerifySettings"
        _finite_number(owner, self, "tf32_rel_tolerance", "cpu_reference_max_gflop")
        for name in ("rel_tolerance", "abs_tolerance"):
            if getattr(self, name) is not None:
                _finite_number(owner, self, name)
        _whole_number(owner, self, 0, "seed")
        _one_of(owner, self, "reference", REFERENCES)
        for name in ("rel_tolerance", "tf32_rel_tolerance"):
            relative = getattr(self, name)
            problem = zeros_pass(relative, self.abs_tolerance) if relative is not None else None
            if problem:
                raise WrongArgumentValue(f"{owner}.{name}: {problem} (hint: for instance 1.0e-3; or bound the "
                                         "absolute error alone with abs_tolerance=...)")


@dataclass(frozen=True)
class Spec:
    """A whole spec file: kernels x shapes, with measurement and verification settings."""

    path: Path | None
    name: str
    description: str
    kernels: tuple[KernelSpec, ...]
    shapes: tuple[Shape, ...]
    measure: MeasureSettings = MeasureSettings()
    verify: VerifySettings = VerifySettings()
    baseline: bool = True
    scalars: Mapping[str, float] = field(default_factory=lambda: {"alpha": 1.0, "beta": 0.0})
    dispatch: Mapping = field(default_factory=dict)    # kernel name -> spec.dispatch.DispatchTable
    # The names of `scalars` the spec's file wrote (the rest are the built-in alpha = 1, beta = 0); None where not
    # known (a Spec made in code), where a value equal to the built-in default is taken as none of the spec's.
    written_scalars: frozenset[str] | None = None

    def __post_init__(self) -> None:
        _check_spec_fields(self)   # a copy changed with dataclasses.replace too
        # The values the spec reader holds shapes and scalars to, held here too (a copy changed with
        # dataclasses.replace, a Spec made in code): a shape given twice is kept once, as the reader and `select` keep
        # it (its cases would run and be recorded twice, which no results file holds), a dimension stays within
        # MAX_DIMENSION (what a results file holds), and a scalar is finite (a NaN alpha checks against NaN).
        object.__setattr__(self, "shapes", tuple(dict.fromkeys(self.shapes)))
        for index, shape in enumerate(self.shapes):
            if max(shape.M, shape.N, shape.K) > MAX_DIMENSION:
                raise WrongArgumentValue(f"Spec.shapes[{index}]: shape {shape.label} has a dimension above "
                                         f"{MAX_DIMENSION:,} (MAX_DIMENSION)")
        for name, value in self.scalars.items():
            if not isinstance(value, numbers.Integral) and not math.isfinite(value):   # a whole number always is
                raise WrongArgumentValue(f"Spec.scalars.{name}: must be a finite number, got {value}")
        freeze_fields(self, "scalars", "dispatch")

    @property
    def dispatch_members(self) -> frozenset[str]:
        """Names of the kernels that run only through another kernel's table: those its entries name, where that
        kernel is in the spec (`specfile.dispatch`)."""
        present = {k.name for k in self.kernels}
        return frozenset(member for name, table in self.dispatch.items() if name in present
                         for member in table.members)

    def with_members(self, chosen: Iterable[KernelSpec]) -> tuple[KernelSpec, ...]:
        """`chosen`, with the members of their dispatch tables (in spec order): a family runs with its members."""
        kept = {id(k) for k in chosen}
        names = {k.name for k in self.kernels if id(k) in kept}
        members = {m for name in names if name in self.dispatch for m in self.dispatch[name].members} - names
        return tuple(k for k in self.kernels if id(k) in kept or k.name in members)

    @property
    def file_stem(self) -> str:
        """The spec's name made safe for a file name (``results/STEM-TIMESTAMP.json``)."""
        return self.name if is_safe_name(self.name) else safe_file_stem(self.name)

    def select(self, kernels: str | Iterable[str] = (),
               shapes: str | Shape | Iterable[str | Shape | tuple[int, int, int]] = (), *,
               fields: tuple[str, str] = ("Spec.select: kernels", "Spec.select: shapes")) -> "Spec":
        """A copy restricted to the kernels named (by name or label; one name may be given as a str), with the shapes
        given in place of the spec's (MxNxK text, `Shape`s or (M, N, K) tuples, any shape, not only the spec's own;
        one may be given alone). `fields` name the two arguments in errors: the command line passes its options
        (``("--kernel", "--shape")``)."""
        kernel_field, shape_field = fields
        names = _selected_names(kernels, kernel_field)
        chosen = self.kernels
        if names:
            known = {k.name for k in self.kernels} | {k.label for k in self.kernels}
            unknown = [k for k in names if k not in known and k != "cublas"]
            if unknown:
                # Shown escaped where a name holds a character that does not print (an escape sequence would act
                # on the terminal), and cut where it is long.
                shown = [k if k.isprintable() else ascii(k) for k in unknown[:5]]
                named = ", ".join(k if len(k) <= 60 else k[:57] + "..." for k in shown)
                raise SpecError(f"no kernel named {named} in this spec "
                                f"(has {', '.join(sorted({k.name for k in self.kernels}))})",
                                where=str(self.path or self.name), field=kernel_field)
            chosen = self.with_members(k for k in self.kernels if k.name in names or k.label in names)
        chosen_shapes = self.shapes
        wanted = _selected_shapes(shapes, shape_field)
        if wanted:
            if len(wanted) * max(len(chosen), 1) > MAX_CASES:
                raise SpecError(f"{len(wanted):,} shapes x {len(chosen):,} kernels is more than the limit of "
                                f"{MAX_CASES:,} cases", field=shape_field)
            chosen_shapes = tuple(dict.fromkeys(_selected_shape(item, shape_field) for item in wanted))
        return dataclasses.replace(self, kernels=chosen, shapes=chosen_shapes)

    def with_measure(self, **changes: Any) -> "Spec":
        """A copy whose measurement settings have `changes` (a command line's overrides of ``measure:``)."""
        return dataclasses.replace(self, measure=dataclasses.replace(self.measure, **changes))


def _selected_names(kernels: object, field: str) -> list[str]:
    """`Spec.select`'s kernels as a list of names: one str is one name (read as a list, "v4" would be v and 4)."""
    if isinstance(kernels, str):
        return [kernels]
    if not isinstance(kernels, Iterable) or isinstance(kernels, (bytes, Mapping)):
        raise WrongArgumentType(f"{field}: a kernel's name or a list of names, got {kernels!r:.40} "
                                f"({type(kernels).__name__})")
    try:
        names = list(kernels)
    except TypeError:   # iterable in name only, as a 0-d NumPy array is
        raise WrongArgumentType(f"{field}: a kernel's name or a list of names, got {kernels!r:.40} "
                                f"({type(kernels).__name__})") from None
    wrong = [name for name in names if not isinstance(name, str)]
    if wrong:
        raise WrongArgumentType(f"{field}: kernels' names (str), got {wrong[0]!r:.40} ({type(wrong[0]).__name__})")
    return names


def _selected_shapes(shapes: object, field: str) -> list:
    """`Spec.select`'s shapes as a list: one MxNxK text, `Shape` or (M, N, K) tuple is one shape (read as a list,
    "1x1x1" would be three shapes "1", "x" and "1")."""
    if isinstance(shapes, (str, Shape)) or (isinstance(shapes, tuple) and len(shapes) == 3
                                            and all(isinstance(n, numbers.Integral) for n in shapes)):
        return [shapes]
    if not isinstance(shapes, Iterable) or isinstance(shapes, (bytes, Mapping)):
        raise WrongArgumentType(f"{field}: shapes (MxNxK text, Shape(M, N, K) or (M, N, K)) or a list of them, got "
                                f"{shapes!r:.40} ({type(shapes).__name__})")
    try:
        return list(shapes)
    except TypeError:   # iterable in name only, as a 0-d NumPy array is
        raise WrongArgumentType(f"{field}: shapes (MxNxK text, Shape(M, N, K) or (M, N, K)) or a list of them, got "
                                f"{shapes!r:.40} ({type(shapes).__name__})") from None


def _selected_shape(item: object, field: str) -> Shape:
    """One shape `Spec.select` was given, as a `Shape`; a mistake is a `SpecError` (text) or a wrong argument, at
    `field`."""
    if isinstance(item, Shape):
        return item
    if isinstance(item, str):
        try:
            return parse_shape_text(item)
        except SpecError as exc:
            raise SpecError(exc.message, where=exc.where, field=field, hint=exc.hint) from None
    if isinstance(item, (tuple, list)) and len(item) == 3:
        try:
            return Shape(*item)
        except (WrongArgumentType, WrongArgumentValue) as exc:
            raise type(exc)(f"{field}: {exc}") from None
    raise WrongArgumentType(f"{field}: a shape is MxNxK text, Shape(M, N, K) or (M, N, K), got {item!r:.40} "
                            f"({type(item).__name__})")


def parse_shape_text(text: str) -> Shape:
    """Parse ``1024x512x1024`` (or with ``*`` or ``,``) into a `Shape`; a `SpecError` names what is wrong."""
    if not isinstance(text, str) or len(text) > 100:
        raise SpecError(f"shape {str(text)[:40]!r} is not MxNxK with three whole numbers", field="--shape")
    parts = text.strip().lower().replace("*", "x").replace(",", "x").split("x")
    if len(parts) != 3 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise SpecError(f"shape {text!r} is not MxNxK with three whole numbers", field="--shape")
    M, N, K = (int(p) for p in parts)
    if min(M, N, K) < 1:
        raise SpecError(f"shape {text!r} has a dimension below 1", field="--shape")
    if max(M, N, K) > MAX_DIMENSION:
        raise SpecError(f"shape {text!r} has a dimension above {MAX_DIMENSION:,} (MAX_DIMENSION)", field="--shape")
    return Shape(M, N, K)
