"""A kernel's ``signature:``: its arguments in its own order, each with its exact C type.

Standard names (``A``, ``M``, ``alpha``, ``lda``...) are bound by driver-gemm;
other scalars give a type and a value expression; ``tensormap`` entries
describe TMA tensor maps (`launch_fields`); ``buffer`` entries and alpha or
beta as ``ptr`` are device buffers of the case's own (`device_buffers`), as are fp8's per-tensor scales as
``ptr`` (``{name: scale_a, type: ptr}``);
``struct`` entries hold fields, structs and fixed arrays (a list ``value:``) in
C layout; ``pointers`` entries are arrays of the addresses of a matrix's batch.
A, B and C must each reach the kernel once, as a pointer, through a tensor map
or through an array of pointers, names are unique across the whole signature,
and a constant must fit its C type. ``constants:`` (`parse_constants`) gives the
values of the source's ``__constant__`` variables the same way.
"""

from __future__ import annotations

from typing import Any

from . import expr
from ..gemm.operands import Gram
from ..argtypes import C_TYPES, DEFAULT_SIGNATURE, STANDARD_ARGUMENTS
from .fields import IDENTIFIER, Context, check_keys, parse_expression
from .kinds import kind_name
from .device_buffers import (SCALE_POINTERS, buffer_argument, check_constant_fits, declared_scales,
                             scale_pointer_argument, scalar_pointer_argument)
from .launch_fields import CONSTANT_NAME, tensor_map_argument
from .limits import MAX_ARRAY_ELEMENTS
from .model import Argument, HostBuilder
from .project import host_builder

ARGUMENT_TYPES = (*C_TYPES, "struct", "buffer", "pointers")


def is_integer_type(ctype: str) -> bool:
    """True for a C integer type an argument or constant may have (``int32``, ``uint64``): its value is a whole
    number, so C's integer ceiling written with ``/`` is refused in it (`parse_expression`)."""
    return ctype in C_TYPES and ctype not in ("ptr", "bool") and C_TYPES[ctype].low is not None


def _check_constant_fits(context: Context, argument: Argument, node: Any, key: Any, dotted: str) -> None:
    if argument.buffer is not None or argument.ctype == "ptr":
        return
    for position, element in enumerate(argument.array):
        check_constant_fits(context, argument.ctype, element, node.get(key) if isinstance(node, dict) else node,
                            position, f"{dotted}[{position}]")
    check_constant_fits(context, argument.ctype, argument.value, node, key, dotted)


def parse_signature(context: Context, node: dict, dotted: str, scalars: dict[str, float],
                    elsewhere: frozenset[str] = frozenset(), gram: Gram | None = None
                    ) -> tuple[tuple[Argument, ...], tuple[tuple[str, Argument], ...]]:
    """The kernel's arguments in order: standard names (A, B, C, M, N, K, alpha, beta) or typed mappings; and
    apart, each with its field path, the buffers that are no parameter (``pass: none``, read through maps).
    `elsewhere` are the names the launches that follow the kernel's own take (``then:``), and a Gram product's
    tied operand (``gram:``, the other's buffer): a matrix among them need not be among the kernel's own, and a
    buffer they name reaches a launch without being a parameter of the kernel (``pass: none``). `gram` (the parsed
    ``gram:``) has a matrix missing or taken twice said in its terms."""
    value = node.get("signature", list(DEFAULT_SIGNATURE))
    if not isinstance(value, list) or not value:
        raise context.error(f"signature is a non-empty list of arguments, got {kind_name(value)}", node,
                            "signature", f"{dotted}.signature")
    scales = declared_scales(node)
    arguments = [_argument_at(context, value, index, f"{dotted}.signature[{index}]", scalars, scales=scales)
                 for index in range(len(value))]
    mapped = _check_operands_reached(context, node, dotted, arguments, elsewhere, gram)
    unpassed = [index for index, argument in enumerate(arguments)
                if argument.buffer is not None and not argument.buffer.passed]
    for index in unpassed:
        name = arguments[index].name
        if name not in mapped and name not in elsewhere:
            then = " and no launch of then: takes it" if "then" in node else ""
            quantized = arguments[index].buffer.quantized
            hint = (f"add a tensormap entry with tensor: {name}, "
                    + ("name it in a launch of then:, " if "then" in node else "") + "or leave pass out")
            if quantized is not None and quantized.part == "scales":
                hint = ("B's scales stored beside the codes in one buffer (GGUF's blocks) are laid out by the codes' "
                        "pack: {builder: ...}, which is given them: leave this entry out; " + hint)
            raise context.error(f"buffer {name} has pass: none, but no tensor map reads it{then}: it would reach the "
                                "kernel in no way", value, index, f"{dotted}.signature[{index}].pass", hint=hint)
    memory = tuple((f"signature[{index}]", arguments[index]) for index in unpassed)
    if len(memory) == len(arguments):
        raise context.error("signature holds no parameter of the kernel", node, "signature", f"{dotted}.signature")
    return tuple(argument for argument in arguments if argument.buffer is None or argument.buffer.passed), memory


