"""One ``kernels:`` entry of a spec, read field group by field group into `KernelSpec` instances.

Each group (identity, source, template parameters, launch, ``require``, compiler settings, launch
attributes, signature) is read and checked by one function here; `parse_kernel` puts them together
and expands the parameter sweep, counted before it is built. The fields: docs/spec-reference.md.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import math
import re
import unicodedata
from pathlib import Path
from typing import Any, Callable

from . import expr
from ..argtypes import STANDARD_ARGUMENTS
from ..errors import SpecError
from ..gemm.elementwise import ALIASES, EXAMPLES, FUNCTIONS
from ..status import is_baseline_label
from .archs import arch_problem
from .fields import (IDENTIFIER, Context, check_keys, check_number, field_name, parse_expression, read_number,
                     read_text, refuse_slash_ceilings, unknown_names_error)
from .kinds import kind_name
from ..kernel_names import mangled_base_name, split_overload
from ..source_text import without_comments
from .limits import (MAX_BINARY_BYTES, MAX_CASES, MAX_FUNCTION_CHARS, MAX_NAME_CHARS, MAX_SOURCE_BYTES,
                     SOURCE_SUFFIXES)
from .launch_fields import LAUNCH_ATTRIBUTE_KEYS, check_tensor_map_names, parse_launch_attributes
from .model import (CHARACTER_LITERAL, COMPILERS, EPILOGUES, MIN_PCT_RULE, PARAM_NAME, PRECISIONS, ROWS_ON,
                    FollowingLaunch, KernelSpec, is_character_literal, is_safe_name)
from .project import UNENCODABLE_HINT, project_file, project_root, unencodable
from .quantized import check_quantized
from .signature import following_signature_entries, parse_constants, parse_following_signature, parse_signature
from .typed import LAYOUT_NAMES, OPERAND_KEYS, is_cpp_type, parse_gram, parse_kernel_scalars, parse_operands
from .yaml_lines import LineList, OversizedInteger

KERNEL_KEYS = ("name", "source", "binary", "compiler", "function", "params", "values", "block", "grid",
               "shared_bytes", "signature", "tile", "require", "options", "precision", "arch", "scalars", "min_pct",
               "epilogue", "rows_on", "constants", "then") + OPERAND_KEYS + LAUNCH_ATTRIBUTE_KEYS
THEN_KEYS = ("function", "block", "grid", "shared_bytes", "signature")
BINARY_SUFFIXES = (".cubin", ".fatbin", ".ptx")
LAUNCH_NAMES = ("blockDim_x", "blockDim_y", "blockDim_z", "threads")   # what require: may read beside params
SM_COUNT_NAME = "sm_count"   # the target's SM count, for the launch expressions (a persistent grid)
# The clusters of the kernel's launch (blocks, without one) that fit on the GPU at once: a persistent grid of
# clusters. Counted for the kernel's block, shared memory and cluster, so only the grid, the signature (argument
# values, buffer sizes) and the constants may read it.
MAX_ACTIVE_CLUSTERS_NAME = "max_active_clusters"
# The names every expression reads already (a grouped GEMM's groups among the operands' names): a param or value of
# the same name would be shown in the label while the built-in one is what the launch reads.
RESERVED_PARAM_NAMES = frozenset(STANDARD_ARGUMENTS) | frozenset(LAUNCH_NAMES) | frozenset(LAYOUT_NAMES) \
    | {SM_COUNT_NAME, MAX_ACTIVE_CLUSTERS_NAME} \
    | expr.FUNCTION_NAMES
# NVRTC options that name files or folders: a spec could use them to read any file into a compile error.
# Options that name files to read; each may take its path as the next entry too (options: [-I, inc]).
PATH_OPTIONS = ("-I", "--include-path", "-include", "--pre-include", "-isystem", "--system-include")
# Options that set what driver-gemm sets itself: the target (the kernel's arch:, else the GPU's) and what the
# compiler produces and where (a CUBIN, with the PTX kept, in a folder of driver-gemm's own).
TARGET_OPTIONS = frozenset({"-arch", "--gpu-architecture", "-code", "--gpu-code", "-gencode", "--generate-code"})
OWN_OPTIONS = TARGET_OPTIONS | frozenset({
    "-o", "--output-file", "-odir", "--output-directory", "-keep", "--keep", "-keep-dir", "--keep-dir",
    "-save-temps", "--save-temps", "-E", "--preprocess", "-M", "-MM", "-MD", "-MMD", "--generate-dependencies",
    "--generate-nonsystem-dependencies", "-ptx", "--ptx", "-cubin", "--cubin", "-fatbin", "--fatbin", "-c",
    "--compile", "-lib", "--lib", "-link", "--link", "-dlink", "--device-link", "-dc", "--device-c", "-dw",
    "--device-w", "-cuda", "--cuda", "-lto", "--lto", "-dlto", "--dlink-time-opt", "-fdevice-syntax-only",
    "--fdevice-syntax-only", "-dryrun", "--dryrun", "-run", "--run", "-optix-ir", "--optix-ir", "-ltoir", "--ltoir",
    "-r", "--relocatable-link", "-astoolspatch", "--compile-as-tools-patch",
})
# Relocatable device code: the CUBIN is an object to link (ELF type REL), its shared memory not laid out yet, so
# the plan would read it wrong and no kernel in it could be loaded as it is. Only "=false" (the default) is harmless.
RELOCATABLE_OPTIONS = frozenset({"-rdc", "--relocatable-device-code"})
# Options that run a program of their own or read and write files wherever they name: as an include folder
# outside the project, they need the user's leave.
LEAVE_OPTIONS = frozenset({
    "-ccbin", "--compiler-bindir", "-Xcompiler", "--compiler-options", "-Xlinker", "--linker-options",
    "-Xarchive", "--archive-options", "-Xnvlink", "--nvlink-options", "-run-args", "--run-args", "-optf",
    "--options-file", "-MF", "--dependency-output", "-time", "--time", "-fdevice-time-trace",
    "--fdevice-time-trace", "-create-pch", "--create-pch", "-use-pch", "--use-pch", "-pch-dir", "--pch-dir",
    "-pch", "--pch", "-use-local-env", "--use-local-env", "-idp", "--input-drive-prefix", "-L", "--library-path",
    "-l", "--library",
})
INCLUDE_OPTION = "--include-path="   # how an include folder is passed on, absolute, whatever the spec wrote
PRE_INCLUDE_OPTION = "--pre-include="   # how a project's own pre-included header is passed on, absolute


def parse_kernel(context: Context, node: Any, parent: list, index: int,
                 scalars: dict[str, float]) -> list[KernelSpec]:
    """One kernel entry; a ``params`` value given as a list sweeps it (the product of all lists), and a list of
    ``params`` mappings names the configurations themselves."""
    dotted = f"kernels[{index}]"
    if not isinstance(node, dict):
        raise context.error(f"a kernel is a mapping with at least source, function, block and grid, "
                            f"got {kind_name(node)}", parent, index, dotted)
    # Named as every later message names it wherever the entry's own name can be read safely.
    named = node.get("name")
    if isinstance(named, str) and is_safe_name(named) and not is_baseline_label(named):
        dotted = f"kernels[{named}]"
    check_keys(context, node, KERNEL_KEYS, dotted)
    if "source" not in node and "binary" not in node:
        raise context.error("missing required field 'source' (or 'binary' for a prebuilt kernel)", node, None,
                            dotted)
    for required in ("function", "block", "grid"):
        if required not in node:
            raise context.error(f"missing required field '{required}'", node, None, dotted)
    name, function = _identity(context, node, f"kernels[{index}]" if "name" not in node else dotted)
    dotted = f"kernels[{name}]"
    source, binary, compiler = _code(context, node, dotted)
    declared = source if binary is None else None     # the source whose own names a hint may name
    _check_template_id_reads_no_shape(context, node, f"{dotted}.function", function, name, declared)
    param_names, param_configurations = _params(context, node, dotted, function, declared)
    value_names, value_configurations = _launch_values(context, node, dotted, param_names)
    param_names = param_names + value_names
    count = len(param_configurations) * len(value_configurations)
    if count > MAX_CASES:
        raise context.error(f"the parameter sweep expands to {count:,} kernels, more than the limit of "
                            f"{MAX_CASES:,} (MAX_CASES)", node, "params", f"{dotted}.params")
    configurations = [params + values for params in param_configurations for values in value_configurations]
    # Each name's values over every configuration: which names hold numbers, and which a type.
    sweep = [[configuration[index] for configuration in configurations] for index in range(len(param_names))]
    block, grid, shared, tile, sizeofs = _launch(context, node, dotted)
    # Params true or false in every configuration: what and, or and not in require: may read without a comparison.
    flags = frozenset(key for key, values in zip(param_names, sweep) if all(isinstance(v, bool) for v in values))
    require = _require(context, node, dotted, sizeofs, flags)
    if sizeofs and binary is not None:
        raise context.error("sizeof needs the kernel's source, whose compiler sizes the type; a prebuilt binary "
                            "has none", node, "shared_bytes", f"{dotted}.shared_bytes",
                            hint="give shared_bytes as a number of bytes")
    options, precision, arch = _compiler_settings(context, node, dotted)
    scalars = parse_kernel_scalars(context, node, dotted, scalars)
    # A Gram product's tied operand is the other's buffer: the signature need not take it.
    gram = parse_gram(context, node, dotted)
    tied = frozenset({gram.tied.upper()}) if gram is not None else frozenset()
    signature, memory = parse_signature(context, node, dotted, scalars,
                                        _names_following(context, node, dotted) | tied, gram)
    constants = parse_constants(context, node, dotted)
    numeric_names = [key for key, values in zip(param_names, sweep) if not any(isinstance(v, str) for v in values)]
    # Params whose value is a type or another C++ name (shown by their first such value): never in an expression.
    type_params = {key: next(v for v in values if isinstance(v, str)) for key, values in zip(param_names, sweep)
                   if key not in numeric_names}
    operands = parse_operands(context, node, dotted, set(numeric_names), type_params)
    launch_attributes = parse_launch_attributes(context, node, dotted)
    _check_names_used(context, node, dotted, numeric_names, type_params, set(sizeofs), block=block, grid=grid,
                      shared_bytes=(shared,), tile=tile or (), require=require,
                      cluster=launch_attributes.cluster if launch_attributes and launch_attributes.cluster else ())
    check_tensor_map_names(context, node, dotted, numeric_names, signature, type_params)
    then = _following_launches(context, node, dotted, scalars, signature, memory, numeric_names, type_params,
                               sizeofs, declared)
    if sizeofs and binary is not None:
        raise context.error("sizeof needs the kernel's source, whose compiler sizes the type; a prebuilt binary "
                            "has none", node, "then", f"{dotted}.then", hint="give the launch's fields as numbers")

    field_lines = _field_lines(node)
    min_pct = _min_pct(context, node, dotted)
    epilogue = _epilogue(context, node, dotted, signature, then)
    rows_on = _rows_on(context, node, dotted)
    entry = plain(node)
    kernels = [KernelSpec(name=name, source=source, function=function, params=dict(zip(param_names, combo)),
                          block=block, grid=grid, shared_bytes=shared, signature=signature, tile=tile,
                          require=require, options=options, precision=precision, arch=arch, compiler=compiler,
                          binary=binary, operands=operands, launch_attributes=launch_attributes,
                          where=context.where(parent, index), field_path=dotted, field_lines=field_lines,
                          min_pct=min_pct, epilogue=epilogue, rows_on=rows_on, entry=entry, sizeofs=sizeofs,
                          memory=memory,
                          allow_outside_headers=context.allow_outside_sources, project=project_root(context.base_dir),
                          launch_values=frozenset(value_names), constants=constants, then=then)
               for combo in configurations]
    _check_signature_reads_no_type_param(kernels[0], type_params, scalars)
    _check_value_names(kernels[0], numeric_names, set(scalars), type_params)
    _check_fill_names(kernels[0], set(numeric_names) | set(value_names) | set(scalars))
    _check_own_scalars_read(context, node, dotted, kernels[0])
    _check_drawn_buffers(kernels[0])
    check_quantized(kernels[0])
    return kernels


# The alpha and beta of C = alpha * A @ B + beta * C where nothing gives others: a plain C = A @ B.
DEFAULT_SCALARS = {"alpha": 1.0, "beta": 0.0}


def reads_scalar(kernel: KernelSpec, name: str) -> bool:
    """Whether `kernel` reads the scalar `name`: for alpha and beta, an argument of that name (of its signature, a
    struct's or a launch of then:'s, by value or by pointer); for any, a value its grid, arguments, buffers or
    constants read."""
    return (name in DEFAULT_SCALARS and any(argument.name == name for _, argument in kernel.leaf_arguments())
            or kernel.grid_or_signature_reads(name)
            or any(name in value.names for constant in kernel.constants
                   for value in (*((constant.value,) if constant.value is not None else ()), *constant.array)))


def implied_scalar(kernel: KernelSpec, name: str) -> float:
    """The alpha or beta (`name`) a kernel that takes none computes with: its epilogue's, else C = A @ B's."""
    return kernel.epilogue_scalars().get(name, DEFAULT_SCALARS[name])


def _check_own_scalars_read(context: Context, node: dict, dotted: str, kernel: KernelSpec) -> None:
    """A kernel's own ``scalars: {alpha, beta}`` that nothing of the kernel reads, of a value other than the one it
    computes with, is refused: the check would hold the kernel to its own alpha and beta, not to the spec's."""
    own = node.get("scalars")
    if not isinstance(own, dict):
        return
    for key, value in own.items():
        if key not in DEFAULT_SCALARS or reads_scalar(kernel, key) or float(value) == implied_scalar(kernel, key):
            continue
        computes = "C += A @ B" if kernel.epilogue == "accumulate" else "C = A @ B"
        raise context.error(f"{key} = {float(value):g}, but the kernel takes no {key} (no argument, value or "
                            f"constant of it reads {key}): it computes {computes}, {key} = "
                            f"{implied_scalar(kernel, key):g}, and is checked against that", own, key,
                            f"{dotted}.scalars.{key}",
                            hint=f"remove {key}, or add {key} to the signature where the kernel takes it")


