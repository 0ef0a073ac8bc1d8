"""A weight-only quantized B on one shape: the codes, scales and zero points it is drawn from, and their buffers.

A kernel that takes B as integer codes (AWQ, GPTQ, Marlin) computes with B = (q - z) * s, q a code in
[0, 2^bits) per element, s and z per `group` rows of B and column. `draw_quantized` draws q, z and s = 2^e so
that every (q - z) * s is exact in fp16 and bf16: the B the case uploads, the reference multiplies and the kernel
dequantizes are then the same numbers, and the check needs nothing new. With a codebook (NF4, FP4), B =
codebook[q] * s instead, the codebook's values rounded to B's type and s drawn so that each product stays exact.
`QuantizedPart` is one buffer's layout on the shape (planned, its size checked, without drawing);
`QuantizedPart.laid_out` lays the drawn values out in it: packed with NumPy a bit field at a time (32 / bits passes
over the grid, none over its elements), row after row or column after column; or the spec's builder does, which
`planning.buffer_plans` also tries while planning on a draw of its own. No GPU. The fields: docs/kernels.md,
"Quantized weights".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specfile.model import QUANTIZED_BITS, HostBuilder

# A scale is 2^e for e drawn from this range. |q - z| < 2^bits <= 256 has at most 8 significant bits, as bf16's
# significand (fp16's has 11); every nonzero (q - z) * s is at least 2^-7, above fp16's smallest normal (2^-14), and
# below 2^8 * 2^-4, far under its largest: every (q - z) * s is exact in both.
QUANTIZED_SCALE_EXPONENTS = (-7, -4)
assert 2 ** max(QUANTIZED_BITS) <= 2 ** 8 and QUANTIZED_SCALE_EXPONENTS[0] >= -14 \
    and 2 ** max(QUANTIZED_BITS) * 2.0 ** QUANTIZED_SCALE_EXPONENTS[1] < 65504, \
    "every (q - z) * s must be exact in fp16 and bf16"
# The most elements of B whose draw `plan` lays out through a pack builder to check what it returns: a builder is
# given the codes and copies them at least once, and `plan` goes through every case of a sweep; a larger B's builder
# runs only when its case is bound.
PLAN_DRAW_ELEMENTS = 1 << 26
# With a codebook (B = codebook[q] * s) a scale is 2^e for e drawn from this range instead: a codebook value is
# rounded to B's type and is 0 or of a magnitude from 2^-11 to 2^15 (`specfile.device_buffers.CODEBOOK_MAGNITUDES`),
# so its product with 2^-3 is still a normal fp16 number (2^-14 up) and with 1 within fp16's range: exact.
CODEBOOK_SCALE_EXPONENTS = (-3, 0)
# Mixed into the seed of the draw, apart from the one that draws an unquantized B of the same shape.
_DRAW_SALT = 0x5157


@dataclass(frozen=True)
class QuantizedDraw:
    """The values a quantized B of K x N is drawn from: `codes` (K x N, uint8), `exponents` (groups x N, int8:
    s = 2^e) and `zeros` (groups x N, uint8; None: every zero point is the symmetric 2^(bits - 1)); or, with a
    `codebook` (2^bits float64 values), B = codebook[q] * s."""

    bits: int
    group: int
    codes: np.ndarray
    exponents: np.ndarray
    zeros: np.ndarray | None
    codebook: np.ndarray | None = None

    @property
    def groups(self) -> int:
        return self.codes.shape[0] // self.group

    def scales(self) -> np.ndarray:
        """s, groups x N float64."""
        return np.ldexp(1.0, self.exponents.astype(np.int64))

    def zero_points(self) -> np.ndarray:
        """z, groups x N integers: drawn, or 2^(bits - 1) everywhere."""
        if self.zeros is not None:
            return self.zeros
        return np.full(self.exponents.shape, 1 << (self.bits - 1), dtype=np.uint8)

    def values(self) -> np.ndarray:
        """B = (q - z) * s, or codebook[q] * s, K x N float64, scaled a group of rows at a time in place (no K x N
        temporary)."""
        rows, cols = self.codes.shape
        if self.codebook is not None:
            values = self.codebook[self.codes]
            by_group = values.reshape(self.groups, self.group, cols)
        else:
            values = self.codes.astype(np.float64)
            by_group = values.reshape(self.groups, self.group, cols)
            by_group -= self.zero_points().astype(np.float64)[:, None, :]
        by_group *= self.scales()[:, None, :]
        return values

    @property
    def nbytes(self) -> int:
        return self.codes.nbytes + self.exponents.nbytes + (self.zeros.nbytes if self.zeros is not None else 0)


def draw_quantized(K: int, N: int, bits: int, group: int, with_zeros: bool, seed: int,
                   codebook: tuple[float, ...] | None = None) -> QuantizedDraw:
    """q uniform in [0, 2^bits), z uniform in [0, 2^bits) per group and column where the kernel takes zero points,
    s = 2^e with e uniform in `QUANTIZED_SCALE_EXPONENTS`, from `seed` (the case's); with a `codebook` (its values
    as B's type holds them), no zero points and e in `CODEBOOK_SCALE_EXPONENTS`."""
    assert bits in QUANTIZED_BITS and group >= 1 and K % group == 0, (bits, group, K)
    assert codebook is None or (len(codebook) == 1 << bits and not with_zeros), (len(codebook), bits, with_zeros)
    rng = np.random.default_rng([seed, bits, group, int(with_zeros), _DRAW_SALT])
    codes = rng.integers(0, 1 << bits, size=(K, N), dtype=np.uint8)
    low, high = QUANTIZED_SCALE_EXPONENTS if codebook is None else CODEBOOK_SCALE_EXPONENTS
    exponents = rng.integers(low, high + 1, size=(K // group, N), dtype=np.int8)
    zeros = rng.integers(0, 1 << bits, size=(K // group, N), dtype=np.uint8) if with_zeros else None
    table = np.array(codebook, dtype=np.float64) if codebook is not None else None
    return QuantizedDraw(bits, group, codes, exponents, zeros, table)


def pack_codes(grid: np.ndarray, bits: int, along: str, order: tuple[int, ...] | None = None) -> np.ndarray:
    """`grid` (rows x cols of codes, rows along K) packed 32 / bits to a uint32 along `along` (``K``: runs down a
    column, ``N``: along a row): bit field i (bits i * bits up) of a word holds position ``order[i]`` (default i)
    of its run; a run past the grid's edge is completed with code 0. Rows x ceil(cols / per) words along N,
    ceil(rows / per) x cols along K."""
    per = 32 // bits
    axis = 0 if along == "K" else 1
    length = grid.shape[axis]
    words = -(-length // per)
    if words * per != length:
        pad = [(0, 0), (0, 0)]
        pad[axis] = (0, words * per - length)
        grid = np.pad(grid, pad)
    shape = (words, grid.shape[1]) if axis == 0 else (grid.shape[0], words)
    packed = np.zeros(shape, dtype=np.uint32)
    for field, position in enumerate(order if order is not None else range(per)):
        run = grid[position::per, :] if axis == 0 else grid[:, position::per]
        packed |= run.astype(np.uint32) << np.uint32(field * bits)
    return packed


@dataclass(frozen=True)
class QuantizedPart:
    """One buffer of a quantized B on one shape: its `part` (codes, scales, zeros) of B (K x N) with `bits` and
    `group`, stored as `element`, packed along `along` (None: one to an element) in `order`, the grid of values or
    words row after row (`major` ``row``) or column after column (``col``), or laid out by `builder` (called with
    the drawn values and the launch's `values`); `zeros` says whether the kernel takes zero points at all (else
    each is 2^(bits - 1))."""

    part: str
    element: str
    K: int
    N: int
    bits: int
    group: int
    zeros: bool
    along: str | None = None
    order: tuple[int, ...] | None = None
    builder: HostBuilder | None = None
    values: tuple[tuple[str, Any], ...] = ()
    major: str = "row"
    codebook: tuple[float, ...] | None = None   # B = codebook[q] * s: its values as B's type holds them
    codebook_name: str | None = None             # nf4, fp4; None for one the spec lists

    @property
    def grid(self) -> tuple[int, int]:
        """The rows x cols of the values it holds: K x N codes, a scale or zero point per group and column, or the
        codebook's values in a row."""
        if self.part == "codebook":
            return 1, 1 << self.bits
        return (self.K, self.N) if self.part == "codes" else (self.K // self.group, self.N)

    @property
    def per_element(self) -> int:
        return 32 // self.bits if self.along is not None else 1

    @property
    def stored(self) -> tuple[int, int]:
        """The rows x cols of elements it is laid out in (in `major` order); the grid itself where unpacked."""
        rows, cols = self.grid
        per = self.per_element
        if self.along == "K":
            return -(-rows // per), cols
        if self.along == "N":
            return rows, -(-cols // per)
        return rows, cols

    @property
    def needed(self) -> int | None:
        """The elements its layout needs; None for a builder's (its numbers decide)."""
        if self.builder is not None:
            return None
        rows, cols = self.stored
        return rows * cols

    def describe(self) -> str:
        """What the buffer holds, as `plan` notes it."""
        rows, cols = self.stored
        major = f"{self.major}-major" if self.major == "row" else f"column-major: {cols} x {rows} row-major"
        if self.part == "scales":
            laid = f", {self.built()}" if self.builder is not None else f" ({rows} x {cols}, {major})"
            return f"a scale per {self.group} rows of B and column, {self.element}{laid}"
        table = f"the {self.codebook_name.upper()} codebook" if self.codebook_name is not None else "a codebook"
        if self.part == "codebook":
            return f"{table}'s {cols} values (B = codebook[q] * s), {self.element}, as B's type rounds them"
        symmetric = f" (no zero points: each is {1 << (self.bits - 1)})" if not self.zeros else ""
        if self.codebook is not None:
            symmetric = f" looked up in {table} (B = codebook[q] * s)"
        what = f"B's {self.bits}-bit codes{symmetric}" if self.part == "codes" else \
            f"a {self.bits}-bit zero point per {self.group} rows of B and column"
        if self.builder is not None:
            return f"{what}, {self.built()}"
        if self.along is None:
            return f"{what}, one to a {self.element} ({rows} x {cols}, {major})"
        order = f", fields in order {list(self.order)}" if self.order is not None else ""
        return (f"{what}, {self.per_element} to a{'n' if self.element[0] == 'i' else ''} {self.element} along "
                f"{self.along} ({rows} x {cols} words, {major}{order})")

    def built(self) -> str:
        """How its builder lays it out, as `describe` says it."""
        assert self.builder is not None
        unchecked = f" (not tried while planning: B has more than {PLAN_DRAW_ELEMENTS:,} elements)" \
            if self.K * self.N > PLAN_DRAW_ELEMENTS else ""
        return f"laid out by {self.builder.text} when the case is bound{unchecked}"

    def grid_values(self, draw: QuantizedDraw) -> np.ndarray:
        """The grid of values it holds: codes, zero points (integers) or scales (float64)."""
        if self.part == "codes":
            return draw.codes
        if self.part == "codebook":
            return np.array([self.codebook], dtype=np.float64)
        return draw.scales() if self.part == "scales" else draw.zero_points()

    def builder_values(self, draw: QuantizedDraw) -> dict[str, Any]:
        """What a pack builder is given: the drawn codes, scales and zero points, group and bits, and the launch's
        values (M, N, K, the params) by name. The arrays are copies: a builder that changes them in place (a format
        storing z - 1) must not change the draw the reference was made from and later cases lay out again."""
        return {**dict(self.values), "codes": draw.codes.copy(), "scales": draw.scales(),
                "zeros": draw.zero_points().copy(), "group": self.group, "bits": self.bits,
                "codebook": draw.codebook.copy() if draw.codebook is not None else None}

    def laid_out(self, draw: QuantizedDraw) -> np.ndarray:
        """Its layout's numbers (not a builder's), in C order: the packed words, or one value to an element, row
        after row or column after column."""
        grid = self.grid_values(draw)
        if self.along is not None:
            grid = pack_codes(grid, self.bits, self.along, self.order)
        return (grid if self.major == "row" else grid.T).reshape(-1)
