"""Between spec and launch: what one kernel gets for one shape, and every check that can fail before launching.

`plan_case` evaluates the spec's expressions for a shape (grid, block, dynamic shared memory,
scalars, output tile) and checks them against the target's limits, the kernel's compiled resources
and its ``require:`` constraints; each failure is a `ConfigError` naming file, line, field, values
and a hint. Pure: no GPU. In two halves, so a run evaluates each case once: `plan_launch` needs no
compiler output (it decides what to compile), `with_resources` adds what needs the compiler's report.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Callable, Mapping

import numpy as np

from ..argtypes import C_TYPES, float_value
from ..specfile import expr
from ..cuda.resources import KernelResources
from ..errors import CompileError, ConfigError, SourceDidNotBuild, SpecError, WrongArgumentType, WrongArgumentValue
from ..gemm.elementwise import check_note
from ..gemm.operands import GemmOperands, Gram
from ..specfile.typed import evaluate_operands
from ..cuda.launch import LaunchConfig, pack_layout
from ..cuda.launch_attributes import LaunchAttributes
from ..cuda.tensormap import GLOBAL_ALIGN, TensorMapPlan
from ..cuda.occupancy import ArchLimits, Occupancy, base_arch, occupancy, waves
from ..specfile.kernels import (DEFAULT_SCALARS, MAX_ACTIVE_CLUSTERS_NAME, SM_COUNT_NAME, implied_scalar,
                                reads_scalar)
from ..specfile.archs import compute_capability, machine_code_runs_on
from ..specfile.model import Argument, KernelSpec, Shape
from .buffer_plans import BufferPlan, drawn_bias, overflow_note, plan_buffers
from .sizeof_values import sized_types, sizeof_values, unsized_types
from .coverage import (PERSISTENT_NOTE, UNCHECKED_NOTE, fixed_block_count_note, flat_elements, is_persistent,
                       literal_tile_axes, one_block_per_matrix, one_block_per_matrix_note, tile_axes)
from .coverage_checks import (SplitMultiple, ceil_of, check_count_axes, check_flat_grid, check_inferred_coverage,
                              check_rows_axis, check_tile, count_text, find_split_multiples, names_with_values,
                              over_coverage_notes, span)
from .hopper_checks import cluster_note, launch_attributes_of, tensor_maps_of
from .tensor_scales import fold_scales, product_alpha

DEFAULT_SHARED_LIMIT = 48 * 1024  # dynamic shared memory above this needs the per-kernel opt-in
INDEX_LIMIT = 2**31               # a product of sizes at or above this overflows a 32-bit index
# A kernel's occupancy is the same on every shape it has one launch size for: worked out once per distinct input.
_occupancy = functools.lru_cache(maxsize=1024)(occupancy)


@dataclass(frozen=True)
class ActiveClusters:
    """The `max_active_clusters` a grid read: the clusters of the kernel's launch (blocks, without a cluster)
    that fit on the GPU at once.

    Offline it is estimated, SMs x blocks an SM / blocks a cluster, an upper
    bound: a cluster's blocks share one GPC, and a GPU's SMs need not divide
    into clusters evenly. A run counts it with the driver for the loaded
    kernel (`by_driver`) and plans the case again with that count.
    """

    count: int
    by_driver: bool
    blocks_per_sm: int = 1      # the estimate's: 1 until the kernel's resources say otherwise
    cluster_size: int | None = None    # None: a launch without a cluster, whose count is of blocks

    def note(self, sm_count: int) -> str:
        if self.by_driver:
            return (f"grid reads {MAX_ACTIVE_CLUSTERS_NAME} = {self.count}, the driver's count for the loaded kernel "
                    + ("(cuOccupancyMaxActiveClusters)" if self.cluster_size else
                       "(cuOccupancyMaxActiveBlocksPerMultiprocessor x SMs)"))
        per_cluster = f" / {self.cluster_size} blocks a cluster, an upper bound (a cluster's blocks share one GPC)" \
            if self.cluster_size and self.cluster_size > 1 else ""
        return (f"grid reads {MAX_ACTIVE_CLUSTERS_NAME} = {self.count}, estimated as {sm_count} SMs x "
                f"{self.blocks_per_sm} block{'s' if self.blocks_per_sm != 1 else ''} an SM{per_cluster}; "
                "a run takes the driver's count for the loaded kernel")

    def as_dict(self) -> dict:
        return {"count": self.count, "counted_by": "driver" if self.by_driver else "estimate"}


@dataclass
class CasePlan:
    """One kernel on one shape: its launch, its arguments' values, its occupancy and what is wrong with it."""

    kernel: KernelSpec
    shape: Shape
    config: LaunchConfig | None
    argument_values: dict[str, Any]
    resources: KernelResources | None
    occupancy: Occupancy | None
    waves: float | None
    problems: list[SpecError] = field(default_factory=list)   # ConfigErrors, and a signature the image refutes
    notes: list[str] = field(default_factory=list)
    tile: tuple[int, int] | None = None   # rows, cols of C one block computes, when the spec declares it
    attributes: LaunchAttributes | None = None            # cluster, PDL (cuLaunchKernelEx)
    tensor_maps: dict[str, TensorMapPlan] = field(default_factory=dict)   # by argument name
    operands: GemmOperands | None = None  # A, B and C as laid out in memory (None: their fields did not evaluate)
    buffers: dict[str, BufferPlan] = field(default_factory=dict)   # the kernel's own device buffers, by name
    scalars: dict[str, float] = field(default_factory=dict)        # the spec's, which argument values read
    active_clusters: ActiveClusters | None = None   # where the grid or an argument reads max_active_clusters
    constants: dict[str, bytes] = field(default_factory=dict)   # each __constant__ variable's bytes, by its name
    following: tuple[LaunchConfig | None, ...] = ()   # the launch of each of the kernel's then: (None: refused)
    split_multiples: tuple[SplitMultiple, ...] = ()   # splits of C's tiles that the kernel's PTX is to confirm
    # The names of `scalars` the spec wrote (None: not known): how its notes were made, not part of the plan (two
    # plans of one launch are equal whichever way the caller knew it).
    written_scalars: frozenset[str] | None = field(default=None, compare=False)
    # For a case a ``dispatch:`` table picked: the table's kernel (the name its rows are counted under) and which of
    # its entries picked the configuration, by which rule (a `results.records.DispatchChoice`).
    picked_by: tuple[str, Any] | None = None

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def refused_before_compiling(self) -> bool:
        """Whether the launch checks refuse the case on their own, so that its kernel need not be compiled for it;
        not where the one problem is that the source did not build (met while sizing a sizeof), which the
        kernel's compile is left to report."""
        source_field = f"{self.kernel.field_path}.source"
        return any(problem.field != source_field for problem in self.problems)

    def as_dict(self) -> dict:
        return {
            "kernel": self.kernel.label, "instance": self.kernel.instance, "shape": self.shape.label,
            "launch": self.config.as_dict() if self.config else None,
            "resources": self.resources.as_dict() if self.resources else None,
            "occupancy": self.occupancy.as_dict() if self.occupancy else None,
            "waves": self.waves, "problems": [str(p) for p in self.problems], "notes": self.notes,
            "attributes": self.attributes.as_dict() if self.attributes else None,
            "tensor_maps": {name: plan.as_dict() for name, plan in self.tensor_maps.items()},
            **({"buffers": {name: plan.as_dict() for name, plan in self.buffers.items()}} if self.buffers else {}),
            **({MAX_ACTIVE_CLUSTERS_NAME: self.active_clusters.as_dict()} if self.active_clusters else {}),
        }


def base_env(kernel: KernelSpec, shape: Shape) -> dict[str, int]:
    return {**shape.as_env(), **kernel.numeric_params}


def launch_env(kernel: KernelSpec, shape: Shape, limits: ArchLimits) -> dict[str, int]:
    """The names a launch expression reads: the shape's, the params', and `sm_count`, the target's SMs
    (the device's in a run; the architecture's typical part, or `plan --sms`, offline), so that a
    persistent kernel's grid can be one block per SM."""
    return {**base_env(kernel, shape), SM_COUNT_NAME: limits.typical_sm_count}


# Far above any GPU's SM count (a few hundred): a larger count is a slip, not a GPU to plan for.
MAX_SM_COUNT = 10_000


