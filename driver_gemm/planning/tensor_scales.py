"""fp8's per-tensor scales (a kernel's ``scales: {a, b}``): how each reaches the kernel, and the product it is held to.

A kernel with scales is checked against alpha x scale a x scale b x A @ B (+ beta C), whatever its signature, as
the cuBLASLt row computes it. Each scale reaches the kernel by pointer where its signature takes it so
(``{name: scale_a, type: ptr}``, a one-element buffer holding it, alpha left as it is), else folded into alpha where
the kernel takes alpha, else in no way: the kernel must then apply it itself, and the plan says so. A Gram
product's tied operand takes its input's pointer where it has none of its own. No GPU.
"""

from __future__ import annotations

import math
from typing import Any

from ..argtypes import C_TYPES, fits_float
from ..specfile.model import KernelSpec

BY_POINTER = "pointer"     # a one-element buffer of the case's own holds it
IN_ALPHA = "alpha"         # multiplied into the alpha the kernel receives
UNPASSED = "none"          # nothing the kernel receives holds it


def scale_pointers(kernel: KernelSpec) -> dict[str, str]:
    """The argument that takes each per-tensor scale by pointer, by operand (``a``, ``b``)."""
    return {argument.buffer.tensor_scale: argument.name for _, argument in kernel.leaf_arguments()
            if argument.buffer is not None and argument.buffer.tensor_scale is not None}


def takes_alpha(kernel: KernelSpec) -> bool:
    """Whether an argument of the kernel (or of a launch of then:, or a struct's field) is alpha, by value or by
    pointer."""
    return any(argument.name == "alpha" for _, argument in kernel.leaf_arguments())


def scale_routes(kernel: KernelSpec) -> dict[str, str]:
    """How each per-tensor scale reaches the kernel, by operand: `BY_POINTER`, `IN_ALPHA` or `UNPASSED`."""
    pointers = scale_pointers(kernel)
    folded = IN_ALPHA if takes_alpha(kernel) else UNPASSED
    routes = {operand: BY_POINTER if operand in pointers else folded for operand in ("a", "b")}
    gram = kernel.operands.gram if kernel.operands is not None else None
    if gram is not None and gram.of in pointers and gram.tied not in pointers:
        # The tied operand is the input's buffer read transposed and its scale the input's: the one pointer gives
        # both, and a kernel that multiplies by it twice applies both.
        routes[gram.tied] = BY_POINTER
    return routes


def _has_scales(kernel: KernelSpec) -> bool:
    return kernel.operands is not None and (kernel.operands.scales != (1.0, 1.0) or bool(scale_pointers(kernel)))


def fold_scales(kernel: KernelSpec, argument_values: dict[str, Any], problem, notes: list[str]) -> None:
    """Fold the per-tensor scales that reach the kernel through alpha into `argument_values["alpha"]` (its alpha, by
    value or in its buffer), reporting through `problem(message, field, hint=...)` an alpha that leaves its C type;
    and say in `notes` how each scale reaches the kernel and what the check computes with."""
    if not _has_scales(kernel):
        return
    assert kernel.operands is not None
    scales = dict(zip("ab", kernel.operands.scales))
    routes = scale_routes(kernel)
    folded = math.prod(scales[operand] for operand, route in routes.items() if route == IN_ALPHA)
    if "alpha" in argument_values and any(route == IN_ALPHA for route in routes.values()):
        argument_values["alpha"] = argument_values["alpha"] * folded
        ctype = next((a.ctype for _, a in kernel.leaf_arguments() if a.name == "alpha"), "float32")
        ctype = next((a.buffer.element for _, a in kernel.leaf_arguments() if a.name == "alpha" and a.buffer),
                     ctype)
        if ctype in C_TYPES and C_TYPES[ctype].is_float and not fits_float(ctype, argument_values["alpha"]):
            problem(f"alpha x the scales = {argument_values['alpha']:g} is beyond the range of {ctype}, the type the "
                    "kernel takes them in (folded into alpha)", "scales",
                    hint="scale the inputs so that alpha x scale a x scale b fits")
    notes.append(scales_note(kernel, scales, routes, argument_values))


def scales_note(kernel: KernelSpec, scales: dict[str, float], routes: dict[str, str],
                argument_values: dict[str, Any]) -> str:
    """How each per-tensor scale reaches the kernel, and the alpha the check computes with, in one line."""
    pointers = scale_pointers(kernel)
    product = product_alpha(kernel, argument_values)
    parts = []
    for operand in ("a", "b"):
        route = routes[operand]
        how = (f"by pointer ({_pointer_of(kernel, pointers, operand)})" if route == BY_POINTER
               else "folded into alpha" if route == IN_ALPHA else "in no way")
        parts.append(f"scale {operand} = {scales[operand]:g} {how}")
    checked = f"the check computes with alpha x scale a x scale b = {product:g}, as the cuBLASLt row does"
    unpassed = [operand for operand, route in routes.items() if route == UNPASSED]
    if unpassed:
        names = " or ".join(f"scale_{operand}" for operand in unpassed)
        return (f"fp8 scales: {', '.join(parts)} (the kernel takes no alpha and no {names} by pointer): {checked}, "
                f"so the kernel must apply {'it' if len(unpassed) == 1 else 'them'} itself ({{name: "
                f"scale_{unpassed[0]}, type: ptr}} passes one by pointer; a kernel that computes A @ B alone is "
                "given no scales:)")
    received = (f"; the kernel receives alpha = {argument_values['alpha']:g}"
                if "alpha" in argument_values and takes_alpha(kernel) else "")
    return f"fp8 scales: {', '.join(parts)}{received}; {checked}"


def _pointer_of(kernel: KernelSpec, pointers: dict[str, str], operand: str) -> str:
    """The argument that gives `operand`'s scale by pointer: its own, or a Gram product's input's."""
    if operand in pointers:
        return pointers[operand]
    assert kernel.operands is not None and kernel.operands.gram is not None
    gram = kernel.operands.gram
    return f"{pointers[gram.of]}: gram makes scale {operand} scale {gram.of}, {operand.upper()} being " \
        f"{gram.of.upper()} read transposed"


def product_alpha(kernel: KernelSpec, argument_values: dict[str, Any]) -> float:
    """The alpha of the product the kernel is checked against: its alpha (that of its epilogue, or 1 where it takes
    none) times both per-tensor scales, of which `fold_scales` has put those it passes through alpha into
    `argument_values` already."""
    alpha = float(argument_values.get("alpha", 1.0))
    if kernel.operands is None:
        return alpha
    routes = scale_routes(kernel)
    return alpha * math.prod(scale for operand, scale in zip("ab", kernel.operands.scales)
                             if routes[operand] != IN_ALPHA)
