"""The fields of a kernel entry for Hopper launches: thread-block clusters, PDL, cooperative launches, and TMA
tensor-map arguments.

``cluster``, ``cluster_non_portable``, ``cluster_scheduling``, ``pdl`` and ``cooperative`` become a
`LaunchAttributeSpec`; a ``type: tensormap`` signature entry becomes an `Argument` with a
`TensorMapArgument`. Only words and expressions are checked here; what depends on the shape is
checked per case by `hopper_checks`. The fields: docs/hopper.md.
"""

from __future__ import annotations

import re
from typing import cast

from . import expr
from ..argtypes import STANDARD_ARGUMENTS
from .fields import IDENTIFIER, Context, check_keys, parse_expression, unknown_names_error
from .kinds import kind_name
from .model import Argument, LaunchAttributeSpec, TensorMapArgument
from .typed import LAYOUT_NAMES

LAUNCH_ATTRIBUTE_KEYS = ("cluster", "cluster_non_portable", "cluster_scheduling", "pdl", "cooperative")
# The vocabulary of launch attributes and tensor maps as a spec spells it; cuda.launch_attributes and
# cuda.tensormap translate each word to the driver's enum (tests/test_tma_spec.py keeps the lists equal).
CLUSTER_SCHEDULING = ("default", "spread", "load_balancing")
TENSOR_MAP_KEYS = ("name", "type", "tensor", "box", "swizzle", "l2_promotion", "oob_fill", "element", "dims", "strides",
                   "element_strides", "interleave", "pass", "count")
TENSOR_MAP_ELEMENTS = ("uint8", "fp8_e4m3", "fp8_e5m2", "uint16", "fp16", "bf16", "uint32", "int32", "fp32", "tf32",
                       "uint64", "int64", "fp64")
# The names types: and buffers give the same types, taken here too.
TENSOR_MAP_ELEMENT_ALIASES = {"float32": "fp32", "float64": "fp64", "float16": "fp16", "bfloat16": "bf16",
                              "e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2", "int8": "uint8"}
TENSOR_MAP_SWIZZLES = ("none", "32B", "64B", "128B")
TENSOR_MAP_L2_PROMOTIONS = ("none", "64B", "128B", "256B")
TENSOR_MAP_OOB_FILLS = ("zero", "nan")
TENSOR_MAP_INTERLEAVES = ("none", "16B", "32B")
TENSOR_MAP_PASSING = ("value", "pointer")
# count: one map per matrix of the operand, for a kernel that indexes an array of maps by its matrix.
TENSOR_MAP_COUNTS = ("batch", "groups")
TENSOR_MAP_MAX_RANK = 5
# A __constant__ variable as its source names it: table, or lut::offsets inside a namespace.
CONSTANT_NAME = re.compile(r"(?:[A-Za-z_]\w*::)*[A-Za-z_]\w*")

# ----------------------------------------------------------------------------------- tensor maps


def _choice(context: Context, item: dict, key: str, choices: tuple[str, ...], default, item_path: str, hint=None,
            aliases: dict[str, str] | None = None):
    value = item.get(key, default)
    if value is default:
        return value
    if aliases and isinstance(value, str):
        value = aliases.get(value, value)
    if not isinstance(value, str) or value not in choices:
        raise context.error(f"{key} is one of {', '.join(choices)}, got {kind_name(value)}", item, key,
                            f"{item_path}.{key}", hint=hint)
    return value


def _expression_list(context: Context, item: dict, key: str, item_path: str, lengths: range, what: str, hint=None):
    node = item[key]
    if not isinstance(node, list) or len(node) not in lengths:
        counts = f"{lengths.start}" if len(lengths) == 1 else f"{lengths.start} to {lengths.stop - 1}"
        raise context.error(f"{key} is {what}: a list of {counts} expressions, got {kind_name(node)}", item, key,
                            f"{item_path}.{key}", hint=hint)
    return tuple(parse_expression(context, node, i, v, f"{item_path}.{key}[{i}]", whole=True)
                 for i, v in enumerate(node))