def _check_operands_reached(context: Context, node: dict, dotted: str, arguments: list[Argument],
                            elsewhere: frozenset[str] = frozenset(), gram: Gram | None = None) -> set[str]:
    """A, B and C each reach the kernel: as a pointer (at most once) or through tensor maps, and every map names
    one of them or a buffer of the signature; names are unique, struct fields (of structs) included, since each
    names one value of the case's plan. The ``constants:`` are read first, since their maps reach matrices too.
    Returns what the maps read (matrices and buffers by name)."""
    names: list[str] = []
    mapped: set[str] = set()   # what tensor maps reach, a struct's maps included
    arrays: set[str] = set()   # the matrices whose batch an array of pointers reaches
    buffers: set[str] = set()
    coded: set[str] = set()    # B given as the codes of a quantized B, which the kernel reads in its place

    def add(argument: Argument) -> None:
        names.append(argument.name)
        if argument.tensor_map is not None:
            mapped.add(argument.tensor_map.tensor)
        if argument.pointers_to is not None:
            arrays.add(argument.pointers_to)
        if argument.buffer is not None:
            buffers.add(argument.name)
            if argument.buffer.quantized is not None and argument.buffer.quantized.part == "codes":
                coded.add("B")
        for field in argument.fields:
            add(field)

    for argument in arguments:
        add(argument)
    # A __constant__ CUtensorMap of constants: reaches its matrix as a map of the signature does. The constants are
    # checked here, before what they reach is: a mistake in one is named at its own field, not as a matrix missing.
    constant_maps = {constant.tensor_map.tensor for constant in parse_constants(context, node, dotted)
                     if constant.tensor_map is not None}
    for tensor in sorted(mapped - {"A", "B", "C"} - buffers):
        raise context.error(f"a tensor map's tensor {tensor!r} is neither A, B, C nor a buffer of the signature",
                            node, "signature", f"{dotted}.signature",
                            hint="a map over the kernel's own data names a {name: X, type: buffer, ...} entry")
    for matrix in ("A", "B", "C"):
        reached = (matrix in names or matrix in mapped or matrix in arrays or matrix in elsewhere or matrix in coded
                   or matrix in constant_maps)
        if (names.count(matrix) > 1 or not reached) and gram is not None and matrix != "C":
            message, hint = _gram_refusal(gram, matrix, names.count(matrix))
            raise context.error(message, node, "signature", f"{dotted}.signature", hint=hint)
        if names.count(matrix) > 1 or not reached:
            raise context.error(f"signature must take {matrix} exactly once (as a pointer, through tensor maps with "
                                f"tensor: {matrix}, or through an array of pointers to its matrices"
                                + (", or as a quantized B's codes: a buffer with quantized: {of: B, part: codes}"
                                   if matrix == "B" else "") + ")"
                                + (f", or a launch of then: must take it (by name, or as a ptr with value: {matrix})"
                                   if "then" in node else ""), node,
                                "signature", f"{dotted}.signature",
                                hint=None if names.count(matrix) > 1 else
                                f"a kernel that reads {matrix} through a __constant__ CUtensorMap its host code fills "
                                f"is given it in constants: {{name: map_{matrix.lower()}, type: tensormap, tensor: "
                                f"{matrix}, box: [...]}}")
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise context.error(f"signature names {', '.join(duplicates)} more than once", node, "signature",
                            f"{dotted}.signature")
    return mapped


