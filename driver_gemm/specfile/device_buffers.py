"""Device buffers a kernel takes besides A, B and C, as a ``signature:`` describes them.

``{name: workspace, type: buffer, element: int32, size: EXPR, fill: zero}`` is a buffer of the case's
own: `size` elements of `element`, holding ``zero``, ``iota`` (0, 1, 2, ...), one number, a list of
numbers repeated over its length, or a NumPy array from a ``.npy`` file (``fill: {file: NAME}``, the name per
shape), before every launch and every sample; or, with ``scales: {of: A, block: [1, 128]}`` instead of a fill, a
factor per block of A or B that the reference applies too (as a float, or a byte of ``ue8m0`` or ``e4m3``), with
``bias: N``, a value per column of C that it adds, or, with ``quantized: {of: B, part: codes, ...}``, a part of a
weight-only quantized B (its codes, scales, zero points or codebook), filled from the values B is drawn from, or,
with ``groups: ends`` (`gemm.groups.METADATA`), what a grouped kernel reads about its groups. ``{name: alpha,
type: ptr}`` (or beta) passes the scalar through a one-element buffer (``const float* alpha``), and ``{name:
scale_a, type: ptr}`` (or scale_b) an fp8 per-tensor scale of ``scales:`` the same way (``const float*
A_scale``). Each becomes an `Argument` of C type ``ptr`` with a `DeviceBufferArgument`; `planning.buffer_plans`
sizes and fills them per shape. The fields: docs/kernels.md.
"""

from __future__ import annotations

import dataclasses
import math
import re
import struct
from typing import Any

from . import expr
from ..argtypes import C_TYPES, STANDARD_ARGUMENTS, fits_float
from ..gemm.dtypes import SCALE_STORAGES
from ..gemm.groups import METADATA as GROUP_METADATA
from .fields import IDENTIFIER, Context, check_keys, check_number, parse_expression
from .kinds import kind_name
from .limits import MAX_BUFFER_VALUES
from .model import (QUANTIZED_BITS, QUANTIZED_PARTS, Argument, BlockScales, DeviceBufferArgument, HostBuilder,
                    QuantizedWeights)
from .project import host_builder, project_root

BUFFER_KEYS = ("name", "type", "element", "size", "fill", "pass", "scales", "bias", "quantized", "groups")
# What holds a grouped GEMM's metadata: row counts and indices, in any integer type a kernel reads them in.
GROUP_ELEMENTS = ("int32", "uint32", "int64", "uint64", "int16", "uint16")
SCALES_KEYS = ("of", "block", "order", "ld")
QUANTIZED_KEYS = ("of", "part", "bits", "group", "order", "pack", "codebook")
PACK_KEYS = ("along", "order", "builder")
# What holds a quantized B's parts: packed codes (or zero points) fill 32-bit words; one to an element, any integer
# type as wide as a byte or more; scales, the floating types a kernel reads them in.
PACKED_ELEMENTS = ("int32", "uint32")
CODE_ELEMENTS = ("uint8", "int8", "uint16", "int16", "int32", "uint32")
QUANTIZED_SCALE_ELEMENTS = ("float16", "bfloat16", "float32")
# The 4-bit codebooks of bitsandbytes (csrc/kernels.cu's dequantization tables, as float32 holds them): NF4, the
# QLoRA paper's NormalFloat quantiles of N(0, 1) scaled to [-1, 1]; FP4, an e2m1 float over 12 with its sign in the
# code's top bit (code 8 is -0).
NF4 = (-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
       -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
       0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0)