def tensor_map_argument(context: Context, parent, index, item: dict, item_path: str,
                        constant: bool = False) -> Argument:
    """A signature entry of type tensormap: ``{name, type: tensormap, tensor: A|B|C, box: [rows, cols],
    swizzle, l2_promotion, oob_fill, element, pass, count}``, or with ``dims`` (rank 1 to 5) and ``strides``,
    ``element_strides`` and ``interleave`` the whole of what cuTensorMapEncodeTiled takes, innermost
    dimension first; its words checked against the driver's vocabulary. ``count: batch`` (or ``groups``) on a
    map over A, B or C passed by pointer makes one map per matrix of the operand, in one array. With `constant`,
    the entry is one of ``constants:``: a ``__constant__ CUtensorMap`` (an array of them with ``count``) over A, B
    or C, which takes no ``pass``."""
    check_keys(context, item, TENSOR_MAP_KEYS, item_path)
    for required in ("name", "tensor", "box"):
        if required not in item:
            raise context.error(f"a tensormap {'constant' if constant else 'argument'} needs {required}", parent,
                                index, item_path,
                                hint="{name: map_a, type: tensormap, tensor: A, box: [BM, 32], swizzle: 128B}")
    name = item["name"]
    if constant:
        if not isinstance(name, str) or not CONSTANT_NAME.fullmatch(name):
            raise context.error(f"a constant is named as its source names the __constant__ variable (map_a, "
                                f"maps::a), got {kind_name(name)}", item, "name", f"{item_path}.name")
        if "pass" in item:
            raise context.error("a tensor map in constants: is read by the kernel from its __constant__ variable, "
                                "where the case writes it: it takes no pass", item, "pass", f"{item_path}.pass",
                                hint="leave pass out; a map the kernel takes as a parameter belongs in signature:")
        if item["tensor"] not in ("A", "B", "C"):
            raise context.error(f"a tensor map in constants: describes A, B or C, got {kind_name(item['tensor'])}",
                                item, "tensor", f"{item_path}.tensor",
                                hint="a map over a buffer of the kernel's own goes in signature:")
    elif not isinstance(name, str) or not IDENTIFIER.fullmatch(name) or name in STANDARD_ARGUMENTS:
        raise context.error(f"a tensor map's name is a C identifier other than "
                            f"{', '.join(STANDARD_ARGUMENTS)}, got {kind_name(name)}", item, "name",
                            f"{item_path}.name")
    if "count" in item and not constant and item.get("pass") != "pointer":
        raise context.error("count makes one map per matrix, in an array the kernel indexes: only a map passed "
                            "by pointer (a const CUtensorMap*) can be such an array", item, "count",
                            f"{item_path}.count", hint="add pass: pointer, or leave count out for one map")
    tensor = item["tensor"]
    if not isinstance(tensor, str) or not IDENTIFIER.fullmatch(tensor):
        raise context.error(f"tensor is what the map describes: A, B, C or a buffer of the signature, got "
                            f"{kind_name(tensor)}", item, "tensor", f"{item_path}.tensor")
    if item.get("count") is not None and tensor not in ("A", "B", "C"):
        # count lays the maps out by the operand's batch stride; a buffer of the signature has neither matrices
        # nor a batch stride, so no map of the array would know where it starts
        raise context.error(f"count makes one map per matrix of A, B or C, a batch stride apart; tensor {tensor!r} "
                            "is a buffer of the signature, which holds no matrices to count", item, "count",
                            f"{item_path}.count",
                            hint="leave count out; a map over a buffer reaches more of it through a dimension of "
                                 "its own in dims: and strides:")
    if tensor not in ("A", "B", "C") and "dims" not in item:
        raise context.error(f"tensor is the matrix the map describes, A, B or C, got {tensor!r}; a map over a "
                            "buffer of the signature gives its dims: (and strides:), since a buffer has no rows "
                            "and columns of its own", item, "tensor", f"{item_path}.tensor",
                            hint="e.g. dims: [M, K // 128], strides: [M * 4], box: [BM, 1] for scale factors")
    dims = strides = element_strides = None
    if "dims" in item:
        dims = _expression_list(context, item, "dims", item_path, range(1, TENSOR_MAP_MAX_RANK + 1),
                                "the map's dimensions in elements, innermost first",
                                hint="e.g. dims: [64, K, N / 64] for B in 64-column panels")
        rank = len(dims)
        if "strides" not in item and rank > 1:
            raise context.error(f"a map of rank {rank} needs strides: the byte stride of each dimension but the "
                                "innermost", item, "dims", f"{item_path}.strides",
                                hint="e.g. strides: [N * 2, 128] for dims: [64, K, N / 64] of bf16")
        if rank == 1 and "strides" in item and item["strides"] != []:
            # strides gives the byte step of each dimension past the innermost, whose elements lie side by side
            raise context.error(f"a map of rank 1 (dims: [{dims[0].source}]) has no dimension above the innermost, "
                                f"so no strides to give, got {kind_name(item['strides'])}", item, "strides",
                                f"{item_path}.strides",
                                hint="leave strides out, or give dims a second dimension with its byte stride "
                                     "in strides")
        strides = (_expression_list(context, item, "strides", item_path, range(rank - 1, rank),
                                    "the byte stride of dimension 1" if rank == 2 else
                                    f"the byte strides of dimensions 1 to {rank - 1}")
                   if rank > 1 or "strides" in item else ())
        box = _expression_list(context, item, "box", item_path, range(rank, rank + 1),
                               "the extents one copy moves in each dimension of dims, innermost first")
        if "element_strides" in item:
            element_strides = _expression_list(context, item, "element_strides", item_path, range(rank, rank + 1),
                                               "the step between elements a copy takes in each dimension")
    else:
        for key in ("strides", "element_strides", "interleave"):
            if key in item:
                raise context.error(f"{key} belongs to a map given by its dims", item, key, f"{item_path}.{key}",
                                    hint="give dims: [...] (innermost first) and a box of the same rank, or leave "
                                         f"{key} out to describe {tensor} as stored")
        box_node = item["box"]
        if not isinstance(box_node, list) or len(box_node) != 2:
            raise context.error(f"box is [rows, cols] of {tensor} (row-major) that one copy moves, got "
                                f"{kind_name(box_node)}", item, "box", f"{item_path}.box",
                                hint="e.g. box: [BM, 32] for BM rows of 32 elements; for another rank give dims:")
        box = tuple(parse_expression(context, box_node, i, v, f"{item_path}.box[{i}]", whole=True)
                    for i, v in enumerate(box_node))
    description = TensorMapArgument(
        tensor=tensor, box=cast("tuple[expr.Expression, expr.Expression]", box),   # two extents, checked above
        swizzle=_choice(context, item, "swizzle", TENSOR_MAP_SWIZZLES, "none", item_path,
                        hint="128B for a box row of 128 bytes read by wgmma"),
        l2_promotion=_choice(context, item, "l2_promotion", TENSOR_MAP_L2_PROMOTIONS, "none", item_path),
        oob_fill=_choice(context, item, "oob_fill", TENSOR_MAP_OOB_FILLS, "zero", item_path,
                         hint="zero: elements past the matrix read as 0; nan: as NaN (floating-point types)"),
        element=_choice(context, item, "element", TENSOR_MAP_ELEMENTS, None, item_path,
                        hint="default: the operand's storage type", aliases=TENSOR_MAP_ELEMENT_ALIASES),
        dims=dims, strides=strides, element_strides=element_strides,
        interleave=_choice(context, item, "interleave", TENSOR_MAP_INTERLEAVES, "none", item_path),
        passing=_choice(context, item, "pass", TENSOR_MAP_PASSING, None, item_path,
                        hint="value: a __grid_constant__ const CUtensorMap; pointer: a const CUtensorMap* to a "
                             "copy in device memory; default: as the kernel's parameter is declared"),
        count=_choice(context, item, "count", TENSOR_MAP_COUNTS, None, item_path,
                      hint="batch: a map per matrix of the batch; groups: a map per group's matrix"))
    return Argument(name, "tensormap", None, description)


