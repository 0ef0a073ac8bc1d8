"""Whether two kernels compute the same GEMM: what a dispatch table's member must share with its family.

A member's rows are counted as its family's (its geometric mean, `compare` under the family's name, the family's
vendor row as its 100%), so everything that changes the product the reference checks or the vendor row it is
timed against must agree: precision, types, storage orders, per-tensor scales, epilogue, alpha and beta, the batch,
leading dimensions and batch strides, the groups, a bias, block scales, quantized weights, the inputs' structure, a
Gram product of one input and the element-wise functions applied to the product. What only says how the kernel is
given its inputs (the signature's order, tensor maps, a workspace, following launches) may differ.
"""

from __future__ import annotations

from typing import Any, Mapping

from . import expr
from ..errors import SpecError
from ..gemm.dtypes import parse_types
from .fields import flow_text
from .model import KernelSpec, Shape
from .typed import OPERAND_KEYS, evaluate_operands


def computes_differently(family: KernelSpec, member: KernelSpec, shape: Shape, scalars: Mapping[str, float]) -> str:
    """What makes `member`'s GEMM on `shape` another than `family`'s, said as ``batch 3, not 1``; '' when they
    compute the same. `scalars` are the spec's (a kernel's own are in its signature's values)."""
    if (family.operands is None) != (member.operands is None):
        return _typed_on_one_side(family, member)
    ours, theirs = gemm_properties(family, shape, scalars), gemm_properties(member, shape, scalars)
    for what, value in ours.items():
        if theirs.get(what) != value:
            return f"{what} {_shown(theirs.get(what))}, not {_shown(value)}"
    return ""


def _typed_on_one_side(family: KernelSpec, member: KernelSpec) -> str:
    """What differs between a typed kernel and an untyped one (docs/kernels.md, "The conventions"): which is which,
    the typed one's fields and types, why it matters (the vendor row, C's start where beta is 0) and the fix."""
    typed, untyped = (member, family) if member.operands is not None else (family, member)
    types = typed.operands.types if typed.operands is not None else parse_types({"a": "fp32"})
    written = _operand_fields(typed)
    untyped_words = "FP32" if untyped.precision == "fp32" else f"FP32 with precision: {untyped.precision}"
    differs = f"{typed.name} is typed, {_types_words(types)} ({written}), and {untyped.name} is not ({untyped_words}): "
    # An untyped kernel multiplies FP32 (TF32 with precision: tf32) matrices, as types: {a: fp32} ({a: tf32}) says.
    if types != parse_types({"a": untyped.precision}):
        return differs + (f"they multiply other element types, so their products and vendor rows differ; a table "
                          f"picks among kernels of one product: dispatch {typed.name} from a family of its own types")
    vendor = "cuBLAS SGEMM" if untyped.precision == "fp32" else "cuBLAS's TF32 GEMM"
    return differs + (f"their rows differ: {untyped.name}'s vendor row is {vendor} and, where it reads C, its C starts "
                      f"from C0 whatever beta; {typed.name}'s vendor row is cuBLASLt's and its C starts as poison "
                      f"where beta is 0; give both the same operand fields: write {written} on {untyped.name} too"
                      + (f" (in place of precision: {untyped.precision})" if untyped.precision != "fp32" else "")
                      + f", or leave {'them' if ';' in written else 'it'} off {typed.name}")


def _operand_fields(kernel: KernelSpec) -> str:
    """The operand fields that make `kernel` typed (`typed.OPERAND_KEYS`), as its entry writes them
    (``types: {a: fp32}; ld: {a: K + 4}``); its types in full where the entry is not at hand."""
    entry = kernel.entry or {}
    written = [f"{key}: {flow_text(entry[key])}" for key in OPERAND_KEYS if key in entry]
    if written or kernel.operands is None:
        return "; ".join(written)
    return f"types: {_shown(kernel.operands.types.as_dict())}"


def _types_words(types) -> str:
    """A GEMM's element types in words: ``fp32 in and out``, ``bf16 in, fp32 out``."""
    inputs = types.a.name if types.a == types.b else f"{types.a.name} and {types.b.name}"
    return f"{inputs} in and out" if types.a == types.b == types.c else f"{inputs} in, {types.c.name} out"