def _names_following(context: Context, node: dict, dotted: str) -> frozenset[str]:
    """The names the launches of ``then:`` take: A, B and C (by name, or as a pointer to one), which the kernel's
    own signature need not take (a split of K's partial products takes A and B, the launch after it C), and the
    kernel's buffers by name, which need not be its parameters (``pass: none``). A ``then:`` that is no list of
    launches, or a launch's signature that is no list of what such a launch takes, is refused here, at its field,
    before the kernel's signature that would miss what it takes."""
    if "then" not in node:
        return frozenset()
    launches = node["then"]
    if not isinstance(launches, list) or not launches:
        raise context.error(f"then is a non-empty list of the launches after the kernel's own, got "
                            f"{kind_name(launches)}", node, "then", f"{dotted}.then",
                            hint="then: [{function: reduce<SPLITS>, block: [256], grid: ['ceil(M * N / 256)'], "
                                 "signature: [workspace, C, M, N, alpha, beta]}]")
    found: set[str] = set()
    for index, launch in enumerate(launches):
        if not isinstance(launch, dict) or "signature" not in launch:
            continue    # refused with the launch's other fields (`_following_launches`)
        for entry in following_signature_entries(context, launch, f"{dotted}.then[{index}]"):
            if isinstance(entry, str):
                found.add(entry)
            elif isinstance(entry, dict) and entry.get("type") == "ptr" and entry.get("value") in ("A", "B", "C"):
                found.add(entry["value"])
            elif isinstance(entry, dict) and entry.get("type") == "ptr" and "value" not in entry:
                found.add(str(entry.get("name")))     # {name: C, type: ptr}: the matrix, as the kernel's own takes it
    return frozenset(found)


def _following_launches(context: Context, node: dict, dotted: str, scalars: dict, signature, memory,
                        numeric_names: list[str], type_params: dict[str, str],
                        sizeofs: dict[str, str], source: Path | None = None) -> tuple[FollowingLaunch, ...]:
    """``then:``: the launches after the kernel's own in each case, each a function of the same source (its
    template-id may name the kernel's params: reduce<SPLITS>) with its own block, grid, dynamic shared memory and
    signature, which may name the kernel's own device buffers. Their ``sizeof(TYPE)``s join the kernel's
    (`sizeofs`), sized by the same compile."""
    if "then" not in node:
        return ()
    items, path = node["then"], f"{dotted}.then"    # a non-empty list (`_names_following`)
    arguments = [argument for argument in signature] + [argument for _, argument in memory]
    buffers = frozenset(argument.name for argument in arguments if argument.buffer is not None)
    taken = frozenset(argument.name for argument in arguments
                      if argument.name not in STANDARD_ARGUMENTS and argument.buffer is None)
    launches = []
    for index, item in enumerate(items):
        item_path = f"{path}[{index}]"
        if not isinstance(item, dict):
            raise context.error(f"a launch of then: is a mapping of function, block, grid and signature, got "
                                f"{kind_name(item)}", items, index, item_path)
        check_keys(context, item, THEN_KEYS, item_path)
        for required in ("function", "block", "grid", "signature"):
            if required not in item:
                raise context.error(f"a launch of then: needs {required}", items, index, item_path)
        function = read_text(context, item, "function", f"{item_path}.function")
        if len(function) > MAX_FUNCTION_CHARS or not is_kernel_function(function):
            raise context.error(f"{function[:60]!r} is not a C++ function name or template-id", item, "function",
                                f"{item_path}.function", hint="a template-id may name the kernel's params: "
                                                              "reduce<SPLITS>")
        _check_template_id_reads_no_shape(context, item, f"{item_path}.function", function, source=source)
        block = _dims(context, item, "block", f"{item_path}.block", sizeofs)
        grid = _dims(context, item, "grid", f"{item_path}.grid", sizeofs)
        shared = _launch_expression(context, item, "shared_bytes", item.get("shared_bytes", 0),
                                    f"{item_path}.shared_bytes", sizeofs)
        _check_names_used(context, item, item_path, numeric_names, type_params, set(sizeofs), block=block,
                          grid=grid, shared_bytes=(shared,))
        launch_signature = parse_following_signature(context, item, item_path, scalars, buffers, taken)
        # A value a launch names is the case's from then on: a later launch may not name it for another.
        taken |= {argument.name for argument in launch_signature
                  if argument.name not in STANDARD_ARGUMENTS and argument.name not in buffers}
        # A buffer a launch makes (alpha by pointer) is the case's too: a later launch takes it by its name.
        buffers |= {argument.name for argument in launch_signature if argument.buffer is not None}
        launches.append(FollowingLaunch(function, block, grid, shared, launch_signature, index))
    return tuple(launches)