def plan_case(kernel: KernelSpec, shape: Shape, limits: ArchLimits, resources: KernelResources | None = None,
              scalars: dict[str, float] | None = None, sm_count: int | None = None, *,
              written_scalars: frozenset[str] | None = None) -> CasePlan:
    """Evaluate and check one kernel on one shape; problems are collected, not raised.

    `sm_count` plans for a GPU of that many SMs, as ``plan --sms`` does: the ``sm_count`` launch expressions read
    (a persistent grid) and the waves. `written_scalars` are the names of `scalars` the spec wrote
    (``Spec.written_scalars``); None takes a value equal to the built-in alpha = 1, beta = 0 as none of the
    spec's. An argument of another type is a `WrongArgumentType`.
    """
    for name, value, kind, source in (("kernel", kernel, KernelSpec, "a kernel of load_spec(...).kernels"),
                                      ("shape", shape, Shape, "Shape(M, N, K)"),
                                      ("limits", limits, ArchLimits, "arch_limits('sm_90')")):
        if not isinstance(value, kind):
            raise WrongArgumentType(f"plan_case: {name} is {source}, got {type(value).__name__}")
    if resources is not None and not isinstance(resources, KernelResources):
        raise WrongArgumentType(f"plan_case: resources are a compiled kernel's KernelResources, got "
                                f"{type(resources).__name__}")
    if sm_count is not None:
        if isinstance(sm_count, bool) or not isinstance(sm_count, int):
            raise WrongArgumentType(f"plan_case: sm_count is a whole number of SMs, got {type(sm_count).__name__}")
        if not 1 <= sm_count <= MAX_SM_COUNT:
            raise WrongArgumentValue(f"plan_case: sm_count is 1 to {MAX_SM_COUNT:,}, got {sm_count:,}")
        limits = dataclasses.replace(limits, typical_sm_count=sm_count)
    if scalars is not None:
        if not isinstance(scalars, Mapping):
            raise WrongArgumentType(f"plan_case: scalars map names to numbers ({{'alpha': 1.0}}), got "
                                    f"{type(scalars).__name__}")
        for name, number in scalars.items():
            if not isinstance(name, str) or isinstance(number, (bool, np.bool_)) or not isinstance(number, Real):
                raise WrongArgumentType(f"plan_case: scalars map names to numbers, got {name!r:.40}: "
                                        f"{number!r:.40} ({type(number).__name__})")
        scalars = {name: float(number) for name, number in scalars.items()}
    if written_scalars is not None and not (isinstance(written_scalars, (set, frozenset))
                                            and all(isinstance(name, str) for name in written_scalars)):
        raise WrongArgumentType(f"plan_case: written_scalars is a set of scalar names (Spec.written_scalars), got "
                                f"{type(written_scalars).__name__}")
    plan = plan_launch(kernel, shape, limits, scalars,
                       written_scalars=None if written_scalars is None else frozenset(written_scalars))
    return with_resources(plan, resources, limits, sm_count) if resources is not None else plan


# The first error of a compile's message: "k.cu:8: error: identifier ... is undefined" (NVRTC's, nvcc's alike).
_COMPILER_ERROR = re.compile(r":\s*(?:catastrophic |fatal )?error\s*:\s*(.+)")


