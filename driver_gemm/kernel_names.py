"""How a spec names a kernel function: a name, a template-id, or one overload picked by its parameter types.

``function: gemm(const float*, const float*, float*, int)`` is asked of NVRTC as
``static_cast<void(*)(const float*, const float*, float*, int)>(gemm)`` and matched in a CUBIN by
its demangled parameter types (`cuda.mangling.find_symbol`). Imports nothing from the rest of
driver-gemm, so that any layer may use it.
"""

from __future__ import annotations

import re
from typing import Iterable

# An overloaded kernel is asked for with its parameter types: as the spec writes it, ``gemm(const float*, int)``,
# or as the name expression NVRTC compiles, ``static_cast<void(*)(const float*, int)>(gemm)``.
_OVERLOAD_CAST = re.compile(r"static_cast<void\(\*\)\((?P<params>.*)\)>\((?P<name>.*)\)", re.DOTALL)
_OVERLOAD_CALL = re.compile(r"(?P<name>[^()]*?)\s*\((?P<params>.*)\)", re.DOTALL)


def split_overload(function: str) -> tuple[str, tuple[str, ...] | None]:
    """(name, parameter types) of ``gemm(const float*, int)`` or its ``static_cast`` form; (function, None)
    for a name without a parameter list."""
    text = function.strip()
    match = _OVERLOAD_CAST.fullmatch(text) or _OVERLOAD_CALL.fullmatch(text)
    if not match:
        return text, None
    return match.group("name").strip(), split_parameter_types(match.group("params"))


def split_parameter_types(text: str) -> tuple[str, ...]:
    """``const float*, Pair<int, int>, int`` as its top-level items; ``()`` for ``void`` or nothing."""
    items, depth, current = [], 0, ""
    for char in text:
        depth += char in "<(["
        depth -= char in ">)]"
        if char == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        items.append(current.strip())
    return () if items in ([], ["void"]) else tuple(items)


def overload_expression(name: str, parameter_types: Iterable[str]) -> str:
    """The name expression that picks one overload of `name` (a name or template-id) by its parameter types."""
    return f"static_cast<void(*)({', '.join(parameter_types)})>({name})"


def mangled_base_name(symbol: str) -> str | None:
    """The unqualified name of a function a mangled symbol names (``_ZN2ns4gemmIfEEvPT_`` -> ``gemm``), read
    from its length-prefixed source names; None for no ``_Z`` symbol or one this does not read (a name of
    a special kind: an operator, a constructor, a local or anonymous entity)."""
    match = re.match(r"_ZL?(N(?:[rVK])*)?", symbol)
    if not match:
        return None
    position, name = match.end(), None
    while True:
        digits = re.match(r"\d+", symbol[position:])
        if not digits:
            break
        start = position + len(digits.group())
        name = symbol[start:start + int(digits.group())]
        position = start + len(name)
        if not match.group(1):      # an unnested name: one source name, then its template args or parameters
            break
        if symbol[position:position + 1] == "I":    # a template's arguments inside the nest end this scan
            break
    return name if name and re.fullmatch(r"[A-Za-z_]\w*", name, re.ASCII) else None


def is_mangled(function: str) -> bool:
    """True for a mangled symbol (``_Z1kILi128EEvPKfS1_Pfiii``): a kernel named as it is in the image, not by a
    C++ expression."""
    return re.fullmatch(r"_Z\w+", function.strip(), re.ASCII) is not None
