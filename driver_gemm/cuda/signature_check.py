"""Check a spec's ``signature:`` against the parameters the compiled kernel really takes.

Taken on trust, a signature of five names for six parameters would launch with garbage in the
sixth. The image gives each parameter's size (`cubin.KernelImage`) and a mangled name their types
(`mangling.demangle`); both are compared with the signature's C types before any launch. On a GPU,
`param_slots_from_function` cross-checks with the driver (``cuFuncGetParamInfo``, driver 12.4+).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..argtypes import C_TYPES, TENSOR_MAP_ALIGNMENTS, struct_layout
from ..errors import SpecError
from ..gemm.dtypes import ELEMENT_TYPES
from .check import check
from .cubin import KernelImage, ParamSlot
from .mangling import BUILTIN_TYPES, ParamType, demangle
from .tensormap import POINTER_BYTES, TENSOR_MAP_BYTES


# A pointee that names a floating element type (or a vector of it) -> the spec types whose elements it holds. Only
# these are judged: kernels also read operands as raw bytes or words (uint8_t*, uint16_t*, void*), which say nothing.
# The element types a typed kernel's A, B and C may have, as types: names them.
TYPED_OPERAND_TYPES = tuple(name for name in ELEMENT_TYPES if name != "int32")
ELEMENT_POINTEES = {
    **{name: (element.name,) for element in ELEMENT_TYPES.values() if element.float_format is not None
       for name in (element.cuda_type, element.kernel_type)},
    "half": ("fp16",), "__half2": ("fp16",), "nv_bfloat16": ("bf16",), "__nv_bfloat162": ("bf16",),
    "float": ("fp32", "tf32"), "double": (),
}
# float2 and float4, like int4 and uint4, are not judged: kernels read 8 or 16 bytes of any element type through
# them (eight halves in one float4 load).
# A device buffer's element type for each 16-bit float pointee, as an image's symbol spells it (half and nv_bfloat16
# are typedefs, mangled as the type they name, kept for a symbol written by hand): fp16, bf16, int16 and uint16 are
# all 2 bytes, so only the type tells a bf16 scale read as __half apart. Their vectors (__half2, half2) are not
# judged, as float4 is not: kernels load pairs of any 2-byte element through them.
HALF_POINTEES = {
    **{name: "float16" for name in ("__half", "half", ELEMENT_TYPES["fp16"].kernel_type)},
    **{name: "bfloat16" for name in ("__nv_bfloat16", "nv_bfloat16", ELEMENT_TYPES["bf16"].kernel_type)},
}


def _expected_kind(ctype: str) -> str:
    if ctype == "ptr":
        return "pointer"
    return "float" if C_TYPES[ctype].is_float else "int"


def check_signature(image_params: Sequence[ParamSlot | tuple[int, int, int]],
                    image_types: Sequence[ParamType] | None, spec_signature: Sequence,
                    operand_types: Mapping[str, str] | None = None, *,
                    output_written_elsewhere: bool = False) -> list[str]:
    """The ways `spec_signature` disagrees with the kernel's parameters; empty when they agree.

    `image_params` are the kernel's (ordinal, offset, size) slots, from the
    CUBIN or the driver; `image_types` the demangled parameter types of a C++
    kernel (None for an ``extern "C"`` one); `spec_signature` the spec's
    `Argument` tuple. Reports a count mismatch, and per position a size
    mismatch (8-byte pointer against a 4-byte int32, int64 against int32,
    float64 against float32) or a type mismatch (pointer against integer,
    float against integer of the same size). With `operand_types` (the spec's element type of A, B and C by
    name), a pointer to a floating element type other than its operand's (``const __half*`` for a bf16 A). C
    passed only to pointers to const is a problem unless `output_written_elsewhere`: another launch of the case
    writes C (`writes_output`), so that this one only reads it (row statistics, an amax after the GEMM).
    """
    slots = sorted((ParamSlot(*slot) for slot in image_params), key=lambda slot: slot.ordinal)
    types = list(image_types) if image_types is not None and len(image_types) == len(slots) else None
    problems = []
    if len(slots) != len(spec_signature):
        names = ", ".join(argument.name for argument in spec_signature)
        described = ", ".join(_describe(slot, types[i] if types else None) for i, slot in enumerate(slots))
        problems.append(f"the kernel takes {len(slots)} parameter{'s' if len(slots) != 1 else ''} ({described}), "
                        f"the signature names {len(spec_signature)}: {names}")
    for position, (slot, argument) in enumerate(zip(slots, spec_signature)):
        kernel_type = types[position] if types else None
        where = f"parameter {position + 1} ({argument.name}, {argument.ctype})"
        kernel_text = f" ({kernel_type.text})" if kernel_type else ""
        if argument.builder is not None:   # its bytes are the builder's: their size is checked when it is called
            continue
        if argument.fields:   # a struct by value: its size as the C compiler lays out its fields
            size = argument.layout_for(slot.size).size
            if slot.size != size:
                maps = (f" with a CUtensorMap aligned to {TENSOR_MAP_ALIGNMENTS[0]} bytes as CUDA 13's <cuda.h> "
                        f"declares it ({TENSOR_MAP_ALIGNMENTS[1]} under CUDA 12's makes "
                        f"{argument.layout(TENSOR_MAP_ALIGNMENTS[1]).size})") if argument.holds_tensor_map() else ""
                problems.append(f"{where}: the kernel's parameter{kernel_text} is {_bytes(slot.size)}, the struct's "
                                f"fields ({describe_fields(argument)}) make {size}{maps}")
            elif kernel_type is not None and kernel_type.kind in ("pointer", "int", "float"):
                problems.append(f"{where}: the kernel's parameter is {kernel_type.text}, not a struct")
            continue
        if argument.tensor_map is not None:
            problems.extend(_tensor_map_problems(argument, slot, kernel_type, where, kernel_text))
            continue
        ctype = C_TYPES.get(argument.ctype)
        if ctype is None:
            continue
        if slot.size != ctype.size:
            written = spec_type_of(kernel_type) if kernel_type is not None else None
            problems.append(f"{where}: the kernel's parameter{kernel_text} is {_bytes(slot.size)}, "
                            f"{argument.ctype} is {ctype.size}" + (f" (write type: {written})" if written else ""))
            continue
        if kernel_type is not None and kernel_type.kind in ("pointer", "int", "float"):
            expected = _expected_kind(argument.ctype)
            if kernel_type.kind != expected:
                problems.append(f"{where}: the kernel's parameter is {kernel_type.text} ({kernel_type.kind}), "
                                f"the signature says {expected}")
            elif pointee_of(kernel_type) in ("CUtensorMap", "CUtensorMap_st"):
                problems.append(f"{where}: the kernel's parameter is {kernel_type.text}, a tensor map by pointer, "
                                f"not the matrix: describe it as {{name: ..., type: tensormap, tensor: ..., box: "
                                "[...], pass: pointer}")
            elif argument.buffer is not None:
                problems.extend(_element_problems(where, kernel_type, argument.buffer.element))
            elif argument.pointers_to is not None:
                problems.extend(_pointer_array_problems(where, kernel_type, argument.pointers_to, operand_types))
            elif operand_types and (argument.alias or argument.name) in operand_types:
                matrix = argument.alias or argument.name   # D passed where C is: C's element type
                problems.extend(_operand_problems(where, kernel_type, argument.name, operand_types[matrix]))
    if types is not None and len(slots) == len(spec_signature) and not output_written_elsewhere:
        problems.extend(_output_only_read(types, spec_signature))
    return problems


def writes_output(image_types: Sequence[ParamType] | None, spec_signature: Sequence) -> bool | None:
    """Whether a launch may write C through its parameters, as its types say: False where C reaches it only as
    pointers to const (``const float*``), which it declares it does not write through; True where C reaches a pointer
    to what may be written, or a tensor map, a struct's field or a builder's bytes (a TMA store, a parameter block:
    whether they are written is not read here); None where C does not reach it, or its types are unknown (an
    ``extern "C"`` kernel's symbol, or a count that differs from the signature's: a problem of its own)."""
    if image_types is None or len(image_types) != len(spec_signature):
        return None
    reaching = _output_reach(image_types, spec_signature)
    if reaching is None:
        return True
    if not reaching:
        return None
    return not all(points_to_const(kernel_type) for _, _, kernel_type in reaching)


def _output_reach(types: Sequence[ParamType], spec_signature: Sequence) -> list[tuple[int, Any, ParamType]] | None:
    """The (position, argument, kernel type) of each plain pointer that takes C; None where C (or what cannot be
    read: a builder's bytes) reaches the kernel through a tensor map or a struct's field."""
    def mentions_c(argument) -> bool:
        if argument.tensor_map is not None:
            return argument.tensor_map.tensor == "C"
        return argument.pointers_to == "C" or any(mentions_c(field) for field in argument.fields)

    reaching = []
    for position, argument in enumerate(spec_signature):
        if argument.builder is not None or argument.fields or argument.tensor_map is not None or \
                argument.pointers_to is not None:
            if argument.builder is not None or mentions_c(argument):
                return None
            continue
        if argument.ctype == "ptr" and (argument.alias or argument.name) == "C":
            reaching.append((position, argument, types[position]))
    return reaching


def _output_only_read(types: Sequence[ParamType], spec_signature: Sequence) -> list[str]:
    """C, the output, passed only to parameters that point to const (``const float*``): the kernel declares that it
    does not write through them, so C = [A, B, C] given to ``(const float* A, const float* B, float* C)`` in
    another order would leave C unwritten and write A. Only where C reaches the kernel as plain pointers: through a
    tensor map or a struct's field (a TMA store, a parameter block), whether it is written is not read here."""
    reaching = _output_reach(types, spec_signature)
    if not reaching or not all(points_to_const(kernel_type) for _, _, kernel_type in reaching):
        return []
    writable = [f"parameter {position + 1} ({kernel_type.text})" for position, kernel_type in enumerate(types)
                if kernel_type.kind == "pointer" and not points_to_const(kernel_type)]
    passed = "; ".join(f"parameter {position + 1} ({argument.name}) is {kernel_type.text}"
                       for position, argument, kernel_type in reaching)
    return [f"C, the output, is passed only to parameters that point to const, which the kernel does not write "
            f"through ({passed})" + (f"; the kernel writes through {', '.join(writable[:3])}: check the signature's "
                                     "order" if writable else "")]


def points_to_const(kernel_type: ParamType) -> bool:
    """``const float*`` or ``float const* __restrict__``: a pointer whose pointee is const (``float* const`` is a
    const pointer to what may be written)."""
    text = kernel_type.text
    return kernel_type.kind == "pointer" and text.count("*") == 1 and "const" in text[:text.index("*")]


# A kernel's scalar parameter types, as the image's symbol spells them, with the signature's type for each.
_SPEC_TYPES = {
    "bool": "bool", "char": "int8", "signed char": "int8", "unsigned char": "uint8", "short": "int16",
    "unsigned short": "uint16", "int": "int32", "unsigned int": "uint32", "long": "int64", "unsigned long": "uint64",
    "long long": "int64", "unsigned long long": "uint64", "float": "float32", "double": "float64",
    "half": "float16", "__half": "float16", "__nv_bfloat16": "bfloat16", "std::bfloat16_t": "bfloat16",
}


def spec_type_of(kernel_type: ParamType) -> str | None:
    """The signature's type for a scalar parameter of the kernel (``float16`` for ``__half``, ``uint64`` for
    ``size_t``); None for a pointer, a struct or a type with no scalar of its own."""
    text = " ".join(kernel_type.text.replace("const", " ").replace("volatile", " ").split())
    return _SPEC_TYPES.get(text)


def pointee_of(kernel_type: ParamType) -> str | None:
    """What a single-level pointer parameter points to, without qualifiers (None for anything else)."""
    text = kernel_type.text
    for qualifier in ("__restrict__", "const", "volatile"):
        text = text.replace(qualifier, "")
    return " ".join(text.replace("*", "").split()) if text.count("*") == 1 else None


def _operand_problems(where: str, kernel_type: ParamType, name: str, element: str) -> list[str]:
    """A matrix's pointer against the spec's element type for it: a kernel instantiated for fp16 and described as
    bf16 would read every element wrong, and only a FAIL (not its cause) would show it."""
    pointee = pointee_of(kernel_type) or ""
    if element == "int8" and pointee == "unsigned char":
        # Raw bytes are not judged (fp8 is read through uint8_t*), but int8 through unsigned char is a certain
        # misreading: every negative input would be read as 128 or more.
        return [f"{where}: the kernel's parameter is {kernel_type.text}, unsigned, and types: makes {name} int8, "
                "which is signed: every negative element would be read as 128 or more (give types: "
                f"{{{name.lower()}: uint8}} for unsigned 8-bit inputs)"]
    if element == "uint8" and pointee == "signed char":
        return [f"{where}: the kernel's parameter is {kernel_type.text}, signed, and types: makes {name} uint8: "
                f"every element of 128 or more would be read as negative (give types: {{{name.lower()}: int8}})"]
    holds = ELEMENT_POINTEES.get(pointee)
    if holds is None or element in holds:
        return []
    if not holds:       # double: no type of types: is read through it
        return [f"{where}: the kernel's parameter is {kernel_type.text}, and types: makes {name} {element}; "
                f"driver-gemm's typed operands ({', '.join(TYPED_OPERAND_TYPES)}) include no {pointee}, so a "
                f"kernel reading {pointee} operands cannot be checked (instantiate it for one of those types)"]
    return [f"{where}: the kernel's parameter is {kernel_type.text}, and types: makes {name} {element} (instantiate "
            f"the kernel for {element}, or give types: what it reads)"]


def _pointer_array_problems(where: str, kernel_type: ParamType, matrix: str,
                            operand_types: Mapping[str, str] | None) -> list[str]:
    """An array of pointers to `matrix`'s batch against the kernel's parameter: a pointer to pointers
    (``const float* const*``, ``float**``), whose pointee is checked as a pointer to the matrix would be."""
    text = kernel_type.text
    if text.count("*") < 2:
        if _holds_addresses(kernel_type):
            return []
        return [f"{where}: the kernel's parameter is {text}, a pointer to the data; type: pointers passes an array of "
                f"pointers to {matrix}'s matrices (T** or const T* const*, or addresses as const int64_t* or void*): "
                f"give {matrix} itself where the kernel takes the data"]
    if not operand_types or matrix not in operand_types:
        return []
    inner = ParamType("pointer", 8, text[:text.rindex("*")].removesuffix("const").strip())
    return _operand_problems(where, inner, matrix, operand_types[matrix])


def _holds_addresses(kernel_type: ParamType) -> bool:
    """A pointer to raw 8-byte words or to void (``const int64_t*``, ``uint64_t*``, ``void*``): an array of addresses
    as flashinfer's and Triton's host code pass one (an int64 tensor of data pointers), or as CUTLASS's arguments
    take one (``void*``), cast to the element's pointer in the kernel. Their element type says nothing about the
    matrix, so it is not judged."""
    pointee = pointee_of(kernel_type)
    if pointee == "void":
        return True
    kind, size = BUILTIN_TYPES.get(pointee or "", (None, None))
    return kind == "int" and size == POINTER_BYTES


def _element_problems(where: str, kernel_type: ParamType, element: str) -> list[str]:
    """A device buffer's element against what the kernel's pointer points to (``int*`` holds int32), where
    the pointee is a builtin type or a 16-bit float (``__half``, ``__nv_bfloat16``): a buffer of int64 read as int
    would be read wrong from its second element, an fp16 buffer read as bf16 wrong from its first."""
    pointee = pointee_of(kernel_type)
    if pointee is None:
        return []
    holds = HALF_POINTEES.get(pointee)
    if holds is not None:
        if element == holds:
            return []
        return [f"{where}: the kernel's parameter is {kernel_type.text}, {holds} values, and the buffer's "
                f"element is {element} (write element: {holds})"]
    kind, size = BUILTIN_TYPES.get(pointee, (None, None))
    if kind not in ("int", "float"):
        return []
    ctype = C_TYPES[element]
    if size != ctype.size or (kind == "float") != ctype.is_float:
        return [f"{where}: the kernel's parameter is {kernel_type.text}, {size}-byte {kind}s, and the buffer's "
                f"element is {element}"]
    return []


def describe_fields(argument) -> str:
    """A struct argument's fields as C would declare them, with each one's offset and size:
    ``M: int32 @0 (4), stride: int64[3] @8 (24), epilogue: struct @32 (24)``."""
    layout, offsets = struct_layout([field.layout() for field in argument.fields])
    parts = []
    for field, offset in zip(argument.fields, offsets):
        kind = "struct" if field.fields else f"{field.buffer.element}*" if field.buffer else \
            f"{field.ctype}[{len(field.array)}]" if field.array else field.ctype
        parts.append(f"{field.name}: {kind} @{offset} ({field.layout().size})")
    return ", ".join(parts)


def _tensor_map_problems(argument, slot: ParamSlot, kernel_type: ParamType | None, where: str,
                         kernel_text: str) -> list[str]:
    """A tensor map reaches the kernel as its 128 bytes (by value) or as an 8-byte pointer to a copy."""
    passing = argument.tensor_map.passing
    pointer = kernel_type is not None and kernel_type.kind == "pointer"
    if passing == "pointer" and (slot.size != POINTER_BYTES or kernel_type is not None and not pointer):
        return [f"{where}: pass: pointer, but the kernel's parameter{kernel_text} is {_bytes(slot.size)}, "
                "not a pointer"]
    if passing == "value" and (slot.size != TENSOR_MAP_BYTES or pointer):
        return [f"{where}: pass: value needs a {TENSOR_MAP_BYTES}-byte parameter, the kernel's{kernel_text} is "
                f"{_bytes(slot.size)}" + (" (a pointer: write pass: pointer, or leave pass out)" if pointer else "")]
    if passing is None and slot.size not in (TENSOR_MAP_BYTES, POINTER_BYTES):
        return [f"{where}: the kernel's parameter{kernel_text} is {_bytes(slot.size)}; a tensor map is passed as "
                f"{TENSOR_MAP_BYTES} bytes by value or as an {POINTER_BYTES}-byte const CUtensorMap*"]
    if passing is None and slot.size == POINTER_BYTES and kernel_type is not None and not pointer:
        return [f"{where}: the kernel's parameter is {kernel_type.text} ({kernel_type.kind}), neither a tensor "
                "map nor a pointer to one"]
    return []


def _describe(slot: ParamSlot, kind: ParamType | None) -> str:
    return f"{kind.text}" if kind else _bytes(slot.size)


def _bytes(size: int) -> str:
    """``1 byte``, ``4 bytes``: a bool or char parameter is one byte."""
    return f"{size} byte" if size == 1 else f"{size} bytes"


def launch_writes_output(image: KernelImage, spec_signature: Sequence) -> bool | None:
    """`writes_output` for the function `image` holds, with the types its (mangled) symbol gives."""
    demangled = demangle(image.name)
    return writes_output(demangled.params if demangled else None, spec_signature)


def check_kernel_signature(kernel, image: KernelImage, *, output_written_elsewhere: bool = False) -> None:
    """Raise `SpecError` at the spec's ``signature:`` line when `image` disagrees with `kernel.signature`.

    `kernel` is a `specfile.model.KernelSpec` (or a launch of its ``then:``
    described as one); the demangled types of `image.name` are used when it
    is a C++ (mangled) symbol. `output_written_elsewhere`: another launch of
    the case writes C (`launch_writes_output`), so C passed only to pointers
    to const here is read, not lost: the case's sequence is judged as a whole.
    """
    demangled = demangle(image.name)
    problems = check_signature(image.params, demangled.params if demangled else None, kernel.signature,
                               _operand_types(kernel), output_written_elsewhere=output_written_elsewhere)
    if problems:
        field = f"{kernel.field_path}.signature" if kernel.field_path else "signature"
        shown = f"{image.name} ({demangled.name})" if demangled else image.name
        takes = (f"it takes ({', '.join(p.text for p in demangled.params)})" if demangled
                 else f"its parameters are {', '.join(f'{slot.size}' for slot in image.params)} bytes")
        # The cause and what the kernel takes on the first line; each disagreement on a line of its own after.
        raise SpecError(f"the signature does not match the kernel's parameters: {takes}\n"
                        + "\n".join(f"  {problem}" for problem in problems) + f"\n  (kernel {shown})",
                        where=kernel.where_field("signature"), field=field,
                        hint="list one argument per kernel parameter, in order, with its exact C type; "
                             "a standard name of another type is written {name: M, type: uint64, value: M} "
                             "(size_t M); a struct by value is {name: args, type: struct, fields: [M, N, K, A, ...]}; "
                             "a device buffer (int* workspace) is {name: workspace, type: buffer, element: int32, "
                             "size: EXPR}; alpha by pointer is {name: alpha, type: ptr}")


def _operand_types(kernel) -> dict[str, str]:
    """The element type of A, B and C by name: the spec's ``types:``, or fp32 for an untyped (SGEMM) kernel."""
    types = kernel.operands.types if kernel.operands is not None else None
    if types is None:
        return {"A": "fp32", "B": "fp32", "C": "fp32"}
    return {"A": types.a.name, "B": types.b.name, "C": types.c.name}


def param_slots_from_function(function, count: int) -> tuple[ParamSlot, ...]:
    """The layout of the first `count` parameters of a loaded `CUfunction` as the driver reports it
    (``cuFuncGetParamInfo``).

    `count` comes from the compiled image: asking past the last parameter is
    an API error, which compute-sanitizer would report against the case.
    Needs a GPU and a current context; the offsets and sizes are the
    device-side layout, the same as the CUBIN's ``EIATTR_KPARAM_INFO``.
    """
    # cuda.bindings: heavy, only when the driver is asked
    from cuda.bindings import driver

    slots = []
    for index in range(count):
        offset, size = check(driver.cuFuncGetParamInfo(function, index), f"cuFuncGetParamInfo(index {index})")
        slots.append(ParamSlot(index, int(offset), int(size)))
    return tuple(slots)