def _check_drawn_buffers(kernel: KernelSpec) -> None:
    """Buffers of block scales and a bias need a kernel whose operands are typed (their reference scales A and B,
    or adds to C), one matrix (a batch would need values per matrix), and one buffer per operand (one bias)."""
    scaled: dict[str, str] = {}
    for path, argument in kernel.device_buffers():
        buffer = argument.buffer
        if buffer is None or (buffer.scales is None and buffer.bias is None):
            continue
        key = "scales" if buffer.scales is not None else "bias"
        what = "a buffer of block scales" if key == "scales" else "a bias"
        where, field = kernel.where_field(f"{path}.{key}"), f"{kernel.field_path}.{path}.{key}"
        operands = kernel.operands
        if operands is None:
            raise SpecError(f"buffer {argument.name}: {what} needs a kernel with typed operands, whose "
                            "reference it changes", where=where, field=field,
                            hint="types: makes them typed: {a: fp32} for fp32, {a: e4m3, c: bf16} for fp8")
        if operands.batch.names or operands.batch.evaluate_int({}) != 1:
            raise SpecError(f"buffer {argument.name}: {what} is for one matrix per operand; this kernel "
                            f"has batch: {operands.batch.source}", where=where, field=field)
        groups = operands.groups
        if buffer.scales is not None and groups is not None and \
                (buffer.scales.operand == "b" or groups.layout == "masked"):
            # One grid of factors for every group's matrix would check a kernel that reads group 0's factors
            # everywhere and fail one that reads its own: a grid per group is not described.
            raise SpecError(f"buffer {argument.name}: block scales are one grid for one matrix; this kernel's "
                            f"{'groups each have their own ' + buffer.scales.operand.upper()}", where=where,
                            field=field, hint="block scales of a grouped GEMM go with A of contiguous groups (one "
                                              "matrix); a grid per group is not described")
        target = buffer.scales.operand if buffer.scales is not None else "bias"
        if target in scaled:
            taken = f"{target.upper()} already takes its block scales" if key == "scales" else "C already takes a bias"
            raise SpecError(f"buffer {argument.name}: {taken} from {scaled[target]}", where=where, field=field)
        scaled[target] = argument.name


def _check_signature_reads_no_type_param(kernel: KernelSpec, type_params: dict[str, str], scalars: dict) -> None:
    """An argument's value or a buffer's size or values that read a param holding a type: refused now, as the
    launch's expressions are (each case's plan would only call the name unknown). A scalar of that name is read
    instead, so it is left alone."""
    if not type_params:
        return
    for path, argument in kernel.leaf_arguments():
        buffer = argument.buffer
        for value in (argument.value, *argument.array, *((buffer.size, *buffer.values) if buffer else ())):
            read = sorted(name for name in (value.names if value is not None else ()) if name in type_params
                          and name not in scalars)
            if read:
                name = read[0]
                raise SpecError(f"argument {argument.name}: {value.source!r} reads {name}, a type (non-numeric) "
                                f"param ({name}: {type_params[name]} in params), which cannot be used in an "
                                "expression", where=kernel.where_field(path), field=f"{kernel.field_path}.{path}",
                                hint="only params with whole numbers (or true/false) take part in expressions; give "
                                     "the number its own param")


def _check_value_names(kernel: KernelSpec, numeric_names: list[str], scalar_names: set[str],
                       type_params: dict[str, str]) -> None:
    """An argument's value (a struct's field, a fixed array's element, a launch of then:'s), a device buffer's size
    or a constant's value that reads a name no case has (a misspelt param): refused at its field now, as the launch's
    expressions are, rather than by every case's plan after the compile. Each reads what its case gives it: the
    shape, the operands' `LAYOUT_NAMES`, the numeric params and values, `sm_count`, `max_active_clusters` and the
    sizes of the launch's sizeof; a value (not a size) reads the spec's scalars too."""
    sizes = {"M", "N", "K", SM_COUNT_NAME, MAX_ACTIVE_CLUSTERS_NAME} | set(LAYOUT_NAMES) | set(numeric_names) \
        | set(kernel.sizeofs)
    values = sizes | scalar_names
    listed = ", ".join(("M", "N", "K", *LAYOUT_NAMES, SM_COUNT_NAME, MAX_ACTIVE_CLUSTERS_NAME, *numeric_names))
    read: list[tuple[str, str, expr.Expression, set[str]]] = []   # (field path, what, expression, names it may read)
    for path, argument in kernel.leaf_arguments():
        if argument.value is not None:
            read.append((f"{path}.value", f"argument {argument.name}:", argument.value, values))
        read.extend((f"{path}.value[{position}]", f"argument {argument.name}:", element, values)
                    for position, element in enumerate(argument.array))
        if argument.buffer is not None:
            read.append((f"{path}.size", f"buffer {argument.name}: size", argument.buffer.size, sizes))
    for path, argument in kernel.memory:
        if argument.buffer is not None:
            read.append((f"{path}.size", f"buffer {argument.name}: size", argument.buffer.size, sizes))
    for index, constant in enumerate(kernel.constants):
        if constant.value is not None:
            read.append((f"constants[{index}].value", f"constant {constant.name}:", constant.value, values))
        read.extend((f"constants[{index}].value[{position}]", f"constant {constant.name}:", element, values)
                    for position, element in enumerate(constant.array))
    for path, what, expression, known in read:
        unknown = sorted(expression.names - known)
        if not unknown:
            continue
        where, field = kernel.where_field(path), f"{kernel.field_path}.{path}"
        typed = [name for name in unknown if name in type_params]
        if typed:
            name = typed[0]
            raise SpecError(f"{what} {expression.source!r} reads {name}, a type (non-numeric) param ({name}: "
                            f"{type_params[name]} in params), which cannot be used in an expression", where=where,
                            field=field, hint="only params with whole numbers (or true/false) take part in "
                                              "expressions; give the number its own param")
        scalars_read = sorted(set(unknown) & scalar_names)
        if scalars_read:
            raise SpecError(f"{what} {expression.source!r} reads the scalar {', '.join(scalars_read)}: a buffer's "
                            "size is a whole count of elements, made from the shape, the operands and the params",
                            where=where, field=field, hint=f"names available: {listed}")
        raise SpecError(f"{what} {expression.source!r} uses unknown name {', '.join(unknown)}", where=where,
                        field=field, hint=f"names available: {listed}"
                        + (f", and the scalars {', '.join(sorted(scalar_names))}" if known is values else ""))


def _check_fill_names(kernel: KernelSpec, names: set[str]) -> None:
    """A buffer's fill that reads a name no case has (a word meant as a fill kind, a misspelt param): refused at its
    line now, rather than by every case's plan."""
    known = names | {"M", "N", "K", SM_COUNT_NAME, MAX_ACTIVE_CLUSTERS_NAME} | set(LAYOUT_NAMES)
    for path, argument in kernel.leaf_arguments():
        for value in argument.buffer.values if argument.buffer is not None else ():
            unknown = sorted(value.names - known)
            if unknown:
                raise SpecError(f"fill is zero, iota, a number or a list of them, each a number or an expression of "
                                f"the shape; {value.source!r} reads {', '.join(unknown)}, which no case has",
                                where=kernel.where_field(path), field=f"{kernel.field_path}.{path}.fill",
                                hint=f"names available: M, N, K, {', '.join(LAYOUT_NAMES)}, the numeric params")


def _rows_on(context: Context, node: dict, dotted: str) -> str | None:
    """``rows_on: x`` or ``y``: the block index the kernel reads its row of C from. A grid counts C's tiles the same
    either way round, so only the spec can say which a kernel expects (`planning.case_plan` holds the grid to it)."""
    if "rows_on" not in node:
        return None
    value = node["rows_on"]
    if value not in ROWS_ON:
        raise context.error(f"rows_on is x or y (the block index the kernel reads its row of C from), got "
                            f"{kind_name(value)}", node, "rows_on", f"{dotted}.rows_on",
                            hint="rows_on: y for the usual grid [ceil(N / cols), ceil(M / rows)]")
    return value


def _epilogue(context: Context, node: dict, dotted: str, signature,
              then: tuple[FollowingLaunch, ...] = ()) -> str | None:
    """What a kernel without alpha and beta computes: ``overwrite`` (C = A @ B) or ``accumulate`` (C += A @ B,
    C read first); a signature that takes alpha or beta says it itself, and so does a launch of then: that takes
    them (the case's alpha and beta reach C there), refused at that launch's signature."""
    if "epilogue" not in node:
        return None
    value = node["epilogue"]
    if value not in EPILOGUES:
        function = FUNCTIONS.get(ALIASES.get(value, value)) if isinstance(value, str) else None
        raise context.error(f"epilogue is overwrite (C = A @ B) or accumulate (C += A @ B), got {kind_name(value)}",
                            node, "epilogue", f"{dotted}.epilogue",
                            f"an element-wise function applied to C is a field of its own: elementwise: "
                            f"[{EXAMPLES[function.takes].format(name=value).split(' or ')[0]}]"
                            if function is not None else None)
    def named(argument) -> bool:
        return argument.name in ("alpha", "beta") or any(named(field) for field in argument.fields)
    taken = [argument.name for argument in signature if named(argument)]
    if taken:
        raise context.error(f"epilogue: {value} is for a kernel without alpha and beta; this signature takes "
                            f"{', '.join(taken)}", node, "epilogue", f"{dotted}.epilogue",
                            hint="leave epilogue out: alpha and beta in the signature say what C gets")
    for launch in then:
        taken = [argument.name for argument in launch.signature if named(argument)]
        if taken:
            raise context.error(f"epilogue: {value} is for a kernel without alpha and beta; this launch of then: "
                                f"takes {', '.join(taken)}", node["then"][launch.index], "signature",
                                f"{dotted}.then[{launch.index}].signature",
                                hint="leave epilogue out: alpha and beta in the launch's signature say what C gets")
    return value


