"""Element types of a GEMM: the table, exact encoding to and from their bits, draws, and tolerances.

Operands go up and come back as raw bytes of their storage type, so every type needs an exact map
between a float64 value and its bit pattern. NumPy has no bf16 or fp8: each small float format is
described by its exponent and mantissa widths and decoded through a table of all its codes;
encoding rounds to nearest even on the float64 bits (no double rounding) and needs no
``ml_dtypes``. fp8 e4m3 is the OCP "fn" variant (CUDA's ``__nv_fp8_e4m3``): no infinities, one NaN
per sign, largest finite 448.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping

import numpy as np

from ..errors import SpecError


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format narrower than float32, described well enough to decode every code."""

    exponent_bits: int
    mantissa_bits: int
    has_infinity: bool = True     # False: the "fn" layout, where only all-ones exponent and mantissa is NaN

    @property
    def bits(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bias(self) -> int:
        return 2 ** (self.exponent_bits - 1) - 1


@dataclass(frozen=True)
class ElementType:
    """One element type: how it is stored, how precise it is, and what CUDA and cuBLASLt call it.

    `mantissa_bits` is the number of explicit fraction bits (None for
    integers); for tf32 it is the precision of the tensor cores' math, the
    storage being float32. `cuda_type` is the C type of NVIDIA's headers,
    `kernel_type` the one of ``kernels/types/element_types.cuh`` (which
    compiles without those headers), `cuda_data_type` the ``cudaDataType_t``
    value cuBLASLt takes for a matrix layout.
    """

    name: str
    storage_bytes: int
    storage: str                  # NumPy dtype of the uploaded codes
    mantissa_bits: int | None
    max_finite: float
    cuda_type: str
    kernel_type: str
    cuda_data_type: int
    float_format: FloatFormat | None = None   # set for the formats encoded through a table

    @property
    def is_integer(self) -> bool:
        return self.mantissa_bits is None

    @property
    def unit_roundoff(self) -> float:
        """Half the spacing of the type's numbers just above 1 (0 for integers, which a GEMM keeps exact)."""
        return 0.0 if self.is_integer else 2.0 ** -(self.mantissa_bits + 1)

    @property
    def storage_dtype(self) -> np.dtype:
        return np.dtype(self.storage)

    def __str__(self) -> str:
        return self.name


# cudaDataType_t values (library_types.h); the tests compare them with nvmath's enums.
CUDA_R_32F, CUDA_R_16F, CUDA_R_8I, CUDA_R_8U, CUDA_R_32I, CUDA_R_16BF, CUDA_R_8F_E4M3, CUDA_R_8F_E5M2 = (
    0, 2, 3, 8, 10, 14, 28, 29)

ELEMENT_TYPES: dict[str, ElementType] = {t.name: t for t in (
    ElementType("fp32", 4, "float32", 23, float(np.finfo(np.float32).max), "float", "float", CUDA_R_32F),
    ElementType("tf32", 4, "float32", 10, float(np.finfo(np.float32).max), "float", "float", CUDA_R_32F),
    ElementType("fp16", 2, "uint16", 10, 65504.0, "__half", "dg::half_t", CUDA_R_16F, FloatFormat(5, 10)),
    ElementType("bf16", 2, "uint16", 7, 3.3895313892515355e38, "__nv_bfloat16", "dg::bfloat16_t", CUDA_R_16BF,
                FloatFormat(8, 7)),
    ElementType("e4m3", 1, "uint8", 3, 448.0, "__nv_fp8_e4m3", "dg::e4m3_t", CUDA_R_8F_E4M3,
                FloatFormat(4, 3, has_infinity=False)),
    ElementType("e5m2", 1, "uint8", 2, 57344.0, "__nv_fp8_e5m2", "dg::e5m2_t", CUDA_R_8F_E5M2, FloatFormat(5, 2)),
    ElementType("int8", 1, "int8", None, 127.0, "int8_t", "signed char", CUDA_R_8I),
    ElementType("uint8", 1, "uint8", None, 255.0, "uint8_t", "unsigned char", CUDA_R_8U),
    ElementType("int32", 4, "int32", None, 2.0**31 - 1, "int32_t", "int", CUDA_R_32I),
)}

ALIASES = {"float32": "fp32", "f32": "fp32", "float16": "fp16", "half": "fp16", "f16": "fp16",
           "bfloat16": "bf16", "fp8_e4m3": "e4m3", "fp8e4m3": "e4m3", "float8_e4m3fn": "e4m3",
           "fp8_e5m2": "e5m2", "fp8e5m2": "e5m2", "float8_e5m2": "e5m2", "i8": "int8", "i32": "int32", "u8": "uint8"}

INPUT_TYPES = ("fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2", "int8", "uint8")
OUTPUT_TYPES = ("fp32", "fp16", "bf16", "int32")
ACCUMULATE_TYPES = ("fp32", "fp16", "int32")

# Bit patterns a kernel's output is filled with before a launch: a quiet NaN with a payload that arithmetic
# never produces (hardware NaNs carry the canonical payload), so an element still holding it was not written.
POISON_CODES = {"fp32": 0x7FC0DEAD, "tf32": 0x7FC0DEAD, "fp16": 0x7EAD, "bf16": 0x7FDE, "int32": -0x21524111}


def element_type(name: str | ElementType) -> ElementType:
    """The `ElementType` called `name` (canonical or alias, any case); a `SpecError` naming the choices otherwise."""
    if isinstance(name, ElementType):
        return name
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in ELEMENT_TYPES:
        raise SpecError(f"unknown element type {name!r}", hint=f"one of {', '.join(ELEMENT_TYPES)}")
    return ELEMENT_TYPES[key]


# ------------------------------------------------------------------------------------- encode, decode

@lru_cache(maxsize=None)
def code_values(fmt: FloatFormat) -> np.ndarray:
    """The float64 value of every code of `fmt`, indexed by the code (NaN for NaN codes, +-inf for infinities)."""
    codes = np.arange(2 ** fmt.bits, dtype=np.int64)
    negative = (codes >> (fmt.bits - 1)) & 1
    exponent = (codes >> fmt.mantissa_bits) & (2 ** fmt.exponent_bits - 1)
    fraction = (codes & (2 ** fmt.mantissa_bits - 1)).astype(np.float64) / 2.0 ** fmt.mantissa_bits
    normal = np.ldexp(1.0 + fraction, (exponent - fmt.bias).astype(np.int32))
    subnormal = np.ldexp(fraction, 1 - fmt.bias)
    magnitude = np.where(exponent == 0, subnormal, normal)
    top = exponent == 2 ** fmt.exponent_bits - 1
    if fmt.has_infinity:
        magnitude = np.where(top & (fraction == 0), np.inf, magnitude)
        magnitude = np.where(top & (fraction != 0), np.nan, magnitude)
    else:
        magnitude = np.where(top & (fraction == 1.0 - 2.0 ** -fmt.mantissa_bits), np.nan, magnitude)
    values = np.where(negative == 1, -magnitude, magnitude)
    values.setflags(write=False)
    return values


@lru_cache(maxsize=None)
def _rounding_grid(fmt: FloatFormat) -> np.ndarray:
    """The finite non-negative values in code order, plus the next value the format would have (the overflow)."""
    positive = code_values(fmt)[: 2 ** (fmt.bits - 1)]
    finite = positive[np.isfinite(positive)]
    finite = finite[: np.argmax(finite)+1]      # codes 0..largest finite; values increase with the code
    grid = np.append(finite, 2 * finite[-1] - finite[-2])
    grid.setflags(write=False)
    return grid


def _encode_small_float(values: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    # A value in the format's normal range has the format's exponent field and leading fraction bits in
    # its float64 bits, with the exponent biased by 1023 instead of the format's bias: the code is those
    # bits shifted right past the dropped fraction bits, rounded half to even on them (a carry out of the
    # fraction lands on the next binade's first code, or on the overflow code), then rebiased. Below
    # the smallest normal the format's values are whole multiples of its smallest subnormal: the code is
    # |x| over that spacing (a power of two, so exact) rounded half to even by np.rint. The arrays are
    # as large as a case's operands (hundreds of MB at 8192^3): the work is done in place.
    grid = _rounding_grid(fmt)
    overflow_code = len(grid) - 1        # the first code past the largest finite value
    magnitude = np.abs(values)
    bits = magnitude.view(np.uint64)
    dropped = np.uint64(52 - fmt.mantissa_bits)
    code = bits >> dropped
    code &= np.uint64(1)                                   # ties go to the even code
    code += bits
    code += np.uint64((1 << (52 - fmt.mantissa_bits - 1)) - 1)
    code >>= dropped
    code = code.view(np.int64)
    code -= (1023 - fmt.bias) << fmt.mantissa_bits
    smallest_normal = 2.0 ** (1 - fmt.bias)
    subnormal = magnitude < smallest_normal
    if subnormal.any():
        code[subnormal] = np.rint(magnitude[subnormal] * 2.0 ** (fmt.bias - 1 + fmt.mantissa_bits)).astype(np.int64)
    np.minimum(code, overflow_code, out=code)
    code[~(magnitude <= grid[-1])] = overflow_code          # NaN too: replaced below
    sign_bit = 1 << (fmt.bits - 1)
    mantissa_ones = 2 ** fmt.mantissa_bits - 1
    if fmt.has_infinity:
        overflowed = (2 ** fmt.exponent_bits - 1) << fmt.mantissa_bits              # infinity
        nan = overflowed | (1 << (fmt.mantissa_bits - 1))                          # canonical quiet NaN
    else:
        overflowed = nan = ((2 ** fmt.exponent_bits - 1) << fmt.mantissa_bits) | mantissa_ones
    if overflowed != overflow_code:
        code[code == overflow_code] = overflowed
    np.bitwise_or(code, sign_bit, out=code, where=np.signbit(values))
    code[np.isnan(values)] = nan
    return code


def encode(values, dtype: str | ElementType) -> np.ndarray:
    """The storage codes of `values` in `dtype`, rounded to nearest with ties to even (same shape).

    fp32 and tf32 are stored as float32 (NumPy rounds); fp16, bf16 and fp8 as
    unsigned integers holding the bit pattern; integer types must be given
    integers within range (a `ValueError` otherwise).
    """
    element = element_type(dtype)
    values = np.asarray(values, dtype=np.float64)
    if element.float_format is not None:
        return _encode_small_float(values, element.float_format).astype(element.storage_dtype)
    if element.is_integer:
        info = np.iinfo(element.storage_dtype)
        if not np.all(np.isfinite(values) & (values == np.round(values)) & (values >= info.min)
                      & (values <= info.max)):
            raise ValueError(f"{element.name} holds integers in [{info.min}, {info.max}]")
    return values.astype(element.storage_dtype)


def decode(codes, dtype: str | ElementType) -> np.ndarray:
    """The float64 values of storage `codes` of `dtype` (the inverse of `encode` on representable values)."""
    element = element_type(dtype)
    codes = np.asarray(codes)
    if element.float_format is not None:
        return code_values(element.float_format)[codes.astype(np.int64) & (2 ** element.float_format.bits - 1)]
    return codes.astype(element.storage_dtype).astype(np.float64)


def round_to(values, dtype: str | ElementType) -> np.ndarray:
    """`values` rounded to the nearest number of `dtype`, as float64 (tf32 rounds its 13 low bits away)."""
    element = element_type(dtype)
    if element.name == "tf32":
        bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
        rounded = (bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)
        return rounded.astype(np.uint32).view(np.float32).astype(np.float64)
    return decode(encode(values, element), element)


def is_representable(values, dtype: str | ElementType) -> np.ndarray:
    """True where a value is exactly a number that `dtype` stores (for tf32: a float32)."""
    values = np.asarray(values, dtype=np.float64)
    element = element_type(dtype)
    if element.is_integer:
        info = np.iinfo(element.storage_dtype)
        return np.isfinite(values) & (values == np.round(values)) & (values >= info.min) & (values <= info.max)
    with np.errstate(invalid="ignore"):
        stored = decode(encode(values, element), element)
    return (stored == values) | (np.isnan(stored) & np.isnan(values))


def holds_drawn_values(outer: str | ElementType, inner: str | ElementType) -> bool:
    """Whether every value `draw` can give `inner` is exactly a number of `outer`: a small format's every finite
    code, a float32-stored type's float32 values, an integer type's drawn integers."""
    outer, inner = element_type(outer), element_type(inner)
    if inner.is_integer:
        return bool(is_representable(np.arange(-INTEGER_DRAW_LIMIT, INTEGER_DRAW_LIMIT + 1), outer).all())
    if inner.float_format is None:      # fp32 and tf32 draw float32 values
        return not outer.is_integer and outer.float_format is None
    values = code_values(inner.float_format)
    return bool(is_representable(values[np.isfinite(values)], outer).all())


def to_bytes(values, dtype: str | ElementType) -> bytes:
    """The raw little-endian bytes of `values` in `dtype`, C order, ready to upload."""
    little_endian = element_type(dtype).storage_dtype.newbyteorder("<")
    return np.ascontiguousarray(encode(values, dtype)).astype(little_endian).tobytes()


def from_bytes(raw, dtype: str | ElementType, shape) -> np.ndarray:
    """The float64 values in raw bytes `raw` (e.g. a kernel's output read back) of `dtype`, as an array of `shape`."""
    element = element_type(dtype)
    codes = np.frombuffer(bytes(raw) if not isinstance(raw, np.ndarray) else raw.tobytes(),
                          dtype=element.storage_dtype.newbyteorder("<"))
    count = int(np.prod(shape))
    if codes.size != count:
        raise ValueError(f"{codes.size} {element.name} values in {len(raw)} bytes, expected {count} for {shape}")
    return decode(codes.reshape(shape), element)


def poison_code(dtype: str | ElementType) -> int:
    """The bit pattern an output of `dtype` is filled with before a launch (see `POISON_CODES`)."""
    element = element_type(dtype)
    if element.name not in POISON_CODES:
        raise ValueError(f"{element.name} is not an output type")
    return POISON_CODES[element.name]


def poison_codes(count: int, dtype: str | ElementType) -> np.ndarray:
    """`count` storage codes of `dtype` holding its poison pattern, bit for bit (a float32 NaN keeps its payload)."""
    element = element_type(dtype)
    bits = np.full(count, poison_code(element) & (2 ** (8 * element.storage_bytes) - 1), _bits_dtype(element))
    return bits.view(element.storage_dtype)


def unwritten_mask(codes, dtype: str | ElementType) -> np.ndarray:
    """True where output storage `codes` still hold the poison pattern of `dtype`, compared bit for bit: the
    float32 poison is a NaN, which no comparison of values finds equal to itself."""
    element = element_type(dtype)
    bits = np.ascontiguousarray(codes, dtype=element.storage_dtype).view(_bits_dtype(element))
    return bits == poison_codes(1, element).view(_bits_dtype(element))[0]


def smallest_positive(dtype: str | ElementType) -> float:
    """The smallest positive number `dtype` holds (its smallest subnormal; 1 for an integer type)."""
    element = element_type(dtype)
    if element.is_integer:
        return 1.0
    if element.float_format is not None:
        return float(decode(np.array([1], dtype=element.storage_dtype), element)[0])
    return float(np.finfo(element.storage_dtype).smallest_subnormal)


def _bits_dtype(element: ElementType) -> np.dtype:
    """The unsigned integer type as wide as `element`'s storage, for comparing and building bit patterns."""
    return np.dtype(f"uint{8 * element.storage_bytes}")


# ------------------------------------------------------------------------------ scale factors in a byte

# Block scales stored one to a byte, as the kernels that read them declare them: ``ue8m0``, an unsigned 8-bit
# exponent whose value is 2^(code - 127) and whose code 0xFF is NaN (the OCP Microscaling formats' E8M0: MXFP8's
# factors, CUDA's __nv_fp8_e8m0), and ``e4m3``, a factor in fp8 e4m3 (NVFP4's). Both hold every power of two a
# case draws for its block scales exactly.
SCALE_STORAGES = ("ue8m0", "e4m3")
UE8M0_BIAS = 127
UE8M0_NAN = 0xFF


def encode_scale_factors(values, storage: str) -> np.ndarray:
    """The byte codes (uint8) of scale factors `values` in `storage` (one of `SCALE_STORAGES`), NaN as the storage's
    NaN; a `ValueError` for a factor the storage does not hold exactly (ue8m0 holds powers of two from 2^-127 to
    2^127 only)."""
    values = np.asarray(values, dtype=np.float64)
    if storage == "e4m3":
        codes = encode(values, "e4m3")
        exact = is_representable(values, "e4m3")
    elif storage == "ue8m0":
        mantissa, exponent = np.frexp(np.where(np.isnan(values), 1.0, values))
        power = exponent.astype(np.int64) - 1      # frexp: value = mantissa x 2^exponent, mantissa in [0.5, 1)
        exact = np.isnan(values) | ((mantissa == 0.5) & (power >= -UE8M0_BIAS) & (power <= UE8M0_BIAS))
        codes = np.where(np.isnan(values), UE8M0_NAN, np.clip(power + UE8M0_BIAS, 0, UE8M0_NAN - 1))
    else:
        raise ValueError(f"scale factors are stored as {', '.join(SCALE_STORAGES)}, got {storage}")
    if not exact.all():
        wrong = values[~exact].flat[0]
        raise ValueError(f"{storage} does not hold the scale factor {wrong:g} exactly")
    return codes.astype(np.uint8)


def decode_scale_factors(codes, storage: str) -> np.ndarray:
    """The float64 values of byte codes of scale factors in `storage` (the inverse of `encode_scale_factors`)."""
    codes = np.asarray(codes, dtype=np.uint8)
    if storage == "e4m3":
        return decode(codes, "e4m3")
    if storage == "ue8m0":
        return np.where(codes == UE8M0_NAN, np.nan, np.ldexp(1.0, codes.astype(np.int64) - UE8M0_BIAS))
    raise ValueError(f"scale factors are stored as {', '.join(SCALE_STORAGES)}, got {storage}")


# ------------------------------------------------------------------------------------------ draws

INTEGER_DRAW_LIMIT = 8


def draw(shape, dtype: str | ElementType, rng: np.random.Generator) -> np.ndarray:
    """Random values exactly representable in `dtype`, as float64 of `shape`.

    Floating-point types: uniform in [-0.5, 0.5), then rounded to the type
    (fp8 e4m3 keeps 3 fraction bits, so about 60 distinct values in that
    range, subnormals included). tf32 draws float32 values, not tf32 ones:
    the tensor cores' rounding of its inputs is part of what a tf32 kernel is
    checked for. Integer types: uniform integers in [-8, 8] ([0, 8] unsigned), so
    a product of two fits in 7 bits and K up to 2**18 sums exactly in float32
    and int32.
    """
    element = element_type(dtype)
    if element.is_integer:
        low = max(-INTEGER_DRAW_LIMIT, int(np.iinfo(element.storage_dtype).min))
        return rng.integers(low, INTEGER_DRAW_LIMIT + 1, size=shape).astype(np.float64)
    uniform = rng.random(shape, dtype=np.float64) - 0.5
    return decode(encode(uniform, "fp32" if element.name == "tf32" else element), element)


# ------------------------------------------------------------------------------- the types of a GEMM

@dataclass(frozen=True)
class GemmTypes:
    """The element types of one GEMM: inputs `a` and `b`, output `c` (C and D), and the accumulator."""

    a: ElementType
    b: ElementType
    c: ElementType
    accumulate: ElementType

    @property
    def label(self) -> str:
        """Short name for reports: ``bf16`` when every type agrees, else ``e4m3-bf16`` (inputs-output)
        or ``e4m3.e5m2-bf16``."""
        inputs = self.a.name if self.a == self.b else f"{self.a.name}.{self.b.name}"
        return inputs if self.a == self.b == self.c else f"{inputs}-{self.c.name}"

    @property
    def is_fp8(self) -> bool:
        return self.a.storage_bytes == 1 and not self.a.is_integer

    def as_dict(self) -> dict[str, str]:
        return {"a": self.a.name, "b": self.b.name, "c": self.c.name, "accumulate": self.accumulate.name}


FP32 = GemmTypes(*(ELEMENT_TYPES["fp32"],) * 4)


def parse_types(node: Mapping | None, *, where: str | None = None, field: str = "types") -> GemmTypes:
    """A `GemmTypes` from a spec's ``types: {a: bf16, b: bf16, c: bf16, accumulate: fp32}``.

    ``b`` defaults to ``a``; ``c`` to ``a`` when ``a`` is an fp32, fp16 or
    bf16 type, else to fp32 (int8: int32); ``accumulate`` to fp32 (int8:
    int32). Any mistake raises a `SpecError` naming `where` and the field.
    """
    if node is None:
        return FP32
    if not isinstance(node, Mapping):
        raise SpecError("types is a mapping like {a: bf16, b: bf16, c: bf16, accumulate: fp32}", where, field)
    unknown = sorted(set(node) - {"a", "b", "c", "accumulate"})
    if unknown:
        raise SpecError(f"unknown key {unknown[0]!r}", where, f"{field}.{unknown[0]}",
                        hint="the keys are a, b, c and accumulate")
    if "a" not in node:
        raise SpecError("the type of A is missing", where, f"{field}.a")

    def get(key: str, default: str, allowed: tuple[str, ...]) -> ElementType:
        try:
            element = element_type(node.get(key, default))
        except SpecError as exc:
            raise SpecError(exc.message, where, f"{field}.{key}", exc.hint) from None
        if element.name not in allowed:
            # An 8-bit C is a requantized output (int8 or fp8 with an output scale, rounded and saturated): the check
            # has no reference for it, and the hint says so rather than leave a reader to look for a field.
            requantized = ("; an 8-bit C (an output requantized with a scale of its own) is not described: have the "
                           "kernel write the wider C it rounds from"
                           if key == "c" and element.storage_bytes == 1 else "")
            raise SpecError(f"{element.name} cannot be {'the accumulator' if key == 'accumulate' else key.upper()}"
                            f"'s type", where, f"{field}.{key}", hint=f"one of {', '.join(allowed)}{requantized}")
        return element

    a = get("a", "fp32", INPUT_TYPES)
    b = get("b", a.name, INPUT_TYPES)
    integer = a.is_integer or b.is_integer
    c = get("c", "int32" if integer else a.name if a.name in ("fp32", "fp16", "bf16") else "fp32", OUTPUT_TYPES)
    accumulate = get("accumulate", "int32" if integer else "fp32", ACCUMULATE_TYPES)
    if integer and not (a.is_integer and b.is_integer and accumulate.name == "int32"):
        raise SpecError("8-bit integer inputs go together (A and B, int8 or uint8) and accumulate in int32", where,
                        field)
    if not integer and accumulate.is_integer:
        raise SpecError("floating-point inputs accumulate in fp32 or fp16", where, f"{field}.accumulate")
    if c.is_integer and not integer:
        raise SpecError("an int32 output needs int8 or uint8 inputs", where, f"{field}.c")
    if "tf32" in (a.name, b.name) and not (a == b and accumulate.name == "fp32"):
        raise SpecError("tf32 is tensor-core math on fp32 storage: A and B both tf32, accumulated in fp32",
                        where, field)
    return GemmTypes(a, b, c, accumulate)


# ------------------------------------------------------------------------------------------ tolerance

SAFETY = 5.0

# Hopper's fp8 tensor cores add their products into an accumulator that keeps about 14 significant
# bits between promotions to full fp32 (public measurements of sm_90's fp8 MMA; cuBLASLt's e4m3 matmuls
# agree). A correct fp8 GEMM may use them, so its accumulation is bounded with this unit roundoff, not fp32's.
FP8_TENSOR_CORE_UNIT_ROUNDOFF = 2.0 ** -14


def error_bound(types: GemmTypes, K: int, *, safety: float = SAFETY) -> float:
    """The relative Frobenius error a correct GEMM of `types` with inner size `K` stays within.

    Inputs are exactly representable, so only the arithmetic's rounding counts: sqrt(K) times the
    accumulator's unit roundoff (at least `FP8_TENSOR_CORE_UNIT_ROUNDOFF` for fp8 inputs), plus one
    for an fp16 accumulator's products, plus the output's, plus sqrt(2) * 2 u_tf32 for tf32's input
    rounding; all times `safety` (as the CUTLASS profiler and cuBLAS's tests scale theirs). A kernel
    dropping 1 % of K's terms (about 10 % error) fails wherever the bound is under 10 %: with an fp32
    accumulator at any K, with fp8 inputs up to K of about 70,000, with an fp16 accumulator only up to
    about 1,500 (above that, an fp16 accumulator's own rounding may reach that much). int8 into int32
    is exact: 0. The derivation: docs/kernels.md.
    """
    if K < 0:
        raise ValueError(f"K must be non-negative, got {K}")
    u_acc = types.accumulate.unit_roundoff
    if types.is_fp8:
        u_acc = max(u_acc, FP8_TENSOR_CORE_UNIT_ROUNDOFF)
    accumulation = math.sqrt(max(K, 1)) * u_acc
    products = u_acc if types.accumulate.name == "fp16" else 0.0
    output = types.c.unit_roundoff
    tensor_core_inputs = math.sqrt(2.0) * 2.0 * ELEMENT_TYPES["tf32"].unit_roundoff if types.a.name == "tf32" else 0.0
    return safety * (accumulation + products + output + tensor_core_inputs)


def smallest_normal(dtype: str | ElementType) -> float:
    """The smallest positive normal number of a floating-point `dtype` (below it, its numbers are evenly spaced by
    `smallest_positive`); 1 for an integer type."""
    element = element_type(dtype)
    if element.is_integer:
        return 1.0
    return smallest_positive(element) * 2.0 ** element.mantissa_bits


def subnormal_floor(dtype: str | ElementType) -> float:
    """The absolute error an element of output type `dtype` may carry from rounding alone, however small it is:
    `SAFETY` times half a spacing of the type's subnormal numbers (half its smallest positive number), as
    `error_bound` allows `SAFETY` times C's unit roundoff for C's roundings. A correct kernel may round into C's
    subnormal range more than once: C's own rounding, the epilogue's (alpha x the sum, or adding beta C0, in a type
    as narrow), and a split-K's rounding of each partial sum there. A relative tolerance covers rounding only down
    to the type's smallest normal number: below it, the spacing stops shrinking with the value; at it, this floor
    is what `SAFETY` x C's unit roundoff allows. 0 for an integer type, which a GEMM keeps exact."""
    element = element_type(dtype)
    return 0.0 if element.is_integer else SAFETY * smallest_positive(element) / 2.0


def rounding_direction_visible(types: GemmTypes, K: int) -> bool:
    """Whether a correct GEMM of `types` with inner size `K` leaves C rounded to nearest closely enough that C
    rounded one way (toward zero, down or up) can be told from it: C of 16 bits or fewer, inputs exact in an fp32
    accumulation (not tf32, whose conversion on the tensor cores truncates, nor fp8, whose tensor cores keep about
    14 bits of a sum), and K x the accumulator's unit roundoff at most a quarter of C's, so that even an
    accumulation biased toward zero (tensor cores truncate their fp32 sums) moves C by far less than the half unit
    in the last place that a directed rounding does."""
    if types.c.is_integer or types.c.storage_bytes > 2 or types.accumulate.name != "fp32":
        return False
    if any(operand.name not in ("fp32", "fp16", "bf16") for operand in (types.a, types.b)):
        return False
    return max(K, 1) * types.accumulate.unit_roundoff <= types.c.unit_roundoff / 4