_FP4_MAGNITUDES = (0.0, 0.005208333333, 0.66666667, 1.0, 0.33333333, 0.5, 0.16666667, 0.25)
_FP4_FLOAT32 = tuple(struct.unpack("<f", struct.pack("<f", value))[0] for value in _FP4_MAGNITUDES)
FP4 = _FP4_FLOAT32 + tuple(-value for value in _FP4_FLOAT32)
CODEBOOKS = {"nf4": NF4, "fp4": FP4}
# A codebook value is 0 or of a magnitude in this range: rounded to fp16 it stays a normal number when a scale of
# the draw (`planning.quantized_layouts.CODEBOOK_SCALE_EXPONENTS`, 2^-3 to 1) multiplies it, so every
# codebook[q] * s is exact in B's type.
CODEBOOK_MAGNITUDES = (2.0 ** -11, 2.0 ** 15)
QUANTIZED_HINT = "quantized: {of: B, part: codes, bits: 4, group: 128, pack: {along: K}}"
FILL_SOURCE_KEYS = ("file", "builder")   # fill: {file: NAME.npy} or {builder: FILE.py:FUNCTION}
# What a buffer of drawn values may hold: the floating types, in each of which they are exact, and for block scales
# (powers of two) the one-byte storages of `gemm.dtypes.SCALE_STORAGES`. A bias (multiples of 1/16) needs a float.
BIAS_ELEMENTS = ("float32", "float64", "float16", "bfloat16")
DRAWN_ELEMENTS = (*BIAS_ELEMENTS, *SCALE_STORAGES)
# A name in braces in a fill file's name ({M}, {BM}): replaced by its value for the shape.
FILE_FIELD = re.compile(r"\{([^{}]*)\}")
# What a buffer may hold: any scalar C type but a pointer (an address in a buffer is no address of ours), and, for
# block scales only, a storage of a byte a factor (held as uint8 to the kernel, whose pointer reads bytes).
BUFFER_ELEMENTS = (*(name for name, ctype in C_TYPES.items() if name != "ptr" and not ctype.is_opaque),
                   *SCALE_STORAGES)
# The names types: and tensor maps give the same types, taken here too.
BUFFER_ELEMENT_ALIASES = {"fp32": "float32", "fp64": "float64", "fp16": "float16", "bf16": "bfloat16",
                          "half": "float16", "float": "float32", "double": "float64", "e8m0": "ue8m0"}
SCALAR_POINTER_ELEMENTS = ("float32", "float64")
# fp8's per-tensor scales by pointer, as cuBLASLt's A and B scale pointers and flashinfer's bmm_fp8 take them: the
# argument's name, and the operand of ``scales:`` its one-element buffer holds.
SCALE_POINTERS = {"scale_a": "a", "scale_b": "b"}
SCALE_STORAGE_HINT = ("element: ue8m0 for one byte a factor holding its exponent, 2^(e - 127) (MXFP8's E8M0); "
                      "element: e4m3 for an fp8 factor (NVFP4's)")


def check_constant_fits(context: Context, ctype_name: str, expression, node: Any, key: Any, dotted: str) -> None:
    """A constant (an expression without names) must fit C type `ctype_name` (a float32 beyond its range would
    become infinity, an integer would wrap)."""
    if expression is None or expression.names:
        return
    value = expression.evaluate({})
    ctype = C_TYPES[ctype_name]
    if ctype.is_float:
        if abs(value) == float("inf") or not fits_float(ctype_name, value):
            raise context.error(f"{value} is beyond the range of {ctype_name} (largest {ctype.largest:g})", node,
                                key, dotted)
    elif isinstance(value, float) and not value.is_integer() or not ctype.fits(int(value)):
        raise context.error(f"{value} does not fit {ctype_name}", node, key, dotted)