def _min_pct(context: Context, node: dict, dotted: str) -> float | None:
    """The performance gate of the kernel: the % of cuBLAS each of its cases must reach (``run --min-pct``)."""
    value = read_number(context, node, "min_pct", None, f"{dotted}.min_pct", minimum=0)
    if value is not None and value <= 0:
        raise context.error(MIN_PCT_RULE, node, "min_pct", f"{dotted}.min_pct")
    return value


# ----------------------------------------------------------------------------------- identity


# C++'s keywords and alternative tokens: words no function can be named.
CXX_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
    compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
    default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
    int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
    reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch template
    this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t
    while xor xor_eq""".split())


def is_kernel_function(text: str) -> bool:
    """True for a C++ name (``sgemm``, ``ns::sgemm``) or a template-id with simple arguments (``sgemm<64, 4>``,
    ``blas<'N', 'T', 16>``, or ``sgemm<>`` for a template whose parameters all have defaults), either followed by the
    parameter types that pick one overload (``sgemm(const float*, int)``)."""
    text, parameter_types = split_overload(text)
    if parameter_types is not None and not all(re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:<>, *&]*", t, re.ASCII)
                                               for t in parameter_types):
        return False
    match = re.fullmatch(r"((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)\s*(?:<(.*)>)?", text, re.ASCII)
    if not match or any(part in CXX_KEYWORDS or part == "main" for part in match.group(1).split("::")):
        return False   # a keyword is no name, and main is no kernel
    inner = match.group(2)
    if inner is None or not inner.strip():    # sgemm<>: a template's every parameter takes its default
        return True
    inner = CHARACTER_LITERAL.sub("0", inner)     # a character literal is one argument, as a number is
    if not re.fullmatch(r"[A-Za-z0-9_:<>, +\-()]*", inner):   # (ns::Order)1: an enumerator as demangled
        return False
    depth, argument = 0, ""
    for char in inner + ",":
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
            if depth < 0:
                return False
        elif char == "," and depth == 0:
            if not argument.strip():
                return False
            argument = ""
            continue
        argument += char
    return depth == 0


def _identity(context: Context, node: dict, dotted: str) -> tuple[str, str]:
    function = read_text(context, node, "function", f"{dotted}.function")
    if len(function) > MAX_FUNCTION_CHARS:
        raise context.error(f"function is {len(function):,} characters long, more than the {MAX_FUNCTION_CHARS:,} "
                            "a name, template-id or mangled name may have", node, "function", f"{dotted}.function")
    if not is_kernel_function(function):
        shown = function if len(function) <= 60 else function[:57] + "..."
        raise context.error(f"{shown!r} is not a C++ function name or template-id", node, "function",
                            f"{dotted}.function", hint=_character_code_hint(function) or
                            "e.g. sgemm_tiled, sgemm_tiled<64, 4> with no params, or sgemm_tiled(const float*, "
                            "const float*, float*, int) for one of several overloads")
    default_name = mangled_base_name(function) or split_overload(function)[0].split("<")[0].strip().split("::")[-1]
    name = node.get("name", default_name)
    if not isinstance(name, str) or not is_safe_name(name):
        raise context.error(f"a kernel name is letters, digits and . _ - + = , [ ] (not first a dot), at most "
                            f"{MAX_NAME_CHARS} characters; got {kind_name(name)}", node, "name", f"{dotted}.name",
                            hint="names become file names and table labels")
    if is_baseline_label(name):
        raise context.error(f"{name!r} names a cuBLAS or cuBLASLt baseline row; give the kernel another name", node,
                            "name", f"{dotted}.name")
    return name, function


def _character_code_hint(text: str) -> str | None:
    """For text holding a C character literal a template argument cannot be written with (``'<'``, ``'\\n'``): its
    code, to write instead; None where it holds none."""
    found = next((match for match in re.finditer(r"'(\\?.)'", text)
                  if not CHARACTER_LITERAL.fullmatch(match.group())), None)
    if found is None:
        return None
    written = found.group(1)
    code = ord(written) if len(written) == 1 else _ESCAPE_CODES.get(written[1])
    instead = f": write its code, {code}" if code is not None else ": write its code as a number"
    return (f"a character literal in a template argument is a letter, digit or sign other than ' \\ < > ( ) [ ] , "
            f"between single quotes ('N'), passed as written; for {found.group()}{instead}")


_ESCAPE_CODES = {"n": 10, "t": 9, "r": 13, "0": 0, "\\": 92, "'": 39, '"': 34, "a": 7, "b": 8, "f": 12, "v": 11}


# The names of a case's shape and layout: a template-id cannot read them, its arguments being fixed at compile time.
SHAPE_NAMES = ("M", "N", "K") + LAYOUT_NAMES


def _check_template_id_reads_no_shape(context: Context, node: dict, path: str, function: str,
                                      name: str | None = None, source: Path | None = None) -> None:
    """Refuse a template-id whose arguments name the shape (``gemm_static<M, N, K, 16>``): params are put in their
    place, but M, N, K, the leading dimensions, strides and batch differ from shape to shape while template
    arguments are fixed when the kernel compiles. The hint gives such a kernel, templated on its shape, params of its
    own and a dispatch entry per shape; and, for a name the kernel's own (an enumerator or constant of `source`, as
    ``enum Op { N, T }``), the qualified name that keeps it apart from the shape's (``Op::N``)."""
    template_id = split_overload(function)[0]
    if "<" not in template_id:
        return
    read = [found for found in dict.fromkeys(PARAM_NAME.findall(template_id[template_id.index("<"):]))
            if found in SHAPE_NAMES]
    if not read:
        return
    own = {shape_name: f"{shape_name}_" for shape_name in read}
    rewritten = PARAM_NAME.sub(lambda match: own.get(match.group(), match.group()), template_id)
    values = ", ".join(f"{param}: ..." for param in own.values())
    if name is None:
        how = f"give them params of the kernel's own in their place ({rewritten}), swept or picked per shape"
    else:
        how = (f"function: '{rewritten}' with params of its own, require: "
               f"[{', '.join(f'{param} == {shape_name}' for shape_name, param in own.items())}] to refuse the "
               f"shapes an instance was not built for, and a dispatch: table giving each shape its instance "
               f"(dispatch: {{{name}: [{{shape: [M, N, K], params: {{{values}}}}}, ...]}})")
    raise context.error(f"the template-id {template_id} reads {', '.join(read)}, which the shape gives, but template "
                        "arguments are fixed when the kernel compiles, once for every shape, and only params are "
                        "put in their place", node, "function", path,
                        hint=f"{_own_name_hint(read, source, template_id)}; for a kernel templated on its shape: "
                             f"{how}")


def _own_name_hint(names: list[str], source: Path | None, template_id: str | None = None,
                   param: str | None = None) -> str:
    """How to write `names`, read as the shape's, where they are the kernel's own C++ names: qualified. Where
    `source` declares one in an enum (``enum Op { N, T }``), its qualified name (``Op::N``), shown in `template_id`
    or as `param`'s value; else the general way. Read from the source's text alone, its headers and macros unseen,
    so it only ever words a hint."""
    enums = {name: enum for name in names if (enum := _declaring_enum(source, name))}
    if not enums:
        return (f"if {' or '.join(names)} is a name of the kernel's source (an enumerator or a constant), qualify "
                f"it as C++ may: Op::{names[0]} for an enumerator of enum Op, ::{names[0]} for one at global scope")
    declared = "; ".join(f"{source.name if source else 'the source'} declares {name} in enum {enum}"
                         for name, enum in enums.items())

    def qualified(match: re.Match) -> str:
        return f"{enums[match.group()]}::{match.group()}" if match.group() in enums else match.group()

    if template_id is not None:
        written = f"function: '{PARAM_NAME.sub(qualified, template_id)}'"
    else:
        written = ", ".join(f"{param}: {enum}::{name}" for name, enum in enums.items())
    return f"{declared}: for the enumerator, qualify it ({written})"


# enum Op { N = 0, T = 1 }, enum class Op : int { ... }; an anonymous enum has no name to qualify with. The
# underlying type is a few words (unsigned int, std::uint8_t), read to a bound: an unbounded run to the next brace
# from each of many "enum X :" would make the search quadratic in the source's size.
_ENUM = re.compile(r"\benum\s+(?:class\s+|struct\s+)?([A-Za-z_]\w*)\s*(?::[\w:\s]{0,100})?\{([^{}]*)\}")


def _declaring_enum(source: Path | None, name: str) -> str | None:
    """The enum of the kernel's `source` text (comments left out) that has an enumerator `name`; None where none
    has, or the source cannot be read."""
    if source is None:
        return None
    try:
        text = source.read_bytes()[:MAX_SOURCE_BYTES].decode("utf-8", errors="replace")
    except OSError:
        return None
    text = without_comments(text)
    for enum in _ENUM.finditer(text):
        if name in (item.split("=")[0].strip() for item in enum.group(2).split(",")):
            return enum.group(1)
    return None


# ----------------------------------------------------------------------------------- source