def _gram_refusal(gram: Gram, matrix: str, taken: int) -> tuple[str, str]:
    """The message and hint for a Gram kernel's signature that takes `matrix` (A or B) `taken` times, not once."""
    one, tied = gram.of.upper(), gram.tied.upper()
    if taken > 1 and matrix == one:
        return (f"signature takes {matrix} {taken} times; with gram: {one}, {tied} is {one}'s buffer read transposed",
                f"a kernel given the one buffer as both operands names its second pointer {tied} (it is given "
                f"{one}'s buffer, its ld {one}'s): [A, B, C, M, N, K]")
    if matrix == one:
        other = "B" if one == "A" else "A"
        return (f"gram of {one}: {one} is the one input matrix ({tied} is {one} transposed, read from its buffer), "
                f"so the signature must take {one} (as a pointer, through tensor maps with tensor: {one}, or through "
                f"an array of pointers to its matrices), and it takes none",
                f"name the kernel's input {one} (a pointer {tied} is given the same buffer); a kernel that computes "
                f"{'X X^T' if other == 'A' else 'X^T X'} of an input it names {other} is gram: {other}")
    return (f"signature takes {matrix} {taken} times; with gram: {one}, it may take {matrix} at most once",
            f"{matrix} is {one}'s buffer read transposed, given to any {matrix} pointer")


def parse_following_signature(context: Context, node: dict, dotted: str, scalars: dict[str, float],
                              buffers: frozenset[str], taken: frozenset[str]) -> tuple[Argument, ...]:
    """A following launch's arguments (``then[i].signature``): standard names, typed scalars and pointers (null,
    or to A, B or C), alpha and beta by pointer as the kernel's own signature takes them (``{name: alpha, type:
    ptr}``), and the kernel's own device buffers by their names (`buffers`: a split of K's partial products, summed
    by the launch after; alpha by pointer, once the kernel or an earlier launch takes it so). Its scalars' names
    are apart from the kernel's own (`taken`), since a case holds one value a name."""
    value = following_signature_entries(context, node, dotted)
    path = f"{dotted}.signature"
    arguments: list[Argument] = []
    for index, item in enumerate(value):
        item_path = f"{path}[{index}]"
        if isinstance(item, dict) and item.get("type") == "ptr" and item.get("name") in SCALE_POINTERS:
            name = item["name"]
            if name in buffers:
                raise context.error(f"{name} by pointer is a buffer of the case already (the kernel's): a launch of "
                                    "then: takes it by its name", value, index, item_path, hint=f"write {name}")
            raise context.error(f"{name} by pointer goes in the kernel's own signature, whose scales: give its "
                                "value; a launch of then: takes it by its name", item, "name", f"{item_path}.name",
                                hint=f"put {{name: {name}, type: ptr}} in the kernel's signature and write {name} "
                                     "here")
        if isinstance(item, str) and item in buffers:
            argument = Argument(item, "ptr", None)     # the kernel's buffer, by its name
        elif isinstance(item, str):
            if item not in STANDARD_ARGUMENTS:
                raise context.error(f"unknown argument {item!r}", value, index, item_path,
                                    hint=f"a launch of then: takes standard names, the kernel's own buffers by name "
                                         f"({', '.join(sorted(buffers)) or 'it has none'}) and typed scalars; "
                                         + _LAUNCH_BUFFER_HINT.replace("NAME", item))
            argument = _standard_argument(context, value, index, item, item_path, scalars)
        elif isinstance(item, dict):
            argument = _typed_argument(context, value, index, item, item_path, scalars)
            if argument.name in taken:
                raise context.error(f"{argument.name} is an argument of the kernel or of an earlier launch already: "
                                    "a case holds one value a name", item, "name", f"{item_path}.name",
                                    hint="name this launch's own value otherwise")
            if argument.buffer is not None and argument.name in buffers:
                # alpha or beta by pointer: one device buffer a case, which every launch that takes it shares
                raise context.error(f"{argument.name} by pointer is a buffer of the case already (the kernel's or an "
                                    "earlier launch's): a launch of then: takes it by its name", value, index,
                                    item_path, hint=f"write {argument.name} for that buffer")
            # A pointer named A, B or C is that matrix, and alpha or beta by pointer the case's scalar in a buffer
            # of its own (as in the kernel's own signature): only a scalar written out can say another value.
            if argument.name in STANDARD_ARGUMENTS and argument.ctype != "ptr" and (
                    argument.value is None or argument.value.source.strip() != argument.name):
                raise context.error(f"{argument.name} is the case's own {argument.name}: written out with a type, "
                                    f"its value is {argument.name}", item, "value" if "value" in item else "name",
                                    f"{item_path}.value", hint=f"{{name: {argument.name}, type: {argument.ctype}, "
                                    f"value: {argument.name}}}, or another name for another value")
        else:
            raise context.error(f"an argument is a name or a mapping, got {kind_name(item)}", value, index, item_path)
        _check_constant_fits(context, argument, item if isinstance(item, dict) else value,
                             "value" if isinstance(item, dict) else index, item_path)
        if any(other.name == argument.name for other in arguments):
            raise context.error(f"signature names {argument.name} more than once", value, index, item_path)
        arguments.append(argument)
    return tuple(arguments)


