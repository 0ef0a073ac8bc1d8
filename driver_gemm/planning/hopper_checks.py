"""The launch checks of Hopper kernels: a thread-block cluster's and each TMA tensor map's, per shape. No GPU.

`case_plan.plan_launch` calls `launch_attributes_of` and `tensor_maps_of` once the grid and dynamic
shared memory are known: the cluster's extents are evaluated and checked by
`LaunchAttributes.problems`, each ``tensormap`` argument becomes a `TensorMapPlan` of its operand
as stored for the shape, checked by `TensorMapPlan.problems`. A map given by its dims over A, B or C
is also held to describing a matrix (`matrix_map_problems`) and, with the others over the same operand,
to reaching all of it (`operand_reach_notes`). A failure is reported at the spec's
file and line, the map's name first (``map_a: dimension 1 stride ... must be a multiple of 16``).
`cluster_use_checks` reads what the kernel's PTX does with its cluster against a launch of one block a cluster.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, cast

from ..argtypes import C_TYPES
from ..cuda.launch import LaunchConfig
from ..cuda.launch_attributes import LaunchAttributes
from ..cuda.occupancy import ArchLimits, base_arch, parse_arch
from ..cuda.ptx_facts import KernelPtxFacts
from ..cuda.tensormap import ELEMENT_TYPES, TensorMapPlan
from ..gemm.operands import MatrixLayout
from ..specfile import expr
from ..specfile.typed import evaluate_operands
from ..specfile.model import Argument, KernelSpec, Shape, TensorMapArgument

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
        parts.append(f"cluster {'x'.join(map(str, attributes.cluster))} ({attributes.cluster_size} blocks, "
                     f"{cluster_count_words(config.grid, attributes.cluster)})"
                     + (", non-portable" if attributes.non_portable else "")
                     + (f", scheduling {attributes.cluster_scheduling}" if attributes.cluster_scheduling else ""))
    if attributes.programmatic_dependent_launch:
        parts.append("programmatic dependent launch")
    if attributes.cooperative:
        parts.append(f"cooperative ({config.total_blocks} blocks)")
    return ["launched with cuLaunchKernelEx: " + "; ".join(parts)]


def cluster_count_words(grid: tuple[int, int, int], cluster: tuple[int, int, int]) -> str:
    """How many clusters `grid` makes, or, where a cluster's extent does not divide the grid's in some dimension,
    that it makes no whole number of them (a count there would be true of no launch: the driver refuses it)."""
    if any(size < 1 or extent % size for extent, size in zip(grid, cluster)):
        return f"the grid of {'x'.join(map(str, grid))} blocks is no whole number of clusters"
    return f"{math.prod(extent // size for extent, size in zip(grid, cluster))} clusters"


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


MATRICES = ("A", "B", "C")
# The names a map's dims read for the count of its operand's matrices (a batch, or one per group).
MATRIX_COUNT_NAMES = frozenset(("batch", "groups"))


def operand_layout(kernel: KernelSpec, shape: Shape, tensor: str) -> MatrixLayout:
    """How operand `tensor` (A, B or C) lies in memory for `kernel` on `shape`."""
    return getattr(evaluate_operands(kernel, shape)[0], tensor.lower())


def stored_map_form(layout: MatrixLayout, element_bytes: int) -> str:
    """The dims and strides of a map over `layout` as stored, innermost first, as a spec writes them."""
    dims, strides = [layout.tight_ld, layout.lines], [layout.ld * element_bytes]
    if layout.batch > 1 and layout.batch_stride:
        dims.append(layout.batch)
        strides.append(layout.batch_stride * element_bytes)
    return f"dims [{', '.join(map(str, dims))}], strides [{', '.join(map(str, strides))}]"


def matrix_map_problems(plan: TensorMapPlan, description: TensorMapArgument,
                        layout: MatrixLayout) -> list[tuple[str, str, str]]:
    """Why a map given by its dims cannot describe matrix operand `layout`, as (field, message, hint): a dimension
    over the operand's matrices (its extent reads ``batch`` or ``groups`` and is their count) that steps other than
    the operand's batch stride, or over an operand the batch shares; two coordinates that name one element
    (`TensorMapPlan.aliased_dimensions`: a row longer than the stride between rows, a stride in elements), which no
    view of a matrix has. Nothing for a map without dims, which is the operand as stored."""
    if description.dims is None:
        return []
    size, operand = plan.element_bytes, layout.operand
    stored = stored_map_form(layout, size)
    found: list[tuple[str, str, str]] = []
    over_matrices = set()
    for axis in range(1, plan.rank):
        source = description.dims[axis]
        if not source.names & MATRIX_COUNT_NAMES or plan.extents[axis] != layout.batch or layout.batch < 2:
            continue
        over_matrices.add(axis)
        stride, wanted = plan.strides_bytes[axis - 1], layout.batch_stride * size
        where = (f"dimension {axis} has {operand}'s {layout.batch} matrices as its extent ({source.source})")
        if wanted == 0:
            found.append(("dims", f"{where}, but the batch shares one {operand} (its batch stride is 0): a "
                                  f"dimension stepping {stride} bytes never meets that matrix again",
                          f"describe {operand} as the one matrix it is ({stored}) and copy it at every batch "
                          f"coordinate 0, or give {operand} a batch stride of its own (batch.stride)"))
        elif stride != wanted:
            unit = (f", {operand}'s batch stride in elements (strides are bytes)"
                    if stride == layout.batch_stride else "")
            found.append(("strides", f"{where} but steps {stride} bytes (strides[{axis - 1}]){unit}, and "
                                     f"{operand}'s matrices are {wanted} bytes apart (stride{operand} = "
                                     f"{layout.batch_stride} elements of {size} bytes): every matrix after the first "
                                     "would be read from the wrong place",
                          f"strides[{axis - 1}] is stride{operand} * {size}; {operand} as stored is {stored}"))
    for axis, other, steps in plan.aliased_dimensions():
        if axis in over_matrices:
            continue
        strides = (size, *plan.strides_bytes)
        row = (f" (a row of {plan.extents[0]} x {size} = {plan.extents[0] * size} bytes is longer than the "
               f"{strides[axis]} bytes between rows)" if other == 0 and axis == 1 else "")
        found.append(("strides", f"dimensions {other} and {axis} name the same elements of {operand}: one step "
                                 f"along dimension {axis} ({strides[axis]} bytes) is {steps} steps along "
                                 f"dimension {other}, fewer than its {plan.extents[other]}{row}; no element of a "
                                 "matrix lies at two places, so the copies would move the wrong ones",
                      f"dims are elements, innermost first, and strides bytes: {operand} as stored is {stored}"))
    return found


def operand_end_bytes(layout: MatrixLayout, element_bytes: int) -> int:
    """One past the last byte of the last element of `layout` (the padding after it excluded)."""
    return ((layout.batch - 1) * layout.batch_stride + (layout.lines - 1) * layout.ld + layout.tight_ld) \
        * element_bytes


def element_at(layout: MatrixLayout, offset: int) -> str:
    """The first element of `layout` at or past element `offset` of its buffer, as ``A[i][j]`` (``A[b][i][j]``
    in a batch)."""
    matrix = offset // layout.batch_stride if layout.batch_stride else 0
    line, place = divmod(offset - matrix * layout.batch_stride, layout.ld)
    if place >= layout.tight_ld:            # in a line's padding: the next line is the first element past it
        line, place = line + 1, 0
    if line >= layout.lines:
        matrix, line, place = matrix + 1, 0, 0
    row, column = (line, place) if layout.order == "row" else (place, line)
    return f"{layout.operand}{f'[{matrix}]' if layout.batch > 1 and layout.batch_stride else ''}[{row}][{column}]"


def operand_reach_notes(over_matrices: list[tuple[Argument, TensorMapPlan]], kernel: KernelSpec,
                        shape: Shape) -> list[str]:
    """An operand that maps given by their dims describe, none of its maps reaching its last element: a map with
    another operand's dims, or a batch stride too small, leaves the rest unread. Every map starts at the operand's
    start (a map per matrix, ``count:``, at its matrix), so the furthest map's reach is what they reach together;
    a note, since a kernel may read the rest otherwise. A map without dims over a batch is left to its own note
    (it describes the first matrix)."""
    notes = []
    for operand in MATRICES:
        given = [(argument, plan) for argument, plan in over_matrices if argument.tensor_map.tensor == operand]
        if not any(argument.tensor_map.dims is not None for argument, _ in given):
            continue
        layout = operand_layout(kernel, shape, operand)
        reach, argument, plan = max(((map_reach_bytes(argument.tensor_map, plan, layout), argument, plan)
                                     for argument, plan in given), key=lambda furthest: furthest[0])
        size = plan.element_bytes
        end = operand_end_bytes(layout, size)
        if reach >= end or argument.tensor_map.dims is None:
            continue
        matrices = f"{layout.batch} matrices of " if layout.batch > 1 and layout.batch_stride else ""
        others = f" (the furthest of {len(given)} maps over {operand})" if len(given) > 1 else ""
        one_matrix = dataclasses.replace(layout, batch=1) if argument.tensor_map.count is not None else layout
        notes.append(f"tensor map {argument.name}: reaches the first {reach} bytes of {operand}{others}, but "
                     f"{operand} ({matrices}{layout.rows} x {layout.cols}, {plan.element_type}) ends at byte {end}: "
                     f"its last {end - reach} bytes, from {element_at(layout, -(-reach // size))} on, are reached by "
                     f"no map; dims are elements, innermost first, and strides bytes: {operand} as stored is "
                     f"{stored_map_form(one_matrix, size)}")
    return notes


def map_reach_bytes(description: TensorMapArgument, plan: TensorMapPlan, layout: MatrixLayout) -> int:
    """How far from the operand's start `plan` reaches: its own reach, from the last matrix's start for a map per
    matrix (``count:``)."""
    if description.count is None:
        return plan.reach_bytes
    return (layout.batch - 1) * layout.batch_stride * plan.element_bytes + plan.reach_bytes


def tensor_maps_of(kernel: KernelSpec, env: dict[str, int], shape: Shape,
                   problem: Problem) -> tuple[dict[str, TensorMapPlan], list[str]]:
    """Every tensor map of the signature (and of ``constants:``) for this shape, by argument name, their problems
    reported; and what `plan` says of them: each map it will encode (rank, dims, strides, box, swizzle...), then the
    maps over one operand together (`operand_reach_notes`)."""
    maps: dict[str, TensorMapPlan] = {}
    over_matrices: list[tuple[Argument, TensorMapPlan]] = []
    for _, field_name, argument in kernel.encoded_tensor_maps():
        try:
            plan = tensor_map_of(kernel, argument, env, shape)
        except expr.ExpressionError as exc:
            key = "box" if argument.tensor_map.dims is None else "dims"
            problem(f"{argument.name}: {key}: {exc}", f"{field_name}.{key}")
            continue
        tensor = argument.tensor_map.tensor
        if tensor in MATRICES and kernel.operands is not None and kernel.operands.levels is not None:
            # A map's dimensions step by one stride each: the two levels' matrices would take a rank-4 map or one
            # map per matrix, neither of which is checked against the layout here.
            problem(f"{argument.name}: a tensor map over {tensor}, whose batch has two levels, is not described: "
                    "the maps are checked against batches of one level only", field_name,
                    hint=f"read {tensor} by pointer in this kernel, or describe the batch with one level")
            continue
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
        # Whether the map can describe its matrix at all is said beside how far it reaches (the cause of an overreach).
        over_matrix = not found and tensor in MATRICES and plan.element_bytes == ELEMENT_TYPES[stored][1]
        matrix_problems = (matrix_map_problems(plan, argument.tensor_map, operand_layout(kernel, shape, tensor))
                           if over_matrix else [])
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
        for sub_field, message, hint in matrix_problems:
            problem(f"{argument.name}: {message}", f"{field_name}.{sub_field}", hint=hint)
        if over_matrix and not found and not matrix_problems:
            over_matrices.append((argument, plan))
        maps[argument.name] = plan
    notes = [f"tensor map {name}: {plan.describe()}" for name, plan in maps.items()]
    return maps, notes + operand_reach_notes(over_matrices, kernel, shape)


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
