"""A kernel's own device buffers on one shape: their sizes evaluated, their contents worked out.

A ``buffer`` argument of the signature (`specfile.model.DeviceBufferArgument`) becomes a
`BufferPlan` per case: its element count from its size expression, its bytes before every launch
(`initial_bytes`), and, when those bytes are one 32-bit word repeated (zero, or a constant of a
4-byte type), that word, so that the reset before each sample is one ``cuMemsetD32Async``
instead of a copy. A buffer filled from a ``.npy`` file reads the file its name gives for the shape, and
holds its array converted to the buffer's element, every value checked to fit. A buffer of block scales holds
a factor per block of A or B (`ScaleGrid`), drawn per shape, which the reference applies too; a bias buffer holds a
value per column (or row) of C (`BiasVector`), drawn per shape at the scale of C's elements. No GPU. How the
reset stays out of the timed region: docs/timing.md.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..argtypes import C_TYPES, bfloat16_bits, fits_float
from ..errors import DriverGemmError
from ..gemm.dtypes import INTEGER_DRAW_LIMIT, ElementType, encode_scale_factors, round_to
from ..gemm.groups import METADATA as GROUP_METADATA, GemmGroups, GroupsError
from ..results.text import printable, shortened
from ..specfile import expr
from ..specfile.device_buffers import FILE_FIELD
from ..specfile.limits import MAX_BUFFER_BYTES
from ..specfile.model import BlockScales, DeviceBufferArgument, KernelSpec
from ..specfile.project import UNENCODABLE_HINT, unencodable
from ..specfile.quantized import codes_of, quantized_parts
from .host_builders import BuilderFailed, built_numbers
from .quantized_layouts import (CODEBOOK_SCALE_EXPONENTS, PLAN_DRAW_ELEMENTS, QUANTIZED_SCALE_EXPONENTS,
                                QuantizedDraw, QuantizedPart, draw_quantized)
from .tensor_scales import product_alpha

# The NumPy type of each element a buffer may hold (little-endian, as the GPU reads it).
NUMPY_ELEMENTS = {"int32": "<i4", "uint32": "<u4", "int64": "<i8", "uint64": "<u8", "float32": "<f4",
                  "float64": "<f8", "int8": "i1", "uint8": "u1", "int16": "<i2", "uint16": "<u2", "bool": "?",
                  "float16": "<f2", "bfloat16": "<u2"}     # bfloat16 as its bits (`argtypes.bfloat16_bits`)


# The largest whole number up to which every whole number is exact in a floating type: an iota past it repeats.
EXACT_WHOLE_NUMBERS = {"float16": 2**11, "bfloat16": 2**8, "float32": 2**24, "float64": 2**53}


# The factors a buffer of block scales holds are 2^e for e drawn from this range: exact in every floating type, so
# the float64 reference scales A and B exactly, and wide enough that a factor applied to the wrong block shows.
SCALE_EXPONENTS = (-3, 3)


@dataclass(frozen=True)
class ScaleGrid:
    """The factors of a buffer of block scales on one shape: a `rows` x `cols` grid of blocks of `block_rows` x
    `block_cols` elements over A (M x K) or B (K x N), stored in `order` with leading dimension `ld`; factor
    (i, j) is 2 ** exponents[i * cols + j]. Every other element of the buffer holds NaN, so that a kernel that
    reads a factor from the wrong place makes C wrong where it is checked. `storage` (``ue8m0``, ``e4m3``) stores
    each factor in a byte of that format (None: as the buffer's floating element)."""

    operand: str
    block_rows: int
    block_cols: int
    rows: int
    cols: int
    order: str
    ld: int
    exponents: bytes
    storage: str | None = None

    def offsets(self) -> np.ndarray:
        """Each factor's element offset in the buffer, as a rows x cols grid."""
        row, col = np.meshgrid(np.arange(self.rows), np.arange(self.cols), indexing="ij")
        return row * self.ld + col if self.order == "row" else col * self.ld + row

    @property
    def reach(self) -> int:
        """The elements the buffer needs: one past the furthest factor."""
        return (self.rows - 1) * self.ld + self.cols if self.order == "row" else (self.cols - 1) * self.ld + self.rows

    def factors(self) -> np.ndarray:
        """The grid of factors (float64)."""
        exponents = np.frombuffer(self.exponents, dtype=np.int8).reshape(self.rows, self.cols)
        return np.ldexp(1.0, exponents.astype(np.int64))

    def applied(self, values: np.ndarray) -> np.ndarray:
        """A copy of `values` (... x rows x cols of the operand) with each element multiplied by its block's factor,
        a column of blocks at a time, so that no array of the operand's size is made besides the copy."""
        scaled = np.array(values, dtype=np.float64)
        factors = self.factors()
        rows = scaled.shape[-2]
        for column in range(self.cols):
            per_row = np.repeat(factors[:, column], self.block_rows)[:rows, None]
            scaled[..., :, column * self.block_cols:(column + 1) * self.block_cols] *= per_row
        return scaled

    def describe(self) -> str:
        """The grid in one line, as `plan` prints it."""
        return (f"a factor per {self.block_rows} x {self.block_cols} block of {self.operand.upper()}: "
                f"{self.rows} x {self.cols}, {self.order} order, ld {self.ld}"
                + (f", stored as {self.storage}" if self.storage else ""))

    def as_dict(self) -> dict:
        return {"of": self.operand.upper(), "block": [self.block_rows, self.block_cols], "grid": [self.rows, self.cols],
                "order": self.order, "ld": self.ld, **({"stored": self.storage} if self.storage else {})}


# A bias holds multiples of 1/16 in [-1, 1] times 2^e, e chosen per shape so that the bias is as large as C's
# elements (`bias_exponent`): a bias much smaller than C hides under the tolerance of a long K (fp8 inputs, an fp16
# accumulator), where a kernel that leaves it out would pass.
BIAS_STEPS = 16
# The range of e: every (i / 16) * 2^e, i from -16 to 16, is then 0 or a normal fp16 number (2^-14 up to 2^15) of at
# most 5 significant bits, exact in every floating type a bias is stored in (fp16, bf16, fp32, fp64).
BIAS_EXPONENTS = (-10, 15)


@dataclass(frozen=True)
class BiasVector:
    """The values of a bias buffer on one shape: `steps[i] / BIAS_STEPS * 2 ** exponent` added to every element of
    column i of C (`along` ``N``) or of row i (``M``); the buffer's elements past them hold NaN."""

    along: str
    steps: bytes
    exponent: int = 0

    def values(self) -> np.ndarray:
        return np.ldexp(np.frombuffer(self.steps, dtype=np.int8).astype(np.float64) / BIAS_STEPS, self.exponent)

    def added(self, product: np.ndarray) -> np.ndarray:
        """`product` (batch x M x N) with the bias added, in place."""
        values = self.values()
        product += values[None, None, :] if self.along == "N" else values[None, :, None]
        return product

    def describe(self) -> str:
        return f"a value per {'column' if self.along == 'N' else 'row'} of C, {len(self.steps)} of them"


@dataclass(frozen=True)
class BufferPlan:
    """One device buffer of a case: `count` elements of `element`, holding `fill` (zero, iota, or `values`
    repeated) before the case's launches and, unless `read_only`, before every sample."""

    name: str
    element: str
    count: int
    fill: str
    values: tuple[float | int, ...] = ()
    read_only: bool = False        # alpha or beta by pointer: set once per case, never written by the kernel
    data: bytes = b""              # fill "file", "built", "groups": the array's bytes as the element type lays them out
    # fill "file": the file they came from; "built": the builder (FILE.py:FUNCTION); "groups": what they say
    source: str = ""
    grid: ScaleGrid | None = None  # fill "scales": where each factor is, and its value
    bias: BiasVector | None = None  # fill "bias": the values the reference adds to C
    quantized: QuantizedPart | None = None   # fill "quantized": a part of a quantized B, from the drawn values

    @property
    def nbytes(self) -> int:
        return self.count * C_TYPES[self.element].size

    def initial_bytes(self, draw: QuantizedDraw | None = None) -> np.ndarray:
        """Its contents before a launch, as the bytes to upload; a part of a quantized B laid out from `draw`, the
        values the case drew B from (`QuantizedFillFailed` where its builder fails or returns the wrong numbers)."""
        dtype = np.dtype(NUMPY_ELEMENTS[self.element])
        if self.quantized is not None:
            if draw is None:
                raise QuantizedFillFailed(self.name, "a part of a quantized B is laid out from the values "
                                                     "driver-gemm draws B from, and this run drew none")
            try:
                return _quantized_bytes(self, self.quantized, draw)
            except BuilderFailed as failed:
                raise QuantizedFillFailed(self.name, str(failed), failed.hint) from None
        if self.fill == "zero":
            return np.zeros(self.nbytes, dtype=np.uint8)
        if self.fill in ("file", "built", "groups"):
            return np.frombuffer(self.data, dtype=np.uint8).copy()
        if self.fill in ("scales", "bias"):
            contents = np.full(self.count, np.nan)
            if self.grid is not None:
                contents[self.grid.offsets()] = self.grid.factors()
            if self.bias is not None:
                contents[:len(self.bias.steps)] = self.bias.values()
            if self.grid is not None and self.grid.storage is not None:    # a byte a factor, NaN its own code
                return encode_scale_factors(contents, self.grid.storage).view(np.uint8)
            if self.element == "bfloat16":     # 8 significant bits and NaN: exact in the top half of a float32
                return (contents.astype("<f4").view("<u4") >> 16).astype("<u2").view(np.uint8)
            return contents.astype(dtype).view(np.uint8)
        if self.element == "bfloat16":
            pattern = _bfloat16_words(range(self.count) if self.fill == "iota" else self.values)
            return np.resize(pattern, self.count).view(np.uint8)
        if self.fill == "iota":
            return np.arange(self.count, dtype=dtype).view(np.uint8)
        pattern = np.array(self.values, dtype=dtype)
        return np.resize(pattern, self.count).view(np.uint8)

    def repeated_word(self) -> int | None:
        """The 32-bit word its contents repeat, when they are one (reset with a memset); else None."""
        if self.fill == "zero":
            return 0
        if self.fill != "values" or len(set(self.values)) != 1:   # a quantized part's too: drawn per case
            return None
        size = C_TYPES[self.element].size
        if size != 4:
            return None
        return struct.unpack("<I", np.array(self.values[:1], dtype=NUMPY_ELEMENTS[self.element]).tobytes())[0]

    def as_dict(self) -> dict:
        fill = {"values": list(self.values[:8]), "file": {"file": self.source}, "built": {"builder": self.source},
                "groups": {"groups": self.source},
                "scales": {"scales": self.grid.as_dict() if self.grid else None},
                "bias": {"bias": self.bias.along if self.bias else None},
                "quantized": {"quantized": self.quantized.describe() if self.quantized else None}
                }.get(self.fill, self.fill)
        return {"name": self.name, "element": self.element, "count": self.count, "bytes": self.nbytes,
                "fill": fill}


def drawn_bias(plans: Iterable[BufferPlan]) -> BiasVector | None:
    """The bias among a case's buffer `plans` (a kernel takes one at most), None without one."""
    return next((plan.bias for plan in plans if plan.bias is not None), None)


def plan_buffers(kernel: KernelSpec, env: dict, argument_values: dict, problem,
                 groups: GemmGroups | None = None) -> dict[str, BufferPlan]:
    """The `BufferPlan` of every device buffer of `kernel` on the shape of `env`, by argument name; a size
    that does not evaluate, is below 1, or exceeds `MAX_BUFFER_BYTES`, or a value that does not fit, is
    reported through `problem(message, field)` and the buffer left out. alpha and beta by pointer take
    their values from `argument_values` (fp8 scales folded into alpha there); a buffer of the groups' metadata,
    from the case's `groups`."""
    plans: dict[str, BufferPlan] = {}
    for path, argument in kernel.device_buffers():
        buffer = argument.buffer
        try:
            count = buffer.size.evaluate_int(env)
        except expr.ExpressionError as exc:
            problem(f"buffer {argument.name}: size {buffer.size.source!r}: {exc}", f"{path}.size")
            continue
        element = C_TYPES[buffer.element]
        if count < 1 or count * element.size > MAX_BUFFER_BYTES:
            problem(f"buffer {argument.name} of {count:,} {buffer.element} elements ({buffer.size.source!r}) must "
                    f"hold 1 element to {MAX_BUFFER_BYTES:,} bytes", f"{path}.size")
            continue
        if argument.name in ("alpha", "beta") and argument.name in argument_values:
            values: tuple = (argument_values[argument.name],)
        else:
            try:
                values = tuple(value.evaluate(env) for value in buffer.values)
            except expr.ExpressionError as exc:
                problem(f"buffer {argument.name}: {exc}", f"{path}.fill")
                continue
            unfit = next((value for value in values if not _fits(buffer.element, value)), None)
            if unfit is not None:
                problem(f"buffer {argument.name}: fill holds {unfit:g} on this shape, which {buffer.element} cannot "
                        "hold", f"{path}.fill")
                continue
        if buffer.fill == "file":
            try:
                source, data = _file_contents(buffer, env, count)
            except _Refused as refused:
                problem(f"buffer {argument.name}: {refused}", f"{path}.fill.file")
                continue
            plans[argument.name] = BufferPlan(argument.name, buffer.element, count, "file", (), buffer.read_only,
                                              data, source)
            continue
        if buffer.fill == "built":
            try:
                data = _built_contents(buffer, env, count)
            except (_Refused, BuilderFailed) as refused:
                problem(f"buffer {argument.name}: {refused}", f"{path}.fill.builder",
                        getattr(refused, "hint", None))
                continue
            plans[argument.name] = BufferPlan(argument.name, buffer.element, count, "built", (), buffer.read_only,
                                              data, buffer.builder.text)
            continue
        if buffer.groups is not None:
            try:
                data = _group_metadata(buffer, groups, count)
            except _Refused as refused:
                problem(f"buffer {argument.name}: {refused}", f"{path}.groups")
                continue
            plans[argument.name] = BufferPlan(argument.name, buffer.element, count, "groups", (), True, data,
                                              buffer.groups)
            continue
        if buffer.scales is not None:
            try:
                grid = _scale_grid(buffer.scales, env, count)
            except _Refused as refused:
                problem(f"buffer {argument.name}: {refused}", f"{path}.scales")
                continue
            plans[argument.name] = BufferPlan(argument.name, buffer.element, count, "scales", grid=grid)
            continue
        if buffer.quantized is not None:
            try:
                part = _quantized_part(kernel, buffer, env, count)
            except _Refused as refused:
                problem(f"buffer {argument.name}: {refused}", f"{path}.quantized")
                continue
            plans[argument.name] = BufferPlan(argument.name, buffer.element, count, "quantized", read_only=True,
                                              quantized=part)
            if part.builder is not None:
                failed = checked_pack_builder(plans[argument.name], part)
                if failed is not None:
                    problem(f"buffer {argument.name}: {failed}", f"{path}.quantized.pack.builder", failed.hint)
            continue
        if buffer.bias is not None:
            length = env[buffer.bias]
            if count < length:
                problem(f"buffer {argument.name}: holds {count:,} elements, but a bias along {buffer.bias} needs "
                        f"{length:,} (a value per {'column' if buffer.bias == 'N' else 'row'} of C)", f"{path}.size")
                continue
            steps = np.random.default_rng([env["M"], env["N"], env["K"], ord(buffer.bias)]).integers(
                -BIAS_STEPS, BIAS_STEPS + 1, size=length, dtype=np.int8)
            # Scaled once every buffer is planned: C's size depends on the block scales and a quantized B.
            plans[argument.name] = BufferPlan(argument.name, buffer.element, count, "bias",
                                              bias=BiasVector(buffer.bias, steps.tobytes()))
            continue
        exact = EXACT_WHOLE_NUMBERS.get(buffer.element)
        if buffer.fill == "iota" and not (count - 1 <= exact if exact is not None else element.fits(count - 1)):
            problem(f"buffer {argument.name}: iota up to {count - 1:,} does not fit {buffer.element}"
                    + (f" (its whole numbers are exact up to {exact:,})" if exact is not None else ""),
                    f"{path}.fill")
            continue
        plans[argument.name] = BufferPlan(argument.name, buffer.element, count, buffer.fill, values,
                                          buffer.read_only)
    biased = [(name, plan) for name, plan in plans.items() if plan.bias is not None]
    if biased:
        exponent = bias_exponent(expected_product_rms(kernel, env, argument_values, plans.values()))
        for name, plan in biased:
            assert plan.bias is not None
            plans[name] = dataclasses.replace(plan, bias=dataclasses.replace(plan.bias, exponent=exponent))
    return plans


def bias_exponent(rms: float) -> int:
    """The e of a bias's values (i / 16) * 2^e for C's elements of root mean square `rms`: the power of two at or
    above it, within `BIAS_EXPONENTS`; so that a bias left out, or added to the wrong columns, moves C by about as
    much as C's own size, beyond the tolerance of every type and K a check allows."""
    if not rms > 0 or not math.isfinite(rms):
        return 0
    low, high = BIAS_EXPONENTS
    return min(max(math.ceil(math.log2(rms)), low), high)


# The mean square of a floating operand's elements as `dtypes.draw` draws them, uniform in [-0.5, 0.5).
FLOAT_DRAW_MEAN_SQUARE = 1 / 12


def draw_mean_square(element: ElementType) -> float:
    """The mean square of the values `dtypes.draw` draws for `element`: uniform in [-0.5, 0.5) for a floating type,
    uniform whole numbers up to `INTEGER_DRAW_LIMIT` for an integer one."""
    if not element.is_integer:
        return FLOAT_DRAW_MEAN_SQUARE
    low = max(-INTEGER_DRAW_LIMIT, int(np.iinfo(element.storage_dtype).min))
    return float(np.mean(np.arange(low, INTEGER_DRAW_LIMIT + 1, dtype=np.float64) ** 2))


def expected_product_rms(kernel: KernelSpec, env: dict, argument_values: dict, plans) -> float:
    """The root mean square of C's elements that the check expects for the kernel on the shape of `env`, from the
    draws of A, B (or of a quantized B's codes and scales) and C0, the block scales among `plans`, and alpha and
    beta: sqrt(alpha^2 * sum over k of E[a^2] E[b^2] + beta^2 E[c0^2]). A sum over K of independent products; an
    operand's structure (triangular, symmetric) is left out, as is any correlation."""
    operands = kernel.operands
    assert operands is not None, "a bias needs typed operands (kernels._check_drawn_buffers)"
    types = operands.types
    K = env["K"]
    plans = tuple(plans)
    quantized = next((plan.quantized for plan in plans if plan.quantized is not None), None)
    b_square = _quantized_mean_square(quantized) if quantized is not None else draw_mean_square(types.b)
    along_k = np.full(K, draw_mean_square(types.a) * b_square)
    for plan in plans:
        if plan.grid is not None:
            along_k *= _factor_squares_along_k(plan.grid, K)
    # The product's alpha as the check computes with it (`tensor_scales.product_alpha`): fp8's per-tensor scales
    # included where they reach the kernel by pointer or in no way, not only where they are folded into alpha.
    alpha = product_alpha(kernel, {**argument_values, "alpha": _number(argument_values.get("alpha"), 1.0)})
    beta = _number(argument_values.get("beta"), 0.0)
    return math.sqrt(alpha * alpha * float(along_k.sum()) + beta * beta * draw_mean_square(types.c))


def overflow_note(kernel: KernelSpec, env: dict, argument_values: dict, plans) -> str | None:
    """A note where the product the check expects is likely to go beyond the largest finite number of C's type
    (an fp16 C at alpha 1e4): its elements' root mean square (`expected_product_rms`) times the size the largest of
    M x N such sums typically reaches, sqrt(2 ln(M N)) of it, is over that number, so the reference cannot be
    written there and the run's check will say so. None for an integer C, a fused epilogue (its functions change
    C's range) and a product that fits."""
    operands = kernel.operands
    if operands is None or operands.types.c.is_integer or operands.elementwise:
        return None
    largest = operands.types.c.max_finite
    rms = expected_product_rms(kernel, env, argument_values, plans)
    elements = max(2, env["M"] * env["N"])
    typical_largest = rms * math.sqrt(2.0 * math.log(elements))
    if not typical_largest > largest:
        return None
    alpha = _number(argument_values.get("alpha"), 1.0)
    wider = ", or give C a wider type (fp32)" if operands.types.c.storage_bytes < 4 else ""
    return (f"C is {operands.types.c.name}, which holds values up to {largest:g} in size: with alpha = {alpha:g} "
            f"and K = {env['K']:,}, C's elements are expected to be about {rms:.3g} in size (root mean square) and "
            f"the largest about {typical_largest:.3g}, beyond it, so the reference overflows {operands.types.c.name} "
            f"there and no kernel can write it; lower alpha (or the inputs' range){wider}")


def _number(value, default: float) -> float:
    """A scalar's value as a float; `default` where it has none (a buffer's name, an expression that failed)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return default
    return float(value)


def _factor_squares_along_k(grid: ScaleGrid, K: int) -> np.ndarray:
    """For each k, the mean square of the factors that multiply A's column k (B's row k), over the blocks of M (N)."""
    squares = grid.factors() ** 2
    if grid.operand == "a":
        return np.repeat(squares.mean(axis=0), grid.block_cols)[:K]
    return np.repeat(squares.mean(axis=1), grid.block_rows)[:K]


def _quantized_mean_square(part: QuantizedPart) -> float:
    """The mean square of a quantized B's values as `quantized_layouts.draw_quantized` draws them: (q - z) * s, q and
    z uniform in [0, 2^bits) (z = 2^(bits - 1) without zero points), or codebook[q] * s; s = 2^e, e uniform."""
    low, high = CODEBOOK_SCALE_EXPONENTS if part.codebook is not None else QUANTIZED_SCALE_EXPONENTS
    scale_square = float(np.mean(np.exp2(2.0 * np.arange(low, high + 1))))
    codes = np.arange(1 << part.bits, dtype=np.float64)
    if part.codebook is not None:
        code_square = float(np.mean(np.square(part.codebook)))
    elif part.zeros:
        code_square = 2 * float(np.var(codes))     # q - z, both drawn: twice the variance of one
    else:
        code_square = float(np.mean((codes - (1 << (part.bits - 1))) ** 2))
    return code_square * scale_square


def _fits(element: str, value: float | int) -> bool:
    """Whether `value` is one of `element`'s: a whole number in range for an integer type, within range for a
    floating one."""
    ctype = C_TYPES[element]
    if ctype.is_float:
        return fits_float(element, value)
    return float(value).is_integer() and ctype.fits(int(value))


class _Refused(Exception):
    """Why a buffer's fill file or grid of scales cannot fill it, said in the problem of its case."""