# Where a buffer that only a launch of then: takes is declared: the kernel's own signature holds every buffer of the
# case, and one the kernel itself has no parameter for is passed to it as nothing (pass: none).
_LAUNCH_BUFFER_HINT = ("a buffer only a launch of then: takes is declared in the kernel's own signature with pass: "
                       "none, since the kernel itself does not take it ({name: NAME, type: buffer, element: ..., "
                       "size: ..., pass: none}), and written here by its name")


def following_signature_entries(context: Context, node: dict, dotted: str) -> list:
    """The entries of a launch of then:'s signature (`node` the launch, at `dotted`), refused where they are no list
    or an entry is of a kind only the kernel's own signature takes; read before the kernel's own signature, whose
    check that A, B and C reach a launch would otherwise blame it for what is wrong here."""
    value = node.get("signature")
    path = f"{dotted}.signature"
    if not isinstance(value, list) or not value:
        raise context.error(f"signature is a non-empty list of the function's arguments, got {kind_name(value)}",
                            node, "signature" if "signature" in node else None, path)
    for index, item in enumerate(value):
        if isinstance(item, dict) and item.get("type") in ("tensormap", "struct", "buffer", "pointers"):
            raise context.error(f"a launch of then: takes standard names, typed scalars, pointers and the kernel's "
                                f"own buffers by name, not a {item['type']}", item, "type", f"{path}[{index}].type",
                                hint=_LAUNCH_BUFFER_HINT.replace("NAME", str(item.get("name") or "NAME"))
                                if item["type"] == "buffer" else "declare a buffer in the kernel's own signature and "
                                "name it here")
    return value


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