def buffer_argument(context: Context, parent, index, item: dict, item_path: str) -> Argument:
    """A ``type: buffer`` entry: its name, element type, size expression and fill, each checked."""
    check_keys(context, item, BUFFER_KEYS, item_path)
    for required in ("name", "element", "size"):
        if required not in item:
            raise context.error(f"a buffer argument needs {required}", parent, index, item_path,
                                hint="{name: workspace, type: buffer, element: int32, size: ceil(M / 128), "
                                     "fill: zero}")
    name = item["name"]
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name) or name in STANDARD_ARGUMENTS:
        raise context.error(f"a buffer's name is a C identifier other than {', '.join(STANDARD_ARGUMENTS)}, got "
                            f"{kind_name(name)}", item, "name", f"{item_path}.name")
    element = item["element"]
    element = BUFFER_ELEMENT_ALIASES.get(element, element) if isinstance(element, str) else element
    if element not in BUFFER_ELEMENTS:
        raise context.error(f"element is one of {', '.join(BUFFER_ELEMENTS)}, got {kind_name(element)}", item,
                            "element", f"{item_path}.element")
    if element in SCALE_STORAGES and "scales" not in item:
        raise context.error(f"{element} is how block scales are stored, one factor to a byte: it goes with scales: "
                            f"{{of: A, block: [1, 32]}} in place of fill:", item, "element", f"{item_path}.element",
                            hint="a buffer of raw bytes is element: uint8")
    size = parse_expression(context, item, "size", item["size"], f"{item_path}.size", whole=True)
    passing = item.get("pass", "parameter")
    if passing not in ("parameter", "none"):
        raise context.error(f"pass is parameter (the default: the kernel takes the buffer's address) or none (no "
                            f"parameter: a tensor map over it reaches the kernel), got {kind_name(passing)}", item,
                            "pass", f"{item_path}.pass")
    if "scales" in item and "bias" in item:
        raise context.error("a buffer holds block scales or a bias, not both", item, "bias", f"{item_path}.bias")
    if "quantized" in item and ("scales" in item or "bias" in item):
        other = "block scales" if "scales" in item else "a bias"
        raise context.error(f"a buffer holds a part of a quantized B or {other}, not both", item, "quantized",
                            f"{item_path}.quantized")
    drawn = [key for key in ("scales", "bias", "quantized", "fill") if key in item]
    if "groups" in item and drawn:
        raise context.error(f"a buffer of the groups' {item['groups']} holds what the groups say: it takes no "
                            f"{drawn[0]}", item, drawn[0], f"{item_path}.{drawn[0]}")
    if "groups" in item:
        buffer = _group_metadata(context, item, item_path, element, size)
    elif "quantized" in item:
        buffer = _quantized(context, item, item_path, element, size)
    elif "scales" in item:
        buffer = _block_scales(context, item, item_path, element, size)
    elif "bias" in item:
        buffer = _bias(context, item, item_path, element, size)
    elif isinstance(item.get("fill"), dict):
        buffer = _file_fill(context, item, item_path, element, size)
    else:
        fill, values = _fill(context, item, item_path, element)
        buffer = DeviceBufferArgument(element, size, fill, values)
    return Argument(name, "ptr", None, buffer=dataclasses.replace(buffer, passed=passing == "parameter"))


def _group_metadata(context: Context, item: dict, item_path: str, element: str, size) -> DeviceBufferArgument:
    """``groups: ends``: what a grouped kernel reads about its groups (`gemm.groups.METADATA`), an integer per
    entry, laid out per shape by `planning.buffer_plans` from the case's groups (the kernel's ``groups:``)."""
    kind = item["groups"]
    if not isinstance(kind, str) or kind not in GROUP_METADATA:
        raise context.error(f"groups is what the buffer holds about the groups: one of {', '.join(GROUP_METADATA)};"
                            f" got {kind_name(kind)}", item, "groups", f"{item_path}.groups",
                            hint="; ".join(f"{name}: {meaning}" for name, meaning in GROUP_METADATA.items()))
    if element not in GROUP_ELEMENTS:
        raise context.error(f"the groups' {kind} are whole numbers: element is one of {', '.join(GROUP_ELEMENTS)}, "
                            f"got {element}", item, "element", f"{item_path}.element")
    return DeviceBufferArgument(element, size, "groups", (), read_only=True, groups=kind)


