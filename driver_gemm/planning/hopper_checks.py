"""The launch checks of Hopper kernels: a thread-block cluster's and each TMA tensor map's, per shape. No GPU.

`case_plan.plan_launch` calls `launch_attributes_of` and `tensor_maps_of` once the grid and dynamic
shared memory are known: the cluster's extents are evaluated and checked by
`LaunchAttributes.problems`, each ``tensormap`` argument becomes a `TensorMapPlan` of its operand
as stored for the shape, checked by `TensorMapPlan.problems`. A failure is reported at the spec's
file and line, the map's name first (``map_a: dimension 1 stride ... must be a multiple of 16``).
`cluster_use_checks` reads what the kernel's PTX does with its cluster against a launch of one block a cluster.
"""

from __future__ import annotations

import math
from typing import Any, Callable, cast

from ..argtypes import C_TYPES
from ..cuda.launch import LaunchConfig
from ..cuda.launch_attributes import LaunchAttributes
from ..cuda.occupancy import ArchLimits, base_arch, parse_arch
from ..cuda.ptx_facts import KernelPtxFacts
from ..cuda.tensormap import ELEMENT_TYPES, TensorMapPlan
from ..specfile import expr
from ..specfile.typed import evaluate_operands
from ..specfile.model import Argument, KernelSpec, Shape

Problem = Callable[..., None]   # problem(message, field_name, hint=None), as plan._collector makes it

# An untyped kernel's operands are float32; a typed kernel's are its `types:` (the tensor map's names for them).
STORAGE_ELEMENT = "fp32"
TENSOR_MAP_ELEMENT = {"e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2", "int8": "uint8", "uint8": "uint8"}


def operand_storage(kernel: KernelSpec, tensor: str) -> str:
    """The element type operand `tensor` is stored in for `kernel` (the default of a map's ``element``)."""
    if kernel.operands is None:
        return STORAGE_ELEMENT
    name = getattr(kernel.operands.types, tensor.lower()).name
    return TENSOR_MAP_ELEMENT.get(name, name)


def operand_geometry(kernel: KernelSpec, shape: Shape, tensor: str) -> tuple[int, int, int]:
    """Lines, elements per line and leading dimension (in elements) of operand `tensor` as stored.

    A row-major matrix's lines are its rows, a column-major one's its columns;
    a tensor map's box is given the same way, [lines, elements per line].
    """
    layout = getattr(evaluate_operands(kernel, shape)[0], tensor.lower())
    return layout.lines, layout.tight_ld, layout.ld


def launch_attributes_of(kernel: KernelSpec, env: dict[str, int], config: LaunchConfig, limits: ArchLimits,
                         problem: Problem) -> LaunchAttributes | None:
    """The kernel's launch attributes for this shape (None without any), their problems reported."""
    spec = kernel.launch_attributes
    if spec is None:
        return None
    cluster = None
    if spec.cluster is not None:
        extents = []
        for axis, expression in enumerate(spec.cluster):
            try:
                extents.append(expression.evaluate_int(env))
            except expr.ExpressionError as exc:
                problem(f"{expression.source!r}: {exc}", f"cluster[{axis}]")
                return None
        cluster = cast("tuple[int, int, int]", tuple(extents))   # the spec gives 3 extents (1 for each left out)
    attributes = LaunchAttributes(cluster=cluster, non_portable=spec.non_portable,
                                  programmatic_dependent_launch=spec.pdl, cluster_scheduling=spec.scheduling,
                                  cooperative=spec.cooperative)
    major, minor = parse_arch(base_arch(limits.arch))
    for refusal in attributes.problems(config.grid, config.shared_bytes, 10 * major + minor, limits.shared_per_sm):
        problem(refusal.message, refusal.field, hint=refusal.hint)
    return attributes


