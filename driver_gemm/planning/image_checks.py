"""The checks of a case against what its compiled kernel says of itself: TMA ranks, compile-time clusters, the
registers its warpgroups move with ``setmaxnreg``, a grid-wide barrier, dynamic shared memory and the size of a
parameter a host builder makes (`host_builders`).

`complete_plan` calls `image_checks` once a kernel is built. The kernel's PTX (`cuda.ptx_facts`) names the rank of
every tensor-map copy and the parameter its map comes from, and a ``__cluster_dims__`` kernel carries its cluster in
the image (`KernelImage.cluster_dims`, or the PTX's ``.reqnctapercluster``). A spec map whose rank is not the rank
the kernel copies with, a grid that the compiled cluster does not divide, or a spec ``cluster:`` other than the
compiled one are refused here, at the spec's file and line, before any launch, and so are a block over the kernel's
own ``__launch_bounds__``, a cluster over its third argument (maxBlocksPerCluster, ``.maxclusterrank``), a stack
frame over a thread's local memory and a compiled cluster over the limit a spec's ``cluster:`` has, a kernel that
waits for its whole grid without ``cooperative: true``, and one that uses dynamic shared memory launched with none
(seen in its PTX, or, for a CUBIN without PTX, in machine code that touches shared memory it does not declare); how
each map is passed is noted, and what a prebuilt image says of its spills, whose bytes it does not record. A kernel
whose warpgroups ask ``setmaxnreg.inc`` for more registers than the block was launched with (after the one warpgroup
that gives some back with ``.dec``) would wait for them forever: that is noted too, since which warps take which
branch is not known before the launch. A kernel executing warpgroup-wide instructions (wgmma, setmaxnreg) launched
with no whole warpgroup, or warp-wide ones (wmma, mma.sync) with no whole warp, is refused at ``block``, and a block
ending in a partial warpgroup (or warp) is noted. A grid of more than one block along an axis whose block index the
kernel never reads (no ``%ctaid``, cluster id or cluster rank of that axis in its PTX) is refused at that axis, its
blocks there being copies of one another; a kernel that reads no block index at all is noted (`check_block_axes`). A
kernel whose block barriers limit the blocks an SM holds is noted with why (`cuda.occupancy.barrier_note`). A kernel
whose PTX reads or writes a matrix through vector accesses of global memory (``ld.global.nc.v4.f32``, ``cp.async``
of 16 bytes), or scalar ones of several of its elements (``ld.global.u32`` of fp16: a ``half2``), wider than the
matrix's rows are aligned to (its leading dimension or batch stride times its element's bytes is no multiple of the
access's) is noted, unless the kernel tests that size for the multiple at run time, or the address of the row it
reads for the access's width, as one that falls back to narrower accesses does (`vector_alignment_notes`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import subprocess
from collections.abc import Sequence

from ..argtypes import C_TYPES
from ..cuda.compile import Cubin
from ..cuda.cubin import KernelImage
from ..cuda.mangling import demangle, qualified_name
from ..cuda.launch_attributes import NON_PORTABLE_CLUSTER_SIZE, PORTABLE_CLUSTER_SIZE
from ..cuda.fatbin import cubin_bytes
from ..cuda.ptx_facts import NO_REGISTER_COUNT_AT_ENTRY, KernelPtxFacts, TmaCopy, VectorAccess, ptx_facts
from ..cuda.sass import disassemble, find_disassembler, shared_memory_instructions, tma_copies
from ..cuda.signature_check import points_to_const
from ..cuda.tensormap import TENSOR_MAP_BYTES, passed_by_pointer
from ..errors import ConfigError, ImageError, ToolMissingError
from ..gemm.dtypes import FP32
from ..gemm.operands import MatrixLayout
from ..specfile.expr import Expression
from ..specfile.model import FollowingLaunch, KernelSpec
from ..cuda.occupancy import ArchLimits, barrier_note
from .case_plan import CasePlan, block_registers, check_resources, tensor_map_offsets
from .coverage import tile_axes
from .host_builders import check_builders


def facts_of(built: Cubin, symbol: str, with_sass: bool = False) -> KernelPtxFacts | None:
    """The PTX facts of `symbol` in `built`: kept from NVRTC's compile, read from a PTX image, or (`with_sass`,
    for a CUBIN from nvcc or a spec's binary) the TMA copies of its SASS where a disassembler is installed,
    untraced to parameters; None if unknown."""
    if built.ptx_facts is not None:
        return built.ptx_facts.get(symbol)
    if built.image_format == "ptx":
        return _ptx_image_facts(built.image).get(symbol)
    if not with_sass or find_disassembler() is None:
        return None
    reading = _sass_reading(built.image, built.arch)
    if reading is None or symbol not in reading[0]:
        return None
    return KernelPtxFacts(tuple(TmaCopy(rank, text, None) for rank, text in reading[0][symbol]))


# A spec's cases share their kernel's image: it is read once, not once per shape.
@functools.lru_cache(maxsize=16)
def _ptx_image_facts(image: bytes) -> dict[str, KernelPtxFacts]:
    return ptx_facts(image.rstrip(b"\0").decode(errors="replace"))


@functools.lru_cache(maxsize=16)
def _sass_reading(image: bytes, arch: str) -> tuple[dict[str, tuple[tuple[int, str], ...]],
                                                     dict[str, tuple[str, ...]]] | None:
    """What the machine code of `image` says, by symbol: its TMA copies and its shared-memory instructions; None
    where it cannot be disassembled."""
    try:
        text = disassemble(cubin_bytes(image, arch))
    except (ImageError, ToolMissingError, OSError, subprocess.SubprocessError):
        return None
    return tma_copies(text), shared_memory_instructions(text)


def compiled_cluster(image: KernelImage | None, facts: KernelPtxFacts | None) -> tuple[int, int, int] | None:
    """The kernel's ``__cluster_dims__``: from its image's attributes (`image`, None for PTX), else from its PTX."""
    if image is not None and image.cluster_dims:
        return tuple(image.cluster_dims)   # type: ignore[return-value]
    return facts.cluster if facts else None


def constant_symbol(name: str) -> str:
    """The symbol of the ``__constant__`` variable a source names `name`: the name itself at global scope, the
    C++ mangling of a namespaced one (``lut::scale`` is ``_ZN3lut5scaleE``)."""
    parts = name.split("::")
    return name if len(parts) == 1 else "_ZN" + "".join(f"{len(part)}{part}" for part in parts) + "E"


def _check_constant_kinds(kernel, facts: KernelPtxFacts | None, problem) -> None:
    """Each constant against the type its PTX declares a scalar ``__constant__`` variable with (`KernelPtxFacts.
    constant_types`): a float written into an integer, or an integer into a float, is refused, since the variable
    would read its bits as the other kind (2 as the float 2.8e-45). Only the kind is compared: PTX declares an int
    and an unsigned alike (``.u32``), and an array or a struct as bytes, whose size alone is checked."""
    declared = dict(facts.constant_types) if facts is not None and facts.constant_types is not None else {}
    for index, constant in enumerate(kernel.constants):
        ptx_type = declared.get(constant_symbol(constant.name))
        if ptx_type is None or ptx_type[0] not in "fsu":   # .b32: bits of no kind
            continue
        variable_float = ptx_type[0] == "f"
        if C_TYPES[constant.ctype].is_float == variable_float:
            continue
        kind, given = ("a float", "integer") if variable_float else ("an integer", "float")
        bits = ptx_type[1:]
        same_size = f"float{bits}" if variable_float else f"int{bits} (or uint{bits})"
        problem(f"constant {constant.name}: type {constant.ctype} writes {given} bits, but the kernel's __constant__ "
                f"{constant.name} is {kind} (its PTX declares it .{ptx_type}), which would read them as {kind}",
                f"constants[{index}].type", hint=f"give the variable's own type: {same_size}")


def _check_constants(plan: CasePlan, built: Cubin, problem, notes: list[str],
                     facts: KernelPtxFacts | None = None) -> None:
    """Each of the spec's ``constants:`` against the image's ``__constant__`` variables: there, of the size its
    values make, and, where the PTX declares the variable's type, of its kind (`_check_constant_kinds`); a variable
    of the image that no constant sets is noted (it keeps its initializer, zeros without one, as in a host program
    that never copies to it). PTX is checked by the driver when the case is bound. A tensor map of ``constants:``
    (a ``__constant__ CUtensorMap``, or an array of them with ``count``) is 128 bytes a map, and of a rank one of
    the kernel's TMA copies that take no parameter's map uses."""
    kernel = plan.kernel
    _check_constant_kinds(kernel, facts, problem)
    # A map in __constant__ memory is named by the copies through it, not loaded from a parameter: its rank is held
    # to those of the copies whose map comes from no parameter.
    untraced: dict[int, str] = {}
    for copy in facts.copies if facts is not None else ():
        if copy.param is None:
            untraced.setdefault(copy.rank, copy.instruction)
    for index, constant in enumerate(kernel.constants):
        map_plan = plan.tensor_maps.get(constant.name) if constant.tensor_map is not None else None
        if map_plan is not None and untraced and map_plan.rank not in untraced:
            rank, instruction = sorted(untraced.items())[0]
            problem(f"constant {constant.name}: the spec's map has rank {map_plan.rank}, but the kernel's copies "
                    f"through maps of no parameter use {instruction} (rank {rank})",
                    f"constants[{index}].{'dims' if constant.tensor_map.dims is not None else 'box'}",
                    hint=f"describe {constant.tensor_map.tensor} as the kernel reads it: dims: [...] (innermost "
                         f"first) with {rank} dimensions, strides: and a box of {rank} extents")
    found = built.constant_variables()
    if found is None:
        if kernel.constants:
            notes.append("constants: a PTX image's __constant__ variables are known once the driver compiles it at "
                         "load; each constant's name and size are checked then, when the case is bound")
        return
    given = {constant_symbol(constant.name) for constant in kernel.constants}
    for index, constant in enumerate(kernel.constants):
        initial = found.get(constant_symbol(constant.name))
        size = len(initial) if initial is not None else None
        data = plan.constants.get(constant.name)
        if size is None:
            held = ", ".join(sorted(qualified_name(symbol) for symbol in found)) or "none"
            problem(f"constant {constant.name}: the compiled image holds no __constant__ variable of that name (it "
                    f"holds: {held})", f"constants[{index}].name",
                    hint="name it as the source does, with its namespace (lut::table)")
        elif data is not None and len(data) != size:
            count = len(constant.array) or 1
            problem(f"constant {constant.name}: {count} {constant.ctype} make {len(data)} bytes; the kernel's "
                    f"__constant__ {constant.name} is {size} bytes", f"constants[{index}].value",
                    hint="give one value per element of the variable, of its type")
        elif constant.tensor_map is not None and plan.operands is not None:
            maps = len(tensor_map_offsets(kernel, plan.operands, constant))
            if maps * TENSOR_MAP_BYTES != size:
                counted = f"{maps} tensor maps make" if maps > 1 else "a tensor map is"
                problem(f"constant {constant.name}: {counted} {maps * TENSOR_MAP_BYTES} bytes; the kernel's "
                        f"__constant__ {constant.name} is {size} bytes", f"constants[{index}].name",
                        hint="a map is declared __constant__ CUtensorMap, an array of one a matrix with count: "
                             "batch (or groups); a variable of another type is a scalar constant")
    unset = sorted(f"{qualified_name(symbol)} ({len(initial)} bytes)" for symbol, initial in found.items()
                   if symbol not in given)
    if unset:
        notes.append(f"__constant__ {', '.join(unset)} in the image: no constants: entry sets "
                     f"{'it' if len(unset) == 1 else 'them'}, so the kernel reads the source's initial values (zeros "
                     "without one)")


def image_checks(plan: CasePlan, built: Cubin, limits: ArchLimits) -> tuple[list[ConfigError], list[str]]:
    """The problems and notes of `plan` that its kernel's image shows (see the module's docstring); `limits` are
    the architecture's."""
    kernel = plan.kernel
    symbol = built.symbol(kernel.instance)
    facts = facts_of(built, symbol, with_sass=bool(kernel.tensor_maps()))
    problems: list[ConfigError] = []
    notes: list[str] = []

    def problem(message: str, field_name: str, hint: str | None = None) -> None:
        problems.append(ConfigError(message, where=kernel.where_field(field_name),
                                    field=f"{kernel.field_path}.{field_name}", hint=hint))

    try:
        slots = built.param_slots(kernel.instance)
    except (ImageError, KeyError):
        slots = ()
    if any(argument.builder is not None for argument in kernel.signature):
        # a slot's size is the parameter's only where the image has as many as the signature (else it says so)
        ordered = sorted(slots, key=lambda slot: slot.ordinal)
        sizes = {position: slot.size for position, slot in enumerate(ordered)} \
            if len(ordered) == len(kernel.signature) else {}
        built_problems, built_notes = check_builders(kernel, plan.argument_values, sizes)
        problems.extend(built_problems)
        notes.extend(built_notes)
    for position, argument in kernel.tensor_maps():
        name = argument.name
        size = slots[position].size if position < len(slots) else None
        if passed_by_pointer(argument.tensor_map.passing, size):
            notes.append(f"tensor map {name}: passed by pointer (const CUtensorMap*): encoded and copied to device "
                         "memory before the timed launches")
        map_plan = plan.tensor_maps.get(name)
        if facts is None or map_plan is None:
            continue
        ranks = facts.ranks_for(position)
        if ranks and map_plan.rank not in ranks:
            rank, instruction = sorted(ranks.items())[0]
            where = f"parameter {position + 1}" if any(c.param == position for c in facts.copies) else "its maps"
            key = "dims" if argument.tensor_map.dims is not None else "box"
            problem(f"{name}: the spec's map has rank {map_plan.rank}, but the kernel copies through {where} with "
                    f"{instruction} (rank {rank})", f"signature[{position}].{key}",
                    hint=f"describe {argument.tensor_map.tensor} as the kernel reads it: dims: [...] (innermost "
                         f"first) with {rank} dimensions, strides: and a box of {rank} extents")
    if facts is None and kernel.tensor_maps():
        notes.append(UNREAD_RANKS_NOTE)
    _check_constants(plan, built, problem, notes, facts)
    try:
        image = built.kernel_image(kernel.instance)
    except (ImageError, KeyError):
        image = None
    if image is not None:
        _check_compiled_bounds(plan, image, problem)
        _check_machine_code_shared(plan, built, symbol, image, problem, notes)
        notes.extend(spill_notes(built, image))
    elif facts is not None:
        _check_block_bounds(plan, facts.max_threads, facts.required_threads, problem)
    cluster = compiled_cluster(image, facts)
    if cluster is not None:
        _check_compiled_cluster(plan, cluster, problem, notes)
    # __launch_bounds__'s third argument: the image's attribute, else the PTX's .maxclusterrank
    max_cluster_blocks = image.max_cluster_blocks if image is not None else None
    if max_cluster_blocks is None and facts is not None:
        max_cluster_blocks = facts.max_cluster_blocks
    _check_cluster_bound(plan, cluster, max_cluster_blocks, problem)
    if plan.occupancy is not None and plan.resources is not None:
        note = barrier_note(plan.occupancy, plan.resources.barriers, limits)
        if note:
            notes.append(note)
    if facts is not None and facts.register_increases:
        notes.extend(register_move_notes(facts, plan, limits))
    if facts is not None:
        notes.extend(_check_launch_facts(plan, facts, problem))
        notes.extend(mma_type_checks(plan, facts, problem))
        notes.extend(accumulator_notes(plan, facts))
        notes.extend(atomic_output_notes(plan, facts))
        if plan.config is not None:
            notes.extend(check_block_axes(plan.config.grid, kernel.grid, facts, problem))
        if not plan.problems and not problems:
            notes.extend(vector_alignment_notes(plan, facts))
    return problems, notes


