"""The C types a kernel argument may have: one table for the spec, the planner and the argument packer.

Each entry gives the ``struct`` format (hence size and natural alignment, as
the C ABI lays out kernel parameters) and, for integers, the range a value
must fit. ``ptr`` is a 64-bit device address.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class CType:
    name: str
    format: str                          # struct format, little-endian ("128s": an opaque 128-byte object)
    low: int | None = None               # integer range; None for floating-point and opaque types
    high: int | None = None
    align: int | None = None             # None: natural alignment (the size)
    largest: float | None = None         # floating-point types: the largest finite value

    @property
    def size(self) -> int:
        return struct.calcsize(self.format)

    @property
    def alignment(self) -> int:
        return self.align or self.size

    @property
    def is_opaque(self) -> bool:
        """Passed as raw bytes (a tensor map), not converted from a number."""
        return self.format.endswith("s")

    @property
    def is_float(self) -> bool:
        return self.largest is not None

    def fits(self, value: int) -> bool:
        return self.low is None or self.low <= value <= self.high


C_TYPES: dict[str, CType] = {t.name: t for t in (
    CType("ptr", "Q", 0, 2**64 - 1),
    CType("int32", "i", -2**31, 2**31 - 1),
    CType("uint32", "I", 0, 2**32 - 1),
    CType("int64", "q", -2**63, 2**63 - 1),
    CType("uint64", "Q", 0, 2**64 - 1),
    CType("float32", "f", largest=3.4028234663852886e38),
    CType("float64", "d", largest=1.7976931348623157e308),
    # The narrow scalars of hand-written half-precision and int8 kernels (__half alpha, bool flags, uint8_t).
    CType("int8", "b", -2**7, 2**7 - 1),
    CType("uint8", "B", 0, 2**8 - 1),
    CType("int16", "h", -2**15, 2**15 - 1),
    CType("uint16", "H", 0, 2**16 - 1),
    CType("bool", "?", 0, 1),
    CType("float16", "e", largest=65504.0),
    CType("bfloat16", "H", largest=3.3895313892515355e38),   # packed as its 16 bits (`float_value`)
    # A TMA descriptor passed by value (`const __grid_constant__ CUtensorMap`): 128 bytes, aligned as the
    # <cuda.h> the kernel was built with declares it (TENSOR_MAP_ALIGNMENTS).
    CType("tensormap", "128s", align=128),
)}

# CUtensorMap's alignment: 128 bytes in CUDA 13's <cuda.h> (and driver-gemm's NVRTC stand-in from 13), 64 in
# CUDA 12's (what cuTensorMapEncodeTiled requires). It moves a map inside a struct; a struct holding one is laid
# out at the alignment whose size the kernel's parameter has, the first of these that fits.
TENSOR_MAP_ALIGNMENTS = (128, 64)

def float_value(ctype: str, value: float) -> float:
    """`value` as C type `ctype` holds it (rounded to nearest even): what the kernel reads, and so what the
    reference must compute with. `ValueError` past the type's largest finite value."""
    if ctype == "float64" or value != value or value in (float("inf"), float("-inf")):
        return float(value)
    if not fits_float(ctype, value):
        raise ValueError(f"{value} is beyond the range of {ctype} (largest {C_TYPES[ctype].largest:g})")
    if ctype == "bfloat16":
        return struct.unpack("<f", struct.pack("<I", bfloat16_bits(value) << 16))[0]
    code = "e" if ctype == "float16" else "f"
    return struct.unpack("<" + code, struct.pack("<" + code, value))[0]


# Where rounding to nearest reaches infinity: the largest finite value and half a unit in its last place. Below it
# a value rounds to the largest finite one, as C's conversion does (65519 is 65504 in float16).
_OVERFLOW_AT = {"float16": 65520.0, "bfloat16": 2.0**128 - 2.0**119, "float32": 2.0**128 - 2.0**103}