def _code(context: Context, node: dict, dotted: str) -> tuple[Path, Path | None, str]:
    """The kernel's code: a ``source`` and the ``compiler`` that builds it, or a prebuilt ``binary``.

    A binary obeys the same containment rules as a source; its suffix says
    what it is (CUBIN, fatbin or PTX), and it is loaded as it is, so neither a
    compiler nor compiler options go with it.
    """
    # Beside a binary, source, compiler and options given as null are left out: what a YAML merge key
    # (<<: *common) brought from an entry that compiles the same kernel.
    prebuilt = "binary" in node
    compiler = node.get("compiler", "nvrtc")
    if prebuilt and compiler is None:
        compiler = "nvrtc"
    if compiler not in COMPILERS:
        raise context.error(f"compiler is {' or '.join(COMPILERS)}, got {kind_name(compiler)}", node, "compiler",
                            f"{dotted}.compiler", hint="nvcc must be installed to use it")
    if not prebuilt:
        return _source(context, node, dotted), None, compiler
    if node.get("source") is not None:
        raise context.error("give either source (compiled here) or binary (prebuilt), not both", node, "binary",
                            f"{dotted}.binary", hint="source: null leaves out one a YAML merge key brought")
    for key in ("compiler", "options"):
        if node.get(key) is not None:
            raise context.error(f"a prebuilt binary is not compiled here: {key} does not apply", node, key,
                                f"{dotted}.{key}")
    binary = _source(context, node, dotted, "binary", BINARY_SUFFIXES)
    return binary, binary, compiler


def _source(context: Context, node: dict, dotted: str, key: str = "source",
            suffixes: tuple[str, ...] = SOURCE_SUFFIXES) -> Path:
    noun = "kernel source" if key == "source" else "kernel binary"
    limit = (MAX_SOURCE_BYTES, "MAX_SOURCE_BYTES") if key == "source" else (MAX_BINARY_BYTES, "MAX_BINARY_BYTES")
    # A binary's suffix is read in any case, as the loader reads it (cuda.prebuilt.binary_format); a source's as
    # written, the suffix by which nvcc tells CUDA from C++.
    source = project_file(context, node, key, f"{dotted}.{key}", noun, suffixes, limit, any_case=key == "binary")
    if key == "source":
        _check_source_text(context, node, key, f"{dotted}.{key}", source)
    return source


# What ends a line of C or C++ source to its compiler (and so to the line a compile error names): CR LF, a lone CR
# or a lone LF. YAML's line breaks (`yaml_lines`) are more: NEL and Unicode's separators, which C does not count.
_SOURCE_LINE_BREAK = re.compile(r"\r\n|[\r\n]")
_SOURCE_LINE_BREAK_BYTES = re.compile(rb"\r\n|[\r\n]")


def source_line_column(text: str | bytes, offset: int) -> tuple[int, int]:
    """The line and column of C or C++ source `text` (decoded, or its bytes) that `offset` is at, each counted from
    1 as a C compiler counts them."""
    found = (_SOURCE_LINE_BREAK_BYTES.finditer(text, 0, offset) if isinstance(text, bytes)
             else _SOURCE_LINE_BREAK.finditer(text, 0, offset))
    line, start = 1, 0
    for each in found:
        line, start = line + 1, each.end()
    return line, offset - start + 1


def source_line_of(data: bytes, offset: int) -> int:
    """The line of C or C++ source `data` that byte `offset` is on, counted from 1 as a C compiler counts lines."""
    return source_line_column(data, offset)[0]


def _check_source_text(context: Context, node: dict, key: str, field_path: str, source: Path) -> None:
    """A kernel source is UTF-8 text without NUL bytes: NVRTC reads it as such, and a compile error quotes it."""
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise context.error(f"cannot read kernel source {source}: {exc.strerror}", node, key, field_path) from None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise context.error(f"kernel source {source} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset "
                            f"{exc.start:,} (line {source_line_of(data, exc.start)})", node, key, field_path,
                            hint="save the source as UTF-8") from None
    if b"\0" in data:   # in UTF-8 a zero byte is only ever the NUL character
        line = source_line_of(data, data.index(b"\0"))
        raise context.error(f"kernel source {source} holds a NUL byte (line {line}): not a source file", node, key,
                            field_path)


# ----------------------------------------------------------------------------------- parameters


def _params(context: Context, node: dict, dotted: str, function: str,
            source: Path | None = None) -> tuple[list[str], list[tuple]]:
    """Template parameter names in order, and the configurations (one value of each, in that order) the kernel
    runs: the product of a mapping's values (one value, or the list swept), or, for a list of such mappings, the
    union of their products in the list's order. A value is a whole number, true/false, or a C++ name as written:
    a type for kernels templated on their element types (``TA: dg::bfloat16_t``), an enumerator or a constant
    (``ORDER: lib::Order::Col``)."""
    param_node = node.get("params", {})
    if isinstance(param_node, list):
        return _configuration_list(context, node, "params", f"{dotted}.params",
                                   lambda item, path: _param_mapping(context, item, path, function, source))
    if not isinstance(param_node, dict):
        raise context.error(f"must be a mapping of template parameter names to values, or a list of such mappings "
                            f"(the configurations), got {kind_name(param_node)}", node, "params", f"{dotted}.params")
    names, sweep = _param_mapping(context, param_node, f"{dotted}.params", function, source)
    return names, _configurations(context, node, "params", f"{dotted}.params", [sweep])


def _configuration_list(context: Context, node: dict, key: str, path: str,
                        read_one: Callable[[dict, str], tuple[list[str], list[list]]]) -> tuple[list[str], list[tuple]]:
    """``params: [{BM: 128, BN: 256}, {BM: 64, BN: [64, 128]}]``: the configurations a kernel's parameters are
    tied in, where a product would pair values the kernel cannot take together. Every mapping names the same
    parameters in the same order (template order, for params)."""
    items = node[key]
    if not items:
        raise context.error("an empty list of configurations sweeps nothing", node, key, path)
    names: list[str] | None = None
    sweeps = []
    for index, item in enumerate(items):
        item_path = f"{path}[{index}]"
        if not isinstance(item, dict):
            raise context.error(f"a list under {key} is one of configurations, each a mapping of names to values "
                                f"(a list inside it sweeps), got {kind_name(item)}", items, index, item_path,
                                hint=f"{key}: [{{BM: 128, BN: 256}}, {{BM: 64, BN: [64, 128]}}]")
        item_names, sweep = read_one(item, item_path)
        if names is None:
            names = item_names
        elif item_names != names:
            missing = [name for name in names if name not in item_names]
            extra = [name for name in item_names if name not in names]
            problem = (f"lacks {', '.join(missing)}" if missing else
                       f"gives {', '.join(extra)}, which {path}[0] does not" if extra else
                       f"gives them in the order {', '.join(item_names)}")
            raise context.error(f"every configuration names the same {key} in the same order ({', '.join(names)}, as "
                                f"{path}[0] does); this one {problem}", items, index, item_path,
                                hint="the order is the template's: params are its arguments in order"
                                if key == "params" and not (missing or extra) else None)
        sweeps.append(sweep)
    return names or [], _configurations(context, node, key, path, sweeps)


def _configurations(context: Context, node: dict, key: str, path: str, sweeps: list[list[list]]) -> list[tuple]:
    """The union, in order and each once, of the products of `sweeps` (each a list of every name's values),
    refused past MAX_CASES before any is made."""
    count = sum(math.prod(len(values) for values in sweep) for sweep in sweeps)
    if count > MAX_CASES:
        what = "parameter" if key == "params" else "values"
        raise context.error(f"the {what} sweep expands to {count:,} kernels, more than the limit of {MAX_CASES:,} "
                            "(MAX_CASES)", node, key, path)
    # true and 1 are equal in Python but not as written: a bool is kept apart from the number it equals.
    seen: dict[tuple, tuple] = {}
    for sweep in sweeps:
        for combo in itertools.product(*sweep):
            seen.setdefault(tuple((isinstance(v, bool), v) for v in combo), combo)
    return list(seen.values())


