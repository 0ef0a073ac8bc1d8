"""TMA tensor maps: planned and checked without a GPU, encoded with cuTensorMapEncodeTiled on one.

A tensor map tells Hopper's tensor memory accelerator how a tensor of rank 1 to 5 lies in global
memory and which box of it one copy moves into shared memory. A kernel takes it as a 128-byte
``const __grid_constant__`` parameter, or as a pointer to a copy in device memory, encoded per
launch from the buffer's address. Every rule below is a requirement cuTensorMapEncodeTiled's
documentation states, checked here so that the driver's bare CUDA_ERROR_INVALID_VALUE becomes a
message naming the field and the rule; nothing stricter (strides may overlap, a box may be wider
than its dimension: the driver allows both). `TensorMapPlan.aliased_dimensions` says where two coordinates of
a map name one element, for a caller that knows the map describes a matrix. Using them: docs/hopper.md.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from .check import check

TENSOR_MAP_BYTES = 128            # sizeof(CUtensorMap): 16 64-bit words
TENSOR_MAP_ALIGN = 64             # the address alignment cuTensorMapEncodeTiled requires of the map
POINTER_BYTES = 8                 # a const CUtensorMap* parameter: the map is copied to device memory
MAX_RANK = 5
MAX_BOX_EXTENT = 256
MAX_GLOBAL_EXTENT = 2**32
MAX_GLOBAL_STRIDE = 2**40
GLOBAL_ALIGN = 16                 # bytes: the global address and every stride (32 with 32-byte interleave)
MAX_ELEMENT_STRIDE = 8

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
INTERLEAVES = ("none", "16B", "32B")


@dataclass(frozen=True)
class TensorMapPlan:
    """One tensor map, dimensions innermost first (for a row-major M x K matrix: (K, M)), as
    cuTensorMapEncodeTiled takes it.

    `strides_bytes` holds the byte stride of every dimension but the first
    (whose elements are contiguous); `box` the extents one copy moves;
    `element_strides` the step between the elements a copy takes in each
    dimension (None: 1 everywhere).
    """

    element_type: str
    extents: tuple[int, ...]
    strides_bytes: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: str = "none"
    l2_promotion: str = "none"
    oob_fill: str = "zero"
    element_strides: tuple[int, ...] | None = None
    interleave: str = "none"

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
        """Every rule the encoder states, as (field, message naming the rule); `address` is checked when given.

        The rules of cuTensorMapEncodeTiled (CUDA driver API, Tensor Map Object
        Management): rank 1 to 5 (3 to 5 with interleave); every dimension 1 to
        2^32; every stride a multiple of 16 bytes (32 with 32-byte interleave)
        below 2^40, positive but for a dimension of one element; box extents 1
        to 256; without interleave, a box's inner extent a multiple of 16 bytes
        and, with a swizzle, at most the swizzle's span; 32-byte interleave only with the 32-byte swizzle; element strides
        1 to 8; a NaN fill only for floating-point types; the global address
        16-byte aligned (32 with 32-byte interleave).
        """
        found: list[tuple[str, str]] = []
        if self.element_type not in ELEMENT_TYPES:
            return [("type", f"unknown element type {self.element_type!r} (known: {', '.join(ELEMENT_TYPES)})")]
        size = self.element_bytes
        interleaved = self.interleave != "none"
        if self.interleave not in INTERLEAVES:
            found.append(("interleave", f"interleave is one of {', '.join(INTERLEAVES)}, got {self.interleave!r}"))
        if not 1 <= self.rank <= MAX_RANK:
            found.append(("dims", f"rank {self.rank}: a tensor map has 1 to {MAX_RANK} dimensions"))
        elif interleaved and self.rank < 3:
            found.append(("interleave", f"rank {self.rank}: an interleaved map needs rank 3 to {MAX_RANK}"))
        if len(self.strides_bytes) != self.rank - 1:
            found.append(("strides", f"{self.rank} dimensions need {self.rank - 1} strides (every dimension but "
                                     f"the innermost), got {len(self.strides_bytes)}"))
        if len(self.box) != self.rank:
            found.append(("box", f"{self.rank} dimensions need {self.rank} box extents, got {len(self.box)}"))
        if self.element_strides is not None and len(self.element_strides) != self.rank:
            found.append(("element_strides", f"{self.rank} dimensions need {self.rank} element strides, "
                                             f"got {len(self.element_strides)}"))
        if found:
            return found
        for axis, extent in enumerate(self.extents):
            if not 1 <= extent <= MAX_GLOBAL_EXTENT:
                found.append(("dims", f"dimension {axis} is {extent} elements: each must be 1 to 2^32"))
        stride_align = 32 if self.interleave == "32B" else GLOBAL_ALIGN
        for axis, stride in enumerate(self.strides_bytes, start=1):
            # A dimension of one element is never stepped along: its stride may be 0, as the encoder's "a multiple
            # of 16" allows (kernels that add unit dimensions for a rank their copies need write it so).
            if stride == 0 and self.extents[axis] == 1:
                continue
            if stride % stride_align or not 0 < stride < MAX_GLOBAL_STRIDE:
                padding = (f" (a row of {self.extents[0]} x {size}-byte elements needs padding to "
                           f"{stride_align} bytes)" if axis == 1 and stride % stride_align else "")
                found.append(("strides", f"dimension {axis} stride {stride} bytes must be a positive multiple of "
                                         f"{stride_align} below 2^40{padding}"))
        for axis, extent in enumerate(self.box):
            if not 1 <= extent <= MAX_BOX_EXTENT:
                found.append(("box", f"box extent {extent} on dimension {axis} must be 1 to {MAX_BOX_EXTENT}"))
        inner_bytes = self.box[0] * size
        if not interleaved and inner_bytes % 16:
            found.append(("box", f"the box's inner extent is {inner_bytes} bytes ({self.box[0]} x {size}); "
                                 "without interleave it must be a multiple of 16"))
        if self.swizzle not in SWIZZLE_BYTES:
            found.append(("swizzle", f"swizzle is one of {', '.join(SWIZZLE_BYTES)}, got {self.swizzle!r}"))
        elif self.interleave == "32B" and self.swizzle != "32B":
            found.append(("swizzle", f"32-byte interleave needs the 32B swizzle, got {self.swizzle}"))
        elif not interleaved and SWIZZLE_BYTES[self.swizzle] and inner_bytes > SWIZZLE_BYTES[self.swizzle]:
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
        for axis, stride in enumerate(self.element_strides or ()):
            if not 1 <= stride <= MAX_ELEMENT_STRIDE:
                found.append(("element_strides", f"element stride {stride} on dimension {axis} must be 1 to "
                                                 f"{MAX_ELEMENT_STRIDE}"))
        address_align = 32 if self.interleave == "32B" else GLOBAL_ALIGN
        if address is not None and address % address_align:
            found.append(("address", f"global address {address:#x} is not {address_align}-byte aligned"))
        return found

    @property
    def reach_bytes(self) -> int:
        """One past the furthest byte the map can address from its base: what its buffer must hold."""
        return self.element_bytes + sum((extent - 1) * stride for extent, stride
                                        in zip(self.extents, (self.element_bytes, *self.strides_bytes)))

    def aliased_dimensions(self) -> list[tuple[int, int, int]]:
        """Where one step along a dimension lands on an element another dimension already names, as
        (dimension, other dimension, steps): dimension `dimension`'s stride is `steps` strides of `other`,
        fewer than `other`'s extent, so coordinate 1 of the first and `steps` of the other address the same
        byte. Such a map names elements twice (a row longer than the stride between rows, say); a map whose
        dimensions overlap without meeting (a panel's columns inside its rows) is not listed. The first such
        `other` of each dimension; nothing for an interleaved map, whose innermost dimension is not elements."""
        if self.interleave != "none" or len(self.strides_bytes) != self.rank - 1:
            return []
        strides = (self.element_bytes, *self.strides_bytes)
        found = []
        for dimension in range(1, self.rank):
            step = strides[dimension]
            if self.extents[dimension] < 2 or step <= 0:
                continue
            for other in range(self.rank):
                if other != dimension and strides[other] > 0 and step % strides[other] == 0 \
                        and step // strides[other] < self.extents[other]:
                    found.append((dimension, other, step // strides[other]))
                    break
        return found

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.element_type, "extents": list(self.extents), "strides_bytes": list(self.strides_bytes),
                "box": list(self.box), "element_strides": list(self.element_strides or (1,) * self.rank),
                "interleave": self.interleave, "swizzle": self.swizzle, "l2_promotion": self.l2_promotion,
                "oob_fill": self.oob_fill, "rank": self.rank, "box_bytes": self.box_bytes}

    def describe(self) -> str:
        """The map in one line, innermost dimension first, as `plan` prints it."""
        strides = self.element_strides or (1,) * self.rank
        text = (f"{self.element_type}, rank {self.rank}, dims {{{', '.join(map(str, self.extents))}}}, "
                f"strides {{{', '.join(map(str, self.strides_bytes))}}} B, box {{{', '.join(map(str, self.box))}}} "
                f"({self.box_bytes} B), swizzle {self.swizzle}")
        if any(stride != 1 for stride in strides):
            text += f", element strides {{{', '.join(map(str, strides))}}}"
        for name, value, default in (("interleave", self.interleave, "none"), ("L2 promotion", self.l2_promotion, "none"),
                                     ("OOB fill", self.oob_fill, "zero")):
            if value != default:
                text += f", {name} {value}"
        return text

    def encode(self, driver, address: int) -> bytes:
        """The 128 bytes of the map for data at `address` (cuTensorMapEncodeTiled; needs the driver)."""
        data_type = getattr(driver.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{ELEMENT_TYPES[self.element_type][0]}")
        swizzle = getattr(driver.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{self.swizzle.upper()}")
        promotion = getattr(driver.CUtensorMapL2promotion,
                            "CU_TENSOR_MAP_L2_PROMOTION_NONE" if self.l2_promotion == "none"
                            else f"CU_TENSOR_MAP_L2_PROMOTION_L2_{self.l2_promotion}")
        fill = (driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE if self.oob_fill == "zero"
                else driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
        # cuda-python passes an empty list as a null pointer, which the driver refuses even where it reads no
        # stride: a rank-1 map gets one it never reads, its row's bytes rounded up to the 16 a stride would need.
        strides = self.strides_bytes or (-(-self.extents[0] * self.element_bytes // GLOBAL_ALIGN) * GLOBAL_ALIGN,)
        tensor_map = check(driver.cuTensorMapEncodeTiled(
            data_type, self.rank, address, [driver.cuuint64_t(v) for v in self.extents],
            [driver.cuuint64_t(v) for v in strides], [driver.cuuint32_t(v) for v in self.box],
            [driver.cuuint32_t(v) for v in self.element_strides or (1,) * self.rank],
            getattr(driver.CUtensorMapInterleave, f"CU_TENSOR_MAP_INTERLEAVE_{self.interleave.upper()}"),
            swizzle, promotion, fill),
            "cuTensorMapEncodeTiled")
        return tensor_map_bytes(tensor_map)


def passed_by_pointer(passing: str | None, parameter_bytes: int | None) -> bool:
    """Whether a map reaches its kernel as the address of a copy in device memory: ``pass: pointer``, or no
    ``pass:`` and an 8-byte parameter (a ``const CUtensorMap*``) in the compiled image."""
    return passing == "pointer" or (passing is None and parameter_bytes == POINTER_BYTES)


def tensor_map_bytes(tensor_map) -> bytes:
    """The opaque words of a bindings ``CUtensorMap`` as the 128 bytes a kernel parameter holds."""
    words = [int(word) for word in tensor_map.opaque]
    return struct.pack(f"<{len(words)}Q", *words)