def plan_launch(kernel: KernelSpec, shape: Shape, limits: ArchLimits,
                scalars: dict[str, float] | None = None, *, driver_active_clusters: int | None = None,
                blocks_per_sm: int = 1, written_scalars: frozenset[str] | None = None) -> CasePlan:
    """The half of the plan that needs no compiler output: launch extents, arguments, constraints, tile.
    `written_scalars` are those of `scalars` the spec wrote, as `plan_case` takes them.

    A grid that reads `max_active_clusters` gets `driver_active_clusters`,
    the driver's count for the loaded kernel, where a run has it; otherwise an
    estimate from the SM count, `blocks_per_sm` and the cluster's size.
    """
    env = launch_env(kernel, shape, limits)
    problems: list[SpecError] = []
    notes: list[str] = []
    problem = _collector(kernel, problems)
    if kernel.sizeofs:
        try:
            env.update(sizeof_values(kernel, limits.arch))
        except CompileError as exc:
            # Every expression reading a sizeof would report an unknown name: the plan ends at its one cause.
            lines = str(exc).splitlines()
            reason = next((found.group(1) for found in map(_COMPILER_ERROR.search, lines) if found), lines[0])
            if isinstance(exc, SourceDidNotBuild):   # the kernel's compile reports it, with its file and line
                sized = ", ".join(f"sizeof({text})" for text in sized_types(kernel).values())
                problem(f"the source did not build, so {sized} has no size: {reason}", "source")
            else:
                unsized = unsized_types(kernel, limits.arch)
                sized = ", ".join(f"sizeof({text})" for text in unsized.values())
                problem(f"{sized}: the kernel's compiler cannot size it: {reason}",
                        (kernel.fields_reading(unsized) or kernel.sizeof_fields)[0],
                        "sizeof names a type the kernel's source defines, with the params in their place")
            return CasePlan(kernel, shape, None, {}, None, None, None, problems, notes, None, None, {}, None, {},
                            dict(scalars or {}), None)
    active_clusters = None
    split_multiples: tuple[SplitMultiple, ...] = ()
    if kernel.grid_or_signature_reads(MAX_ACTIVE_CLUSTERS_NAME):
        active_clusters = _active_clusters(kernel, env, limits, driver_active_clusters, blocks_per_sm)
        env[MAX_ACTIVE_CLUSTERS_NAME] = active_clusters.count
        notes.append(active_clusters.note(limits.typical_sm_count))
        if active_clusters.count < 1:
            problem(f"{MAX_ACTIVE_CLUSTERS_NAME} is 0: no cluster of {active_clusters.cluster_size or 1} blocks "
                    "fits at once with this kernel's resources", "grid")
    try:
        operands, layout_values = evaluate_operands(kernel, shape)
        env.update(layout_values)
    except SpecError as exc:
        # The launch and the arguments read the operands' names (lda, batch, strideA...): with none to read,
        # each would report an unknown name, which is not the mistake. The plan ends at its one cause: on a shape
        # the kernel's require: excludes (a Gram kernel's M == N, an ld: that fits only where K <= 64), the require.
        excluded = _unmet_requirements(kernel, env)
        if excluded:
            problems.extend(excluded)
        else:
            problem(exc.message, exc.field or "ld", exc.hint)
        return CasePlan(kernel, shape, None, {}, None, None, None, problems, notes, None, None, {}, None, {},
                        dict(scalars or {}), active_clusters)

    if operands.groups is not None:
        notes.append(operands.groups.describe())
    levels = operands.levels_note()
    if levels:
        notes.append(levels)
    structure = operands.structure_note()
    if structure:
        notes.append(structure)
    if operands.gram is not None:
        notes.append(gram_note(operands.gram))
    for _, argument in kernel.leaf_arguments():
        if argument.pointers_to is not None:
            offsets = pointer_array_offsets(kernel, operands, argument.pointers_to)
            count = len(offsets)
            what = "first rows of the groups" if operands.groups is not None and \
                getattr(operands, argument.pointers_to.lower()).batch == 1 else "matrices"
            apart = {b - a for a, b in zip(offsets, offsets[1:])}
            notes.append(f"{argument.name}: an array of {count:,} pointer{'s' if count != 1 else ''} to "
                         f"{argument.pointers_to}'s {what}"
                         + (f", {apart.pop():,} bytes apart" if len(apart) == 1 else "")
                         + ", made when the case is bound")

    evaluate = _evaluator(env, problem)
    if kernel.arch:
        _check_target(kernel.arch, limits.arch, problem)
    block = [evaluate(e, f"block[{i}]") for i, e in enumerate(kernel.block)]
    launch_problems = len(problems)
    grid = [evaluate(e, f"grid[{i}]") for i, e in enumerate(kernel.grid)]
    shared = evaluate(kernel.shared_bytes, "shared_bytes")
    config = None
    if None not in block and None not in grid and shared is not None:
        config = _check_dimensions(kernel, env, block, grid, shared, limits, problem)
    grid_fields = f"{kernel.field_path}.grid"
    if config is None and all((found.field or "").startswith(grid_fields) for found in problems[launch_problems:]):
        # A grid that fails on a shape the kernel's require: excludes ('N / 16' on N = 513) fails because of it:
        # the require, the reason, is said alone, as a shape it excludes is not held to its grid's coverage either.
        # (A block or shared memory beyond its limit is its own reason.)
        unmet: list[SpecError] = []
        _check_requirements(kernel, env, None, _collector(kernel, unmet), block)
        if unmet:
            problems[launch_problems:] = unmet
    before_following = len(problems)
    following = tuple(_following_config(kernel, launch, env, limits, problem, notes) for launch in kernel.then)
    # A then: launch's grid that fails on a shape the kernel's require: excludes fails because of it, as the
    # kernel's own does (its block or shared memory beyond a limit is its own reason).
    following_grids = [found for found in problems[before_following:]
                       if re.match(rf"{re.escape(kernel.field_path)}\.then\[\d+\]\.grid\b", found.field or "")]

    # A kernel without alpha and beta (epilogue: overwrite or accumulate) computes with the ones it implies.
    before_arguments = len(problems)
    argument_values = {**kernel.epilogue_scalars(), **_argument_values(kernel, env, scalars or {}, problem)}
    argument_problems = problems[before_arguments:]
    notes.extend(_unread_scalar_notes(kernel, scalars or {}, written_scalars))
    # fp8's per-tensor scales reach the kernel by pointer, folded into its alpha, or in no way (said in a note).
    fold_scales(kernel, argument_values, problem, notes)
    if operands.gram is not None and not operands.gram.adds_input and kernel.reads_c() \
            and float(argument_values.get("beta", 0.0)) != 0.0:
        notes.append(gram_c0_note(operands.gram, float(argument_values["beta"])))
    before_buffers = len(problems)
    buffers = plan_buffers(kernel, env, argument_values, problem, operands.groups)
    buffer_problems = problems[before_buffers:]
    notes.extend(f"block scales {name}: {buffer.grid.describe()}" for name, buffer in buffers.items()
                 if buffer.grid is not None)
    notes.extend(f"bias {name}: {buffer.bias.describe()}" for name, buffer in buffers.items()
                 if buffer.bias is not None)
    if kernel.operands is not None and kernel.operands.elementwise:
        # What C is compared with, written out: a fused epilogue's check is otherwise learnt only from a FAIL.
        bias = drawn_bias(buffers.values())
        notes.append(check_note(kernel.operands.elementwise, product_alpha(kernel, argument_values),
                                float(argument_values.get("beta", 0.0)) if kernel.reads_c() else 0.0,
                                bias.along if bias is not None else None,
                                any(buffer.grid is not None for buffer in buffers.values())))
    notes.extend(f"quantized {name}: {buffer.quantized.describe()}" for name, buffer in buffers.items()
                 if buffer.quantized is not None)
    if not buffer_problems:
        overflow = overflow_note(kernel, env, argument_values, buffers.values())
        if overflow:
            notes.append(overflow)
    notes.extend(_index_overflow_notes(kernel, shape, operands))
    notes.extend(unpassed_ld_notes(kernel, operands))
    tile = None
    attributes = None
    before_maps = len(problems)
    tensor_maps, map_notes = tensor_maps_of(kernel, env, shape, problem)
    notes.extend(map_notes)
    notes.extend(_map_array_checks(kernel, tensor_maps, operands, env, problem))
    map_problems = problems[before_maps:]
    notes.extend(_first_matrix_map_notes(kernel, operands))
    if config is not None:
        attributes = launch_attributes_of(kernel, env, config, limits, problem)
        notes.extend(cluster_note(attributes, config))
        if config.shared_bytes > DEFAULT_SHARED_LIMIT and config.shared_bytes <= limits.max_shared_per_block:
            notes.append(f"{config.shared_bytes} bytes of dynamic shared memory: the >48 KB opt-in "
                         "(cuFuncSetAttribute) is applied automatically")
        refused = len(problems)
        _check_requirements(kernel, env, config, problem)
        # A shape the kernel's own require: excludes is not held to the grid's coverage as well: a hint to cover
        # it would point at a launch the kernel was not written for (a kernel with no bounds checks).
        covering = problem if len(problems) == refused else (lambda *_, **__: None)
        persistent = is_persistent(kernel.grid, env)
        check_count_axes(kernel, env, config, covering)
        uncounted = None if persistent else uncounted_matrices_note(kernel, operands, config)
        if uncounted:
            notes.append(uncounted)
        tile = check_tile(kernel, env, shape, config, covering, persistent, operands.groups)
        per_matrix = one_block_per_matrix(kernel.grid, env)
        flat = flat_elements(kernel.grid)
        if tile is not None and len(problems) == refused and not (persistent or per_matrix or flat):
            split_multiples = find_split_multiples(kernel, env, shape, config, *tile)
            notes.extend(split.note for split in split_multiples)
            notes.extend(over_coverage_notes(kernel, env, shape, config, *tile, operands.groups))
        if per_matrix and kernel.tile is None:
            notes.append(one_block_per_matrix_note(*per_matrix))
        elif persistent:
            notes.append(PERSISTENT_NOTE)
            fewer = _fixed_grid_under_its_tiles(kernel, shape, config, tile)
            fixed = fewer or fixed_block_count_note(kernel.grid, math.prod(config.grid), config.grid,
                                                    tiled=kernel.tile is not None)
            if fixed:
                notes.append(fixed)
        elif kernel.tile is None and flat is not None:
            notes.extend(check_flat_grid(kernel, env, shape, config, flat, covering))
        elif kernel.tile is None and not check_inferred_coverage(kernel, env, shape, config, covering,
                                                                 operands.groups):
            notes.append(UNCHECKED_NOTE)
        if not persistent:
            check_rows_axis(kernel, covering, notes)
    before_constants = len(problems)
    constants = _constant_bytes(kernel, env, scalars or {}, problem)
    # What the shape sizes (an argument's value, a buffer of the kernel's own, a tensor map, a constant, a then:
    # launch's grid) and fails on a shape the kernel's require: excludes ('M / 4' on M = 1001) fails because of it:
    # the require, the reason, is said alone.
    shape_read = [*argument_problems, *following_grids, *buffer_problems, *map_problems, *problems[before_constants:]]
    if shape_read and _excluded_by_require(kernel, problems):
        problems[:] = [found for found in problems if not any(found is other for other in shape_read)]
    return CasePlan(kernel, shape, config, argument_values, None, None, None, problems, notes, tile, attributes,
                    tensor_maps, operands, buffers, dict(scalars or {}), active_clusters, constants, following,
                    split_multiples, written_scalars)