# How the note begins, for vector accesses and scalar ones of several elements alike.
MISALIGNED_VECTOR_NOTE = "accesses wider than the rows are aligned: "
# Which size a tight leading dimension is, by operand and storage order (A's rows are K long, its columns M...).
_TIGHT_LD_NAMES = {("A", "row"): "K", ("A", "col"): "M", ("B", "row"): "N", ("B", "col"): "K",
                   ("C", "row"): "N", ("C", "col"): "M"}


def _matrix_params(kernel) -> dict[int, str]:
    """The kernel parameters (by position) that are the address of a matrix: A, B, C, or another pointer to one
    (``{name: D, type: ptr, value: C}``)."""
    found = {}
    for position, argument in enumerate(kernel.signature):
        if argument.ctype == "ptr" and not argument.null and (argument.name in ("A", "B", "C") or argument.alias):
            found[position] = argument.alias or argument.name
    return found


def _widest_by_matrix(facts: KernelPtxFacts, matrices: dict[int, str]) -> dict[str, tuple[VectorAccess, bool]]:
    """The widest access of each matrix among its vector accesses and its scalar ones of several bytes
    (`KernelPtxFacts.vector_accesses`, `KernelPtxFacts.scalar_accesses`), and whether it was traced to the matrix's
    parameter: a vector access not traced to any parameter is taken as one of A's and B's (a load) or of C's (a
    store). Whether the widest moves more than one element is the matrix's element type's to say: an
    ``ld.global.u32`` is one fp32 or two fp16."""
    widest: dict[str, tuple[VectorAccess, bool]] = {}
    scalars = facts.scalar_accesses or ()
    for access in (*(facts.vector_accesses or ()), *scalars):
        traced = [matrices[param] for param in access.params if param in matrices]
        # an access of the kernel's own buffer or a scale is not one of the case's matrices; an untraced scalar one
        # is as likely an index's or a pointer's as a matrix's
        if (access.params or access in scalars) and not traced:
            continue
        for matrix in traced or (("C",) if access.store else ("A", "B")):
            if matrix not in widest or access.width > widest[matrix][0].width:
                widest[matrix] = (access, bool(traced))
    return widest