def _typed_argument(context, parent, index, item: dict, item_path: str, scalars, field: bool = False,
                    scales: dict[str, float | None] | None = None) -> Argument:
    """A typed mapping of a signature; `scales` are the kernel's fp8 per-tensor scales (`declared_scales`), which
    a ``{name: scale_a, type: ptr}`` holds."""
    if item.get("type") == "tensormap":
        return tensor_map_argument(context, parent, index, item, item_path)
    if item.get("type") == "struct":
        return _struct_argument(context, parent, index, item, item_path, scalars, field, scales)
    if item.get("type") == "buffer":
        return buffer_argument(context, parent, index, item, item_path)
    if item.get("type") == "pointers":
        return _pointer_array_argument(context, parent, index, item, item_path)
    if item.get("type") == "ptr" and item.get("name") in ("alpha", "beta"):
        if "value" in item:
            raise context.error(f"{item['name']} by pointer is the spec's scalars.{item['name']} in a device buffer; "
                                "it takes no value", item, "value", f"{item_path}.value",
                                hint=f"set scalars: {{{item['name']}: ...}}; for a pointer the kernel is given as "
                                     "nullptr, name it otherwise")
        return scalar_pointer_argument(context, item, item_path, scalars)
    if item.get("type") == "ptr" and item.get("name") in SCALE_POINTERS:
        if "value" in item:
            operand = SCALE_POINTERS[item["name"]]
            raise context.error(f"{item['name']} by pointer is the kernel's scales.{operand} in a device buffer; it "
                                "takes no value", item, "value", f"{item_path}.value",
                                hint=f"set scales: {{{operand}: ...}}; for a pointer the kernel is given as nullptr, "
                                     "name it otherwise")
        return scale_pointer_argument(context, item, item_path, scales or {})
    ctype = item.get("type")
    if "type" in item and (not isinstance(ctype, str) or ctype not in ARGUMENT_TYPES):
        # before the keys: a misspelt tensormap's tensor and box are no fault of their own
        raise context.error(f"type must be one of {', '.join(ARGUMENT_TYPES)}, got {kind_name(ctype)}",
                            item, "type", f"{item_path}.type")
    check_keys(context, item, ("name", "type", "value"), item_path)
    if "name" not in item or "type" not in item:
        raise context.error("an argument mapping needs name and type", parent, index, item_path)
    name = item["name"]
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise context.error(f"an argument name is a C identifier, got {kind_name(name)}", item, "name",
                            f"{item_path}.name")
    if ctype == "tensormap":
        raise context.error("a tensormap argument is described by tensor, box and swizzle", item, "type",
                            f"{item_path}.type")
    if ctype == "ptr":
        null = "value" in item and (item["value"] is None or item["value"] == 0) and not isinstance(item["value"],
                                                                                                   bool)
        if name in ("A", "B", "C") and not null and "value" not in item:
            return Argument(name, ctype, None)
        if null and name not in ("A", "B", "C"):
            return Argument(name, ctype, None, null=True)
        if item.get("value") in ("A", "B", "C") and name not in ("A", "B", "C"):
            # A second pointer to a matrix: D = alpha * A @ B + beta * C written over C, as cuBLASLt allows.
            return Argument(name, ctype, None, alias=item["value"])
        raise context.error("a ptr argument is A, B or C, alpha or beta by pointer, an fp8 scale by pointer "
                            "(scale_a, scale_b), a null pointer (value: null), or another pointer to a matrix "
                            "(value: C)",
                            item, "value" if "value" in item else "name",
                            f"{item_path}.value" if "value" in item else f"{item_path}.name",
                            hint="a device buffer of another name is {name: workspace, type: buffer, "
                                 "element: int32, size: EXPR, fill: zero}; an optional pointer the kernel is "
                                 "given as nullptr is {name: bias, type: ptr, value: null}; an output D written "
                                 "where C is read is {name: D, type: ptr, value: C}")
    if "value" not in item:
        raise context.error("a scalar argument needs a value", item, None, item_path)
    if isinstance(item["value"], list):
        return _array_argument(context, item, item_path, name, ctype, field)
    value = item["value"]
    if ctype == "bool" and isinstance(value, bool):   # a bool parameter given true or false, as YAML writes them
        value = int(value)
    return Argument(name, ctype, parse_expression(context, item, "value", value, f"{item_path}.value",
                                                  integer=is_integer_type(ctype)))