def _file_fill(context: Context, item: dict, item_path: str, element: str, size) -> DeviceBufferArgument:
    """``fill: {file: tables/order-{M}x{N}.npy}``: the buffer holds a NumPy array the host computed (a tile order,
    a schedule), read per shape by `planning.buffer_plans`; or ``fill: {builder: order.py:hilbert}``: the numbers
    a Python function returns for the shape and the params, the same table computed per case rather than saved.
    Only the name is checked here: which file a shape reads, and what a builder returns, are known only with the
    shape."""
    node, dotted = item["fill"], f"{item_path}.fill"
    check_keys(context, node, FILL_SOURCE_KEYS, dotted)
    if len([key for key in FILL_SOURCE_KEYS if key in node]) != 1:
        raise context.error("a fill mapping names one file or one builder: {file: NAME.npy} or {builder: "
                            "FILE.py:FUNCTION}", item, "fill", dotted)
    if "builder" in node:
        builder = host_builder(context, node, "builder", f"{dotted}.builder",
                               "fill: {builder: order.py:hilbert}, with def hilbert(values) -> numbers in order.py "
                               "beside the spec (values: M, N, K and the params by name)")
        return DeviceBufferArgument(element, size, "built", (), builder=builder)
    name = node.get("file")
    if not isinstance(name, str) or not name.strip() or not name.isprintable():
        raise context.error(f"fill: {{file: NAME}} names a .npy file, got {kind_name(name)}", node, "file",
                            f"{dotted}.file", hint="fill: {file: tables/order-{M}x{N}.npy}")
    if not name.endswith(".npy"):
        raise context.error(f"a fill file is a NumPy array saved with numpy.save (.npy), got {name}", node, "file",
                            f"{dotted}.file")
    unknown = [field for field in FILE_FIELD.findall(name) if not IDENTIFIER.fullmatch(field)]
    if unknown:
        raise context.error(f"{{{unknown[0]}}} in a fill file's name is no name: braces hold M, N, K or a param",
                            node, "file", f"{dotted}.file")
    root = None if context.allow_outside_sources else project_root(context.base_dir)
    return DeviceBufferArgument(element, size, "file", (), file=name, file_folder=context.base_dir, file_root=root)


def _block_scales(context: Context, item: dict, item_path: str, element: str, size) -> DeviceBufferArgument:
    """``scales: {of: A, block: [1, 128], order: col, ld: M}``: a factor per block of A or B, which the case draws
    and the reference applies, so that a kernel that skips or misplaces a factor fails its check."""
    node, dotted = item["scales"], f"{item_path}.scales"
    hint = "scales: {of: A, block: [1, 128]} (a factor per row and 128 columns of A)"
    _check_drawn(context, item, item_path, element, "a buffer of block scales holds factors the case draws (powers "
                 "of two the reference applies)", "block scales are", DRAWN_ELEMENTS, hint,
                 element_hint=SCALE_STORAGE_HINT if element in ("uint8", "int8") else None)
    if not isinstance(node, dict):
        raise context.error(f"scales is a mapping like {{of: A, block: [1, 128]}}, got {kind_name(node)}", item,
                            "scales", dotted, hint=hint)
    check_keys(context, node, SCALES_KEYS, dotted)
    for required in ("of", "block"):
        if required not in node:
            raise context.error(f"block scales need {required}", item, "scales", dotted, hint=hint)
    operand = node["of"]
    if operand not in ("A", "B", "a", "b"):
        raise context.error(f"of is A or B (the matrix whose blocks the factors multiply), got {kind_name(operand)}",
                            node, "of", f"{dotted}.of")
    block = node["block"]
    if not isinstance(block, list) or len(block) != 2:
        raise context.error(f"block is [rows, cols] of {operand.upper()} that one factor multiplies, got "
                            f"{kind_name(block)}", node, "block", f"{dotted}.block", hint=hint)
    extents = tuple(parse_expression(context, block, position, value, f"{dotted}.block[{position}]", whole=True)
                    for position, value in enumerate(block))
    order = node.get("order", "row")
    if order not in ("row", "col"):
        raise context.error(f"order is row (the grid of factors row after row, the default) or col (column after "
                            f"column), got {kind_name(order)}", node, "order", f"{dotted}.order")
    ld = parse_expression(context, node, "ld", node["ld"], f"{dotted}.ld", whole=True) if "ld" in node else None
    # A factor in a byte of its own storage reaches the kernel as bytes: the buffer's C element is uint8.
    storage = element if element in SCALE_STORAGES else None
    scales = BlockScales(operand.lower(), (extents[0], extents[1]), order, ld, storage)
    return DeviceBufferArgument("uint8" if storage else element, size, "scales", (), scales=scales)