def _tested(kernel, facts: KernelPtxFacts, names: frozenset[str], multiple: int) -> bool:
    """Whether the kernel tests, at run time, a parameter that passes the size `names` denote (its value reads one
    of them: ``K``, ``ldb``) for a multiple of `multiple` (`tested_multiples`): a kernel that does chooses its vector
    path by it. Another parameter that happens to have the same value (K where N is misaligned, at N == K) does not
    count."""
    for param, tested in facts.tested_multiples or ():
        if param >= len(kernel.signature) or tested % multiple:
            continue
        argument = kernel.signature[param]
        if (argument.value.names if argument.value is not None else {argument.name}) & names:
            return True
    return False


def _tests_address(facts: KernelPtxFacts, positions: set[int], width: int) -> bool:
    """Whether the kernel tests an address made from one of the pointer parameters `positions` (a row of the
    matrix, `KernelPtxFacts.tested_addresses`) for a multiple of `width` bytes: a kernel that does takes its wide
    accesses only where the row is aligned for them, and narrower ones elsewhere, whatever its sizes."""
    return any(param in positions and tested % width == 0 for param, tested in facts.tested_addresses or ())


def vector_alignment_notes(plan: CasePlan, facts: KernelPtxFacts) -> list[str]:
    """A note where the kernel reads or writes a matrix through accesses of global memory wider than the alignment
    of its rows: vector accesses (`KernelPtxFacts.vector_accesses`) or scalar ones of more bytes than the matrix's
    element (`KernelPtxFacts.scalar_accesses`: an ``ld.global.u32`` of two fp16), whose address must be aligned to
    their width all the same. Where the matrix's leading dimension (or batch stride) times its element's bytes is no
    multiple of the access's width, the access of its second row (or matrix) is misaligned and faults with
    CUDA_ERROR_MISALIGNED_ADDRESS, which ends the process. A kernel that tests that size's parameter for the
    multiple at run time (``and.b32`` of the parameter, `KernelPtxFacts.tested_multiples`), or that tests an address
    made from the matrix's pointer for the access's width (``and.b64`` of ``A + row * K``,
    `KernelPtxFacts.tested_addresses`), is taken to fall back to narrower accesses there, and no note is made for
    it; a test of another size of the same value is no such test."""
    kernel, operands = plan.kernel, plan.operands
    if operands is None or not (facts.vector_accesses or facts.scalar_accesses):
        return []
    types = kernel.operands.types if kernel.operands is not None else FP32
    clauses: list[str] = []
    requirements: list[str] = []
    matrices = _matrix_params(kernel)
    for matrix, (access, traced) in sorted(_widest_by_matrix(facts, matrices).items()):
        if _tests_address(facts, {position for position, name in matrices.items() if name == matrix}, access.width):
            continue
        layout: MatrixLayout = getattr(operands, matrix.lower())
        element = getattr(types, matrix.lower())
        multiple = access.width // math.gcd(access.width, element.storage_bytes)
        sizes = []
        if layout.lines > 1:
            tight = layout.ld == layout.tight_ld
            lines = "rows" if layout.order == "row" else "columns"
            leading = f"ld{matrix.lower()}"
            name = _TIGHT_LD_NAMES[matrix, layout.order] if tight else leading
            # a tight leading dimension is the size it equals as well (B's rows N apart: N or ldb)
            sizes.append((f"its {lines} are {name} = {layout.ld:,} {element.name} elements apart", name,
                          frozenset({name, leading}), layout.ld))
        if layout.batch > 1 and layout.batch_stride:
            name = f"stride{matrix}"
            sizes.append((f"its matrices are {name} = {layout.batch_stride:,} {element.name} elements apart", name,
                          frozenset({name}), layout.batch_stride))
        given = kernel.operands.strides.get(matrix.lower()) if kernel.operands is not None else None
        if layout.levels is not None and layout.outer_stride and isinstance(given, tuple) and layout.levels[0] > 1:
            # A batch of two levels: its outer stride, as the spec writes it, is what a requirement names.
            name = f"({given[0].source})"
            sizes.append((f"its outer level's matrices are {name} = {layout.outer_stride:,} {element.name} "
                          "elements apart", name, frozenset(given[0].names), layout.outer_stride))
        misaligned = [(text, name, value * element.storage_bytes) for text, name, names, value in sizes
                      if value * element.storage_bytes % access.width
                      and not _tested(kernel, facts, names, multiple)]
        if not misaligned:
            continue
        verb = "written" if access.store else "read"
        untraced = "" if traced else " (an address not traced to a parameter, taken as one of its)"
        apart = " and ".join(f"{text} ({size_bytes:,} bytes)" for text, _, size_bytes in misaligned)
        clauses.append(f"{matrix} is {verb} {access.width} bytes at a time ({access.instruction}{untraced}) while "
                       f"{apart}")
        for _, name, _ in misaligned:
            if f"{name} % {multiple} == 0" not in requirements:
                requirements.append(f"{name} % {multiple} == 0")
    if not clauses:
        return []
    return [f"{MISALIGNED_VECTOR_NOTE}{'; '.join(clauses)}: such an access of the second row (or matrix) is "
            "misaligned and faults (CUDA_ERROR_MISALIGNED_ADDRESS, which ends the process) unless the kernel falls "
            "back to narrower accesses there, and its PTX tests none of these sizes for the multiple nor such a "
            "row's address for the width; "
            f"require: {' and '.join(requirements)} keeps such shapes out"]