def cluster_note(attributes: LaunchAttributes | None, config: LaunchConfig) -> list[str]:
    """What `plan` says about a launch through cuLaunchKernelEx: its cluster (extents and the number of clusters in
    the grid), PDL, and a cooperative grid's blocks."""
    if attributes is None or not attributes.any:
        return []
    parts = []
    if attributes.cluster:
        clusters = config.total_blocks // attributes.cluster_size if attributes.cluster_size else 0
        parts.append(f"cluster {'x'.join(map(str, attributes.cluster))} ({attributes.cluster_size} blocks, "
                     f"{clusters} clusters)" + (", non-portable" if attributes.non_portable else "")
                     + (f", scheduling {attributes.cluster_scheduling}" if attributes.cluster_scheduling else ""))
    if attributes.programmatic_dependent_launch:
        parts.append("programmatic dependent launch")
    if attributes.cooperative:
        parts.append(f"cooperative ({config.total_blocks} blocks)")
    return ["launched with cuLaunchKernelEx: " + "; ".join(parts)]


def tensor_map_of(kernel: KernelSpec, argument: Argument, env: dict[str, int], shape: Shape) -> TensorMapPlan:
    """The map `argument` describes: its own ``dims`` (innermost first), or operand data laid out as
    `operand_geometry` says with a [rows, cols] box."""
    description = argument.tensor_map
    own = _own_buffer(kernel, description.tensor)
    element = description.element or (BUFFER_MAP_ELEMENTS[own.element] if own is not None
                                       else operand_storage(kernel, description.tensor))
    options: dict[str, Any] = {"swizzle": description.swizzle, "l2_promotion": description.l2_promotion,
               "oob_fill": description.oob_fill}
    if description.dims is not None:
        def values(expressions):
            return tuple(e.evaluate_int(env) for e in expressions)

        return TensorMapPlan(element, values(description.dims), values(description.strides or ()),
                             values(description.box), interleave=description.interleave,
                             element_strides=(values(description.element_strides)
                                              if description.element_strides is not None else None), **options)
    rows, cols, leading = operand_geometry(kernel, shape, description.tensor)
    box_rows, box_cols = (e.evaluate_int(env) for e in description.box)
    return TensorMapPlan.for_matrix(element, rows, cols, leading, box_rows, box_cols, **options)


# A device buffer's element (`specfile.device_buffers`) as the tensor map's data type of the same width.
BUFFER_MAP_ELEMENTS = {"int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64", "float32": "fp32",
                       "float64": "fp64", "float16": "fp16", "bfloat16": "bf16", "int8": "uint8", "uint8": "uint8",
                       "bool": "uint8", "int16": "uint16", "uint16": "uint16"}


def _own_buffer(kernel: KernelSpec, tensor: str):
    """The kernel's own device buffer a map over `tensor` describes (`DeviceBufferArgument`); None for A, B, C."""
    if tensor in ("A", "B", "C"):
        return None
    return next((argument.buffer for _, argument in kernel.device_buffers() if argument.name == tensor), None)


def operand_bytes(kernel: KernelSpec, shape: Shape, tensor: str, element: str) -> int:
    """The bytes of operand `tensor`'s buffer (padding and batches included) in `element`s."""
    layout = getattr(evaluate_operands(kernel, shape)[0], tensor.lower())
    return layout.elements * ELEMENT_TYPES[element][1]


def tensor_map_notes(maps: dict[str, TensorMapPlan]) -> list[str]:
    """What `plan` says of each map it will encode: rank, dims, strides, box, swizzle..."""
    return [f"tensor map {name}: {plan.describe()}" for name, plan in maps.items()]


