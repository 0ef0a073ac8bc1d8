"""TMA tensor maps: planned and checked without a GPU, encoded with cuTensorMapEncodeTiled on one.

A tensor map tells Hopper's tensor memory accelerator how a matrix lies in global memory and which
box of it one copy moves into shared memory. A kernel takes it as a 128-byte
``const __grid_constant__`` parameter, encoded per launch from the buffer's address. Every rule
below is a requirement of cuTensorMapEncodeTiled, checked here so that the driver's bare
CUDA_ERROR_INVALID_VALUE becomes a message naming the field. Using them: docs/hopper.md.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from .check import check

TENSOR_MAP_BYTES = 128            # sizeof(CUtensorMap): 16 64-bit words
TENSOR_MAP_ALIGN = 64             # the address alignment cuTensorMapEncodeTiled requires of the map
MAX_RANK = 5
MAX_BOX_EXTENT = 256
MAX_GLOBAL_EXTENT = 2**32
MAX_GLOBAL_STRIDE = 2**40
GLOBAL_ALIGN = 16                 # bytes: the global address and every stride

# Element type name -> (CUtensorMapDataType member, bytes per element, is floating point).
ELEMENT_TYPES = {
    "uint8": ("UINT8", 1, False), "fp8_e4m3": ("UINT8", 1, True), "fp8_e5m2": ("UINT8", 1, True),
    "uint16": ("UINT16", 2, False), "fp16": ("FLOAT16", 2, True), "bf16": ("BFLOAT16", 2, True),
    "uint32": ("UINT32", 4, False), "int32": ("INT32", 4, False), "fp32": ("FLOAT32", 4, True),
    "tf32": ("TFLOAT32", 4, True), "uint64": ("UINT64", 8, False), "int64": ("INT64", 8, False),
    "fp64": ("FLOAT64", 8, True),
}
SWIZZLE_BYTES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
L2_PROMOTIONS = ("none", "64B", "128B", "256B")
OOB_FILLS = ("zero", "nan")      # nan: NaN_REQUEST_ZERO_FMA, floating-point types only


@dataclass(frozen=True)
class TensorMapPlan:
    """One tensor map, dimensions innermost first (for a row-major M x K matrix: (K, M)).

    `strides_bytes` holds the byte stride of every dimension but the first
    (whose elements are contiguous); `box` the extents one copy moves.
    """

    element_type: str
    extents: tuple[int, ...]
    strides_bytes: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: str = "none"
    l2_promotion: str = "none"
    oob_fill: str = "zero"
    element_strides: tuple[int, ...] | None = None

    @classmethod
    def for_matrix(cls, element_type: str, rows: int, cols: int, leading_dimension: int, box_rows: int,
                   box_cols: int, batch: int = 1, batch_stride: int = 0, **options) -> "TensorMapPlan":
        """A row-major rows x cols matrix (leading dimension in elements), optionally a strided batch of them."""
        size = ELEMENT_TYPES[element_type][1] if element_type in ELEMENT_TYPES else 1
        extents: tuple[int, ...]
        strides: tuple[int, ...]
        box: tuple[int, ...]
        extents, strides, box = (cols, rows), (leading_dimension * size,), (box_cols, box_rows)
        if batch > 1:
            extents, strides, box = extents + (batch,), strides + (batch_stride * size,), box + (1,)
        return cls(element_type, extents, strides, box, **options)

    @property
    def element_bytes(self) -> int:
        return ELEMENT_TYPES[self.element_type][1]

    @property
    def rank(self) -> int:
        return len(self.extents)

    @property
    def box_bytes(self) -> int:
        """Shared-memory bytes one copy fills."""
        count = 1
        for extent in self.box:
            count *= extent
        return count * self.element_bytes

    def problems(self, address: int | None = None) -> list[tuple[str, str]]:
        """Every rule the encoder enforces, as (field, message); `address` is checked when given."""
        found: list[tuple[str, str]] = []
        if self.element_type not in ELEMENT_TYPES:
            return [("type", f"unknown element type {self.element_type!r} (known: {', '.join(ELEMENT_TYPES)})")]
        size = self.element_bytes
        if not 1 <= self.rank <= MAX_RANK:
            found.append(("extents", f"rank {self.rank}: a tensor map has 1 to {MAX_RANK} dimensions"))
        if len(self.strides_bytes) != self.rank - 1 or len(self.box) != self.rank:
            found.append(("box", f"{self.rank} extents need {self.rank - 1} strides and {self.rank} box extents, "
                                 f"got {len(self.strides_bytes)} and {len(self.box)}"))
            return found
        for axis, extent in enumerate(self.extents):
            if not 1 <= extent <= MAX_GLOBAL_EXTENT:
                found.append(("extents", f"dimension {axis} extent {extent} must be 1 to 2^32"))
        previous = self.extents[0] * size
        for axis, stride in enumerate(self.strides_bytes, start=1):
            if stride % GLOBAL_ALIGN or not 0 < stride < MAX_GLOBAL_STRIDE:
                found.append(("strides", f"dimension {axis} stride {stride} bytes must be a positive multiple of "
                                         f"{GLOBAL_ALIGN} below 2^40 (a row of {self.extents[0]} x {size}-byte "
                                         "elements needs padding to 16 bytes)"))
            elif stride < previous:
                found.append(("strides", f"dimension {axis} stride {stride} bytes is less than the "
                                         f"{previous} bytes of the dimension inside it: rows would overlap"))
            previous = stride * self.extents[axis]
        for axis, extent in enumerate(self.box):
            if not 1 <= extent <= MAX_BOX_EXTENT:
                found.append(("box", f"box extent {extent} on dimension {axis} must be 1 to {MAX_BOX_EXTENT}"))
        inner_bytes = self.box[0] * size
        if inner_bytes % 16:
            found.append(("box", f"the box's inner extent is {inner_bytes} bytes ({self.box[0]} x {size}); "
                                 "it must be a multiple of 16"))
        if self.swizzle not in SWIZZLE_BYTES:
            found.append(("swizzle", f"swizzle is one of {', '.join(SWIZZLE_BYTES)}, got {self.swizzle!r}"))
        elif SWIZZLE_BYTES[self.swizzle] and inner_bytes > SWIZZLE_BYTES[self.swizzle]:
            found.append(("swizzle", f"the box's inner extent of {inner_bytes} bytes is wider than the "
                                     f"{self.swizzle} swizzle span: use box inner extent <= "
                                     f"{SWIZZLE_BYTES[self.swizzle] // size} elements or a wider swizzle"))
        if self.l2_promotion not in L2_PROMOTIONS:
            found.append(("l2_promotion", f"l2_promotion is one of {', '.join(L2_PROMOTIONS)}, "
                                          f"got {self.l2_promotion!r}"))
        if self.oob_fill not in OOB_FILLS:
            found.append(("oob_fill", f"oob_fill is zero or nan, got {self.oob_fill!r}"))
        elif self.oob_fill == "nan" and not ELEMENT_TYPES[self.element_type][2]:
            found.append(("oob_fill", f"a NaN fill needs a floating-point type, not {self.element_type}"))
        for stride in self.element_strides or ():
            if not 1 <= stride <= 8:
                found.append(("element_strides", f"element strides are 1 to 8, got {stride}"))
        if address is not None and address % GLOBAL_ALIGN:
            found.append(("address", f"global address {address:#x} is not {GLOBAL_ALIGN}-byte aligned"))
        return found

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.element_type, "extents": list(self.extents), "strides_bytes": list(self.strides_bytes),
                "box": list(self.box), "swizzle": self.swizzle, "l2_promotion": self.l2_promotion,
                "oob_fill": self.oob_fill, "box_bytes": self.box_bytes}

    def encode(self, driver, address: int) -> bytes:
        """The 128 bytes of the map for data at `address` (cuTensorMapEncodeTiled; needs the driver)."""
        data_type = getattr(driver.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{ELEMENT_TYPES[self.element_type][0]}")
        swizzle = getattr(driver.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{self.swizzle.upper()}")
        promotion = getattr(driver.CUtensorMapL2promotion,
                            "CU_TENSOR_MAP_L2_PROMOTION_NONE" if self.l2_promotion == "none"
                            else f"CU_TENSOR_MAP_L2_PROMOTION_L2_{self.l2_promotion}")
        fill = (driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE if self.oob_fill == "zero"
                else driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
        tensor_map = check(driver.cuTensorMapEncodeTiled(
            data_type, self.rank, address, [driver.cuuint64_t(v) for v in self.extents],
            [driver.cuuint64_t(v) for v in self.strides_bytes], [driver.cuuint32_t(v) for v in self.box],
            [driver.cuuint32_t(v) for v in self.element_strides or (1,) * self.rank],
            driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion, fill),
            "cuTensorMapEncodeTiled")
        return tensor_map_bytes(tensor_map)


def tensor_map_bytes(tensor_map) -> bytes:
    """The opaque words of a bindings ``CUtensorMap`` as the 128 bytes a kernel parameter holds."""
    words = [int(word) for word in tensor_map.opaque]
    return struct.pack(f"<{len(words)}Q", *words)