def _param_mapping(context: Context, param_node: dict, path: str, function: str,
                   source: Path | None = None) -> tuple[list[str], list[list]]:
    """One mapping of template parameter names to a value or a list of values: its names, and each one's values;
    `source`, the kernel's, is read only for a hint."""
    template_id = split_overload(function)[0]
    if param_node and "<" in template_id:
        # A template-id naming params (k<config<BM, BN>>) has them put in its place; one naming none is complete.
        named = set(PARAM_NAME.findall(template_id[template_id.index("<"):]))
        unnamed = [key for key in param_node if key not in named]
        if len(unnamed) == len(param_node):
            raise context.error("the function is already a template-id; give its arguments there or in params, "
                                "not both", param_node, None, path,
                                hint="or name the params inside it, for the params to be put in their place: "
                                     "function: k<config<BM, BN>> with params: {BM: [64, 128], BN: 128}")
        if unnamed:
            raise context.error(f"the function's template-id names some params but not {', '.join(map(str, unnamed))}"
                                f": a template-id with params names each of them", param_node, None, path)
    names, sweep = [], []
    for key, value in param_node.items():
        key_path = f"{path}.{field_name(param_node, key)}"
        if not isinstance(key, str) or not IDENTIFIER.fullmatch(key) or key in RESERVED_PARAM_NAMES:
            reserved = isinstance(key, str) and key in RESERVED_PARAM_NAMES
            written = field_name(param_node, key)
            shown = kind_name(key) if isinstance(key, str) or written == kind_name(key) else \
                f"{written} (which YAML reads as {kind_name(key)})"
            raise context.error(f"template parameter name {shown} must be a C identifier other than "
                                f"{', '.join(sorted(RESERVED_PARAM_NAMES))}", param_node, key, key_path,
                                hint=f"params are given in the template's order, so their names are the spec's own: "
                                     f"call it {key}_ (or any other name) even where the template says {key}"
                                if reserved else None)
        values = value if isinstance(value, list) else [value]
        if not values:
            raise context.error("an empty list sweeps nothing", param_node, key, key_path)
        for v in values:
            shape_names = _shape_names(v)
            if shape_names:
                raise context.error(f"template parameter {key} = {v!r} reads the shape ({', '.join(shape_names)}), "
                                    "but template arguments are fixed when the kernel compiles, once for every "
                                    "shape", param_node, key, key_path,
                                    hint=f"{_own_name_hint(shape_names, source, param=key)}; for a kernel built "
                                         f"for one shape at a time, give each shape a dispatch: entry with its sizes "
                                         f"as numbers ({key}: 1024), and require: [{key} == {shape_names[0]}] to "
                                         f"refuse the shapes it was not built for")
            if is_cpp_type(v) or _is_template_id_type(v):
                problem = _template_argument_problem(v)
                if problem:
                    raise context.error(problem, param_node, key, key_path,
                                        hint="a param's value is put into the template-id as written: a type "
                                             "(float, unsigned int), an enumerator (lib::Order::Col), a template-id "
                                             "or a whole number")
                continue
            if isinstance(v, bool) or is_character_literal(v):   # 1/0 in expressions; 'N' passed as written
                continue
            if not isinstance(v, OversizedInteger) and not isinstance(v, int):
                raise context.error(f"template parameters are whole numbers, true/false, C++ type names, "
                                    f"template-ids or enumerators (or character literals, 'N'), got {kind_name(v)}",
                                    param_node, key, key_path,
                                    hint=(isinstance(v, str) and _character_code_hint(v)) or
                                    "a type or enumerator is written as C++ spells it: float, "
                                    "dg::bfloat16_t, __nv_bfloat16, lib::Layout::ColMajor; a class "
                                    "template's id as config<64, 128>; where the numbers inside it are to "
                                    "be swept, name them in the function: k<config<BM, BN>> with params: "
                                    "{BM: [64, 128], BN: 128}")
            check_number(context, v, param_node, key, key_path, whole=True)
        names.append(key)
        sweep.append(list(values))
    return names, sweep


def _launch_values(context: Context, node: dict, dotted: str, param_names: list[str]) -> tuple[list[str], list[tuple]]:
    """``values: {S: [8, 16, 32]}``: named whole numbers the launch reads (block, grid, shared_bytes, require,
    arguments) and no template takes, such as the block side a launcher picks at run time for a plain kernel;
    each swept as a param is, and, as params, a list of mappings gives the configurations themselves."""
    value_node = node.get("values", {})
    if isinstance(value_node, list):
        return _configuration_list(context, node, "values", f"{dotted}.values",
                                   lambda item, path: _value_mapping(context, item, path, param_names))
    if not isinstance(value_node, dict):
        raise context.error(f"values is a mapping of names to whole numbers (or lists of them), got "
                            f"{kind_name(value_node)}", node, "values", f"{dotted}.values", hint="values: {S: [8, 16]}")
    names, sweep = _value_mapping(context, value_node, f"{dotted}.values", param_names)
    return names, _configurations(context, node, "values", f"{dotted}.values", [sweep])


def _value_mapping(context: Context, value_node: dict, path: str, param_names: list[str]
                   ) -> tuple[list[str], list[list]]:
    """One mapping of launch values: its names, and each one's values."""
    names, sweep = [], []
    for key, value in value_node.items():
        key_path = f"{path}.{field_name(value_node, key)}"
        if not isinstance(key, str) or not IDENTIFIER.fullmatch(key) or key in RESERVED_PARAM_NAMES:
            raise context.error(f"a value's name is a C identifier other than "
                                f"{', '.join(sorted(RESERVED_PARAM_NAMES))}, got {kind_name(key)}", value_node, key,
                                key_path)
        if key in param_names:
            raise context.error(f"{key} is a param already: a name is a template argument (params) or a value only "
                                "the launch reads (values), not both", value_node, key, key_path)
        values = value if isinstance(value, list) else [value]
        if not values:
            raise context.error("an empty list sweeps nothing", value_node, key, key_path)
        for item in values:
            if isinstance(item, bool) or not isinstance(item, (int, OversizedInteger)):
                raise context.error(f"values are whole numbers the launch reads, got {kind_name(item)}", value_node,
                                    key, key_path, hint="a type or an enumerator is a template argument: params")
            check_number(context, item, value_node, key, key_path, whole=True)
        names.append(key)
        sweep.append(list(values))
    return names, sweep


# Keywords that are, alone or combined (unsigned long long), a type a template argument may name, or a value.
TYPE_KEYWORDS = frozenset("bool char char8_t char16_t char32_t wchar_t short int long signed unsigned float double "
                          "void".split())
VALUE_KEYWORDS = frozenset({"true", "false", "nullptr"})
# Inside a template-id's arguments (config<sizeof(float), const int>) these read as C++ too.
TEMPLATE_ID_KEYWORDS = TYPE_KEYWORDS | VALUE_KEYWORDS | {"sizeof", "alignof", "const", "volatile"}
# unsigned, signed, long and short make a type only with these (long double, unsigned char, long long int).
INTEGER_MODIFIERS = frozenset({"unsigned", "signed", "long", "short"})
MODIFIED_TYPES = INTEGER_MODIFIERS | {"int", "char", "double"}
# Names the preprocessor or the compiler defines itself (__LINE__, __FILE__, __CUDA_ARCH__, __func__): each stands
# for a line number, a file name or a version, never for the type or enumerator a param is to name.
PREDEFINED_NAME = re.compile(r"__[A-Z][A-Z0-9_]*__|__cplusplus|__func__|_Pragma|__has_[a-z_]+|__VA_[A-Z]+__")


def _template_argument_problem(value: str) -> str | None:
    """What makes `value` (a type name or template-id as `is_cpp_type` and `is_kernel_function` read it) no
    template argument: a C++ keyword that is no type (delete, sizeof, new), a predefined macro (__LINE__), a
    keyword in a qualified name (std::int), or modifiers on what they cannot modify (unsigned float); else None."""
    template_id = "<" in value
    allowed = TEMPLATE_ID_KEYWORDS if template_id else TYPE_KEYWORDS | VALUE_KEYWORDS
    for qualified in re.findall(r"(?:::)?(?:[A-Za-z_]\w*::)*[A-Za-z_]\w*", value, re.ASCII):
        parts = [part for part in qualified.split("::") if part]
        for part in parts:
            subject = f"{value!r} is" if part == value.strip() else f"{value!r} holds {part},"
            if PREDEFINED_NAME.fullmatch(part):
                return f"{subject} a name the compiler defines itself (a macro), not a type or enumerator"
            if part in CXX_KEYWORDS and (part not in allowed or len(parts) > 1):
                return f"{subject} a C++ keyword, not a type or enumerator"
    words = value.split()
    if not template_id and len(words) > 1 and (not set(words[:-1]) <= INTEGER_MODIFIERS
                                                or words[-1] not in MODIFIED_TYPES
                                                or (words[-1] == "double" and words[:-1] != ["long"])):
        return (f"{value!r} is no C++ type: {', '.join(sorted(INTEGER_MODIFIERS))} combine with int, char, each "
                "other or (long) double alone")
    return None


def _is_template_id_type(value: Any) -> bool:
    """True for a template argument that is a class template's id (``lib::config<64, 128, float>``), whose
    arguments may name the kernel's other params (``config<BM, BN>``)."""
    return (isinstance(value, str) and len(value) <= MAX_FUNCTION_CHARS and value.rstrip().endswith(">")
            and split_overload(value)[1] is None and is_kernel_function(value))


def _shape_names(value: Any) -> list[str]:
    """The shape's names (M, N, K) that a parameter value written as an expression reads: ``M``, ``K // 64``."""
    if not isinstance(value, str):
        return []
    try:
        names = expr.parse(value).names
    except expr.ExpressionError:   # a C++ name such as dg::bfloat16_t is no expression
        return []
    return [name for name in ("M", "N", "K") if name in names]


# ----------------------------------------------------------------------------------- launch




def _dims(context: Context, node: dict, key: str, dotted: str, sizeofs: dict[str, str]) -> tuple[expr.Expression, ...]:
    value = node[key]
    items = value if isinstance(value, list) else [value]
    if not 1 <= len(items) <= 3:
        raise context.error(f"{key} has 1 to 3 dimensions (x, y, z), got {len(items)}", node, key, dotted)
    parent = value if isinstance(value, list) else node
    return tuple(_launch_expression(context, parent, i if parent is value else key, v, f"{dotted}[{i}]", sizeofs)
                 for i, v in enumerate(items))


def _launch_expression(context: Context, parent, key, written: Any, dotted: str,
                       sizeofs: dict[str, str], condition: bool = False) -> expr.Expression:
    """One launch extent, shared_bytes, a tile's side or (`condition`) a requirement: an expression, whose
    ``sizeof(TYPE)``s are read as names that the kernel's compiler gives values (`sizeofs` gathers them), shown as
    written."""
    text = _sizeof_names(context, parent, key, written, dotted, sizeofs)
    if text is not written and not condition:
        _refuse_slash_ceilings_as_written(context, parent, key, written, dotted, dict(sizeofs))
    try:
        expression = parse_expression(context, parent, key, text, dotted, **({"condition": True} if condition
                                                                              else {"whole": True}))
    except SpecError as exc:
        if text is written:
            raise
        # Each sizeof(...) was read as a name padded to its own length, so columns are the written text's: the
        # message quotes that text, not the names
        raise SpecError(exc.message.replace(repr(text), repr(written)).replace(repr(text.strip()),
                                                                               repr(written.strip())),
                        where=exc.where, field=exc.field, hint=exc.hint) from None
    if text is not written:
        expression = dataclasses.replace(expression, source=written.strip())   # shown as written, sizeof and all
    return expression