def _group_metadata(buffer: DeviceBufferArgument, groups: GemmGroups | None, count: int) -> bytes:
    """The bytes of a buffer holding the groups' `buffer.groups`, zeros past them; `_Refused` where the kernel has
    no groups, the buffer is too short, or a number does not fit its element."""
    kind = buffer.groups
    assert kind is not None
    if groups is None:
        raise _Refused(f"holds the groups' {kind}, but the kernel has no groups: (a grouped GEMM's layout and rows)")
    try:
        numbers = groups.metadata(kind)
    except GroupsError as exc:
        raise _Refused(str(exc)) from None
    if count < len(numbers):
        raise _Refused(f"holds {count:,} elements, but the {groups.count} groups' {kind} are {len(numbers):,}: "
                       f"{GROUP_METADATA[kind]}")
    element = C_TYPES[buffer.element]
    wrong = next((number for number in numbers if not element.fits(number)), None)
    if wrong is not None:
        raise _Refused(f"the groups' {kind} hold {wrong:,}, which does not fit {buffer.element}")
    contents = np.zeros(count, dtype=NUMPY_ELEMENTS[buffer.element])
    contents[:len(numbers)] = numbers
    return contents.tobytes()


def _scale_grid(scales: BlockScales, env: dict, count: int) -> ScaleGrid:
    """The grid of factors of `scales` on the shape of `env`, its factors drawn from the shape (the same on every
    run of it); `_Refused` where a block, the leading dimension or the buffer's size does not hold it."""
    rows, cols = (env["M"], env["K"]) if scales.operand == "a" else (env["K"], env["N"])
    matrix = f"{scales.operand.upper()} ({rows} x {cols})"
    try:
        block_rows, block_cols = (extent.evaluate_int(env) for extent in scales.block)
        ld = scales.ld.evaluate_int(env) if scales.ld is not None else None
    except expr.ExpressionError as exc:
        raise _Refused(str(exc)) from None
    if block_rows < 1 or block_cols < 1:
        raise _Refused(f"a block of {block_rows} x {block_cols} elements of {matrix}: each extent must be 1 or more")
    grid_rows, grid_cols = -(-rows // block_rows), -(-cols // block_cols)
    tight = grid_cols if scales.order == "row" else grid_rows
    if ld is None:
        ld = tight
    elif ld < tight:
        raise _Refused(f"ld {ld} is shorter than a {'row' if scales.order == 'row' else 'column'} of the "
                       f"{grid_rows} x {grid_cols} grid of factors of {matrix} ({tight})")
    exponents = np.random.default_rng([rows, cols, block_rows, block_cols, ord(scales.operand)]).integers(
        SCALE_EXPONENTS[0], SCALE_EXPONENTS[1] + 1, size=grid_rows * grid_cols, dtype=np.int8)
    grid = ScaleGrid(scales.operand, block_rows, block_cols, grid_rows, grid_cols, scales.order, ld,
                     exponents.tobytes(), scales.storage)
    if grid.reach > count:
        raise _Refused(f"holds {count:,} elements, but the {grid_rows} x {grid_cols} grid of factors of {matrix} "
                       f"(blocks of {block_rows} x {block_cols}, {scales.order} order, ld {ld}) reaches {grid.reach:,}")
    return grid


def _quantized_part(kernel: KernelSpec, buffer: DeviceBufferArgument, env: dict, count: int) -> QuantizedPart:
    """A part of a quantized B on the shape of `env`, its bits and group the codes part's; `_Refused` where K is no
    multiple of the group or the buffer is too small for its layout."""
    weights, codes = buffer.quantized, codes_of(kernel)
    assert weights is not None and codes is not None and codes.bits is not None and codes.group is not None, \
        "specfile.quantized.check_quantized: a codes part with bits and group"
    K, N = env["K"], env["N"]
    try:
        group = codes.group.evaluate_int(env)
    except expr.ExpressionError as exc:
        raise _Refused(f"group {codes.group.source!r}: {exc}") from None
    if group < 1 or K % group:
        raise _Refused(f"K = {K} is no multiple of group {group} ({codes.group.source!r}), the rows of B a scale "
                       "covers" if group >= 1 else f"group {group} ({codes.group.source!r}) must be 1 or more")
    values = tuple((name, value) for name, value in env.items() if not name.startswith("__"))
    codebook = None
    if codes.codebook is not None:
        assert kernel.operands is not None, "specfile.quantized.check_quantized: a quantized B has typed operands"
        b_type = kernel.operands.types.b.name
        codebook = tuple(float(value) for value in round_to(codes.codebook, b_type))
        exact = ("float32", {"fp16": "float16", "bf16": "bfloat16"}.get(b_type))
        if weights.part == "codebook" and buffer.element not in exact:
            raise _Refused(f"holds the codebook as {buffer.element}, which does not hold every value of B's type "
                           f"{b_type} that the codebook rounds to: element is {' or '.join(filter(None, exact))}")
    part = QuantizedPart(weights.part, buffer.element, K, N, codes.bits, group, "zeros" in quantized_parts(kernel),
                         weights.along, weights.order, weights.builder, values if weights.builder else (),
                         weights.major, codebook, codes.codebook_name)
    needed = part.needed
    if needed is not None and count < needed:
        raise _Refused(f"holds {count:,} elements, but {part.describe()} need {needed:,} for B of {K} x {N}")
    return part


# The seed of the draw a pack builder is checked on while planning: its numbers' count and type are the layout's,
# whatever values it lays out.
PLAN_DRAW_SEED = 0


def checked_pack_builder(plan: BufferPlan, part: QuantizedPart) -> BuilderFailed | None:
    """Why `part`'s pack builder cannot fill `plan`'s buffer, found by laying out a draw of B's shape as a bound case
    would (None: it returns the buffer's count of numbers, each fitting its element), or nothing where B has more
    than `PLAN_DRAW_ELEMENTS` elements. The same builder, layout and shape are checked once a process: a sweep
    plans each case again with the driver's counts, and a run plans what `plan` planned."""
    if part.K * part.N > PLAN_DRAW_ELEMENTS:
        return None
    return _checked_pack_builder(plan.name, plan.element, plan.count, part)


@functools.lru_cache(maxsize=256)
def _checked_pack_builder(name: str, element: str, count: int, part: QuantizedPart) -> BuilderFailed | None:
    draw = _plan_draw(part.K, part.N, part.bits, part.group, part.zeros, part.codebook)
    try:
        _quantized_bytes(BufferPlan(name, element, count, "quantized", read_only=True, quantized=part), part, draw)
    except BuilderFailed as failed:
        return failed
    return None


@functools.lru_cache(maxsize=1)
def _plan_draw(K: int, N: int, bits: int, group: int, zeros: bool, codebook: tuple[float, ...] | None
               ) -> QuantizedDraw:
    """One draw kept for the next part of the same B: a kernel's codes and scales may both have builders."""
    return draw_quantized(K, N, bits, group, zeros, PLAN_DRAW_SEED, codebook)


class QuantizedFillFailed(DriverGemmError):
    """Why buffer `buffer`, a part of a quantized B, cannot be filled: its pack builder failed or returned the wrong
    numbers, or there are no drawn values to lay out (a run on the caller's own tensors, which holds no codes)."""

    def __init__(self, buffer: str, message: str, hint: str | None = None):
        super().__init__(f"buffer {buffer}: {message}")
        self.buffer = buffer
        self.hint = hint


def _quantized_bytes(plan: BufferPlan, part: QuantizedPart, draw: QuantizedDraw) -> np.ndarray:
    """`plan`'s bytes: `part` laid out from `draw` (packed words or one value to an element, the rest of the buffer
    zero, or NaN for scales), or the numbers its builder returns for them, checked as a fill builder's are."""
    dtype = np.dtype(NUMPY_ELEMENTS[plan.element])
    if part.builder is not None:
        array = built_numbers(part.builder, part.builder_values(draw))
        if array.size != plan.count:
            raise BuilderFailed(f"builder {part.builder.text} returned {array.size:,} numbers, but the buffer holds "
                                f"{plan.count:,} (its size)")
        try:
            data = _as_element(_as_unsigned_words(array, plan.element), plan.element,
                               f"builder {part.builder.text} returned")
        except _Refused as refused:
            raise BuilderFailed(str(refused)) from None
        return np.frombuffer(data, dtype=np.uint8).copy()
    numbers = part.laid_out(draw)
    # Scales, powers of two, and a codebook's values, rounded to B's type (fp16 or bf16): exact in each floating
    # element, bfloat16 the top of a float32.
    if part.part in ("scales", "codebook"):
        contents = np.full(plan.count, np.nan)
        contents[:numbers.size] = numbers
        if plan.element == "bfloat16":
            return (contents.astype("<f4").view("<u4") >> 16).astype("<u2").view(np.uint8)
        return contents.astype(dtype).view(np.uint8)
    # Codes and zero points as their bits: a word with its top bit set, or a code of 128 up in an int8, is read back
    # through the unsigned type of the element's width.
    unsigned = np.dtype(f"<u{dtype.itemsize}")
    contents = np.zeros(plan.count, dtype=unsigned)
    contents[:numbers.size] = numbers
    return contents.view(np.uint8)


def _as_unsigned_words(array: np.ndarray, element: str) -> np.ndarray:
    """A builder's whole numbers for a signed integer element, those from its largest up to the unsigned type's
    given as the same bits (a packed word 0x80000000 for an int32), so that a builder may return unsigned words."""
    ctype = C_TYPES[element]
    if ctype.is_float or array.dtype.kind not in "iu" or not array.size or not element.startswith("int"):
        return array
    width = ctype.size * 8
    if array.min() < 0 or int(array.max()) >= 1 << width or ctype.fits(int(array.max())):
        return array
    return array.astype(f"<u{ctype.size}").view(f"<i{ctype.size}")


# A fill file's header and padding besides its data (numpy.save writes at most a few hundred bytes of header).
_NPY_HEADER_ALLOWANCE = 1 << 16
_NPY_MAGIC = b"\x93NUMPY"   # how every file numpy.save writes begins
_ZIP_MAGIC = b"PK\x03\x04"   # how a zip archive begins, an .npz of numpy.savez among them


def _file_contents(buffer: DeviceBufferArgument, env: dict, count: int) -> tuple[str, bytes]:
    """The file a buffer's ``fill: {file: NAME}`` names for the shape of `env`, and its array as the bytes of
    `count` elements of the buffer's element type. `_Refused` says what is wrong: a name in braces with no value,
    a file outside the project, missing, too large, no NumPy array, of another length or a value that does not
    fit. The braces are replaced by name, never through str.format, which would let a name reach attributes."""
    def value(match: re.Match) -> str:
        name = match.group(1)
        if name not in env:
            raise _Refused(f"{{{name}}} in {buffer.file} is neither M, N, K nor a param of the kernel")
        return str(env[name])

    name = FILE_FIELD.sub(value, buffer.file or "")
    folder = buffer.file_folder or Path(".")
    try:
        path = (folder / name).resolve()
    except (OSError, RuntimeError) as exc:    # a link that leads back to itself: Python 3.11's resolve raises
        raise _Refused(f"fill file {folder / name} cannot be followed: {getattr(exc, 'strerror', None) or exc}") \
            from None
    except UnicodeError:    # a ValueError, not an OSError: the name has no bytes in the file-name encoding
        raise _Refused(f"{unencodable('fill file', str(folder / name))} ({UNENCODABLE_HINT})") from None
    if buffer.file_root is not None and not path.is_relative_to(buffer.file_root):
        raise _Refused(f"fill file {name} leaves the spec's project ({buffer.file_root}); pass "
                       "--allow-outside-sources to read it")
    limit = count * 8 + _NPY_HEADER_ALLOWANCE   # 8 bytes: the widest number an array may hold (int64, float64)
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise _Refused(f"fill file {path} is not a regular file")
        if size > limit:
            raise _Refused(f"fill file {path} holds {size:,} bytes, more than {count:,} elements of any type")
        with path.open("rb") as file:
            start = file.read(len(_NPY_MAGIC))
            if start.startswith(_ZIP_MAGIC):
                raise _Refused(f"fill file {path} is a zip archive (an .npz of numpy.savez, named .npy), not one "
                               "array saved with numpy.save: save the buffer's array alone with numpy.save")
            if start != _NPY_MAGIC:   # np.load would take it for a pickle and say so, which it is not
                raise _Refused(f"fill file {path} is no NumPy array saved with numpy.save: it does not begin with "
                               f"the .npy format's {_NPY_MAGIC!r} (a text or other file named .npy)")
            _check_declared_count(file, path, count, size)
        array = np.load(path, allow_pickle=False)
    except _Refused:
        raise
    except FileNotFoundError:
        raise _Refused(f"fill file {path} does not exist (for this shape, {name})") from None
    # Not a .npy file, truncated, an object array, a header NumPy's parser cannot read (it raises what its Python
    # tokenizer does, a TokenError or a SyntaxError): the user's file, so whatever it raises is said.
    except Exception as exc:
        # NumPy's message may quote a header of any length, and whatever bytes it holds
        raise _Refused(f"fill file {path} is no NumPy array saved with numpy.save: {type(exc).__name__}: "
                       f"{printable(shortened(str(exc)))}") from None
    if not isinstance(array, np.ndarray) or array.size != count:
        elements = array.size if isinstance(array, np.ndarray) else "no"
        raise _Refused(f"fill file {path} holds {elements} elements, but the buffer holds {count:,} (its size)")
    return str(path), _as_element(array.reshape(-1), buffer.element, f"fill file {path} holds")


def _check_declared_count(file, path: Path, count: int, size: int) -> None:
    """The array a .npy file's header declares, against the buffer and the file, before NumPy reads the array: a
    header that declares more than its file holds would have NumPy allocate the whole declared array first, and
    NumPy reads no further than the declared data, so bytes after it (a header that declares fewer elements, or a
    narrower type, than the file was written with) would go unseen. `size`: the file's bytes."""
    file.seek(0)
    version = np.lib.format.read_magic(file)
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if version not in readers:   # a later format: np.load reads (or refuses) it
        return
    shape, _, dtype = readers[version](file)
    if any(dimension < 0 for dimension in shape):
        raise _Refused(f"fill file {path} declares the shape {tuple(shape)} in its header, with a negative "
                       "dimension: not an array numpy.save writes")
    declared = math.prod(shape)
    if declared != count:
        raise _Refused(f"fill file {path} holds {declared:,} elements, but the buffer holds {count:,} (its size)")
    data = size - file.tell()
    if not dtype.hasobject and data > declared * dtype.itemsize:
        raise _Refused(f"fill file {path} holds {data - declared * dtype.itemsize:,} bytes after the data its header "
                       f"declares ({declared:,} elements of {dtype}, {declared * dtype.itemsize:,} bytes): a header "
                       "that does not match the data written after it (save the array again with numpy.save)")


def _built_contents(buffer: DeviceBufferArgument, env: dict, count: int) -> bytes:
    """The numbers a buffer's ``fill: {builder: ...}`` returns for the shape of `env`, as the bytes of `count`
    elements of the buffer's element type; `BuilderFailed` or `_Refused` says what is wrong."""
    assert buffer.builder is not None, "a built fill has its builder (device_buffers._file_fill)"
    values = {name: value for name, value in env.items() if not name.startswith("__")}   # not a sizeof's name
    array = built_numbers(buffer.builder, values)
    if array.size != count:
        raise _Refused(f"builder {buffer.builder.text} returned {array.size:,} numbers, but the buffer holds "
                       f"{count:,} (its size)")
    return _as_element(array, buffer.element, f"builder {buffer.builder.text} returned")


def _as_element(array: np.ndarray, element: str, what: str) -> bytes:
    """`array`'s values as `element`s, little-endian; `_Refused` where one does not fit or the kinds differ. `what`
    leads each message: ``fill file PATH holds``."""
    ctype = C_TYPES[element]
    if array.dtype.kind not in "biuf":
        raise _Refused(f"{what} {array.dtype} values, not numbers")
    if not ctype.is_float:
        if array.dtype.kind == "f" and not np.all(np.isfinite(array) & (array == np.round(array))):
            raise _Refused(f"{what} values that are not whole numbers, for a buffer of {element}")
        if array.size and not (ctype.fits(int(array.min())) and ctype.fits(int(array.max()))):
            raise _Refused(f"{what} values from {array.min()} to {array.max()}, beyond {element}")
        return np.ascontiguousarray(array, dtype=NUMPY_ELEMENTS[element]).tobytes()
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):   # as a fill written in the spec must be
        raise _Refused(f"{what} NaN or infinite values; a buffer's numbers are finite")
    if array.size and not all(fits_float(element, float(v)) for v in (array.min(), array.max())):
        raise _Refused(f"{what} values beyond the range of {element}")
    if element == "bfloat16":
        return _bfloat16_words(array).tobytes()
    return np.ascontiguousarray(array, dtype=NUMPY_ELEMENTS[element]).tobytes()


def _bfloat16_words(values) -> np.ndarray:
    """`values` as bfloat16 bit patterns (NumPy has no bfloat16), rounded as `argtypes.bfloat16_bits` rounds."""
    return np.array([bfloat16_bits(float(value)) for value in values], dtype=NUMPY_ELEMENTS["bfloat16"])
