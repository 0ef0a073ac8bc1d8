"""A kernel's own device buffers on one shape: their sizes evaluated, their contents worked out.

A ``buffer`` argument of the signature (`specfile.model.DeviceBufferArgument`) becomes a
`BufferPlan` per case: its element count from its size expression, its bytes before every launch
(`initial_bytes`), and, when those bytes are one 32-bit word repeated (zero, or a constant of a
4-byte type), that word, so that the reset before each sample is one ``cuMemsetD32Async``
instead of a copy. Pure: no GPU. How the reset stays out of the timed region: docs/timing.md.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..argtypes import C_TYPES, bfloat16_bits
from ..specfile import expr
from ..specfile.limits import MAX_BUFFER_BYTES
from ..specfile.model import KernelSpec

# The NumPy type of each element a buffer may hold (little-endian, as the GPU reads it).
NUMPY_ELEMENTS = {"int32": "<i4", "uint32": "<u4", "int64": "<i8", "uint64": "<u8", "float32": "<f4",
                  "float64": "<f8", "int8": "i1", "uint8": "u1", "int16": "<i2", "uint16": "<u2", "bool": "?",
                  "float16": "<f2", "bfloat16": "<u2"}     # bfloat16 as its bits (`argtypes.bfloat16_bits`)


# The largest whole number up to which every whole number is exact in a floating type: an iota past it repeats.
EXACT_WHOLE_NUMBERS = {"float16": 2**11, "bfloat16": 2**8, "float32": 2**24, "float64": 2**53}


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

    @property
    def nbytes(self) -> int:
        return self.count * C_TYPES[self.element].size

    def initial_bytes(self) -> np.ndarray:
        """Its contents before a launch, as the bytes to upload."""
        dtype = np.dtype(NUMPY_ELEMENTS[self.element])
        if self.fill == "zero":
            return np.zeros(self.nbytes, dtype=np.uint8)
        if self.element == "bfloat16":
            values = range(self.count) if self.fill == "iota" else self.values
            pattern = np.array([bfloat16_bits(float(value)) for value in values], dtype=dtype)
            return np.resize(pattern, self.count).view(np.uint8)
        if self.fill == "iota":
            return np.arange(self.count, dtype=dtype).view(np.uint8)
        pattern = np.array(self.values, dtype=dtype)
        return np.resize(pattern, self.count).view(np.uint8)

    def repeated_word(self) -> int | None:
        """The 32-bit word its contents repeat, when they are one (reset with a memset); else None."""
        if self.fill == "zero":
            return 0
        if self.fill != "values" or len(set(self.values)) != 1:
            return None
        size = C_TYPES[self.element].size
        if size != 4:
            return None
        return struct.unpack("<I", np.array(self.values[:1], dtype=NUMPY_ELEMENTS[self.element]).tobytes())[0]

    def as_dict(self) -> dict:
        return {"name": self.name, "element": self.element, "count": self.count, "bytes": self.nbytes,
                "fill": self.fill if self.fill != "values" else list(self.values[:8])}


def plan_buffers(kernel: KernelSpec, env: dict, argument_values: dict, problem) -> dict[str, BufferPlan]:
    """The `BufferPlan` of every device buffer of `kernel` on the shape of `env`, by argument name; a size
    that does not evaluate, is below 1, or exceeds `MAX_BUFFER_BYTES`, or a value that does not fit, is
    reported through `problem(message, field)` and the buffer left out. alpha and beta by pointer take
    their values from `argument_values` (fp8 scales folded into alpha there)."""
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
        exact = EXACT_WHOLE_NUMBERS.get(buffer.element)
        if buffer.fill == "iota" and not (count - 1 <= exact if exact is not None else element.fits(count - 1)):
            problem(f"buffer {argument.name}: iota up to {count - 1:,} does not fit {buffer.element}"
                    + (f" (its whole numbers are exact up to {exact:,})" if exact is not None else ""),
                    f"{path}.fill")
            continue
        plans[argument.name] = BufferPlan(argument.name, buffer.element, count, buffer.fill, values,
                                          buffer.read_only)
    return plans