def gemm_properties(kernel: KernelSpec, shape: Shape, scalars: Mapping[str, float]) -> dict[str, Any]:
    """The properties of `kernel`'s GEMM on `shape` that the reference or the vendor row reads, in the order a
    difference is said (the first found is reported): two kernels whose properties are equal are checked against
    the same product and timed against the same vendor row."""
    operands = kernel.operands
    gemm: dict[str, Any] = {"precision": kernel.precision}
    if operands is not None:
        gemm.update({"types": operands.types.label, "storage orders": dict(operands.orders),
                     "scales": operands.scales, "structure": dict(operands.structure) or "none",
                     "gram": operands.gram.as_dict() if operands.gram is not None else "none",
                     "elementwise": _functions(operands.elementwise)})
    gemm["epilogue"] = kernel.epilogue or "alpha and beta"
    try:
        laid_out, _ = evaluate_operands(kernel, shape)
    except SpecError:   # its case is INVALID at the field that does not evaluate, which says more than this would
        laid_out = None
    if laid_out is not None:
        gemm["batch"] = laid_out.batch
        gemm[f"groups on {shape.label}"] = laid_out.groups.describe() if laid_out.groups is not None else "none"
        gemm[f"leading dimensions on {shape.label}"] = {key: getattr(laid_out, key).ld for key in "abc"}
        if laid_out.batch > 1:
            gemm[f"batch strides on {shape.label}"] = {key: getattr(laid_out, key).recorded_stride for key in "abc"}
        if laid_out.levels is not None:
            gemm["batch levels"] = f"{laid_out.levels[0]} x {laid_out.levels[1]}"
    gemm["alpha and beta"] = _alpha_and_beta(kernel, shape, scalars)
    buffers = [argument.buffer for _, argument in kernel.device_buffers() if argument.buffer is not None]
    gemm["bias"] = sorted(f"along {buffer.bias}" for buffer in buffers if buffer.bias is not None) or "none"
    gemm["block scales"] = sorted(_block_scales(buffer.scales, shape, kernel) for buffer in buffers
                                  if buffer.scales is not None) or "none"
    gemm["quantized B"] = sorted(_quantized(buffer.quantized, shape, kernel) for buffer in buffers
                                 if buffer.quantized is not None) or "none"
    return gemm


def _functions(functions) -> str:
    """The element-wise functions as a spec writes them, ``[relu, {mul: 1.5}]``, or "none"."""
    if not functions:
        return "none"
    written = []
    for function in functions:
        spec = function.as_spec()
        written.append(spec if isinstance(spec, str) else
                       ", ".join(f"{{{name}: {_number(argument)}}}" for name, argument in spec.items()))
    return "[" + ", ".join(written) + "]"


def _number(argument) -> str:
    if isinstance(argument, list):
        return "[" + ", ".join(f"{value:g}" for value in argument) + "]"
    return f"{argument:g}"


def _alpha_and_beta(kernel: KernelSpec, shape: Shape, scalars: Mapping[str, float]) -> str:
    """alpha and beta as the reference takes them (as `planning.cases.gemm_scalars` works them out for the vendor
    row): the epilogue's, or the values the signature (and those of the following launches) gives."""
    env = {**scalars, **shape.as_env(), **kernel.numeric_params}
    found = kernel.epilogue_scalars()
    for _, argument in kernel.leaf_arguments():
        if argument.name in ("alpha", "beta") and argument.value is not None:
            try:
                found[argument.name] = float(argument.value.evaluate(env))
            except expr.ExpressionError:   # reported where the case evaluates its arguments
                continue
    return f"{found.get('alpha', 1.0):g} and {found.get('beta', 0.0):g}"


def _block_scales(scales, shape: Shape, kernel: KernelSpec) -> str:
    """A buffer of block scales as the product sees it: which operand, and the block one factor multiplies."""
    return f"{scales.operand.upper()} per {_evaluated(scales.block, shape, kernel)}"


def _quantized(quantized, shape: Shape, kernel: KernelSpec) -> str:
    """A part of a quantized B as the product sees it: the part, its code width and group, and the codebook its
    codes are looked up in."""
    group = _evaluated((quantized.group,), shape, kernel) if quantized.group is not None else "-"
    table = f", codebook {quantized.codebook_name or list(quantized.codebook)}" if quantized.codebook else ""
    return f"{quantized.part} of {quantized.bits or '-'} bits, group {group}{table}"


def _evaluated(expressions, shape: Shape, kernel: KernelSpec) -> str:
    env = {**shape.as_env(), **kernel.numeric_params}
    try:
        return " x ".join(str(extent.evaluate_int(env)) for extent in expressions)
    except expr.ExpressionError:   # compared as written where the shape does not say
        return " x ".join(extent.source for extent in expressions)


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {item}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return ", ".join(value)
    return str(value)