def _pointer_array_argument(context, parent, index, item: dict, item_path: str) -> Argument:
    """``{name: Aarray, type: pointers, to: A}``: the address of a device array that holds the address of each of
    A's matrices in the batch (``const float* const Aarray[]``, as cuBLAS's batched GEMMs take them), made when the
    case is bound; one address for a kernel without ``batch:``."""
    check_keys(context, item, ("name", "type", "to"), item_path)
    name, matrix = item.get("name"), item.get("to")
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name) or name in ("A", "B", "C"):
        raise context.error(f"an array of pointers is named by a C identifier other than A, B and C, got "
                            f"{kind_name(name)}", item if "name" in item else parent, "name" if "name" in item
                            else index, f"{item_path}.name")
    if matrix not in ("A", "B", "C"):
        raise context.error(f"an array of pointers holds the addresses of A's, B's or C's matrices, got "
                            f"{kind_name(matrix)}", item if "to" in item else parent, "to" if "to" in item else index,
                            f"{item_path}.to", hint="{name: Aarray, type: pointers, to: A}")
    return Argument(name, "ptr", None, pointers_to=matrix)


CONSTANT_KEYS = ("name", "type", "value")
CONSTANT_TYPES = tuple(kind for kind in C_TYPES if kind != "ptr" and not C_TYPES[kind].is_opaque)


def parse_constants(context: Context, node: dict, dotted: str) -> tuple[Argument, ...]:
    """``constants: [{name: table, type: float32, value: [1.0, 0.5]}, {name: lut::scale, type: int32, value: K}]``:
    the kernel's ``__constant__`` variables and what its host code would copy into them (cudaMemcpyToSymbol)
    before launching it, each a typed scalar or, for a list, an array of them; expressions of the shape, the
    params and the scalars, written into the loaded module when the case is bound. A ``type: tensormap`` entry
    (``{name: map_a, type: tensormap, tensor: A, box: [128, 64], swizzle: 128B}``, the keys of a signature's map
    but pass) is a ``__constant__ CUtensorMap`` the case encodes for its own buffers and writes there."""
    if "constants" not in node:
        return ()
    items, path = node["constants"], f"{dotted}.constants"
    if not isinstance(items, list) or not items:
        raise context.error(f"constants is a non-empty list of {{name, type, value}}, got {kind_name(items)}", node,
                            "constants", path, hint="constants: [{name: table, type: float32, value: [1.0, 0.5]}]")
    constants: list[Argument] = []
    for index, item in enumerate(items):
        item_path = f"{path}[{index}]"
        if not isinstance(item, dict):
            raise context.error(f"a constant is a mapping of name, type and value, got {kind_name(item)}", items,
                                index, item_path)
        if item.get("type") == "tensormap":
            constants.append(_constant_map(context, node, dotted, items, index, item, constants))
            continue
        check_keys(context, item, CONSTANT_KEYS, item_path)
        for required in CONSTANT_KEYS:
            if required not in item:
                raise context.error(f"a constant needs {required}", items, index, item_path)
        name, ctype, value = item["name"], item["type"], item["value"]
        if not isinstance(name, str) or not CONSTANT_NAME.fullmatch(name):
            raise context.error(f"a constant is named as its source names the __constant__ variable (table, "
                                f"lut::table), got {kind_name(name)}", item, "name", f"{item_path}.name")
        if any(constant.name == name for constant in constants):
            raise context.error(f"constant {name} is given twice", item, "name", f"{item_path}.name")
        if ctype not in CONSTANT_TYPES:
            raise context.error(f"a constant's type is one of {', '.join(CONSTANT_TYPES)} or tensormap, got "
                                f"{kind_name(ctype)}", item, "type", f"{item_path}.type")
        if isinstance(value, list):
            if not value or len(value) > MAX_ARRAY_ELEMENTS:
                raise context.error(f"an array constant has 1 to {MAX_ARRAY_ELEMENTS} elements, got {len(value)}",
                                    item, "value", f"{item_path}.value")
            elements = tuple(parse_expression(context, value, position, element, f"{item_path}.value[{position}]",
                                              integer=is_integer_type(ctype))
                             for position, element in enumerate(value))
            argument = Argument(name, ctype, None, array=elements)
        else:
            argument = Argument(name, ctype, parse_expression(context, item, "value", value, f"{item_path}.value",
                                                              integer=is_integer_type(ctype)))
        _check_constant_fits(context, argument, item, "value", f"{item_path}.value")
        constants.append(argument)
    return tuple(constants)