def _quantized(context: Context, item: dict, item_path: str, element: str, size) -> DeviceBufferArgument:
    """``quantized: {of: B, part: codes, bits: 4, group: 128, pack: {along: K}}``: a part of a weight-only quantized
    B (its codes, scales, zero points or codebook), which the case fills from the values it draws B from, so that
    the kernel dequantizes to exactly the B the reference multiplies; ``order: col`` stores its grid column after
    column, ``codebook: nf4`` on the codes makes B = codebook[q] * s. What concerns the kernel's other parts (bits
    and group agreeing, one codes part, a codebook without zero points, typed operands) is checked with the whole
    signature (`specfile.quantized`)."""
    node, dotted = item["quantized"], f"{item_path}.quantized"
    if "fill" in item:
        raise context.error("a part of a quantized B holds what the case draws B from: it takes no fill", item,
                            "fill", f"{item_path}.fill", hint=QUANTIZED_HINT)
    if not isinstance(node, dict):
        raise context.error(f"quantized is a mapping like {{of: B, part: codes, bits: 4, group: 128}}, got "
                            f"{kind_name(node)}", item, "quantized", dotted, hint=QUANTIZED_HINT)
    check_keys(context, node, QUANTIZED_KEYS, dotted)
    for required in ("of", "part"):
        if required not in node:
            raise context.error(f"a part of a quantized B needs {required}", item, "quantized", dotted,
                                hint=QUANTIZED_HINT)
    operand = node["of"]
    if operand not in ("B", "b"):
        raise context.error(f"of is B, the weights a kernel takes quantized (A, the activations, stays fp16 or bf16),"
                            f" got {kind_name(operand)}", node, "of", f"{dotted}.of")
    part = node["part"]
    if part not in QUANTIZED_PARTS:
        raise context.error(f"part is {', '.join(QUANTIZED_PARTS)} (B = (codes - zeros) * scales), got "
                            f"{kind_name(part)}", node, "part", f"{dotted}.part")
    bits = node.get("bits")
    if "bits" in node and (type(bits) is not int or bits not in QUANTIZED_BITS):     # 4.0 is no width of a code
        raise context.error(f"bits is {', '.join(map(str, QUANTIZED_BITS))} (a whole number of codes to a 32-bit "
                            f"word), got {kind_name(bits)}", node, "bits", f"{dotted}.bits")
    group = parse_expression(context, node, "group", node["group"], f"{dotted}.group", whole=True) \
        if "group" in node else None
    if part == "codes":
        for required in ("bits", "group"):
            if required not in node:
                raise context.error(f"the codes part of a quantized B needs {required} (the other parts inherit "
                                    "it)", item, "quantized", dotted, hint=QUANTIZED_HINT)
    codebook, codebook_name = _codebook(context, node, dotted, part, bits)
    if part == "codebook":
        for key in ("pack", "order"):
            if key in node:
                raise context.error(f"a codebook buffer holds the table, its 2^bits values in order: it takes no "
                                    f"{key}", node, key, f"{dotted}.{key}")
    along, order, builder = _pack(context, node, dotted, part, bits)
    major = node.get("order", "row")
    if major not in ("row", "col"):
        raise context.error(f"order is row (the grid of {part}, or of their packed words, row after row: the "
                            f"default) or col (column after column), got {kind_name(major)}", node, "order",
                            f"{dotted}.order", hint="bitsandbytes' absmax, a scale per group of W = B^T's rows "
                                                    "([N, K / group] row-major): order: col")
    if builder is not None and "order" in node:
        raise context.error("a pack builder lays the whole buffer out: the part takes no order", node, "order",
                            f"{dotted}.order")
    if part in ("scales", "codebook"):
        if element not in QUANTIZED_SCALE_ELEMENTS:
            raise context.error(f"a quantized B's {part} are stored as {', '.join(QUANTIZED_SCALE_ELEMENTS)}, got "
                                f"{element}", item, "element", f"{item_path}.element")
    elif builder is None:
        allowed = PACKED_ELEMENTS if along is not None else CODE_ELEMENTS
        if element not in allowed:
            packing = f"packed along {along}" if along is not None else "one to an element (no pack)"
            raise context.error(f"a quantized B's {part} {packing} are stored as {', '.join(allowed)}, got "
                                f"{element}", item, "element", f"{item_path}.element",
                                hint="pack: {along: K} packs 32 / bits codes into an int32; without pack, "
                                     "element: uint8 holds one")
    weights = QuantizedWeights(part, bits, group, along, order, builder, major, codebook, codebook_name)
    return DeviceBufferArgument(element, size, "quantized", (), read_only=True, builder=builder, quantized=weights)