def check_tensor_map_names(context: Context, node: dict, dotted: str, param_names: list[str],
                           signature: tuple[Argument, ...], type_params: dict[str, str] | None = None) -> None:
    """Refuse a map's expression (box, dims, strides...) that uses a name other than M, N, K, the operands'
    `LAYOUT_NAMES` (lda, strideB, batch: a rank-3 map over a batched B reads them) and the kernel's numeric
    parameters (`type_params`: those whose value is a type, named as such). One rule for a map of the signature,
    one inside a struct (of structs) and one of ``constants:`` (read again from its entry, checked already), at the
    field that holds it."""
    known = set(param_names) | {"M", "N", "K"} | set(LAYOUT_NAMES)
    available = f"names available: M, N, K, {', '.join(LAYOUT_NAMES)}, {', '.join(param_names) or '(no params)'}"
    constant_maps = [(item, f"{dotted}.constants[{index}]") for index, item in enumerate(node.get("constants") or ())
                     if isinstance(item, dict) and item.get("type") == "tensormap"]
    for item, path, argument in [*_map_fields(node.get("signature"), f"{dotted}.signature", signature),
                                 *((item, path, tensor_map_argument(context, None, None, item, path, constant=True))
                                   for item, path in constant_maps)]:
        for key, expressions in argument.tensor_map.expressions().items():
            for axis, expression in enumerate(expressions):
                unknown = sorted(expression.names - known)
                if unknown:
                    raise unknown_names_error(context, expression, unknown, item, key, f"{path}.{key}[{axis}]",
                                              available, type_params)


