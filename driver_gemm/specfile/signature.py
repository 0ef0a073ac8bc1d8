"""A kernel's ``signature:``: its arguments in its own order, each with its exact C type.

Standard names (``A``, ``M``, ``alpha``, ``lda``...) are bound by driver-gemm;
other scalars give a type and a value expression; ``tensormap`` entries
describe TMA tensor maps (`launch_fields`). A, B and C must each reach the
kernel once, as a pointer or through a tensor map, and a constant must fit its
C type.
"""

from __future__ import annotations

from typing import Any

from . import expr
from ..argtypes import C_TYPES, DEFAULT_SIGNATURE, STANDARD_ARGUMENTS
from .fields import IDENTIFIER, Context, check_keys, kind_name, parse_expression
from .launch_fields import tensor_map_argument
from .model import Argument

ARGUMENT_TYPES = (*C_TYPES, "struct")
FLOAT32_MAX = 3.4028234663852886e38


def _check_constant_fits(context: Context, argument: Argument, node: Any, key: Any, dotted: str) -> None:
    """A constant scalar argument must fit its C type (a float32 beyond its range would become infinity)."""
    if argument.value is None or argument.value.names:
        return
    value = argument.value.evaluate({})
    ctype = C_TYPES[argument.ctype]
    if ctype.is_float:
        if argument.ctype == "float32" and abs(value) > FLOAT32_MAX:
            raise context.error(f"{value} is beyond the range of float32", node, key, dotted)
    elif isinstance(value, float) and not value.is_integer() or not ctype.fits(int(value)):
        raise context.error(f"{value} does not fit {argument.ctype}", node, key, dotted)


def parse_signature(context: Context, node: dict, dotted: str, scalars: dict[str, float]) -> tuple[Argument, ...]:
    """The kernel's arguments in order: standard names (A, B, C, M, N, K, alpha, beta) or typed mappings."""
    value = node.get("signature", list(DEFAULT_SIGNATURE))
    if not isinstance(value, list) or not value:
        raise context.error(f"signature is a non-empty list of arguments, got {kind_name(value)}", node,
                            "signature", f"{dotted}.signature")
    arguments = [_argument_at(context, value, index, f"{dotted}.signature[{index}]", scalars)
                 for index in range(len(value))]
    _check_operands_reached(context, node, dotted, arguments)
    return tuple(arguments)


def _check_operands_reached(context: Context, node: dict, dotted: str, arguments: list[Argument]) -> None:
    """A, B and C each reach the kernel: as a pointer (at most once) or through tensor maps; names are unique."""
    names = [a.name for a in arguments] + [field.name for a in arguments for field in a.fields]
    mapped = {a.tensor_map.tensor for a in arguments if a.tensor_map is not None}
    for matrix in ("A", "B", "C"):
        if names.count(matrix) > 1 or (matrix not in names and matrix not in mapped):
            raise context.error(f"signature must take {matrix} exactly once (as a pointer, or through tensor "
                                f"maps with tensor: {matrix})", node, "signature", f"{dotted}.signature")
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise context.error(f"signature names {', '.join(duplicates)} more than once", node, "signature",
                            f"{dotted}.signature")


def _standard_argument(context, parent, index, item: str, item_path: str, scalars) -> Argument:
    if item not in STANDARD_ARGUMENTS:
        raise context.error(f"unknown argument {item!r}", parent, index, item_path,
                            hint=f"standard names are {', '.join(STANDARD_ARGUMENTS)}; "
                                 "give others as {name: X, type: int32, value: EXPR}")
    ctype = STANDARD_ARGUMENTS[item]
    value = None
    if ctype.startswith("float"):
        value = expr.parse(scalars.get(item, 0.0))
    elif ctype != "ptr":
        value = expr.parse(item)
    return Argument(item, ctype, value)


def _typed_argument(context, parent, index, item: dict, item_path: str, scalars=None) -> Argument:
    if item.get("type") == "tensormap":
        return tensor_map_argument(context, parent, index, item, item_path)
    if item.get("type") == "struct":
        if scalars is None:   # a field of a struct
            raise context.error("a struct's fields are scalars and pointers, not structs", item, "type",
                                f"{item_path}.type")
        return _struct_argument(context, parent, index, item, item_path, scalars)
    check_keys(context, item, ("name", "type", "value"), item_path)
    if "name" not in item or "type" not in item:
        raise context.error("an argument mapping needs name and type", parent, index, item_path)
    name, ctype = item["name"], item["type"]
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise context.error(f"an argument name is a C identifier, got {kind_name(name)}", item, "name",
                            f"{item_path}.name")
    if not isinstance(ctype, str) or ctype not in ARGUMENT_TYPES:
        raise context.error(f"type must be one of {', '.join(ARGUMENT_TYPES)}, got {kind_name(ctype)}",
                            item, "type", f"{item_path}.type")
    if ctype == "tensormap":
        raise context.error("a tensormap argument is described by tensor, box and swizzle", item, "type",
                            f"{item_path}.type")
    if ctype == "ptr":
        if name not in ("A", "B", "C"):
            raise context.error("only A, B and C are device buffers", item, "name", f"{item_path}.name")
        return Argument(name, ctype, None)
    if "value" not in item:
        raise context.error("a scalar argument needs a value", item, None, item_path)
    return Argument(name, ctype, parse_expression(context, item, "value", item["value"], f"{item_path}.value"))


def _struct_argument(context, parent, index, item: dict, item_path: str, scalars) -> Argument:
    """``{name: args, type: struct, fields: [A, B, C, M, N, K, {name: lda, type: int64, value: K}]}``: a struct
    passed by value, its fields in declaration order (standard names or typed scalars and pointers)."""
    check_keys(context, item, ("name", "type", "fields"), item_path)
    name, fields = item.get("name"), item.get("fields")
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise context.error(f"an argument name is a C identifier, got {kind_name(name)}", item, "name" if "name" in item
                            else None, f"{item_path}.name")
    if not isinstance(fields, list) or not fields:
        raise context.error(f"a struct argument lists its fields in order, got {kind_name(fields)}", item,
                            "fields" if "fields" in item else None, f"{item_path}.fields",
                            hint="fields: [A, B, C, M, N, K, alpha], each as in signature:")
    parsed = tuple(_argument_at(context, fields, position, f"{item_path}.fields[{position}]", scalars, field=True)
                   for position in range(len(fields)))
    return Argument(name, "struct", None, fields=parsed)


def _argument_at(context: Context, parent: list, index: int, item_path: str, scalars: dict[str, float],
                 field: bool = False) -> Argument:
    """The argument (a standard name or a typed mapping) at ``parent[index]``, its constant checked to fit its type.

    A struct's `field` is a scalar or a pointer (no tensor map), and its typed
    form does not take the spec's scalars by name: its value is written out.
    """
    item = parent[index]
    if not isinstance(item, (str, dict)):
        raise context.error(f"{'a field' if field else 'an argument'} is a name or a mapping, got {kind_name(item)}",
                            parent, index, item_path)
    if field and isinstance(item, dict) and item.get("type") == "tensormap":
        raise context.error("a tensor map is an argument of its own, not a struct's field", item, "type",
                            f"{item_path}.type")
    if isinstance(item, str):
        argument = _standard_argument(context, parent, index, item, item_path, scalars)
        _check_constant_fits(context, argument, parent, index, item_path)
    else:
        argument = _typed_argument(context, parent, index, item, item_path, None if field else scalars)
        _check_constant_fits(context, argument, item, "value", f"{item_path}.value")
    return argument