def _codebook(context: Context, node: dict, dotted: str, part: str, bits: int | None
              ) -> tuple[tuple[float, ...] | None, str | None]:
    """``codebook: nf4``, ``fp4`` or a list of 2^bits numbers on the codes part, as (its values, its name or
    None); (None, None) without one."""
    if "codebook" not in node:
        return None, None
    listed, path = node["codebook"], f"{dotted}.codebook"
    if part != "codes":
        raise context.error("codebook is given on the codes part (part: codes), whose codes it looks up", node,
                            "codebook", path)
    count = 1 << bits if bits is not None else None
    if isinstance(listed, str) and listed.lower() in CODEBOOKS:
        name = listed.lower()
        if bits != 4:
            raise context.error(f"the {name.upper()} codebook has 16 values, for 4-bit codes; these are {bits}-bit",
                                node, "codebook", path)
        return CODEBOOKS[name], name
    if not isinstance(listed, list) or len(listed) != count:
        raise context.error(f"codebook is nf4, fp4 or a list of the {count} values codes 0 to {count - 1} stand for "
                            f"(B = codebook[q] * s), got {kind_name(listed)}", node, "codebook", path,
                            hint="codebook: nf4 (bitsandbytes' and QLoRA's NormalFloat)")
    low, high = CODEBOOK_MAGNITUDES
    values = []
    for position, value in enumerate(listed):
        number = check_number(context, value, listed, position, path)
        if not math.isfinite(number) or number != 0 and not low <= abs(number) <= high:
            raise context.error(f"a codebook value is 0 or of a magnitude from 2^-11 to 2^15, so that each "
                                f"codebook[q] * s the case draws is exact in fp16 and bf16; got {number}", listed,
                                position, path)
        values.append(float(number))
    return tuple(values), None