def _map_fields(items, path: str, arguments: tuple[Argument, ...]):
    """(YAML entry, field path, argument) of every tensor map among `arguments` (written as `items`), those of
    their structs' fields included."""
    if not isinstance(items, list):
        return
    for index, (item, argument) in enumerate(zip(items, arguments)):
        if argument.tensor_map is not None:
            yield item, f"{path}[{index}]", argument
        elif argument.fields and isinstance(item, dict):
            yield from _map_fields(item.get("fields"), f"{path}[{index}].fields", argument.fields)


# ----------------------------------------------------------------------------------- launch attributes


def parse_launch_attributes(context: Context, node: dict, dotted: str) -> LaunchAttributeSpec | None:
    """``cluster: [x, y, z]`` (expressions), ``cluster_non_portable``, ``cluster_scheduling``, ``pdl`` and
    ``cooperative`` as a `LaunchAttributeSpec`; None when the entry has none of them."""
    if not any(key in node for key in LAUNCH_ATTRIBUTE_KEYS):
        return None
    cluster = None
    if "cluster" in node:
        cluster_node = node["cluster"]
        if not isinstance(cluster_node, list) or not 1 <= len(cluster_node) <= 3:
            raise context.error(f"cluster is [x, y, z] blocks (1 to 3 extents), got {kind_name(cluster_node)}",
                                node, "cluster", f"{dotted}.cluster")
        extents = [parse_expression(context, cluster_node, i, v, f"{dotted}.cluster[{i}]", whole=True)
                   for i, v in enumerate(cluster_node)]
        cluster = cast("tuple[expr.Expression, expr.Expression, expr.Expression]",
                       tuple(extents + [expr.parse(1)] * (3 - len(extents))))
    flags = {}
    for key in ("cluster_non_portable", "pdl", "cooperative"):
        value = node.get(key, False)
        if not isinstance(value, bool):
            raise context.error(f"{key} is true or false, got {kind_name(value)}", node, key, f"{dotted}.{key}")
        flags[key] = value
    scheduling = _choice(context, node, "cluster_scheduling", CLUSTER_SCHEDULING, None, dotted.rstrip("."))
    if cluster is None and (flags["cluster_non_portable"] or scheduling is not None):
        key = "cluster_non_portable" if flags["cluster_non_portable"] else "cluster_scheduling"
        raise context.error(f"{key} without a cluster", node, key, f"{dotted}.{key}",
                            hint="give cluster: [x, y, z] as well")
    return LaunchAttributeSpec(cluster=cluster, non_portable=flags["cluster_non_portable"], scheduling=scheduling,
                               pdl=flags["pdl"], cooperative=flags["cooperative"])
