"""Check a spec's ``signature:`` against the parameters the compiled kernel really takes.

Taken on trust, a signature of five names for six parameters would launch with garbage in the
sixth. The image gives each parameter's size (`cubin.KernelImage`) and a mangled name their types
(`mangling.demangle`); both are compared with the signature's C types before any launch. On a GPU,
`param_slots_from_function` cross-checks with the driver (``cuFuncGetParamInfo``, driver 12.4+).
"""

from __future__ import annotations

from typing import Sequence

from ..argtypes import C_TYPES, struct_type
from ..errors import SpecError
from .check import check
from .cubin import KernelImage, ParamSlot
from .mangling import ParamType, demangle


def _expected_kind(ctype: str) -> str:
    if ctype == "ptr":
        return "pointer"
    return "float" if C_TYPES[ctype].is_float else "int"


def check_signature(image_params: Sequence[ParamSlot | tuple[int, int, int]],
                    image_types: Sequence[ParamType] | None, spec_signature: Sequence) -> list[str]:
    """The ways `spec_signature` disagrees with the kernel's parameters; empty when they agree.

    `image_params` are the kernel's (ordinal, offset, size) slots, from the
    CUBIN or the driver; `image_types` the demangled parameter types of a C++
    kernel (None for an ``extern "C"`` one); `spec_signature` the spec's
    `Argument` tuple. Reports a count mismatch, and per position a size
    mismatch (8-byte pointer against a 4-byte int32, int64 against int32,
    float64 against float32) or a type mismatch (pointer against integer,
    float against integer of the same size).
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
        if argument.fields:   # a struct by value: its size as the C ABI lays out its fields
            size = struct_type([field.ctype for field in argument.fields])[0].size
            if slot.size != size:
                problems.append(f"{where}: the kernel's parameter{kernel_text} is {slot.size} bytes, the struct's "
                                f"fields ({', '.join(f'{f.name}: {f.ctype}' for f in argument.fields)}) make "
                                f"{size}")
            elif kernel_type is not None and kernel_type.kind in ("pointer", "int", "float"):
                problems.append(f"{where}: the kernel's parameter is {kernel_type.text}, not a struct")
            continue
        ctype = C_TYPES.get(argument.ctype)
        if ctype is None:
            continue
        if slot.size != ctype.size:
            problems.append(f"{where}: the kernel's parameter{kernel_text} is {slot.size} bytes, "
                            f"{argument.ctype} is {ctype.size}")
            continue
        if kernel_type is not None and kernel_type.kind in ("pointer", "int", "float"):
            expected = _expected_kind(argument.ctype)
            if kernel_type.kind != expected:
                problems.append(f"{where}: the kernel's parameter is {kernel_type.text} ({kernel_type.kind}), "
                                f"the signature says {expected}")
    return problems


def _describe(slot: ParamSlot, kind: ParamType | None) -> str:
    return f"{kind.text}" if kind else f"{slot.size} bytes"


def check_kernel_signature(kernel, image: KernelImage) -> None:
    """Raise `SpecError` at the spec's ``signature:`` line when `image` disagrees with `kernel.signature`.

    `kernel` is a `specfile.model.KernelSpec`; the demangled types of `image.name`
    are used when it is a C++ (mangled) symbol.
    """
    demangled = demangle(image.name)
    problems = check_signature(image.params, demangled.params if demangled else None, kernel.signature)
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
                             "(size_t M); a struct by value is {name: args, type: struct, fields: [M, N, K, A, ...]}")


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