def _pack(context: Context, node: dict, dotted: str, part: str, bits: int | None
          ) -> tuple[str | None, tuple[int, ...] | None, HostBuilder | None]:
    """``pack: {along: K, order: [...]}`` or ``pack: {builder: FILE.py:FUNCTION}`` as (along, order, builder); no
    pack: one code to an element."""
    if "pack" not in node:
        return None, None, None
    pack, path = node["pack"], f"{dotted}.pack"
    if part == "scales" and not (isinstance(pack, dict) and "builder" in pack):
        raise context.error("a quantized B's scales are one to an element: they take no pack but a builder (pack: "
                            "{builder: FILE.py:FUNCTION} lays them out; order: col stores them column after column)",
                            node, "pack", path)
    if not isinstance(pack, dict):
        raise context.error(f"pack is a mapping: {{along: K}}, {{along: N, order: [0, 2, 4, 6, 1, 3, 5, 7]}} or "
                            f"{{builder: FILE.py:FUNCTION}}, got {kind_name(pack)}", node, "pack", path)
    check_keys(context, pack, PACK_KEYS, path)
    if "builder" in pack:
        if len(pack) != 1:
            extra = next(key for key in pack if key != "builder")
            raise context.error(f"a pack builder lays the whole buffer out: it takes no {extra}", pack, extra,
                                f"{path}.{extra}")
        builder = host_builder(context, pack, "builder", f"{path}.builder",
                               "pack: {builder: pack.py:marlin}, with def marlin(values) -> numbers in pack.py beside "
                               "the spec (values: codes, scales, zeros, group, bits, M, N, K and the params)")
        return None, None, builder
    along = pack.get("along")
    if along not in ("K", "N"):
        raise context.error(f"pack.along is K (32 / bits codes of a column, rows 0 to 32 / bits - 1 in a word) or N "
                            f"(of a row), got {kind_name(along)}", pack, "along" if "along" in pack else None,
                            f"{path}.along")
    order = None
    if "order" in pack:
        listed = pack["order"]
        per = 32 // bits if bits is not None else None
        if not isinstance(listed, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in listed) \
                or sorted(listed) != list(range(len(listed))) or (per is not None and len(listed) != per):
            count = f"{per}" if per is not None else "32 / bits"
            raise context.error(f"pack.order lists the positions 0 to {count} - 1 of a word's run of codes, each "
                                f"once (bit field i holds position order[i]), got {kind_name(listed)}", pack,
                                "order", f"{path}.order", hint="AWQ: order: [0, 2, 4, 6, 1, 3, 5, 7]")
        order = tuple(listed)
    return along, order, None


def _bias(context: Context, item: dict, item_path: str, element: str, size) -> DeviceBufferArgument:
    """``bias: N``: a value per column of C (``M``: per row), which the case draws and the reference adds to every
    row (column) of C, as a bias epilogue does; a kernel that skips it or adds the wrong element fails its check."""
    along = item["bias"]
    if along not in ("M", "N"):
        raise context.error(f"bias is N (a value per column of C, added to every row) or M (a value per row), got "
                            f"{kind_name(along)}", item, "bias", f"{item_path}.bias",
                            hint="{name: bias, type: buffer, element: fp32, size: N, bias: N}")
    _check_drawn(context, item, item_path, element, "a bias buffer holds values the case draws (which the "
                 "reference adds to C)", "a bias is", BIAS_ELEMENTS)
    return DeviceBufferArgument(element, size, "bias", (), bias=along)


def _check_drawn(context: Context, item: dict, item_path: str, element: str, holds: str, stored: str,
                 elements: tuple[str, ...], hint: str | None = None, element_hint: str | None = None) -> None:
    """What a buffer of values the case draws (block scales, a bias) cannot have: a fill of its own, or an element
    other than the types its values are exact in (`elements`)."""
    if "fill" in item:
        raise context.error(f"{holds}: it takes no fill", item, "fill", f"{item_path}.fill", hint=hint)
    if element not in elements:
        raise context.error(f"{stored} stored as {', '.join(elements)}, got {element}", item, "element",
                            f"{item_path}.element", hint=element_hint)