def tensor_maps_of(kernel: KernelSpec, env: dict[str, int], shape: Shape,
                   problem: Problem) -> dict[str, TensorMapPlan]:
    """Every tensor map of the signature for this shape, by argument name; their problems reported."""
    maps: dict[str, TensorMapPlan] = {}
    for _, field_name, argument in kernel.tensor_map_fields():
        try:
            plan = tensor_map_of(kernel, argument, env, shape)
        except expr.ExpressionError as exc:
            key = "box" if argument.tensor_map.dims is None else "dims"
            problem(f"{argument.name}: {key}: {exc}", f"{field_name}.{key}")
            continue
        tensor = argument.tensor_map.tensor
        own = _own_buffer(kernel, tensor)
        stored = BUFFER_MAP_ELEMENTS[own.element] if own is not None else operand_storage(kernel, tensor)
        if ELEMENT_TYPES[plan.element_type][1] != ELEMENT_TYPES[stored][1]:
            problem(f"{argument.name}: element {plan.element_type} is {plan.element_bytes} bytes, but {tensor} is "
                    f"stored as {stored} ({ELEMENT_TYPES[stored][1]} bytes)", f"{field_name}.element",
                    hint="the map must describe the operand as it lies in memory")
        found = plan.problems()
        buffer_bytes: int | None = None
        if not found and own is not None:
            try:
                buffer_bytes = own.size.evaluate_int(env) * C_TYPES[own.element].size
            except expr.ExpressionError:    # the buffer's own plan says why
                pass
        elif not found:
            buffer_bytes = operand_bytes(kernel, shape, tensor, plan.element_type)
        if not found and buffer_bytes is not None:
            if plan.reach_bytes > buffer_bytes:
                found.append(("dims", f"the map reaches {plan.reach_bytes} bytes from {tensor}'s start, past its "
                                      f"{buffer_bytes}-byte buffer: a copy there would read outside it"))
        for sub_field, message in found:
            hint = None
            if sub_field == "strides" and argument.tensor_map.dims is None:
                leading = operand_geometry(kernel, shape, tensor)[2]
                hint = (f"{tensor}'s leading dimension ({leading} elements) must be a multiple of "
                        f"{16 // plan.element_bytes or 1} for TMA; use a kernel without tensor maps for this shape")
            problem(f"{argument.name}: {message}", f"{field_name}.{sub_field}", hint=hint)
        maps[argument.name] = plan
    return maps


def cluster_use_checks(facts: KernelPtxFacts | None, attributes: LaunchAttributes | None,
                       compiled: tuple[int, int, int] | None, problem: Problem) -> list[str]:
    """A kernel whose PTX works with the other blocks of its cluster, launched one block a cluster (no ``cluster:``,
    or one of one block, and no ``__cluster_dims__`` of more). A TMA copy multicast to the blocks of its cluster
    (``.multicast::cluster``) in a kernel that never reads its cluster's size (``%cluster_nctarank``,
    ``%cluster_nctaid``) is written for a fixed cluster of several blocks: it names blocks that do not exist and
    its rank is always 0, so the launch is refused at ``cluster``. Where the kernel reads its cluster's size it may
    adapt to a cluster of one (a note says what to watch), and a barrier of the whole cluster is one of one block;
    a rank or another block's shared memory (``mapa``) read without a ``cluster:`` in the spec is noted. The notes
    are returned."""
    uses = set(facts.cluster_uses or ()) if facts is not None else set()
    spec_cluster = attributes.cluster if attributes is not None else None
    blocks = math.prod(spec_cluster) if spec_cluster else math.prod(compiled) if compiled else 1
    if blocks > 1 or not uses & {"multicast", "mapa", "rank"}:
        return []
    launch = (f"cluster: [{', '.join(map(str, spec_cluster))}] makes clusters of one block" if spec_cluster
              else "the launch has no cluster (one block a cluster)")
    ranks = " and reads its place in the cluster (%cluster_ctarank, %cluster_ctaid)" if "rank" in uses else ""
    if "multicast" in uses and "size" not in uses:
        zero = " and every block's rank is 0, so part of C would never be written" if "rank" in uses else ""
        problem(f"the kernel's PTX multicasts TMA copies to the blocks of its cluster (cp.async.bulk ... "
                f"multicast::cluster){ranks}, and never reads its cluster's size, but {launch}: the copies name "
                f"blocks that do not exist{zero}",
                "cluster", hint="give cluster: the extents the kernel's launcher gives (cudaLaunchKernelEx's "
                                "cluster dimension), e.g. cluster: [2, 1, 1] for a pair along x")
        return []
    if "multicast" in uses:
        return [f"the kernel's PTX multicasts TMA copies to the blocks of its cluster{ranks} and reads its cluster's "
                f"size, but {launch}: it must pick plain copies for a cluster of one; the run's check names any "
                "element of C left unwritten"]
    if spec_cluster or "size" in uses:
        return []
    what = " and ".join(part for part, use in (("reads its place in its cluster (%cluster_ctarank, "
                                                 "%cluster_ctaid)", "rank"),
                                                ("addresses other blocks' shared memory (mapa)", "mapa"))
                        if use in uses)
    return [f"the kernel's PTX {what} but {launch}: every block's rank is 0 and no other block is there; a kernel "
            "written for a cluster of several blocks needs cluster: (the run's check names any element of C left "
            "unwritten)"]