def _constant_map(context: Context, node: dict, dotted: str, items: list, index: int, item: dict,
                  earlier: list[Argument]) -> Argument:
    """A ``__constant__ CUtensorMap`` of ``constants:`` (`launch_fields.tensor_map_argument`), its name apart from
    the other constants' and from every name of the signature, struct fields (of structs) included, since the case
    knows its tensor maps by their names alone."""
    item_path = f"{dotted}.constants[{index}]"
    argument = tensor_map_argument(context, items, index, item, item_path, constant=True)
    taken = _signature_names(context, node.get("signature"), f"{dotted}.signature")
    taken.update((constant.name, (f"{dotted}.constants[{position}]", context.where(items, position)))
                 for position, constant in enumerate(earlier) if constant.name not in taken)
    if argument.name in taken:
        other, where = taken[argument.name]
        raise context.error(f"constant {argument.name} is also the name of {other} ({where}): the case knows its "
                            "tensor maps by their names, so one would be encoded as the other", item, "name",
                            f"{item_path}.name",
                            hint="name each once: a constant as its source names the __constant__ variable")
    return argument


def _signature_names(context: Context, entries: Any, path: str) -> dict[str, tuple[str, str]]:
    """Each name of the signature written as `entries` (at `path`), struct fields of any depth included, with the
    field path and ``file:line`` of its first entry."""
    names: dict[str, tuple[str, str]] = {}
    for position, entry in enumerate(entries if isinstance(entries, list) else ()):
        entry_path = f"{path}[{position}]"
        name = entry if isinstance(entry, str) else entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name not in names:
            names[name] = (entry_path, context.where(entries, position))
        if isinstance(entry, dict):
            for field, place in _signature_names(context, entry.get("fields"), f"{entry_path}.fields").items():
                names.setdefault(field, place)
    return names


def _array_argument(context, item: dict, item_path: str, name: str, ctype: str, field: bool) -> Argument:
    """``{name: stride, type: int64, value: [K, 1, M * K]}``: a struct's fixed array (``int64_t stride[3]``),
    one expression per element."""
    values = item["value"]
    if not field:
        raise context.error("an array is a struct's field (a C array parameter is a pointer)", item, "value",
                            f"{item_path}.value", hint="put it in a {type: struct, fields: [...]}")
    if not values or len(values) > MAX_ARRAY_ELEMENTS:
        raise context.error(f"an array has 1 to {MAX_ARRAY_ELEMENTS} elements, got {len(values)}", item, "value",
                            f"{item_path}.value")
    elements = tuple(parse_expression(context, values, position, value, f"{item_path}.value[{position}]",
                                      integer=is_integer_type(ctype))
                     for position, value in enumerate(values))
    return Argument(name, ctype, None, array=elements)


