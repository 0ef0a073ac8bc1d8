"""The fields of a kernel entry for Hopper launches: thread-block clusters, PDL, and TMA tensor-map arguments.

``cluster``, ``cluster_non_portable``, ``cluster_scheduling`` and ``pdl`` become a
`LaunchAttributeSpec`; a ``type: tensormap`` signature entry becomes an `Argument` with a
`TensorMapArgument`. Only words and expressions are checked here; what depends on the shape is
checked per case by `hopper_checks`. The fields: docs/hopper.md.
"""

from __future__ import annotations

from typing import cast

from . import expr
from ..argtypes import STANDARD_ARGUMENTS
from .fields import IDENTIFIER, Context, check_keys, kind_name, parse_expression
from .model import Argument, LaunchAttributeSpec, TensorMapArgument

LAUNCH_ATTRIBUTE_KEYS = ("cluster", "cluster_non_portable", "cluster_scheduling", "pdl")
# The vocabulary of launch attributes and tensor maps as a spec spells it; cuda.launch_attributes and
# cuda.tensormap translate each word to the driver's enum (tests/test_tma_spec.py keeps the lists equal).
CLUSTER_SCHEDULING = ("default", "spread", "load_balancing")
TENSOR_MAP_KEYS = ("name", "type", "tensor", "box", "swizzle", "l2_promotion", "oob_fill", "element")
TENSOR_MAP_ELEMENTS = ("uint8", "fp8_e4m3", "fp8_e5m2", "uint16", "fp16", "bf16", "uint32", "int32", "fp32", "tf32",
                       "uint64", "int64", "fp64")
TENSOR_MAP_SWIZZLES = ("none", "32B", "64B", "128B")
TENSOR_MAP_L2_PROMOTIONS = ("none", "64B", "128B", "256B")
TENSOR_MAP_OOB_FILLS = ("zero", "nan")

# ----------------------------------------------------------------------------------- tensor maps


def _choice(context: Context, item: dict, key: str, choices: tuple[str, ...], default, item_path: str, hint=None):
    value = item.get(key, default)
    if value is default:
        return value
    if not isinstance(value, str) or value not in choices:
        raise context.error(f"{key} is one of {', '.join(choices)}, got {kind_name(value)}", item, key,
                            f"{item_path}.{key}", hint=hint)
    return value


def tensor_map_argument(context: Context, parent, index, item: dict, item_path: str) -> Argument:
    """A signature entry of type tensormap: ``{name, type: tensormap, tensor: A|B|C, box: [rows, cols],
    swizzle, l2_promotion, oob_fill, element}``, its words checked against the driver's vocabulary."""
    check_keys(context, item, TENSOR_MAP_KEYS, item_path)
    for required in ("name", "tensor", "box"):
        if required not in item:
            raise context.error(f"a tensormap argument needs {required}", parent, index, item_path,
                                hint="{name: map_a, type: tensormap, tensor: A, box: [BM, 32], swizzle: 128B}")
    name = item["name"]
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name) or name in STANDARD_ARGUMENTS:
        raise context.error(f"a tensor map's name is a C identifier other than "
                            f"{', '.join(STANDARD_ARGUMENTS)}, got {kind_name(name)}", item, "name",
                            f"{item_path}.name")
    tensor = item["tensor"]
    if tensor not in ("A", "B", "C"):
        raise context.error(f"tensor is the matrix the map describes: A, B or C, got {kind_name(tensor)}", item,
                            "tensor", f"{item_path}.tensor")
    box_node = item["box"]
    if not isinstance(box_node, list) or len(box_node) != 2:
        raise context.error(f"box is [rows, cols] of {tensor} (row-major) that one copy moves, got "
                            f"{kind_name(box_node)}", item, "box", f"{item_path}.box",
                            hint="e.g. box: [BM, 32] for BM rows of 32 elements")
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
                        hint="default: the operand's storage type"))
    return Argument(name, "tensormap", None, description)


def check_tensor_map_names(context: Context, node: dict, dotted: str, param_names: list[str],
                           signature: tuple[Argument, ...]) -> None:
    """Refuse a box expression that uses a name other than M, N, K and the kernel's parameters."""
    known = set(param_names) | {"M", "N", "K"}
    for index, argument in enumerate(signature):
        if argument.tensor_map is None:
            continue
        for axis, expression in enumerate(argument.tensor_map.box):
            unknown = sorted(expression.names - known)
            if unknown:
                box_path = f"{dotted}.signature[{index}].box[{axis}]"
                item = node["signature"][index]
                raise context.error(f"{expression.source!r} uses unknown name {', '.join(unknown)}", item, "box",
                                    box_path,
                                    hint=f"names available: M, N, K, {', '.join(param_names) or '(no params)'}")


# ----------------------------------------------------------------------------------- launch attributes


def parse_launch_attributes(context: Context, node: dict, dotted: str) -> LaunchAttributeSpec | None:
    """``cluster: [x, y, z]`` (expressions), ``cluster_non_portable``, ``cluster_scheduling`` and ``pdl``
    as a `LaunchAttributeSpec`; None when the entry has none of them."""
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
    for key in ("cluster_non_portable", "pdl"):
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
                               pdl=flags["pdl"])