def literal_grid_check(plan: CasePlan, block_reads: tuple[str, ...] | None, reads_grid_size: bool | None) -> CasePlan:
    """`plan` with its grid of numbers alone on x and y (a kernel generated for one shape, as TVM, TileLang and
    tinygrad print its launch; `coverage.literal_tile_axes`) held to C, where the kernel's PTX shows it is no
    persistent kernel: the grid has more than one block on x and y, the kernel reads its block's index on both
    (`block_reads`: ``ctaid.x``, ``ctaid.y``) and never the grid's size (`reads_grid_size` False: no grid-stride loop
    over tiles), so each block computes the tile of its indices. Grid z is a split of K (a number, or an extent that
    reads K) or, where C is a batch, its matrices (an extent that reads the batch, or a number of their count): it
    numbers no tiles. With a tile: declared, grid x counts C's columns and y its rows (the other way round with
    ``rows_on: x``), each checked as a grid that reads N and M is; the notes that took the grid as persistent are
    replaced. `plan` as it is otherwise (a grouped GEMM's included)."""
    kernel, config, tile = plan.kernel, plan.config, plan.tile
    if _excluded_by_require(kernel, plan.problems):
        return plan     # a shape the kernel's require: excludes is not held to covering C
    if (config is None or tile is None or kernel.tile is None or block_reads is None or reads_grid_size is not False
            or not literal_tile_axes(kernel.grid) or not (config.grid[0] > 1 and config.grid[1] > 1)
            or not {"ctaid.x", "ctaid.y"} <= set(block_reads)):
        return plan
    third = _literal_third_axis(kernel, plan.operands, config)
    if third is None:
        return plan
    rows, cols = tile
    shape = plan.shape
    column_axis, row_axis = (1, 0) if kernel.rows_on == "x" else (0, 1)
    usual = [0, 0]
    usual[column_axis], usual[row_axis] = -(-shape.N // cols), -(-shape.M // rows)
    written = [ceil_of("N", kernel.tile[1].source), ceil_of("M", kernel.tile[0].source)]
    if len(kernel.grid) > 2:
        usual.append(config.grid[2])
        written.append(kernel.grid[2].source)
    problems: list[SpecError] = []
    problem = _collector(kernel, problems)
    for axis, size_name, size, extent, what in ((column_axis, "N", shape.N, cols, "columns"),
                                                (row_axis, "M", shape.M, rows, "rows")):
        covered = config.grid[axis] * extent
        if covered < size:
            problem(f"the grid covers {covered} of {size_name} = {size} {what} ({config.grid[axis]} blocks x "
                    f"{extent}): {span(what, covered, size - 1)} would never be written; the kernel's PTX reads "
                    "blockIdx.x and blockIdx.y and never the grid's size (%nctaid), so each block computes the one "
                    "tile its indices name" + third, f"grid[{axis}]",
                    hint=f"on this shape the grid is [{', '.join(map(str, usual))}] "
                         f"([{', '.join(written)}]"
                         + (" with x and y swapped, rows_on: x" if kernel.rows_on == "x" else
                            "; rows_on: x says the kernel reads its row from blockIdx.x" if kernel.rows_on is None
                            else "") + ")")
    taken_as_persistent = {PERSISTENT_NOTE, _fixed_grid_under_its_tiles(kernel, shape, config, tile),
                           fixed_block_count_note(kernel.grid, math.prod(config.grid), config.grid, tiled=True)}
    notes = [note for note in plan.notes if note not in taken_as_persistent]
    if not problems:
        subject = ("the grid of numbers alone is" if not any(extent.names for extent in kernel.grid)
                   else "grid x and y, numbers alone, are")
        notes.append(f"{subject} checked against C's tiles of {rows} x {cols}: the kernel's PTX reads blockIdx.x and "
                     f"blockIdx.y and never the grid's size (%nctaid), so it is no persistent kernel{third}")
    return dataclasses.replace(plan, problems=[*plan.problems, *problems], notes=notes)


def _literal_third_axis(kernel: KernelSpec, operands: GemmOperands | None, config: LaunchConfig) -> str | None:
    """What grid z of a grid of numbers on x and y is, as said after its check (empty where it has one block and C
    one matrix): a split of K, or the batch's matrices where C is a batch and z reads ``batch`` or has their count.
    None where it is neither (a grouped GEMM's groups, a batch that z does not count: left to the other checks)."""
    blocks = config.grid[2]
    if operands is not None and operands.groups is not None:
        return None
    if operands is not None and operands.c.batch > 1:
        counts_batch = len(kernel.grid) > 2 and ("batch" in kernel.grid[2].names or blocks == operands.c.batch)
        return f"; grid z's {blocks:,} blocks number the batch's {operands.c.batch:,} matrices" if counts_batch \
            else None
    if blocks == 1:
        return ""
    if "batch" in kernel.grid[2].names:
        return None
    return f"; grid z's {blocks:,} blocks are taken as a split of K, each adding its part to the same tiles"


def _unread_scalar_notes(kernel: KernelSpec, scalars: Mapping[str, float],
                         written: frozenset[str] | None) -> list[str]:
    """A note for each alpha and beta the spec wrote (`written`) that `kernel` does not take (`reads_scalar`) where
    its value is not the one the kernel computes with: the case is checked against the kernel's own, not the
    spec's. The built-in default (alpha = 1, beta = 0: what a spec without ``scalars:`` has) is no choice of the
    spec's, so a kernel computing otherwise (``epilogue: accumulate``) is noted only for a value the spec wrote,
    ``beta: 0`` too; where `written` is not known, a value equal to the default is taken as not written. (A
    kernel's own ``scalars:`` of that kind is refused where the spec is read.)"""
    notes = []
    for name, default in DEFAULT_SCALARS.items():
        chosen = name in written if written is not None else float(scalars.get(name, default)) != default
        if name not in scalars or reads_scalar(kernel, name) or not chosen:
            continue
        given, implied = float(scalars[name]), implied_scalar(kernel, name)
        if given != implied:
            computes = "C += A @ B" if kernel.epilogue == "accumulate" else "C = A @ B"
            notes.append(f"scalars: {name} = {given:g} does not reach this kernel, which takes no {name}: it computes "
                         f"{computes} ({name} = {implied:g}) and is checked against that")
    return notes


def _uncounted_matrices(kernel: KernelSpec, operands: GemmOperands | None,
                        config: LaunchConfig | None = None) -> tuple[str, int] | None:
    """The name that counts C's matrices (``batch``, or ``groups`` for masked groups, each of its own matrices) and
    their count, where C has more than one and no grid extent reads that name, nor (on the launch `config`) has
    their count as its value while it reads neither M, N nor the GPU's size and numbers no tiles (``NB * NI`` where
    the batch's count is ``NB * NI``): no axis gives each matrix its blocks, so the kernel covers them only by
    looping over them itself. None otherwise (contiguous groups share one C, whose rows the grid's M covers)."""
    if operands is None or operands.c.batch <= 1:
        return None
    name = "groups" if operands.groups is not None else "batch"
    if any(name in extent.names for extent in kernel.grid):
        return None
    if config is not None:
        numbering = tile_axes(kernel.grid)
        if any(config.grid[axis] == operands.c.batch and axis not in numbering
               and not extent.names & {"M", "N", SM_COUNT_NAME, MAX_ACTIVE_CLUSTERS_NAME}
               for axis, extent in enumerate(kernel.grid)):
            return None
    return name, operands.c.batch


def _matrices_words(name: str, count: int) -> tuple[str, str, str]:
    """What `name` counts, in words: ``the batch's 3 matrices``, and one and several of them (``matrix``,
    ``matrices``)."""
    if name == "batch":
        return f"the batch's {count:,} matrices", "matrix", "matrices"
    return f"the {count:,} masked groups' matrices", "group", "groups"


def uncounted_matrices_note(kernel: KernelSpec, operands: GemmOperands | None,
                            config: LaunchConfig | None = None) -> str | None:
    """A note for a grid that no axis of reads the batch (or the masked groups), nor on `config` counts them by
    value, while C has several matrices: the kernel must loop over them itself, since none of its blocks is told
    which matrix is its own. `uncounted_matrices_check` refuses the case where the kernel's PTX shows it picks the
    matrix from a block index the grid leaves at 1."""
    found = _uncounted_matrices(kernel, operands, config)
    if found is None:
        return None
    name, count = found
    matrices, one, _ = _matrices_words(name, count)
    return (f"no grid axis reads {name}, but C is {matrices}: the kernel must loop over them itself; one that picks "
            f"its {one} from blockIdx.z needs grid z = {name}, and the run's check names any {one} left unwritten")


def uncounted_matrices_check(plan: CasePlan, block_reads: tuple[str, ...] | None,
                             reads_grid_size: bool | None) -> CasePlan:
    """`plan` with its grid held to C's matrices where the kernel's PTX settles what `uncounted_matrices_note` leaves
    open: no grid extent reads the batch (or the masked groups), the kernel reads ``%ctaid.z`` while the grid's z,
    written as a number or left out, is 1, and it never reads the grid's size (no ``blockIdx.z + k * gridDim.z``
    loop over the matrices). blockIdx.z is 0 in every block, so a kernel picking its matrix by it writes the first
    one alone. Only z is held so: it is where a batch's blocks go, while a 1 on x or y may be C's one tile there.
    `plan` as it is otherwise."""
    kernel, config = plan.kernel, plan.config
    found = _uncounted_matrices(kernel, plan.operands, config)
    if (found is None or config is None or block_reads is None or reads_grid_size is not False
            or is_persistent(kernel.grid)):
        return plan
    axis, letter = 2, "z"
    if config.grid[axis] != 1 or "ctaid.z" not in block_reads or axis < len(kernel.grid) and kernel.grid[axis].names:
        return plan
    name, count = found
    matrices, one, many = _matrices_words(name, count)
    given = axis < len(kernel.grid)
    written = f"grid {letter} is {kernel.grid[axis].source}" if given else f"the grid has no {letter}"
    at = f"grid[{axis}]" if given else "grid"
    problem = ConfigError(
        f"{written}, yet the kernel reads blockIdx.{letter} (its PTX names %ctaid.{letter}) and never the grid's "
        f"size (%nctaid), and no grid axis reads {name}: C is {matrices}, and every block is given {one} 0, so "
        + (f"{one} 1" if count == 2 else f"{many} 1-{count - 1}") + " would never be written",
        where=kernel.where_field(at), field=f"{kernel.field_path}.{at}",
        hint=f"grid {letter} should be {name}, a block for every {one}"
             + ("" if axis < len(kernel.grid) else f": [{', '.join(e.source for e in kernel.grid)}"
                + ", 1" * (axis - len(kernel.grid)) + f", {name}]"))
    note = uncounted_matrices_note(kernel, plan.operands, config)
    return dataclasses.replace(plan, problems=[*plan.problems, problem],
                               notes=[existing for existing in plan.notes if existing != note])


def _first_matrix_map_notes(kernel: KernelSpec, operands: GemmOperands) -> list[str]:
    """A map without dims over an operand of several matrices (a batch, or a B per group) describes the first
    matrix only: said, with the dims that reach them all, since a kernel reading the others through it fails its
    check only where it steps past that first matrix."""
    notes = []
    for position, _, argument in kernel.encoded_tensor_maps():
        described = argument.tensor_map
        layout = getattr(operands, described.tensor.lower(), None) if described.tensor in ("A", "B", "C") else None
        if described.dims is None and described.count is None and layout is not None and layout.batch > 1 \
                and not layout.two_level:     # refused where the maps are made (`hopper_checks.tensor_maps_of`)
            count = "groups" if operands.groups is not None else "batch"
            # a kernel may as well take an array of maps, one a matrix, and pick its own by the block's index
            array = (f"; a kernel that indexes an array of maps by its matrix (&{argument.name}[blockIdx.z]) is "
                     f"given count: {count}, a map per matrix" if described.passing == "pointer" or position is None
                     else "")
            notes.append(f"tensor map {argument.name}: describes the first of {described.tensor}'s {layout.batch} "
                         f"matrices only (it has no dims:); a map over them all is of rank 3, dims [{layout.tight_ld},"
                         f" {layout.lines}, {count}] innermost first, the batch stride among its strides{array}")
    return notes


def tensor_map_offsets(kernel: KernelSpec, operands: GemmOperands, argument: Argument) -> list[int]:
    """The byte offsets from its buffer's address at which `argument`'s maps are encoded: 0 for one map, and one
    per matrix of its operand for a map with ``count`` (each matrix of the batch, a batch stride apart)."""
    if argument.tensor_map.count is None:
        return [0]
    return pointer_array_offsets(kernel, operands, argument.tensor_map.tensor)


def _map_array_checks(kernel: KernelSpec, tensor_maps: dict, operands: GemmOperands, env, problem) -> list[str]:
    """Each map with ``count`` (one map per matrix of its operand, in an array the kernel indexes): its count is
    the number of matrices the operand holds (a batch, or a matrix per group), and every map's start is 16-byte
    aligned and its reach inside the operand's buffer, as the first map's is checked already; noted with the
    array's maps and their spacing."""
    notes = []
    for _, field_name, argument in kernel.encoded_tensor_maps():
        described, plan = argument.tensor_map, tensor_maps.get(argument.name)
        if described.count is None or plan is None:
            continue
        count = env.get(described.count, 1)
        layout = getattr(operands, described.tensor.lower())
        if count != layout.batch:
            holds = (f"{layout.batch} matrices" if layout.batch > 1 else "one matrix")
            other = next((word for word, value in (("batch", env.get("batch", 1)), ("groups", env.get("groups", 1)))
                          if word != described.count and value == layout.batch and layout.batch > 1), None)
            problem(f"{argument.name}: count: {described.count} makes {count} maps, but {described.tensor} holds "
                    f"{holds}" + (" (contiguous groups share one matrix of rows)" if operands.groups is not None
                                  and layout.batch == 1 else ""),
                    f"{field_name}.count",
                    hint=f"count: {other}" if other else f"a map per matrix needs {described.tensor} to hold a "
                    f"matrix per map; leave count out for one map over {described.tensor}")
            continue
        offsets = tensor_map_offsets(kernel, operands, argument)
        buffer_bytes = layout.elements * plan.element_bytes
        misaligned = next((offset for offset in offsets if offset % GLOBAL_ALIGN), None)
        if misaligned is not None:
            problem(f"{argument.name}: map {offsets.index(misaligned)} of {count} starts {misaligned} bytes into "
                    f"{described.tensor}, not a multiple of {GLOBAL_ALIGN}: a tensor map's address must be",
                    f"{field_name}.count", hint=f"{described.tensor}'s batch stride in bytes must be a multiple of "
                    f"{GLOBAL_ALIGN} for an array of maps")
            continue
        if offsets[-1] + plan.reach_bytes > buffer_bytes:
            problem(f"{argument.name}: the last of its {count} maps starts {offsets[-1]} bytes into "
                    f"{described.tensor} and reaches {plan.reach_bytes} bytes from there, past its {buffer_bytes}-byte "
                    "buffer: a copy there would read outside it", f"{field_name}.{'dims' if described.dims else 'box'}")
            continue
        spacing = f", {offsets[1] - offsets[0]} bytes apart" if count > 1 else ""
        held = "written into its __constant__ array" if field_name.startswith("constants") else \
            "copied to one device buffer, its address passed"
        notes.append(f"tensor map {argument.name}: {count} maps, one per matrix of {described.tensor}{spacing}, "
                     f"{held}")
    return notes


def _evaluator(env, problem) -> Callable[[expr.Expression, str], int | None]:
    """What evaluates a launch field's expression on the case: its whole value, or None with the problem said at
    the field it is given."""
    def evaluate(expression: expr.Expression, field_name: str) -> int | None:
        try:
            return expression.evaluate_int(env)
        except expr.ExpressionError as exc:
            # most evaluation errors quote the expression already; the rest are told which one it is
            quoted = repr(expression.source) in str(exc)
            problem(str(exc) if quoted else f"{expression.source!r}: {exc}", field_name)
            return None

    return evaluate


def _following_config(kernel: KernelSpec, launch, env, limits: ArchLimits, problem, notes: list[str]
                      ) -> LaunchConfig | None:
    """The launch of one of the kernel's ``then:`` on this case, checked as the kernel's own is (its problems at
    ``then[i]``), and noted with its grid and block; None where it cannot be launched."""
    where = f"then[{launch.index}]"

    def at(message: str, field_name: str, hint: str | None = None) -> None:
        problem(message, f"{where}.{field_name}", hint)

    evaluate = _evaluator(env, at)
    block = [evaluate(e, f"block[{i}]") for i, e in enumerate(launch.block)]
    grid = [evaluate(e, f"grid[{i}]") for i, e in enumerate(launch.grid)]
    shared = evaluate(launch.shared_bytes, "shared_bytes")
    if None in block or None in grid or shared is None:
        return None
    config = _check_dimensions(launch, env, block, grid, shared, limits, at)
    if config is not None:
        notes.append(f"{where}: {kernel.following_instance(launch)} launched after it in each case, grid "
                     f"{'x'.join(map(str, config.grid))}, block {'x'.join(map(str, config.block))}"
                     + (f", {config.shared_bytes:,} bytes of dynamic shared memory" if config.shared_bytes else ""))
    return config


def _constant_bytes(kernel: KernelSpec, env, scalars, problem) -> dict[str, bytes]:
    """Each of the kernel's ``constants:`` as the bytes its ``__constant__`` variable is given, by name: its value
    (or its array's) evaluated on this case and converted to its C type; one that does not evaluate or fit is
    reported at its field and left out."""
    packed = {}
    for index, constant in enumerate(kernel.constants):
        if constant.tensor_map is not None:   # encoded when the case is bound, from its buffers' addresses
            continue
        field_name = f"constants[{index}].value"
        expressions = constant.array or ((constant.value,) if constant.value is not None else ())
        values = [_argument_value(constant, expression, f"{field_name}[{position}]" if constant.array else field_name,
                                  env, scalars, problem) for position, expression in enumerate(expressions)]
        if values and None not in values:
            packed[constant.name] = pack_layout(constant.layout(), values, [constant.name] * len(values))
    return packed


def gram_note(gram: Gram) -> str:
    """The plan's note on a Gram product: one buffer, what C gets, and what its vendor row is and is credited with."""
    return (f"{gram.describe()}; its vendor row is cuBLASLt's GEMM of that buffer with itself (SYRK is not reached "
            "through nvmath-python), and both are credited with the GEMM's 2 M N K operations")


def gram_c0_note(gram: Gram, beta: float) -> str:
    """The plan's note on a Gram product that adds beta C0 drawn apart from the input: a kernel that adds a multiple
    of its input (a Newton-Schulz step's alpha X X^T + beta X) is held to another product, and says ``c0: input``."""
    product = "alpha A A^T" if gram.of == "a" else "alpha B^T B"
    one = gram.of.upper()
    return (f"beta = {beta:g} with gram of {one}: C is checked against {product} + beta C0, C0 (what C holds before "
            f"the launch) drawn apart from {one}; a kernel that adds beta {one} itself says gram: {{of: {one}, "
            "c0: input}")


def pointer_array_offsets(kernel: KernelSpec, operands: GemmOperands, matrix: str) -> list[int]:
    """The byte offsets from `matrix`'s buffer (``A``, ``B`` or ``C``) of the addresses an array of pointers to it
    holds: each matrix of its batch, a batch stride apart (an untyped kernel's elements are 4-byte floats); for a
    grouped GEMM, each group's, which in one A or C (contiguous groups) is the group's first row."""
    layout = getattr(operands, matrix.lower())
    types = kernel.operands.types if kernel.operands is not None else None
    element_bytes = getattr(types, matrix.lower()).storage_bytes if types is not None else 4
    groups = operands.groups
    if groups is not None and layout.batch == 1:
        step = layout.ld if layout.order == "row" else 1     # from one row's first element to the next's
        return [start * step * element_bytes for start in groups.starts]
    if layout.two_level:      # matrix z = (i, j) of a batch of two levels, at i * stride[0] + j * stride[1]
        return [int(start) * element_bytes for start in layout.matrix_starts()]
    return [index * layout.batch_stride * element_bytes for index in range(layout.batch)]


def _fixed_grid_under_its_tiles(kernel: KernelSpec, shape: Shape, config: LaunchConfig,
                                tile: tuple[int, int] | None) -> str | None:
    """For a grid of numbers alone on x and y (`coverage.literal_tile_axes`: a kernel built for one shape, its tiles
    numbered by x and y, z a split of K or the batch; a persistent one with its SMs written out is one axis of them)
    with a declared tile, fewer blocks on x and y than C has tiles: the grid is taken as persistent, which a kernel
    whose blocks compute one tile each is not. Said with the counts, and how the grid is written to be checked."""
    if tile is None or not literal_tile_axes(kernel.grid) or sum(side > 1 for side in config.grid) < 2 \
            or any(extent.names for extent in kernel.grid) and min(config.grid[:2]) == 1:
        return None
    rows, cols = tile
    tiles = -(-shape.M // rows) * -(-shape.N // cols)
    blocks = config.grid[0] * config.grid[1]
    if blocks >= tiles:
        return None
    counted = "blocks" if config.grid[2] == 1 else "blocks on x and y"
    return (f"the grid's {blocks:,} {counted}, a fixed count, are fewer than C's {tiles:,} tiles of {rows} x {cols} "
            f"(tile:): taken as a persistent kernel's, each block looping over tiles; if each block computes one "
            f"tile, this grid leaves {tiles - blocks:,} of them unwritten: written as [ceil(N / {cols}), "
            f"ceil(M / {rows})], it is checked against C")


def _active_clusters(kernel: KernelSpec, env: dict[str, int], limits: ArchLimits, driver_count: int | None,
                     blocks_per_sm: int) -> ActiveClusters:
    """What `max_active_clusters` is for this launch: the driver's count, else the estimate."""
    cluster_size = None
    spec = kernel.launch_attributes
    if spec is not None and spec.cluster is not None:
        try:
            cluster_size = max(1, math.prod(expression.evaluate_int(env) for expression in spec.cluster))
        except expr.ExpressionError:
            cluster_size = 1   # the cluster's own evaluation reports it
    if driver_count is not None:
        return ActiveClusters(driver_count, True, cluster_size=cluster_size)
    return ActiveClusters(limits.typical_sm_count * blocks_per_sm // (cluster_size or 1), False, blocks_per_sm,
                          cluster_size)


def with_resources(plan: CasePlan, resources: KernelResources, limits: ArchLimits,
                   sm_count: int | None = None) -> CasePlan:
    """`plan` completed with the compiler's report: shared memory and register checks, occupancy, waves."""
    config = plan.config
    estimate = plan.active_clusters
    if config is not None and estimate is not None and not estimate.by_driver \
            and 1 <= config.threads_per_block <= limits.max_threads_per_block:
        # The estimate of the clusters that fit counts the blocks an SM holds, which the resources decide.
        blocks_per_sm = _occupancy(limits, config.threads_per_block, resources.registers,
                                   resources.static_shared_bytes, config.shared_bytes,
                                   barriers=resources.barriers).blocks_per_sm
        if blocks_per_sm >= 1 and blocks_per_sm != estimate.blocks_per_sm:
            # The launch half again, with that count. The problems found after the launch half (the memory
            # check's, appended to its own) read no launch value, so they stand: they are the ones past the
            # launch half's count with the earlier estimate.
            launch_problems = len(plan_launch(plan.kernel, plan.shape, limits, plan.scalars,
                                              blocks_per_sm=estimate.blocks_per_sm).problems)
            again = plan_launch(plan.kernel, plan.shape, limits, plan.scalars, blocks_per_sm=blocks_per_sm,
                                written_scalars=plan.written_scalars)
            plan = dataclasses.replace(again, problems=[*again.problems, *plan.problems[launch_problems:]])
            config = plan.config
    problems = list(plan.problems)
    notes = list(plan.notes)
    problem = _collector(plan.kernel, problems)
    occ = None
    wave_count = None
    if config is not None:
        threads = config.threads_per_block
        check_resources(config, resources, limits, problem)
        if config.shared_bytes > DEFAULT_SHARED_LIMIT and \
                config.shared_bytes + resources.static_shared_bytes > limits.max_shared_per_block:
            notes = [note for note in notes if "opt-in" not in note]
        if 1 <= threads <= limits.max_threads_per_block:
            occ = _occupancy(limits, threads, resources.registers, resources.static_shared_bytes, config.shared_bytes,
                             barriers=resources.barriers)
            if occ.blocks_per_sm == 0 and occ.reason and not problems:
                problem(f"cannot launch: {occ.reason}", "block", hint=occ.hint or None)
            wave_count = waves(config.total_blocks, occ.blocks_per_sm, sm_count or limits.typical_sm_count)
            if plan.attributes is not None and plan.attributes.cooperative and occ.blocks_per_sm >= 1:
                refusal = cooperative_grid_refusal(config.total_blocks, occ.blocks_per_sm,
                                                   sm_count or limits.typical_sm_count)
                if refusal:
                    problem(refusal, "cooperative", hint=COOPERATIVE_GRID_HINT)
    return dataclasses.replace(plan, resources=resources, occupancy=occ, waves=wave_count, problems=problems,
                               notes=notes)


COOPERATIVE_GRID_HINT = ("cap the grid at the blocks that fit at once: max_active_clusters counts them (without a "
                         "cluster, blocks an SM x SMs), e.g. grid: [\"min(max_active_clusters, TILES)\"]")


def cooperative_grid_refusal(total_blocks: int, blocks_per_sm: int, sm_count: int) -> str | None:
    """Why a cooperative launch of `total_blocks` cannot run where `blocks_per_sm` fit on each of `sm_count` SMs
    (None: it fits). Its blocks may all wait for each other, so the driver launches only a grid resident at once."""
    resident = blocks_per_sm * sm_count
    if total_blocks <= resident:
        return None
    return (f"a cooperative launch needs all its blocks resident at once: the grid has {total_blocks}, but "
            f"{resident} fit ({blocks_per_sm} an SM x {sm_count} SMs)")


def _collector(kernel: KernelSpec, problems: list[SpecError]):
    """A function that records a problem with `kernel`'s spec file, line and field."""
    def problem(message: str, field_name: str, hint: str | None = None) -> None:
        problems.append(ConfigError(message, where=kernel.where_field(field_name),
                                    field=f"{kernel.field_path}.{field_name}", hint=hint))
    return problem


def _check_target(target: str, device_arch: str, problem: Callable[..., None]) -> None:
    """A kernel built for `target` (its ``arch:``) against the device, by CUDA's rule for machine code
    (`machine_code_runs_on`): ``sm_80`` code runs on 8.6 and 8.9, ``sm_90a`` code only on 9.0."""
    if machine_code_runs_on(target, device_arch):
        return
    major, minor, suffix = compute_capability(target)
    if suffix == "a":
        runs_on = f"whose arch-specific instructions run only on {base_arch(target)}"
    else:
        runs_on = f"whose machine code runs only on compute capability {major}.{minor} and later minors of {major}.x"
    problem(f"built for {target}, {runs_on}; this device is {device_arch}", "arch",
            hint=f"leave out arch: to build for the device's own architecture, or plan for one that {target} runs on "
                 f"(plan --arch {base_arch(target)})")


def _names_passed(arguments) -> set[str] | None:
    """The names the kernel is told through `arguments`: each standard argument's own (``lda``), the names each
    value, array element, buffer, struct field and tensor map reads, and ``tensor map A`` for a map laid over A as
    stored (its strides are A's leading dimension). None where a builder makes an argument: what it reads is its own."""
    passed: set[str] = set()
    for argument in arguments:
        if argument.builder is not None:
            return None
        passed.add(argument.name)
        buffer, tensor_map = argument.buffer, argument.tensor_map
        expressions = [argument.value, *argument.array, *((buffer.size, *buffer.values) if buffer else ())]
        if tensor_map is not None:
            expressions.extend([*tensor_map.box, *(tensor_map.dims or ()), *(tensor_map.strides or ())])
            if tensor_map.dims is None:
                passed.add(f"tensor map {tensor_map.tensor}")
        for expression in expressions:
            if expression is not None:
                passed |= expression.names
        inner = _names_passed(argument.fields)
        if inner is None:
            return None
        passed |= inner
    return passed


def unpassed_ld_notes(kernel: KernelSpec, operands: GemmOperands) -> list[str]:
    """A note for each matrix whose ``ld:`` pads its lines on this shape while no argument of the kernel (nor of a
    launch of its ``then:``) passes that leading dimension: no ``lda``, no value reading it, no tensor map over the
    matrix. Such a kernel computes its addresses from the shape alone (``A[row * K + k]``), so it reads the padded
    matrix at the wrong places, unless it pads its lines itself by the same expression."""
    if kernel.operands is None or not kernel.operands.ld:
        return []
    passed = _names_passed([*kernel.signature, *(argument for launch in kernel.then for argument in launch.signature),
                            *kernel.constants])
    if passed is None:
        return []
    notes = []
    for key, expression in kernel.operands.ld.items():
        layout = getattr(operands, key)
        matrix = key.upper()
        if layout.ld == layout.tight_ld or f"ld{key}" in passed or f"tensor map {matrix}" in passed:
            continue
        lines = "rows" if layout.order == "row" else "columns"
        notes.append(f"{kernel.where_field(f'ld.{key}')}: ld.{key}: {matrix}'s leading dimension "
                     f"'{expression.source}' pads its {lines} past the tight {layout.tight_ld}, but no argument passes "
                     f"it (ld{key} in the signature, a value or struct field reading ld{key}, a tensor map over "
                     f"{matrix}): a kernel not told its leading dimension takes {matrix} as tight and reads the wrong "
                     f"elements, unless it pads its {lines} itself by the same expression; the run's check names "
                     "the elements that differ")
    return notes


# The sizes a kernel computes its indices with (row * ld + col, b * stride): an int32 argument of one of these values
# makes them 32-bit.
_INDEX_SIZES = frozenset({"M", "N", "K", "lda", "ldb", "ldc", "strideA", "strideB", "strideC"})


def _index_overflow_notes(kernel: KernelSpec, shape: Shape, operands: GemmOperands | None = None) -> list[str]:
    """A warning when an operand spans 2**31 elements or more (every matrix of its batch, padding included) while
    the kernel takes a size it indexes with as int32: an argument whose value reads M, N, K, a leading dimension or
    a batch stride, whatever its name."""
    narrow = [a.name for _, a in kernel.leaf_arguments()
              if a.ctype == "int32" and (a.value.names if a.value is not None else {a.name}) & _INDEX_SIZES]
    if not narrow:
        return []
    if operands is None:
        sizes = {"A (M*K)": shape.M * shape.K, "B (K*N)": shape.K * shape.N, "C (M*N)": shape.M * shape.N}
    else:
        sizes = {f"{label} ({f'{layout.batch:,} matrices of ' if layout.batch > 1 else ''}{each})": layout.elements
                 for label, layout, each in (("A", operands.a, "M*K"), ("B", operands.b, "K*N"),
                                             ("C", operands.c, "M*N"))}
    large = [f"{name} = {count}" for name, count in sizes.items() if count >= INDEX_LIMIT]
    if not large:
        return []
    index = "b * stride + row * ld + col" if operands is not None and operands.c.batch > 1 else "row * ld + col"
    if operands is not None and operands.levels is not None:
        index = "i * stride[0] + j * stride[1] + row * ld + col"
    return [f"{kernel.where_field('signature')}: shape {shape.label}: {', '.join(large)} elements reach 2**31 while "
            f"{', '.join(narrow)} {'is' if len(narrow) == 1 else 'are'} int32: an index computed in 32 bits "
            f"({index}) overflows"]


def _check_dimensions(kernel, env, block, grid, shared, limits: ArchLimits, problem) -> LaunchConfig | None:
    ok = True
    threads = 1
    for axis, (extent, maximum) in enumerate(zip(block, limits.max_block_dims)):
        threads *= extent
        if extent < 1 or extent > maximum:
            x, y, z = limits.max_block_dims
            problem(f"block {'xyz'[axis]} extent {count_text(extent)} ('{kernel.block[axis].source}' with "
                    f"{names_with_values(kernel.block[axis], env)}) must be 1 to {maximum}", f"block[{axis}]",
                    hint=f"a block's x may be 1 to {x}, y 1 to {y} and z 1 to {z}, with at most "
                         f"{limits.max_threads_per_block} threads in all: give the rest of the work to the grid")
            ok = False
    if ok and threads > limits.max_threads_per_block:
        problem(f"{threads} threads per block ({' x '.join(map(str, block))}) exceed the limit of "
                f"{limits.max_threads_per_block}", "block",
                hint="make the block smaller or give each thread more of the tile")
        ok = False
    for axis, (extent, maximum) in enumerate(zip(grid, limits.max_grid_dims)):
        if extent < 1 or extent > maximum:
            problem(f"grid {'xyz'[axis]} extent {count_text(extent)} ('{kernel.grid[axis].source}' with "
                    f"{names_with_values(kernel.grid[axis], env)}) must be 1 to {maximum}", f"grid[{axis}]",
                    hint="the y and z extents are limited to 65535: put the largest dimension on x"
                    if axis else None)
            ok = False
    if shared < 0:
        problem(f"dynamic shared memory {count_text(shared)} is negative", "shared_bytes")
        ok = False
    elif shared > limits.max_shared_per_block:
        problem(f"{count_text(shared)} bytes of dynamic shared memory exceed the {limits.max_shared_per_block} a "
                f"block may have on {limits.arch}", "shared_bytes", hint="use smaller tiles or fewer pipeline stages")
        ok = False
    return LaunchConfig.of(grid, block, shared) if ok else None


def block_registers(registers: int, threads: int, limits: ArchLimits) -> int:
    """The registers a block of `threads` is launched with when each thread has `registers`: whole warps, each
    rounded up to the allocation unit."""
    warps = -(-threads // limits.warp_size)
    per_warp = -(-registers * limits.warp_size // limits.register_unit) * limits.register_unit
    return per_warp * warps


def check_resources(config: LaunchConfig, resources: KernelResources, limits: ArchLimits, problem) -> None:
    total_shared = resources.static_shared_bytes + config.shared_bytes
    if total_shared > limits.max_shared_per_block:
        room = max(limits.max_shared_per_block - resources.static_shared_bytes, 0)
        problem(f"{resources.static_shared_bytes} static + {config.shared_bytes} dynamic = {total_shared} bytes of "
                f"shared memory exceed the {limits.max_shared_per_block} a block may have on {limits.arch}: beside "
                f"the kernel's static part, shared_bytes may be at most {room}", "shared_bytes",
                hint="use smaller tiles or fewer pipeline stages, or move static __shared__ arrays into the dynamic "
                     "part")
    need = block_registers(resources.registers, config.threads_per_block, limits)
    if need > limits.registers_per_block:
        problem(f"{resources.registers} registers per thread x {config.threads_per_block} threads need "
                f"{need} registers, more than the {limits.registers_per_block} of a block: "
                "the launch would fail with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "block",
                hint="use fewer threads per block or cap registers with __launch_bounds__")


# The names a require: reads of the launch's block (the rest are the case's).
_BLOCK_NAMES = frozenset({"blockDim_x", "blockDim_y", "blockDim_z", "threads"})


def _check_requirements(kernel: KernelSpec, env, config: LaunchConfig | None, problem,
                        block: list[int | None] | None = None, *, unmet_only: bool = False) -> None:
    """The kernel's ``require:`` on the case. Without a launch (`config` None: its grid or block did not evaluate
    or fit), on the `block` alone where it evaluated; a requirement that reads the block's extents without one is
    left to the block's own problem. With `unmet_only`, only the conditions `env` evaluates that do not hold are
    said (one that reads a name `env` lacks, or does not evaluate, is left to the launch's own check)."""
    extents = config.block if config is not None else block
    full = dict(env)
    if extents is not None and None not in extents:
        x, y, z = (*extents, 1, 1, 1)[:3]   # a block written with fewer axes has 1 on the rest
        full.update({"blockDim_x": x, "blockDim_y": y, "blockDim_z": z, "threads": x * y * z})
    for index, requirement in enumerate(kernel.require):
        if config is None and requirement.names & _BLOCK_NAMES - full.keys():
            continue
        if unmet_only and not requirement.names <= full.keys():
            continue
        try:
            holds = requirement.evaluate(full)
        except expr.ExpressionError as exc:
            if not unmet_only:
                problem(f"'{requirement.source}': {exc}", f"require[{index}]")
            continue
        if not holds:
            problem(f"'{requirement.source}' does not hold with {names_with_values(requirement, full)}",
                    f"require[{index}]", hint="the kernel was written for launches where this is true")


def _excluded_by_require(kernel: KernelSpec, problems: list[SpecError]) -> bool:
    """Whether `problems` hold a refusal of the kernel's ``require:``: the case's shape is one it excludes."""
    return any((found.field or "").startswith(f"{kernel.field_path}.require[") for found in problems)


def _unmet_requirements(kernel: KernelSpec, env) -> list[SpecError]:
    """The kernel's ``require:`` conditions that do not hold on the case, of those `env` evaluates without a launch:
    the refusals said alone in place of a check that fails because the shape is one the kernel was not written
    for."""
    unmet: list[SpecError] = []
    _check_requirements(kernel, env, None, _collector(kernel, unmet), unmet_only=True)
    return unmet


def split_multiple_check(plan: CasePlan, reads_grid_size: bool | None) -> CasePlan:
    """`plan` with each axis taken to share out tiles as a multiple of them (`SplitMultiple`) settled by the
    kernel's PTX: a kernel that never reads the grid's size (`reads_grid_size` False) cannot tell the blocks past
    the tiles to return early, so the axis is a split of K and the case is refused at the axis along M (N), naming
    what it leaves; one that reads it keeps the split, without the note. `plan` as it is where the PTX was not
    read."""
    if not plan.split_multiples or reads_grid_size is None:
        return plan
    kernel = plan.kernel
    problems: list[SpecError] = []
    problem = _collector(kernel, problems)
    for split in plan.split_multiples if reads_grid_size is False and plan.config is not None else ():
        size = plan.shape.M if split.size_name == "M" else plan.shape.N
        what = "columns" if split.size_name == "N" else "rows"
        letter, other_letter = "xyz"[split.axis], "xyz"[split.other]
        tile_source = kernel.tile[0 if split.size_name == "M" else 1].source
        problem(f"the grid covers {split.covered} of {split.size_name} = {size} {what} "
                f"({plan.config.grid[split.axis]} blocks of grid {letter} x {split.tile}): "
                f"{span(what, split.covered, size - 1)} would never be written; grid {other_letter}'s "
                f"{plan.config.grid[split.other]:,} blocks, a multiple of the {split.factor} tiles "
                f"'{kernel.grid[split.axis].source}' gives each block of grid {letter}, do not share them out: the "
                f"kernel's PTX never reads the grid's size (%nctaid), which blocks past the tiles need to return early "
                f"(blockIdx.{letter} * gridDim.{other_letter} + blockIdx.{other_letter}), so grid {other_letter} is a "
                "split of K", f"grid[{split.axis}]",
                hint=f"grid {letter} should be {ceil_of(split.size_name, tile_source)}; or grid {other_letter} "
                     f"should be {split.factor}, where its blocks share out the tiles of each block of grid {letter}")
    stale = {split.note for split in plan.split_multiples}
    return dataclasses.replace(plan, problems=[*plan.problems, *problems],
                               notes=[note for note in plan.notes if note not in stale])


def _argument_values(kernel: KernelSpec, env, scalars, problem) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for field_name, argument in kernel.leaf_arguments():
        if argument.array:   # a struct's fixed array: one value per element
            elements = [_argument_value(argument, element, f"{field_name}.value[{position}]", env, scalars, problem)
                        for position, element in enumerate(argument.array)]
            if None not in elements:
                values[argument.name] = elements
            continue
        if argument.null:
            values[argument.name] = 0   # nullptr
            continue
        if argument.ctype == "ptr" and argument.value is not None:   # alpha or beta by pointer: its value
            value = _argument_value(argument, argument.value, field_name, env, scalars, problem, "float64")
            if value is not None:
                values[argument.name] = value
            continue
        if argument.ctype == "ptr" or argument.tensor_map is not None:
            # bound to a buffer (or a map encoded from one) at launch; a launch of then: naming the kernel's alpha
            # by pointer leaves the value that buffer holds, set where the kernel's signature takes it
            values.setdefault(argument.name, argument.name)
            continue
        value = _argument_value(argument, argument.value, field_name, env, scalars, problem)
        if value is not None:
            values[argument.name] = value
    return values


def _argument_value(argument, expression: expr.Expression, field_name: str, env, scalars, problem,
                    ctype: str | None = None):
    """The value of one scalar (or array element) of C type `ctype` (the argument's own by default), or None
    with the problem reported."""
    ctype = ctype or argument.ctype
    try:
        value = expression.evaluate({**env, **scalars})
    except expr.ExpressionError as exc:
        problem(f"argument {argument.name}: {exc}", field_name)
        return None
    if C_TYPES[ctype].is_float:
        try:   # as the kernel reads it: a 16-bit alpha or beta reaches the reference rounded as the kernel has it
            return float_value(ctype, float(value))
        except (ValueError, OverflowError) as exc:   # OverflowError: an integer too large for a float at all
            problem(f"argument {argument.name} = {exc}", field_name,
                    hint=f"where the kernel's parameter is {ctype} too, the value is beyond what it takes; where the "
                         "parameter is wider, give the signature its type")
            return None
    if isinstance(value, float) and not value.is_integer():
        problem(f"argument {argument.name} = {value} is not a whole number for {ctype}", field_name)
        return None
    value = int(value)
    if not C_TYPES[ctype].fits(value):
        low, high = C_TYPES[ctype].low, C_TYPES[ctype].high
        bound = f"{expression.source} <= {high}" if value > high else f"{expression.source} >= {low}"
        problem(f"argument {argument.name} = {value} does not fit {ctype} [{low}, {high}], the type the signature "
                f"gives it", field_name,
                hint=f"where the kernel's parameter is {ctype} too, this shape is beyond what the kernel takes: "
                     f"require: [{bound}] keeps the cases to those it can run; where the parameter is wider, give "
                     "the signature its type")
        return None
    return value