PARTIAL_WARPGROUP_NOTE = "partial warpgroup: "   # how the note begins


def _check_launch_facts(plan: CasePlan, facts: KernelPtxFacts, problem) -> list[str]:
    """What the kernel's PTX says its launch must give it: dynamic shared memory where it uses an extern
    ``__shared__`` array, a cooperative launch where it waits for its whole grid, and a whole warpgroup where it
    executes warpgroup-wide instructions (wgmma, setmaxnreg). Which warps execute those the PTX does not tell: a
    block of fewer than 128 threads has no warpgroup to execute them and is refused; one that ends in a partial
    warpgroup is noted, since that part may be warps that never execute them (a producer warp that only loads, as
    in 2 warpgroups and 1 warp, 288 threads). A kernel whose tensor-core instructions are warp-wide (wmma, mma.sync)
    needs whole warps the same way (`_check_whole_warps`). Returns the notes."""
    notes: list[str] = []
    warpgroup_wide = facts.warpgroup_instructions()
    threads = plan.config.threads_per_block if plan.config is not None else 0
    if warpgroup_wide and threads % THREADS_A_WARPGROUP:
        whole = threads // THREADS_A_WARPGROUP
        warps = threads % THREADS_A_WARPGROUP // 32 or 1
        executes = (f"the kernel executes {' and '.join(warpgroup_wide)}, which all 4 warps of a warpgroup execute "
                    "together (.sync.aligned)")
        them = "it" if len(warpgroup_wide) == 1 else "them"
        # a size the kernel's own __launch_bounds__ (or required block) refuses is no advice
        bound = math.prod(facts.max_threads) if facts.max_threads is not None else None
        fits = [size for size in (THREADS_A_WARPGROUP * (whole + 1), THREADS_A_WARPGROUP * (whole + 2))
                if facts.required_threads is None and (bound is None or size <= bound)]
        if not whole:
            hint = _no_whole_unit_hint(facts, "warpgroup", THREADS_A_WARPGROUP) or (
                f"launch {' or '.join(map(str, fits))} threads, whole warpgroups" if fits
                else "launch whole warpgroups, multiples of 128 threads")
            problem(f"a block of {threads} threads holds no whole warpgroup (128 threads), but {executes}: the warps "
                    f"that execute {them} wait for warps that do not exist (a hang) or compute garbage", "block",
                    hint=hint)
        else:
            # rounding down would leave no room for the extra warps, so only the next whole size is named
            room = (f"; a kernel whose every warp executes {them} needs whole warpgroups: {fits[0]} threads"
                    if fits else "")
            notes.append(f"{PARTIAL_WARPGROUP_NOTE}a block of {threads} threads ends in a partial warpgroup ({warps} "
                         f"warp{'s' if warps != 1 else ''} of 4), and {executes}: right only where the warps of the "
                         f"partial warpgroup never execute {them}, as a producer warp that only loads does; where "
                         f"they do, they wait for warps that do not exist (a hang) or compute garbage{room}")
    elif not warpgroup_wide and threads:
        notes.extend(_check_whole_warps(threads, facts, problem))
    if facts.dynamic_shared and plan.config is not None and plan.config.shared_bytes == 0:
        problem("the kernel uses dynamic shared memory (an extern __shared__ array), but shared_bytes gives it none: "
                "its first access would be out of bounds", "shared_bytes",
                hint="give shared_bytes: the bytes its launcher passes as the third <<<grid, block, bytes>>> "
                     "argument (an expression of the params and M, N, K)")
    if facts.grid_sync and not (plan.attributes is not None and plan.attributes.cooperative):
        problem("the kernel waits for its whole grid (it reads the grid workspace, %envreg1 and %envreg2, as "
                "cooperative_groups' grid.sync() does), which only a cooperative launch provides: launched "
                "otherwise it traps", "cooperative",
                hint="add cooperative: true to the kernel, with a grid that fits on the GPU at once "
                     "(max_active_clusters counts the blocks that do)")
    return notes


def _no_whole_unit_hint(facts: KernelPtxFacts, unit: str, unit_threads: int) -> str | None:
    """For a block too small to hold one whole `unit` (a warp or a warpgroup, `unit_threads` threads) where the kernel
    itself asks for that size: its required block (.reqntid) or its __launch_bounds__ (.maxntid) holding no whole
    one, which the spec cannot launch around; None where neither does (a size to launch is the advice then)."""
    required = math.prod(facts.required_threads) if facts.required_threads is not None else None
    bound = math.prod(facts.max_threads) if facts.max_threads is not None else None
    if required is not None and required % unit_threads:
        return (f"the kernel's required block of {required} threads (.reqntid) holds no whole number of {unit}s: "
                f"build it for a multiple of {unit_threads} threads and launch that")
    if bound is not None and bound < unit_threads:
        return (f"the kernel's __launch_bounds__ of {bound} threads (.maxntid) holds no whole {unit}: raise it to a "
                f"multiple of {unit_threads} and launch that")
    return None


PARTIAL_WARP_NOTE = "partial warp: "   # how the note begins
THREADS_A_WARP = 32