def _fill(context: Context, item: dict, item_path: str, element: str) -> tuple[str, tuple[expr.Expression, ...]]:
    """``fill:`` as (kind, values): zero (the default), iota, one number or a list of numbers (values), each a
    number or an expression of the shape (``lda``, ``K``: a CUTLASS grouped GEMM's leading dimension per group)."""
    value = item.get("fill", "zero")
    dotted = f"{item_path}.fill"
    if value in ("zero", "iota"):
        return value, ()
    listed = value if isinstance(value, list) else [value]
    if not listed or len(listed) > MAX_BUFFER_VALUES:
        raise context.error(f"fill lists 1 to {MAX_BUFFER_VALUES} values, got {len(listed)}", item, "fill", dotted)
    node = value if isinstance(value, list) else item
    numbers = []
    for position, number in enumerate(listed):
        key = position if isinstance(value, list) else "fill"
        if isinstance(number, str):
            if not number.strip() or number.strip() in ("zero", "iota"):
                raise context.error(f"fill is zero, iota, a number, an expression or a list of them, got "
                                    f"{kind_name(number)}", node, key, dotted,
                                    hint="fill: 0, fill: iota, fill: [1, 2, 3], fill: lda")
            expression = parse_expression(context, node, key, number, dotted)
        else:
            expression = expr.parse(check_number(context, number, node, key, dotted))
        check_constant_fits(context, element, expression, node, key, dotted)
        numbers.append(expression)
    return "values", tuple(numbers)


def scalar_pointer_argument(context: Context, item: dict, item_path: str, scalars: dict[str, float]) -> Argument:
    """``{name: alpha, type: ptr}`` (or beta; ``element: float64`` for a double): the scalar in a one-element
    device buffer of the case's own, whose address the kernel receives."""
    check_keys(context, item, ("name", "type", "element"), item_path)
    element = item.get("element", "float32")
    if element not in SCALAR_POINTER_ELEMENTS:
        raise context.error(f"alpha or beta by pointer is float32 or float64, got {kind_name(element)}", item,
                            "element", f"{item_path}.element")
    value = expr.parse(scalars.get(item["name"], 0.0))
    return Argument(item["name"], "ptr", value,
                    buffer=DeviceBufferArgument(element, expr.parse(1), "values", (value,), read_only=True))


def scale_pointer_argument(context: Context, item: dict, item_path: str, scales: dict[str, float | None]) -> Argument:
    """``{name: scale_a, type: ptr}`` (or scale_b; ``element: float64`` for a double): fp8's per-tensor scale a of
    the kernel's ``scales:`` in a one-element device buffer of the case's own, whose address the kernel receives
    (``const float* A_scale``), as alpha by pointer holds alpha. `scales` holds what ``scales:`` gives, by
    operand: a number, or None for a value that is no positive number (refused with ``scales:`` itself)."""
    check_keys(context, item, ("name", "type", "element"), item_path)
    name = item["name"]
    operand = SCALE_POINTERS[name]
    element = item.get("element", "float32")
    element = BUFFER_ELEMENT_ALIASES.get(element, element) if isinstance(element, str) else element
    if element not in SCALAR_POINTER_ELEMENTS:
        raise context.error(f"{name} by pointer is a float32 or float64 factor, got {kind_name(element)}", item,
                            "element", f"{item_path}.element", hint="a const float* scale is element: float32 (the "
                            "default); a const double* one, element: float64")
    if operand not in scales:
        raise context.error(f"{name} by pointer holds the kernel's fp8 per-tensor scale {operand}, but its scales: "
                            f"gives none", item, "name", f"{item_path}.name",
                            hint=f"give the kernel scales: {{{operand}: 0.5}} (a value other than 1, so that a kernel "
                                 "that skips the factor fails its check); types: must be fp8")
    given = scales[operand]
    value = expr.parse(given if given is not None else 1.0)
    return Argument(name, "ptr", None, buffer=DeviceBufferArgument(element, expr.parse(1), "values", (value,),
                                                                   read_only=True, tensor_scale=operand))


def declared_scales(node: dict) -> dict[str, float | None]:
    """The fp8 per-tensor scales a kernel's ``scales: {a, b}`` gives, by operand, as read before its operands are
    (`specfile.typed`, which refuses a value that is no positive number and scales without fp8 types): a number, or
    None for a value it refuses."""
    if "scales" not in node:
        return {}
    given = node["scales"]
    if not isinstance(given, dict):
        return {"a": None, "b": None}
    numbers: dict[str, float | None] = {}
    for operand in ("a", "b"):
        if operand in given:
            value = given[operand]
            valid = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
            numbers[operand] = float(value) if valid else None
    return numbers