def _refuse_slash_ceilings_as_written(context: Context, parent, key, written: str, dotted: str,
                                      sizeofs: dict[str, str]) -> None:
    """`refuse_slash_ceilings` for a field with sizeof(TYPE)s, its texts as written: each sizeof read as a name
    padded with underscores to its own length, so that a name spans its sizeof's columns. Text that does not parse
    is left to `parse_expression`, which says why."""
    probe = _sizeof_names(context, parent, key, written, dotted, sizeofs, padding="_")
    if len(probe) != len(written):    # a name longer than its sizeof(T): the columns no longer meet
        return
    try:
        expression = expr.parse(probe)
    except expr.ExpressionError:
        return
    refuse_slash_ceilings(context, parent, key, dotted, expression, shown=written)


def _launch(context: Context, node: dict, dotted: str):
    """Block, grid, dynamic shared memory and tile, and the C++ types their sizeofs read."""
    sizeofs: dict[str, str] = {}
    block = _dims(context, node, "block", f"{dotted}.block", sizeofs)
    grid = _dims(context, node, "grid", f"{dotted}.grid", sizeofs)
    shared = _launch_expression(context, node, "shared_bytes", node.get("shared_bytes", 0), f"{dotted}.shared_bytes",
                                sizeofs)
    tile = None
    if "tile" in node:
        tile_node = node["tile"]
        if not isinstance(tile_node, list) or len(tile_node) != 2:
            raise context.error(f"tile is [rows, cols] of C computed by one block, got {kind_name(tile_node)}",
                                node, "tile", f"{dotted}.tile")
        tile = tuple(_launch_expression(context, tile_node, i, v, f"{dotted}.tile[{i}]", sizeofs)
                     for i, v in enumerate(tile_node))
    return block, grid, shared, tile, sizeofs


# sizeof(T) in block, grid and shared_bytes: T is a C++ type (a template-id of numbers, types and params included, or
# an array whose extents the source's macros or constants give: sizeof(half[CHUNK_K * 16][64 + SKEW]),
# sizeof(char[SHMEM_SZ]), sizeof(char[THREADS]) for a block side the source defines).
_SIZEOF = re.compile(r"\bsizeof\s*\(")
_SIZEOF_TYPE = re.compile(r"[A-Za-z_:][A-Za-z0-9_:<>, *&()+\-\[\]/%]*", re.ASCII)
SIZEOF_NAME = "__sizeof{}"


def _sizeof_names(context: Context, parent, key, value: Any, dotted: str, sizeofs: dict[str, str],
                  padding: str = " ") -> Any:
    """`value` with each ``sizeof(TYPE)`` replaced by a name (``__sizeof0``) padded with `padding` to the sizeof's
    length, `value` itself where it has none; `sizeofs` gains the type each new name sizes (a type read twice keeps
    one name)."""
    if not isinstance(value, str) or not _SIZEOF.search(value):
        return value
    parts: list[str] = []
    position = 0
    for match in _SIZEOF.finditer(value):
        if match.start() < position:     # inside a sizeof already read
            continue
        depth, end = 1, match.end()
        while end < len(value) and depth:
            depth += {"(": 1, ")": -1}.get(value[end], 0)
            end += 1
        type_text = value[match.end():end - 1].strip()
        if depth or not _SIZEOF_TYPE.fullmatch(type_text) or type_text.count("<") != type_text.count(">"):
            raise context.error(f"sizeof takes one C++ type, as sizeof(SMem<BM, BN>) or sizeof(char[SMEM]) (a macro "
                                f"of the source); got "
                                f"{value[match.start():end]!r}", parent, key, dotted)
        name = next((known for known, text in sizeofs.items() if text == type_text), None)
        if name is None:
            name = SIZEOF_NAME.format(len(sizeofs))
            sizeofs[name] = type_text
        parts.extend((value[position:match.start()], name.ljust(end - match.start(), padding)))   # columns stay
        position = end
    parts.append(value[position:])
    return "".join(parts)


def _require(context: Context, node: dict, dotted: str, sizeofs: dict[str, str],
             flags: frozenset[str] = frozenset()) -> tuple[expr.Expression, ...]:
    """``require:``, each a condition: a comparison, or comparisons joined by and, or and not, where a part that
    compares nothing may only be a param of true or false (`flags`): a number read as true or false holds wherever
    it is not 0, the opposite of the ``% ... == 0`` it is mostly meant for."""
    require_node = node.get("require", [])
    if isinstance(require_node, str):
        require_node = [require_node]
    if not isinstance(require_node, list):
        raise context.error(f"require is a list of conditions, got {kind_name(require_node)}", node, "require",
                            f"{dotted}.require")
    parent = require_node if isinstance(require_node, LineList) else node
    for index, value in enumerate(require_node):
        if not isinstance(value, str):   # a bare number holds always or never: it checks nothing about a case
            raise context.error(f"a condition is text over the names, such as 'BM % TM == 0'; got {kind_name(value)}",
                                parent, index if parent is require_node else "require",
                                f"{dotted}.require[{index}]")
    conditions = tuple(_launch_expression(context, parent, i if parent is require_node else "require", v,
                                          f"{dotted}.require[{i}]", sizeofs, condition=True)
                       for i, v in enumerate(require_node))
    for index, (written, condition) in enumerate(zip(require_node, conditions)):
        uncompared = [part for part in expr.uncompared_operands(condition.tree)
                      if not (isinstance(part, ast.Name) and part.id in flags)]
        if uncompared:
            # sizeof(...) is read as a name of its own length, so a part's columns are the written text's
            part = ast.get_source_segment(written.strip(), uncompared[0]) or ast.unparse(uncompared[0])
            raise context.error(f"{condition.source!r} reads {part} as true or false: each part joined by and, or "
                                "or not compares (a number holds wherever it is not 0), or is a param of true or "
                                "false", parent, index if parent is require_node else "require",
                                f"{dotted}.require[{index}]",
                                hint=f"compare it: '{part} == 0' where a multiple (or zero) is meant, "
                                     f"'{part} != 0' for the opposite")
    return conditions


def _check_names_used(context: Context, node: dict, dotted: str, param_names: list[str],
                      type_params: dict[str, str], sizeof_names: set[str], **groups) -> None:
    known = set(param_names) | {"M", "N", "K", SM_COUNT_NAME} | set(LAYOUT_NAMES)
    for key, expressions in groups.items():
        allowed = known | (set(LAUNCH_NAMES) if key == "require" else set()) \
            | ({MAX_ACTIVE_CLUSTERS_NAME} if key == "grid" else set()) \
            | (sizeof_names if key in ("block", "grid", "shared_bytes", "tile", "require") else set())
        for expression in expressions:
            unknown = sorted(expression.names - allowed)
            if MAX_ACTIVE_CLUSTERS_NAME in unknown:
                raise context.error(f"{expression.source!r} reads {MAX_ACTIVE_CLUSTERS_NAME}, which only the grid "
                                    "and the signature's values and buffer sizes may read (and the constants' "
                                    "values)", node, key,
                                    f"{dotted}.{key}",
                                    hint="it is the count of the clusters (or blocks) that fit with the kernel's "
                                         "block, shared memory and cluster, so none of those can depend on it")
            if unknown:
                raise unknown_names_error(
                    context, expression, unknown, node, key, f"{dotted}.{key}",
                    hint=f"names available: M, N, K, {SM_COUNT_NAME}, {', '.join(LAYOUT_NAMES)}, "
                         f"{', '.join(param_names) or '(no params)'}"
                         + (", " + ", ".join(LAUNCH_NAMES) if key == "require" else "")
                         + (f", {MAX_ACTIVE_CLUSTERS_NAME}" if key == "grid" else ""), type_params=type_params)


# ----------------------------------------------------------------------------------- compiler settings