def _check_whole_warps(threads: int, facts: KernelPtxFacts, problem) -> list[str]:
    """Whole warps where the kernel executes warp-wide tensor-core instructions (``wmma.mma``, ``mma.sync``: every
    lane of the warp takes part, ``.sync.aligned``). A block of fewer than 32 threads has no whole warp to execute
    them and is refused; one that ends in a partial warp is noted, since that warp may be one that never executes
    them. Returns the notes."""
    warp_wide = facts.warp_instructions()
    if not warp_wide or threads % THREADS_A_WARP == 0:
        return []
    them = "it" if len(warp_wide) == 1 else "them"
    executes = (f"the kernel executes {' and '.join(warp_wide)}, which all 32 lanes of a warp execute together "
                "(.sync.aligned)")
    whole = -(-threads // THREADS_A_WARP) * THREADS_A_WARP
    bound = math.prod(facts.max_threads) if facts.max_threads is not None else None
    required = math.prod(facts.required_threads) if facts.required_threads is not None else None
    if threads < THREADS_A_WARP:
        hint = _no_whole_unit_hint(facts, "warp", THREADS_A_WARP) or (
            "launch whole warps: 32 threads for a kernel whose block is one warp (block: [32]), or the multiple of "
            "32 its launcher gives")
        problem(f"a block of {threads} threads holds no whole warp (32 threads), but {executes}: the lanes that do "
                f"not exist leave {them} undefined (garbage in C, or a hang)", "block", hint=hint)
        return []
    room = (f"; a kernel whose every warp executes {them} needs whole warps: {whole} threads"
            if required is None and (bound is None or whole <= bound) else "")
    return [f"{PARTIAL_WARP_NOTE}a block of {threads} threads ends in a partial warp of "
            f"{threads % THREADS_A_WARP} threads, and {executes}: right only where the partial warp never executes "
            f"{them}; where it does, the lanes that do not exist leave {them} undefined (garbage in C, or a "
            f"hang){room}"]


# An operand's element type as a tensor-core instruction names it, and its bytes.
_PTX_FORMATS = {"fp32": "f32", "tf32": "tf32", "fp16": "f16", "bf16": "bf16", "e4m3": "e4m3", "e5m2": "e5m2",
                "int8": "s8", "uint8": "u8"}
_FORMAT_BITS = {"f32": 32, "tf32": 32, "f16": 16, "bf16": 16, "e4m3": 8, "e5m2": 8, "e3m2": 6, "e2m3": 6,
                "e2m1": 4, "s8": 8, "u8": 8, "s4": 4, "u4": 4, "b1": 1, "f64": 64}


def _quantized_b(kernel) -> bool:
    """Whether B reaches the kernel quantized (codes, scales and zero points in buffers of its own)."""
    return any(argument.buffer is not None and argument.buffer.quantized is not None
               for _, argument in kernel.device_buffers())


def _agrees(element: str, used: str) -> bool:
    """Whether an instruction multiplying `used` reads an operand stored as `element` as it is (fp32 as tf32)."""
    return used == element or element in ("f32", "tf32") and used == "tf32"


def mma_type_checks(plan: CasePlan, facts: KernelPtxFacts, problem) -> list[str]:
    """The types ``types:`` gives A and B against those every tensor-core instruction of the kernel multiplies
    (`KernelPtxFacts.mma_types`), where they all agree. The spec's A and B are compared with the instruction's A and
    B in either order, since a kernel that computes C^T = B^T A^T (swap-AB, as small-M kernels do) puts B in the
    instruction's A operand; the order that explains the kernel better is judged. A different format of the same
    width (bf16 for fp16, e5m2 for e4m3, int8 for uint8) with no ``cvt`` from the stored format nor to the
    instruction's (other than an epilogue's from f32 to C's type) in the kernel is refused: the instruction reads
    the stored bytes as its own type, and for a kernel whose operands arrive through tensor maps or untyped pointers
    nothing else tells. An instruction of another width is noted: a conversion may reach it (fp8 or int8 loaded and
    multiplied as bf16, as a dequantising kernel does), and so may bit masks without a ``cvt`` (fp32 split into bf16
    pieces, whose high halves are exact bf16). fp32 operands multiplied as tf32 agree. Returns the notes."""
    kernel = plan.kernel
    if not facts.mma_types:
        return []
    types = kernel.operands.types if kernel.operands is not None else None
    stored = {"A": types.a.name if types else "fp32", "B": types.b.name if types else "fp32"}
    output = _PTX_FORMATS.get(types.c.name) if types is not None else "f32"
    checked = [matrix for matrix in ("A", "B") if not (matrix == "B" and _quantized_b(kernel))]

    def judged(order: tuple[int, int]) -> tuple[list[tuple[str, str, str]], list[str]]:
        """The problems (message, field, hint) and notes of reading the spec's A and B as the instruction's operands
        `order` (0: its A, 1: its B)."""
        problems: list[tuple[str, str, str]] = []
        notes: list[str] = []
        for matrix, slot in zip(("A", "B"), order):
            multiplied = {entry[1 + slot] for entry in facts.mma_types or ()}
            element = _PTX_FORMATS.get(stored[matrix])
            if matrix not in checked or len(multiplied) != 1 or element is None:
                continue
            used = multiplied.pop()
            if _agrees(element, used):
                continue
            instruction = next(entry[0] for entry in facts.mma_types or () if entry[1 + slot] == used)
            stored_bits, used_bits = _FORMAT_BITS[element], _FORMAT_BITS.get(used, 0)
            said = f"types: makes {matrix} {stored[matrix]}" if types is not None else \
                f"the kernel has no types:, so {matrix} is fp32"
            operand = "" if order == (0, 1) else \
                f" in its {'AB'[slot]} operand, where a kernel computing C^T = B^T A^T puts {matrix}"
            every = f"every tensor-core instruction of the kernel multiplies {used} ({instruction}){operand}"
            # A conversion from the stored format, or to the instruction's from another than the f32 accumulators an
            # epilogue rounds into C's type, is one the operand may take before the instruction.
            converts = any(source == element or destination == used and (source != "f32" or output != used)
                           for destination, source in facts.conversions or ())
            if used_bits == stored_bits and not converts:
                # no bit trick turns one format into another of its width: the instruction reads the bytes as stored
                problems.append((
                    f"{said}, but {every}, a different format of the same width, and the kernel converts nothing "
                    f"from {element} nor to {used} (its PTX has no such cvt): it would read {matrix}'s "
                    f"{stored[matrix]} bytes as {used}", "types" if types is not None else "source",
                    f"give types: the type the kernel reads ({matrix.lower()}: {_SPEC_NAMES.get(used, used)}), "
                    f"or build the kernel for {stored[matrix]}"))
                continue
            how = (f"(by cvt, or by masking bits without one, as a kernel splitting {stored[matrix]} into {used} "
                   "pieces does)" if used_bits < stored_bits else "(a dequantising or mixed-input kernel)")
            notes.append(f"{MMA_TYPE_NOTE}{said}, but {every}: right only where the kernel converts each element of "
                         f"{matrix} to {used} before the instruction {how}; a kernel described with the wrong type "
                         f"reads {matrix}'s bytes as {used}, and its run FAILs")
        return problems, notes

    straight, swapped = judged((0, 1)), judged((1, 0))
    # refused only where neither order reads the operands as stored; of two that do, the one with fewer notes
    chosen = swapped if (len(swapped[0]), len(swapped[1])) < (len(straight[0]), len(straight[1])) else straight
    for message, field_name, hint in chosen[0]:
        problem(message, field_name, hint=hint)
    return chosen[1]


MMA_TYPE_NOTE = "tensor-core input type: "   # how the note begins
_SPEC_NAMES = {ptx: name for name, ptx in _PTX_FORMATS.items() if name != "tf32"} | {"tf32": "tf32"}
ACCUMULATOR_NOTE = "tensor-core accumulator: "   # how the note begins
_SHAPE_TOKEN = re.compile(r"m\d+n\d+k\d+")


def accumulated_type(instruction: str) -> str | None:
    """The type a tensor-core instruction accumulates in (its D), the first type after its shape and layouts:
    ``f32`` of ``wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16``, ``f16`` of
    ``mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16`` and of ``wmma.mma.sync.aligned.row.col.m16n16k16.f16.f16``;
    None where the instruction names no shape."""
    tokens = instruction.split(".")
    shape = next((index for index, token in enumerate(tokens) if _SHAPE_TOKEN.fullmatch(token)), None)
    if shape is None:
        return None
    return next((token for token in tokens[shape + 1:] if token in ("f16", "f32", "s32", "f64")), None)


def accumulator_notes(plan: CasePlan, facts: KernelPtxFacts) -> list[str]:
    """A note where every tensor-core instruction of a typed kernel accumulates in another type than ``types:``
    says: fp16 accumulators (``mma ... .f16.f16.f16.f16``) described as fp32 are held to an fp32 sum's tolerance,
    which a correct kernel misses at long K (its FAIL looks like one that drops part of K), and fp32 accumulators
    described as fp16 are given an fp16 sum's looser one, which lets a wrong kernel pass. A kernel that adds its
    fp16 partial sums into fp32 every few k steps sits between the two: the note says so rather than refuse."""
    kernel = plan.kernel
    types = kernel.operands.types if kernel.operands is not None else None
    if types is None or not facts.mma_types or types.accumulate.name not in ("fp32", "fp16"):
        return []
    accumulated = {accumulated_type(entry[0]) for entry in facts.mma_types}
    if len(accumulated) != 1:
        return []
    used = accumulated.pop()
    said = types.accumulate.name
    if (used, said) not in (("f16", "fp32"), ("f32", "fp16")):
        return []
    instruction = next(entry[0] for entry in facts.mma_types)
    if used == "f16":
        return [f"{ACCUMULATOR_NOTE}every tensor-core instruction of the kernel accumulates in f16 ({instruction}), "
                f"but types: says accumulate: fp32, so C is held to an fp32 sum's tolerance, which an fp16 sum "
                f"misses at long K: say types: {{accumulate: fp16}}, unless the kernel adds its fp16 partial sums "
                f"into fp32 every few k steps"]
    return [f"{ACCUMULATOR_NOTE}types: says accumulate: fp16, but every tensor-core instruction of the kernel "
            f"accumulates in f32 ({instruction}): C is allowed an fp16 sum's error, looser than the kernel needs, "
            f"so a wrong kernel may pass; say accumulate: fp32"]


ATOMIC_OUTPUT_NOTE = "C is added into with atomics: "   # how the note begins


def _adds(instruction: str) -> bool:
    """Whether a write of global memory adds into what it writes (``atom.global.add.f32``, ``red.global.add``,
    ``cp.reduce.async.bulk...add``) rather than storing over it."""
    tokens = instruction.split(".")
    return "add" in tokens and (tokens[0] in ("atom", "red") or tokens[:2] == ["cp", "reduce"])


def _stores_through_map(instruction: str) -> bool:
    """Whether a TMA instruction copies shared memory into the global memory its map describes
    (``cp.async.bulk.tensor.2d.global.shared::cta.bulk_group``: its first state space is its destination's)."""
    if not instruction.startswith("cp.async.bulk.tensor."):   # a load, a prefetch, or a reduction's cp.reduce
        return False
    spaces = [token.split("::")[0] for token in instruction.split(".") if token.split("::")[0] in ("global", "shared")]
    return spaces[:1] == ["global"]


def atomic_output_notes(plan: CasePlan, facts: KernelPtxFacts) -> list[str]:
    """A note where the kernel writes C only by atomic or reduction adds (``atom.global.add``, ``red.global.add``
    or a bulk ``cp.reduce.async.bulk.global...add`` through C's parameter, or a TMA ``cp.reduce.async.bulk.tensor...
    add`` through C's map), as a split-K kernel whose host code zeroes C first does, while the spec says C is
    overwritten: a run fills C with a NaN poison before the launch, every add to it stays NaN, and the correct kernel
    FAILs. Nothing is said of a kernel that may also store to C plainly (it may write C before it adds, as serial
    split-K does): a store through C's parameter (``st.global``, a bulk ``cp.async.bulk.global.shared::cta``), a TMA
    store through C's map (``cp.async.bulk.tensor...global.shared::cta``), or one whose address or map is not traced
    to a parameter; nor where the spec says C is read (``epilogue: accumulate``, beta)."""
    kernel = plan.kernel
    if kernel.reads_c():
        return []
    outputs = {position for position, matrix in _matrix_params(kernel).items() if matrix == "C"}
    maps = {position for position, argument in kernel.tensor_maps() if argument.tensor_map.tensor == "C"}
    adds: list[str] = []
    stores: list[str] = []
    for instruction, params in facts.global_writes or ():
        if outputs & set(params):
            (adds if _adds(instruction) else stores).append(instruction)
        elif not params and not _adds(instruction):
            stores.append(instruction)       # an address of no known parameter may be C's
    for copy in facts.copies:
        if copy.param in maps and copy.instruction.startswith("cp.reduce") and ".add" in copy.instruction:
            adds.append(copy.instruction)
        elif (copy.param in maps or copy.param is None) and _stores_through_map(copy.instruction):
            stores.append(copy.instruction)
    if not adds or stores:
        return []
    return [f"{ATOMIC_OUTPUT_NOTE}the kernel writes C only by adding into it ({', '.join(sorted(set(adds))[:3])}), "
            "so its host code must zero C first, but the spec says the kernel overwrites C: a run fills C with a NaN "
            "poison before the launch, every add keeps it NaN, and the case FAILs. Describe what the host does: "
            "epilogue: accumulate (checked against C0 + A @ B), or a launch that zeroes C as the kernel with this "
            "one under then: (docs/spec-reference.md)"]


UNCHECKED_DYNAMIC_SHARED_NOTE = (
    "dynamic shared memory not checked: the image declares no static shared memory and carries no PTX, and no "
    "disassembler (cuobjdump or nvdisasm) is installed to see whether its machine code uses shared memory, which "
    "would then be dynamic and need shared_bytes (Triton's kernels keep all of theirs so)")


def _check_machine_code_shared(plan: CasePlan, built: Cubin, symbol: str, image: KernelImage, problem,
                               notes: list[str]) -> None:
    """A CUBIN without its PTX (a spec's binary, an nvcc build) whose kernel declares no static shared memory and is
    launched with none: where its machine code reads or writes shared memory, that memory can only be dynamic
    (an extern __shared__ array, as Triton keeps all of a kernel's), so the launch gives it too little."""
    config = plan.config
    if built.ptx_facts is not None or config is None or config.shared_bytes or image.static_shared_bytes:
        return
    if find_disassembler() is None:
        notes.append(UNCHECKED_DYNAMIC_SHARED_NOTE)
        return
    reading = _sass_reading(built.image, built.arch)
    used = reading[1].get(symbol) if reading is not None else None
    if used:
        problem(f"the kernel's machine code uses shared memory ({', '.join(used[:4])}), but its image declares no "
                "static shared memory, so the memory is dynamic, and shared_bytes gives it none: its first access "
                "would be out of bounds", "shared_bytes",
                hint="give shared_bytes: the bytes its launcher passes (a Triton kernel's metadata.shared), an "
                     "expression of the params and M, N, K")


def spill_notes(built: Cubin, image: KernelImage) -> list[str]:
    """What a prebuilt image says of the kernel's spills, whose bytes no image records: the spill and refill
    instructions its annotations mark, or that it marks none where its stack frame could hold some."""
    if built.origin != "prebuilt" or not (image.local_bytes or image.min_stack_bytes):
        return []
    frame = f"its stack frame is {max(image.local_bytes, image.min_stack_bytes):,} bytes a thread"
    if image.spill_instructions:
        return [f"spills: the image marks {image.spill_instructions:,} spill or refill instructions ({frame}); a "
                "CUBIN records no spill bytes, so they are shown unknown (ptxas -v at its build reports them)"]
    return [f"spills unknown: a CUBIN records no spill bytes, and {frame}, which may hold spills or a local array "
            "(ptxas -v at its build reports them)"]


NO_BLOCK_INDEX_NOTE = "the kernel reads no block index"   # how the note begins


def check_block_axes(grid: Sequence[int], sources: Sequence[Expression], facts: KernelPtxFacts,
                     problem) -> list[str]:
    """A grid of more than one block along an axis whose block index the kernel never reads (its PTX names no
    ``%ctaid``, cluster id or cluster rank there, `KernelPtxFacts.reads_block_axis`) is refused at that axis: its
    blocks there compute the same part of C, racing on it and timed as many times over. A kernel that reads no
    block index at all tells its blocks apart by what they take at run time (a persistent kernel's atomic tile
    counter), so any grid may launch it: the note it gets is returned. Nothing is said where the reads are unknown."""
    axes = [axis for axis in range(3) if facts.reads_block_axis(axis)]
    if facts.block_reads is None or math.prod(grid) <= 1:
        return []
    if not axes:
        return [f"{NO_BLOCK_INDEX_NOTE} (its PTX names no %ctaid or cluster id): its blocks are told apart only "
                "by what they take at run time (a tile counter in memory, as a persistent kernel's "
                "scheduler has), so the grid's extents say nothing of what each computes; the run's check names any "
                "element of C left unwritten"]
    read = " and ".join(f"blockIdx.{'xyz'[axis]}" for axis in axes)
    numbering = [axis for axis in tile_axes(sources) if grid[axis] > 1]
    for axis, extent in enumerate(grid):
        if extent <= 1 or axis in axes:
            continue
        name = "xyz"[axis]
        source = f" ('{sources[axis].source}')" if axis < len(sources) else ""
        if axis not in numbering:
            hint = f"give grid {name} 1, or launch the kernel that reads blockIdx.{name}"
        elif axes == [0]:
            product = " * ".join(sources[tile].source for tile in numbering)
            hint = f"the kernel numbers its tiles from blockIdx.x alone: a 1-D grid, [{product}], counts them on x"
        else:
            hint = f"number C's tiles on the axes the kernel reads ({read}) and give grid {name} 1"
        problem(f"grid {name} extent {extent:,}{source}: the kernel never reads blockIdx.{name} (its PTX names no "
                f"%ctaid.{name} nor a cluster id on {name}; it reads {read}), so the {extent:,} blocks along {name} "
                "are copies of one another, computing the same part of C, racing to write it and timed as many times "
                "over", f"grid[{axis}]", hint=hint)
    return []


# A launch of then: has no field of these: what its function's image refutes there is said at its function, with
# a hint of what such a launch can be where the kernel's own hint names a field it lacks (it is a plain launch,
# <<<grid, block, shared_bytes>>>, and no other).
_FOLLOWING_FIELDS = {
    "source": ("function", None),
    "cooperative": ("function", "a launch of then: is never cooperative: a function that waits for its whole grid "
                                "is launched as a kernel's own, with cooperative: true"),
    "cluster": ("function", "a launch of then: takes no cluster_non_portable: a function of a larger compiled "
                            "cluster is launched as a kernel's own"),
}


def following_image_checks(plan: CasePlan, built: Cubin, limits: ArchLimits) -> tuple[list[ConfigError], list[str]]:
    """The checks the kernel's own launch gets against its image (`image_checks`: launch bounds, required block,
    stack, compiled cluster, dynamic shared memory, grid-wide barrier) and its resources
    (`case_plan.check_resources`: static plus dynamic shared memory, registers a block), made of each of its
    ``then:`` launches against that launch's own function, each said at ``then[i]``. A launch of then: is plain
    (no cluster, PDL or cooperative attribute), and the image of PTX has no resources before the driver loads it:
    those checks are then made of what the PTX says. A buffer such a launch may write is noted
    (`unchecked_buffer_notes`): a run compares C alone with the reference."""
    kernel = plan.kernel
    problems: list[ConfigError] = []
    notes: list[str] = []
    for launch, config in zip(kernel.then, plan.following):
        if config is None:      # refused at its extents already
            continue
        instance = kernel.following_instance(launch)
        where = f"then[{launch.index}]"

        def problem(message: str, field_name: str, hint: str | None = None, where=where, instance=instance) -> None:
            field_name, own_hint = _FOLLOWING_FIELDS.get(field_name, (field_name, None))
            hint = own_hint or hint
            problems.append(ConfigError(f"{instance}: {message}", where=kernel.where_field(f"{where}.{field_name}"),
                                        field=f"{kernel.field_path}.{where}.{field_name}", hint=hint))

        try:
            symbol = built.symbol(instance)
            image = built.kernel_image(instance)
        except (ImageError, KeyError):
            continue
        resources = built.resources_of(instance) if built.resources_known else None
        # The launch as the kernel's own checks read one: its config, no attributes, its function's resources.
        view = dataclasses.replace(plan, config=config, attributes=None, resources=resources)
        if resources is not None:
            check_resources(config, resources, limits, problem)
        facts = facts_of(built, symbol)
        if image is not None:
            _check_compiled_bounds(view, image, problem)
        elif facts is not None:
            _check_block_bounds(view, facts.max_threads, facts.required_threads, problem)
        cluster = compiled_cluster(image, facts)
        cluster_notes: list[str] = []
        if cluster is not None:
            _check_compiled_cluster(view, cluster, problem, cluster_notes)
        if facts is not None:
            cluster_notes.extend(_check_launch_facts(view, facts, problem))
            cluster_notes.extend(check_block_axes(config.grid, launch.grid, facts, problem))
            if facts.register_increases:
                cluster_notes.extend(register_move_notes(facts, view, limits))
        notes.extend(f"{where}: {instance}: {note}" for note in cluster_notes)
        notes.extend(unchecked_buffer_notes(kernel, launch, symbol))
    return problems, notes


def unchecked_buffer_notes(kernel: KernelSpec, launch: FollowingLaunch, symbol: str) -> list[str]:
    """A note for each buffer of the case (the kernel's own, `KernelSpec.device_buffers`, or the launch's) that a
    ``then:`` launch takes through a pointer it may write through (no ``const`` pointee), as the types of its
    function's (mangled) `symbol` say: a run compares C alone with the reference, so what such a launch leaves
    there (a row sum in ``out[M]``) is never checked. None where the types cannot be read (an ``extern "C"``
    symbol) or their count differs from the signature's (a problem of its own)."""
    demangled = demangle(symbol)
    if demangled is None or len(demangled.params) != len(launch.signature):
        return []
    buffers = {argument.name for _, argument in kernel.device_buffers()}
    where = f"then[{launch.index}]: {kernel.following_instance(launch)}"
    return [f"{where}: may write buffer {argument.name} ({kernel_type.text}), which the check does not read: only C "
            "is compared with the reference"
            for argument, kernel_type in zip(launch.signature, demangled.params)
            if (argument.buffer is not None or argument.ctype == "ptr" and argument.name in buffers)
            and kernel_type.kind == "pointer" and not points_to_const(kernel_type)]


# What the plan could not check, said where it would otherwise pass for checked.
UNREAD_RANKS_NOTE = ("TMA copy ranks not checked against the maps: the image carries no PTX and no disassembler "
                     "(cuobjdump or nvdisasm) is installed to read its machine code")

REGISTER_MOVE_NOTE = "setmaxnreg: "   # how the note begins, so that a case that then hangs can name it
THREADS_A_WARPGROUP = 128       # setmaxnreg moves the registers of a whole warpgroup (128 threads) at once
SETMAXNREG_STEP = 8             # its counts are multiples of 8


SETMAXNREG_IGNORED_NOTE = "setmaxnreg ignored by ptxas: "   # how the note begins


def ignored_setmaxnreg_note(facts: KernelPtxFacts, plan: CasePlan) -> str | None:
    """What ptxas's log says of the kernel's ``setmaxnreg`` (`KernelPtxFacts.setmaxnreg_ignored`): that it ignored
    them, so that no registers move and every warp keeps the compiled count, and why; None where it says nothing."""
    lines = facts.setmaxnreg_ignored or ()
    if not lines:
        return None
    registers = plan.resources.registers if plan.resources is not None else None
    kept = f"the compiled {registers} registers a thread" if registers else "the compiled count"
    # A kernel's own bound (.maxntid, .reqntid) is the threads its fix names; else the block it is launched with.
    declared = facts.max_threads or facts.required_threads
    threads = math.prod(declared) if declared else (plan.config.threads_per_block if plan.config is not None
                                                     else None)
    bound = f"__launch_bounds__({threads}, 1)" if threads else "__launch_bounds__(threads, 1)"
    causes = []
    for code, text, kernels in lines:
        whose = "" if kernels == 1 else (f" (ptxas names no kernel, and {kernels} kernels of this program use "
                                         "setmaxnreg: it may be another's)")
        if code == NO_REGISTER_COUNT_AT_ENTRY and declared:
            # A bound of threads alone (.maxntid, .reqntid) leaves the blocks an SM holds, and so the registers a
            # thread starts with, open: ptxas needs a minimum of blocks per SM (.minnctapersm) to fix them.
            written = (f"__launch_bounds__({threads}) (.maxntid {', '.join(map(str, facts.max_threads))})"
                       if facts.max_threads else f"required block (.reqntid "
                                                 f"{', '.join(map(str, facts.required_threads or ()))})")
            why = (f"the kernel has no register count at entry, which setmaxnreg moves from: its {written} gives no "
                   f"minimum of blocks per SM (.minnctapersm), which ptxas needs to fix that count: add one, "
                   f"{bound} (or give it __maxnreg__)")
        elif code == NO_REGISTER_COUNT_AT_ENTRY:
            why = (f"the kernel has no register count at entry (no __launch_bounds__ or maxnreg), which setmaxnreg "
                   f"moves from: give it {bound} (or __maxnreg__)")
        else:
            why = ("ptxas kept the registers the kernel's code needs at least: a count it moves to is below what "
                   "the code there uses (most often the .dec of the warps that give registers back)")
        causes.append(f"{text.rstrip('.')}{whose}: {why}")
    return (f"{SETMAXNREG_IGNORED_NOTE}{'; '.join(causes)}. No registers move: every warp keeps {kept}, and the "
            "register split the source writes never happens (the requests cannot hang either)")


def register_move_notes(facts: KernelPtxFacts, plan: CasePlan, limits: ArchLimits) -> list[str]:
    """A note where the block's registers cannot cover its setmaxnreg requests in the usual warp-specialised
    layout: one warpgroup gives registers back (the smallest ``.dec``) and every other asks for the largest
    ``.inc``. The pool they share is what the launch allocated for the compiled count; an ``.inc`` that the pool
    cannot cover waits forever. Where ptxas's log says it ignored the kernel's setmaxnreg, that is said instead
    (`ignored_setmaxnreg_note`): its machine code then moves no registers."""
    ignored = ignored_setmaxnreg_note(facts, plan)
    if ignored is not None and all(kernels == 1 for _, _, kernels in facts.setmaxnreg_ignored or ()):
        return [ignored]
    if plan.resources is None or plan.config is None or not plan.resources.registers:
        return [ignored] if ignored else []
    threads = plan.config.threads_per_block
    pool = block_registers(plan.resources.registers, threads, limits)
    allocated = block_registers(plan.resources.registers, limits.warp_size, limits) // limits.warp_size
    asked = max(facts.register_increases)
    if facts.register_decreases and threads > THREADS_A_WARPGROUP:
        given = min(facts.register_decreases)
        askers = threads - THREADS_A_WARPGROUP
        need = THREADS_A_WARPGROUP * given + askers * asked
        asking = -(-askers // THREADS_A_WARPGROUP)     # a partial warpgroup asks as well
        layout = (f"{asking} warpgroup{'s' if asking != 1 else ''} asking for {asked} registers a thread and one "
                  f"giving back down to {given}")
        most = (pool - THREADS_A_WARPGROUP * given) // askers // SETMAXNREG_STEP * SETMAXNREG_STEP
    else:
        need = threads * asked
        layout = f"every warp asking for {asked} registers a thread"
        most = allocated
    if need <= pool:
        return [ignored] if ignored else []
    return ([ignored] if ignored else []) + [
        f"{REGISTER_MOVE_NOTE}{layout} need {need} registers, but the block is launched with {pool} ({allocated} a "
        f"thread x {threads} threads): the increase would wait for registers forever (a hang); with that "
        f"layout the most a thread can ask for is {most}"]


# The local memory a thread may have (CUDA's limit on every architecture since sm_20): a stack frame larger than
# this is refused by the launch.
MAX_LOCAL_BYTES_A_THREAD = 512 * 1024


def _check_compiled_bounds(plan: CasePlan, image: KernelImage, problem) -> None:
    """The block against the kernel's own ``__launch_bounds__`` (.maxntid) and ``.reqntid``, and its stack frame
    against a thread's local memory: each a launch the driver refuses, however the spec's launch looks."""
    _check_block_bounds(plan, image.max_threads, image.required_threads, problem)
    stack = max(image.local_bytes, image.min_stack_bytes)
    if stack > MAX_LOCAL_BYTES_A_THREAD:
        problem(f"the kernel's stack frame is {stack:,} bytes a thread, over the {MAX_LOCAL_BYTES_A_THREAD:,} of "
                "local memory a thread may have: the launch fails", "source",
                hint="a large local array belongs in shared or global memory")


def _check_block_bounds(plan: CasePlan, max_threads: tuple[int, int, int] | None,
                        required_threads: tuple[int, int, int] | None, problem) -> None:
    """The block against the kernel's ``__launch_bounds__`` (.maxntid) and ``.reqntid``, as a CUBIN's attributes or
    a PTX entry's directives give them."""
    config = plan.config
    if config is not None and max_threads is not None:
        bound = max_threads[0] * max_threads[1] * max_threads[2]
        if config.threads_per_block > bound:
            problem(f"a block of {config.threads_per_block} threads ({' x '.join(map(str, config.block))}) is over "
                    f"the kernel's __launch_bounds__ of {bound} threads (.maxntid "
                    f"{', '.join(map(str, max_threads))}): the driver refuses the launch", "block",
                    hint=f"launch at most {bound} threads a block, or raise the kernel's __launch_bounds__")
    if config is not None and required_threads is not None and tuple(config.block) != tuple(required_threads):
        problem(f"block {' x '.join(map(str, config.block))} is not the kernel's required block "
                f"{' x '.join(map(str, required_threads))} (.reqntid): the driver refuses the launch", "block")


def _check_cluster_bound(plan: CasePlan, compiled: tuple[int, int, int] | None, max_cluster_blocks: int | None,
                         problem) -> None:
    """The launch's cluster (the spec's ``cluster:``, else the kernel's ``__cluster_dims__``) against the third
    argument of the kernel's ``__launch_bounds__`` (maxBlocksPerCluster: ``.maxclusterrank`` in its PTX, an
    attribute of its CUBIN): a larger cluster is a launch the driver refuses."""
    spec_cluster = plan.attributes.cluster if plan.attributes is not None else None
    cluster = tuple(spec_cluster) if spec_cluster else compiled
    if max_cluster_blocks is None or not cluster:
        return
    blocks = math.prod(cluster)
    if blocks > max_cluster_blocks:
        problem(f"a cluster of {blocks} blocks ({' x '.join(map(str, cluster))}) is over the kernel's "
                f"__launch_bounds__ maxBlocksPerCluster of {max_cluster_blocks} (.maxclusterrank "
                f"{max_cluster_blocks}): the driver refuses the launch with CUDA_ERROR_INVALID_CLUSTER_SIZE",
                "cluster", hint=f"a cluster of at most {max_cluster_blocks} blocks, or raise the third argument of "
                                "the kernel's __launch_bounds__")


def _check_compiled_cluster(plan: CasePlan, cluster: tuple[int, int, int], problem, notes: list[str]) -> None:
    text = "x".join(map(str, cluster))
    spec_cluster = plan.attributes.cluster if plan.attributes is not None else None
    if spec_cluster is not None and tuple(spec_cluster) != tuple(cluster):
        problem(f"cluster: [{', '.join(map(str, spec_cluster))}] disagrees with the kernel's "
                f"__cluster_dims__({', '.join(map(str, cluster))})", "cluster",
                hint="a compiled cluster cannot be changed at launch: leave cluster: out or give the same extents")
    blocks = cluster[0] * cluster[1] * cluster[2]
    non_portable = plan.attributes is not None and plan.attributes.non_portable
    limit = NON_PORTABLE_CLUSTER_SIZE if non_portable else PORTABLE_CLUSTER_SIZE
    if blocks > limit:   # the same limits as a spec's cluster: (LaunchAttributes.problems)
        extents = ", ".join(map(str, cluster))
        problem(f"the kernel's __cluster_dims__({extents}) make clusters of {blocks} blocks, over the "
                f"{'non-portable' if non_portable else 'portable'} limit of {limit}: the launch would fail with "
                "CUDA_ERROR_INVALID_CLUSTER_SIZE", "cluster",
                hint=f"__cluster_dims__ of at most {NON_PORTABLE_CLUSTER_SIZE} blocks" if non_portable
                else f"up to {NON_PORTABLE_CLUSTER_SIZE} with cluster: [{extents}] and cluster_non_portable: true, "
                "where the GPU allows it")
        return
    if plan.config is None:
        return
    grid = plan.config.grid
    if any(extent % size for extent, size in zip(grid, cluster)):
        problem(f"grid {'x'.join(map(str, grid))} is not a whole number of the kernel's __cluster_dims__ clusters "
                f"({text})", "grid", hint="the grid's extents must be multiples of the cluster's")
        return
    notes.append(f"cluster {text} from the kernel's __cluster_dims__ ({blocks} blocks, "
                 f"{plan.config.total_blocks // blocks} clusters)")
