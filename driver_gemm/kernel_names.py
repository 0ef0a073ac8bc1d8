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