def fits_float(ctype: str, value: float) -> bool:
    """Whether `value` rounds to a finite number of the floating type `ctype` (infinities and NaN are themselves)."""
    limit = _OVERFLOW_AT.get(ctype)
    return limit is None or value != value or abs(value) == float("inf") or abs(value) < limit


def bfloat16_bits(value: float) -> int:
    """The 16 bits of `value` as a bfloat16: float32's upper half, rounded to nearest even (a NaN stays one)."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if bits & 0x7FFFFFFF > 0x7F800000:
        return (bits >> 16) | 0x40
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def struct_type(field_types: "list[str] | tuple[str, ...]") -> tuple[CType, tuple[int, ...]]:
    """A struct of the given C types passed by value, laid out as the C ABI lays it out: each field at its
    natural alignment, the whole aligned to its widest field. Returns the struct's (opaque) type and the
    offset of each field."""
    layout, offsets = struct_layout([scalar_layout(name) for name in field_types])
    return layout.opaque_type(), offsets


@dataclass(frozen=True)
class Layout:
    """Where a C object's scalars lie: its size and alignment, and the (offset, C type) of every scalar in
    declaration order (a struct's members depth first, an array's elements in index order)."""

    size: int
    alignment: int
    leaves: tuple[tuple[int, str], ...]

    def opaque_type(self) -> CType:
        """The object as one parameter of the kernel: its bytes, at its alignment."""
        return CType(f"struct[{self.size} bytes]", f"{self.size}s", align=self.alignment)


def _round_up(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def scalar_layout(ctype: str, tensor_map_alignment: int | None = None) -> Layout:
    """One scalar (or pointer) of C type `ctype`; a tensor map at `tensor_map_alignment` where given."""
    known = C_TYPES[ctype]
    alignment = tensor_map_alignment if ctype == "tensormap" and tensor_map_alignment else known.alignment
    return Layout(known.size, alignment, ((0, ctype),))


def array_layout(element: Layout, count: int) -> Layout:
    """``T x[count]``: `count` elements back to back (an element's size is already a multiple of its
    alignment), aligned as one element."""
    if count < 1:
        raise ValueError(f"an array has at least one element, got {count}")
    leaves = tuple((index * element.size + at, ctype) for index in range(count) for at, ctype in element.leaves)
    return Layout(element.size * count, element.alignment, leaves)


def struct_layout(members: "list[Layout] | tuple[Layout, ...]") -> tuple[Layout, tuple[int, ...]]:
    """A struct of `members` in declaration order, as the C ABI (and so nvcc and NVRTC) lays it out: each
    member at the next offset that is a multiple of its alignment, the whole padded to a multiple of its
    widest member's alignment. Returns its layout and each member's offset."""
    offsets: list[int] = []
    offset, widest = 0, 1
    leaves: list = []
    for member in members:
        offset = _round_up(offset, member.alignment)
        offsets.append(offset)
        leaves.extend((offset + at, ctype) for at, ctype in member.leaves)
        offset += member.size
        widest = max(widest, member.alignment)
    return Layout(_round_up(max(offset, 1), widest), widest, tuple(leaves)), tuple(offsets)


# The argument names a signature may use bare, with their C types: A, B and C
# are the matrices (device pointers); the sizes are 32-bit ints as the seed
# kernels declare them; alpha and beta are floats. The leading dimensions and
# the batch count are int32, the batch strides (elements between matrices)
# int64, as cuBLAS's strided-batched calls and the kernels of kernels/types/ take them.
STANDARD_ARGUMENTS = {
    "A": "ptr", "B": "ptr", "C": "ptr",
    "M": "int32", "N": "int32", "K": "int32",
    "alpha": "float32", "beta": "float32",
    "lda": "int32", "ldb": "int32", "ldc": "int32",
    "strideA": "int64", "strideB": "int64", "strideC": "int64",
    "batch": "int32",
}
DEFAULT_SIGNATURE = ("A", "B", "C", "M", "N", "K")
