"""Device buffers a kernel takes besides A, B and C, as a ``signature:`` describes them.

``{name: workspace, type: buffer, element: int32, size: EXPR, fill: zero}`` is a buffer of the case's
own: `size` elements of `element`, holding ``zero``, ``iota`` (0, 1, 2, ...), one number, a list of
numbers repeated over its length, or a NumPy array from a ``.npy`` file (``fill: {file: NAME}``, the name per
shape), before every launch and every sample; or, with ``scales: {of: A, block: [1, 128]}`` instead of a fill, a
factor per block of A or B that the reference applies too, or, with ``bias: N``, a value per column of C that it
adds. ``{name: alpha, type: ptr}``
(or beta) passes the scalar through a one-element buffer (``const float* alpha``). Each becomes an
`Argument` of C type ``ptr`` with a `DeviceBufferArgument`; `planning.buffer_plans` sizes and fills
them per shape. The fields: docs/kernels.md.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from . import expr
from ..argtypes import C_TYPES, STANDARD_ARGUMENTS, fits_float
from .fields import IDENTIFIER, Context, check_keys, check_number, parse_expression
from .kinds import kind_name
from .limits import MAX_BUFFER_VALUES
from .model import Argument, BlockScales, DeviceBufferArgument
from .project import host_builder, project_root

BUFFER_KEYS = ("name", "type", "element", "size", "fill", "pass", "scales", "bias")
SCALES_KEYS = ("of", "block", "order", "ld")
FILL_SOURCE_KEYS = ("file", "builder")   # fill: {file: NAME.npy} or {builder: FILE.py:FUNCTION}
# What a buffer of drawn values (block scales, a bias) may hold: the floating types, in each of which they are exact.
DRAWN_ELEMENTS = ("float32", "float64", "float16", "bfloat16")
# A name in braces in a fill file's name ({M}, {BM}): replaced by its value for the shape.
FILE_FIELD = re.compile(r"\{([^{}]*)\}")
# What a buffer may hold: any scalar C type but a pointer (an address in a buffer is no address of ours).
BUFFER_ELEMENTS = tuple(name for name, ctype in C_TYPES.items() if name != "ptr" and not ctype.is_opaque)
# The names types: and tensor maps give the same types, taken here too.
BUFFER_ELEMENT_ALIASES = {"fp32": "float32", "fp64": "float64", "fp16": "float16", "bf16": "bfloat16",
                          "half": "float16", "float": "float32", "double": "float64"}
SCALAR_POINTER_ELEMENTS = ("float32", "float64")


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
    size = parse_expression(context, item, "size", item["size"], f"{item_path}.size", whole=True)
    passing = item.get("pass", "parameter")
    if passing not in ("parameter", "none"):
        raise context.error(f"pass is parameter (the default: the kernel takes the buffer's address) or none (no "
                            f"parameter: a tensor map over it reaches the kernel), got {kind_name(passing)}", item,
                            "pass", f"{item_path}.pass")
    if "scales" in item and "bias" in item:
        raise context.error("a buffer holds block scales or a bias, not both", item, "bias", f"{item_path}.bias")
    if "scales" in item:
        buffer = _block_scales(context, item, item_path, element, size)
    elif "bias" in item:
        buffer = _bias(context, item, item_path, element, size)
    elif isinstance(item.get("fill"), dict):
        buffer = _file_fill(context, item, item_path, element, size)
    else:
        fill, values = _fill(context, item, item_path, element)
        buffer = DeviceBufferArgument(element, size, fill, values)
    return Argument(name, "ptr", None, buffer=dataclasses.replace(buffer, passed=passing == "parameter"))


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
                 "of two the reference applies)", "block scales are", hint)
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
    scales = BlockScales(operand.lower(), (extents[0], extents[1]), order, ld)
    return DeviceBufferArgument(element, size, "scales", (), scales=scales)


def _bias(context: Context, item: dict, item_path: str, element: str, size) -> DeviceBufferArgument:
    """``bias: N``: a value per column of C (``M``: per row), which the case draws and the reference adds to every
    row (column) of C, as a bias epilogue does; a kernel that skips it or adds the wrong element fails its check."""
    along = item["bias"]
    if along not in ("M", "N"):
        raise context.error(f"bias is N (a value per column of C, added to every row) or M (a value per row), got "
                            f"{kind_name(along)}", item, "bias", f"{item_path}.bias",
                            hint="{name: bias, type: buffer, element: fp32, size: N, bias: N}")
    _check_drawn(context, item, item_path, element, "a bias buffer holds values the case draws (which the "
                 "reference adds to C)", "a bias is")
    return DeviceBufferArgument(element, size, "bias", (), bias=along)


def _check_drawn(context: Context, item: dict, item_path: str, element: str, holds: str, stored: str,
                 hint: str | None = None) -> None:
    """What a buffer of values the case draws (block scales, a bias) cannot have: a fill of its own, or an element
    other than the floating types its values are exact in."""
    if "fill" in item:
        raise context.error(f"{holds}: it takes no fill", item, "fill", f"{item_path}.fill", hint=hint)
    if element not in DRAWN_ELEMENTS:
        raise context.error(f"{stored} stored as {', '.join(DRAWN_ELEMENTS)}, got {element}", item, "element",
                            f"{item_path}.element")


def _fill(context: Context, item: dict, item_path: str, element: str) -> tuple[str, tuple[expr.Expression, ...]]:
    """``fill:`` as (kind, values): zero (the default), iota, one number or a list of numbers (values)."""
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
            raise context.error(f"fill is zero, iota, a number or a list of numbers, got {kind_name(number)}",
                                node, key, dotted, hint="fill: 0, fill: 7, fill: iota, fill: [1, 2, 3]")
        number = check_number(context, number, node, key, dotted)
        constant = expr.parse(number)
        check_constant_fits(context, element, constant, node, key, dotted)
        numbers.append(constant)
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