def _struct_argument(context, parent, index, item: dict, item_path: str, scalars, field: bool = False,
                     scales: dict[str, float | None] | None = None) -> Argument:
    """``{name: args, type: struct, fields: [A, B, C, M, N, K, {name: lda, type: int64, value: K}]}``: a struct
    passed by value, its fields in declaration order (standard names, typed scalars and pointers, device
    buffers, fixed arrays and structs); with ``builder: FILE.py:FUNCTION``, a parameter whose bytes that
    function makes from the fields' values."""
    check_keys(context, item, ("name", "type", "fields", "builder"), item_path)
    builder = _host_builder(context, item, f"{item_path}.builder", field) if "builder" in item else None
    name, fields = item.get("name"), item.get("fields")
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise context.error(f"an argument name is a C identifier, got {kind_name(name)}", item, "name" if "name" in item
                            else None, f"{item_path}.name")
    if not isinstance(fields, list) or not fields:
        # An empty C++ class (a CuTe tiler or layout of static extents) is passed as one byte whatever it holds:
        # a uint8 says those bytes, where a struct of no fields would say none.
        empty = isinstance(fields, list)
        raise context.error(f"a struct argument lists its fields in order, got {kind_name(fields)}", item,
                            "fields" if "fields" in item else None, f"{item_path}.fields",
                            hint=f"an empty C++ object is one byte: {{name: {name}, type: uint8, value: 0}}" if empty
                            else "fields: [A, B, C, M, N, K, alpha], each as in signature:")
    parsed = tuple(_argument_at(context, fields, position, f"{item_path}.fields[{position}]", scalars, field=True,
                                scales=scales) for position in range(len(fields)))
    return Argument(name, "struct", None, fields=parsed, builder=builder)


def _host_builder(context: Context, item: dict, field_path: str, field: bool) -> HostBuilder:
    """``builder: params.py:build``: the function ``build`` of ``params.py`` (relative to the spec, inside its
    project), which is given the struct's field values by name and returns the parameter's bytes. Only a
    parameter has one: a struct inside a struct is laid out with it."""
    if field:
        raise context.error("a builder makes a whole parameter's bytes; a struct inside a struct is laid out by its "
                            "fields", item, "builder", field_path,
                            hint="put the builder on the outer struct: it is given every field's value by name")
    return host_builder(context, item, "builder", field_path,
                        "builder: params.py:build, with def build(values) -> bytes in params.py beside the spec")


def _argument_at(context: Context, parent: list, index: int, item_path: str, scalars: dict[str, float],
                 field: bool = False, scales: dict[str, float | None] | None = None) -> Argument:
    """The argument (a standard name or a typed mapping) at ``parent[index]``, its constant checked to fit its type.

    A struct's `field` is anything but a tensor map; an array (a list
    ``value:``) is only a field.
    """
    item = parent[index]
    if not isinstance(item, (str, dict)):
        raise context.error(f"{'a field' if field else 'an argument'} is a name or a mapping, got {kind_name(item)}",
                            parent, index, item_path)
    if field and isinstance(item, dict) and item.get("type") == "buffer" and item.get("pass") == "none":
        raise context.error("a struct's buffer field is a pointer in the struct's bytes; pass: none is for a buffer "
                            "of the signature itself", item, "pass", f"{item_path}.pass")
    if field and isinstance(item, dict) and item.get("type") == "tensormap" and item.get("pass") == "pointer":
        raise context.error("a tensor map inside a struct is held by value (the struct's bytes hold its 128); a "
                            "const CUtensorMap* field is not supported", item, "pass", f"{item_path}.pass")
    if field and isinstance(item, dict) and item.get("type") == "tensormap" and item.get("count") is not None:
        # count's array of maps is copied to a device buffer of its own, whose address is a parameter; a struct's
        # bytes hold one map by value and no pointer to such an array
        raise context.error("count makes an array of maps, one per matrix, which the kernel takes as a parameter "
                            "of its own (a const CUtensorMap*) or reads from a __constant__ array; a tensor map "
                            "inside a struct is one map, held by value", item, "count", f"{item_path}.count",
                            hint="leave count out for one map, or move the map out of the struct: into signature: "
                                 "with pass: pointer and count, or into constants: with count")
    if isinstance(item, str):
        argument = _standard_argument(context, parent, index, item, item_path, scalars)
        _check_constant_fits(context, argument, parent, index, item_path)
    else:
        argument = _typed_argument(context, parent, index, item, item_path, scalars, field, scales)
        _check_constant_fits(context, argument, item, "value", f"{item_path}.value")
    return argument