def _compiler_settings(context: Context, node: dict, dotted: str) -> tuple[tuple[str, ...], str, str | None]:
    """NVRTC options, precision and target architecture."""
    options = node.get("options", [])
    if options is None and "binary" in node:     # options: null beside a binary (see _code)
        options = []
    if not isinstance(options, list) or not all(isinstance(o, str) and o.strip() for o in options):
        raise context.error(f"options is a list of NVRTC option strings, got {kind_name(options)}", node,
                            "options", f"{dotted}.options")
    options = _joined_values(options)
    for index, option in enumerate(options):
        name = re.split(r"[=\s]", option.strip(), maxsplit=1)[0]
        if "\0" in option:
            raise context.error(f"option {option!r} holds a NUL character, where the compiler's C strings would "
                                "end", node, "options", f"{dotted}.options")
        _check_option_characters(context, node, dotted, option)
        if name in RELOCATABLE_OPTIONS:
            _check_relocatable(context, node, dotted, option, name, options[index + 1:index + 2])
        if name in OWN_OPTIONS:
            raise context.error(f"option {option!r} sets what driver-gemm sets itself (the target architecture, "
                                "or what the compiler writes and where)", node, "options", f"{dotted}.options",
                                hint="name an arch-specific target with arch: (sm_90a); without it the kernel is "
                                     "built for the GPU at hand" if name in TARGET_OPTIONS else
                                     "driver-gemm builds a CUBIN, keeping the PTX, in a folder of its own")
        if (name in LEAVE_OPTIONS or name.startswith("-L")) and not context.allow_outside_sources:   # -L/lib
            raise context.error(f"option {option!r} runs a program or reads or writes files of its choosing; it "
                                "needs the user's leave", node, "options", f"{dotted}.options",
                                hint="pass --allow-outside-sources (allow_outside_sources=True) to allow it")
    written = [option.strip() for option in options]
    options = [_checked_include_option(context, node, dotted, option) for option in options]
    # the project's own headers a relative pre-include named, which _include_option found and wrote absolute
    vetted = {option for option, was in zip(options, written)
              if option.startswith(PRE_INCLUDE_OPTION) and option != was}
    for option in options:
        if option.startswith(PATH_OPTIONS) and not option.startswith(INCLUDE_OPTION) and option not in vetted \
                and not _toolkit_pre_include(option) and not context.allow_outside_sources:
            raise context.error(f"option {option!r} names files to read; it needs the user's leave", node,
                                "options", f"{dotted}.options",
                                hint="headers beside the kernel source are found without it, and a header of the "
                                     "project pre-included by its path relative to the spec "
                                     "(--pre-include=prelude.h); or pass --allow-outside-sources")
    precision = node.get("precision", "fp32")
    if precision not in PRECISIONS:
        raise context.error(f"precision is {' or '.join(PRECISIONS)}, got {kind_name(precision)}", node,
                            "precision", f"{dotted}.precision",
                            hint="tf32: checked with verify.tf32_tolerance and timed against cuBLAS in TF32 "
                                 "tensor-op math")
    arch = node.get("arch")
    problem = arch_problem(arch) if arch is not None else None
    if problem is not None:
        message, hint = problem
        if not isinstance(arch, str):
            hint = ("name it only for arch-specific instructions (wgmma needs sm_90a); without it a kernel is built "
                    "for the device's own")
        raise context.error(message, node, "arch", f"{dotted}.arch", hint=hint)
    return tuple(options), precision, arch


def _check_option_characters(context: Context, node: dict, dotted: str, option: str) -> None:
    """An option is one line of Unicode text: a lone surrogate cannot be encoded for the compiler, and a line break
    or another control character would reach NVRTC's command line (a -D value with a line break is no macro)."""
    for char in option:
        if 0xD800 <= ord(char) <= 0xDFFF:
            raise context.error(f"option {option!r} holds {ascii(char)}, half of a UTF-16 surrogate pair: not "
                                "Unicode text", node, "options", f"{dotted}.options")
        if unicodedata.category(char) == "Cc" and char != "\t":
            raise context.error(f"option {option!r} holds the control character {ascii(char)}: an option is one "
                                "line of text", node, "options", f"{dotted}.options",
                                hint="give each option its own entry of the list")


def _check_relocatable(context: Context, node: dict, dotted: str, option: str, name: str, following: list[str]):
    """``-rdc=false`` is the default and harmless; any other value (true, or none) builds relocatable code."""
    value = option.strip()[len(name):].lstrip("= \t")
    if not value and following:       # nvcc reads the value from the next entry: options: [-rdc, "true"]
        value = following[0].strip()
    if value != "false":
        raise context.error(f"option {option!r} builds relocatable device code: an object to link, not a CUBIN "
                            "to load, whose shared memory is laid out only when it is linked", node, "options",
                            f"{dotted}.options",
                            hint="leave it out: driver-gemm builds and loads one whole program per kernel source")


# CUDA headers nvcc includes in every file, which a file compiled under NVRTC may need pre-included
# (cudaGridDependencySynchronize is declared in the first): the toolkit's, so no file of the user's is read.
TOOLKIT_PRE_INCLUDES = frozenset({"cuda_device_runtime_api.h", "cuda_runtime.h", "cuda_runtime_api.h"})


# A pre-include and the header it names: ``-include FILE``, ``--pre-include=FILE`` (cuda.compile.pre_included_files
# reads the same spellings, below the spec reader).
# A pre-included header and an include folder as a spec may write them; the writers of a spec (tune's winners) read
# them the same way to rebase what they name.
PRE_INCLUDE_PATTERN = re.compile(r"(?:-include|--pre-include)(?:=|\s+)\s*(\S.*)")
INCLUDE_PATTERN = re.compile(r"(?:-I|--include-path(?:=|\s))\s*(.+)")


def _toolkit_pre_include(option: str) -> bool:
    """Whether `option` pre-includes one of `TOOLKIT_PRE_INCLUDES` by its bare name."""
    match = PRE_INCLUDE_PATTERN.fullmatch(option.strip())
    return match is not None and match.group(1) in TOOLKIT_PRE_INCLUDES


def _joined_values(options: list[str]) -> list[str]:
    """`options` with an option that takes a path and its value, written as two entries, as one."""
    joined: list[str] = []
    for option in options:
        if joined and joined[-1].strip() in PATH_OPTIONS:
            joined[-1] = f"{joined[-1].strip()} {option.strip()}"
        else:
            joined.append(option)
    return joined


def joined_options(options: list[str]) -> list[str]:
    """A kernel entry's options paired as the reader pairs them (one per option of `KernelSpec.options`)."""
    return _joined_values(options)


def read_param_values(context: Context, node: dict, path: str) -> None:
    """Read a mapping of params (a dispatch entry's) with the reader of a kernel entry's ``params:``: each value a
    whole number, true/false or a C++ name that is a template argument, as there; a mistake is a `SpecError`."""
    _param_mapping(context, node, path, "")     # no function: the names are the kernel's own, already checked


def _checked_include_option(context: Context, node: dict, dotted: str, option: str) -> str:
    """`_include_option`, its folder's or header's name one the file-name encoding cannot write said at the field
    (a UnicodeError is a ValueError, which no OSError handler sees)."""
    try:
        return _include_option(context, node, dotted, option)
    except UnicodeError:
        raise context.error(unencodable("option", repr(option)), node, "options", f"{dotted}.options",
                            hint=UNENCODABLE_HINT) from None


def _include_option(context: Context, node: dict, dotted: str, option: str) -> str:
    """``-I FOLDER`` / ``--include-path=FOLDER`` as ``--include-path=ABSOLUTE``: a relative folder is relative to
    the spec, like ``source:``, and may be given without leave while it stays inside the spec's project (an
    absolute one, or one outside, needs --allow-outside-sources). A header pre-included by a relative path that
    names a file of the project (``--pre-include=prelude.h``, the typedefs a fragment's own runner gives it) is
    ``--pre-include=ABSOLUTE`` likewise; any other pre-include is the compiler's to find, with leave."""
    text = option.strip()
    pre = PRE_INCLUDE_PATTERN.fullmatch(text)
    if pre is not None and not Path(pre.group(1).strip()).is_absolute():
        named = pre.group(1).strip()
        found = (context.base_dir / named).resolve()
        inside = context.allow_outside_sources or found.is_relative_to(project_root(context.base_dir))
        if found.is_file() and inside:
            return f"{PRE_INCLUDE_OPTION}{found}"
        if inside and found.is_dir():
            raise context.error(f"option {option!r}: {found} is a folder; a pre-include names a header", node,
                                "options", f"{dotted}.options")
        if inside and ("/" in named or named.startswith(".")) and not found.exists():
            # a path, not a bare name the compiler's search path may hold (cuda_fp16.h)
            raise context.error(f"option {option!r}: no file {found} (a pre-included header's path is relative to "
                                "the spec)", node, "options", f"{dotted}.options")
    match = INCLUDE_PATTERN.fullmatch(text)
    if not match:
        return text
    written = Path(match.group(1).strip())
    folder = (context.base_dir / written).resolve()
    if not context.allow_outside_sources:
        root = project_root(context.base_dir)
        if written.is_absolute() or not folder.is_relative_to(root):
            raise context.error(f"option {option!r} names a folder outside the spec's project ({root}); it needs "
                                "the user's leave", node, "options", f"{dotted}.options",
                                hint="give a folder relative to the spec inside its project, or pass "
                                     "--allow-outside-sources")
    if not folder.is_dir():
        raise context.error(f"option {option!r}: {folder} is not a folder", node, "options", f"{dotted}.options",
                            hint="a relative include folder is relative to the spec file")
    return f"{INCLUDE_OPTION}{folder}"


def plain(node: Any) -> Any:
    """`node` as plain Python values (dicts, lists, str, int, float, bool, None), without the lines it remembers."""
    if isinstance(node, dict):
        return {str(key): plain(value) for key, value in node.items()}
    if isinstance(node, (list, tuple)):
        return [plain(value) for value in node]
    for kind in (bool, int, float, str):
        if isinstance(node, kind):
            return kind(node)
    return node


def _field_lines(node: dict) -> dict:
    lines = dict(node.entry_lines) if hasattr(node, "entry_lines") else {}
    for key, value in node.items():   # list items (grid[1], require[2]) have lines of their own
        if isinstance(value, LineList):
            lines.update({f"{key}[{i}]": line for i, line in value.entry_lines.items()})
            _nested_field_lines(key, value, lines)
    return lines


def _nested_field_lines(path: str, items: LineList, lines: dict) -> None:
    """The lines of a struct's fields (signature[0].fields[2]), at any depth, so that a problem of one is said at
    its own line rather than at its struct's."""
    for index, item in enumerate(items):
        fields = item.get("fields") if isinstance(item, dict) else None
        if isinstance(fields, LineList):
            inner = f"{path}[{index}].fields"
            lines.update({f"{inner}[{i}]": line for i, line in fields.entry_lines.items()})
            _nested_field_lines(inner, fields, lines)
