"""A weight-only quantized B across the whole signature: its parts (codes, scales, zero points) agree.

Each buffer with ``quantized:`` is parsed on its own (`device_buffers`); what only the signature as a whole
shows is checked here, once the kernel is made: a kernel with typed operands of one matrix, B in fp16 or bf16,
one codes part with one scales part (none where a pack builder lays the codes out: it is given the scales and may
store them beside the codes), at most one zeros part, the other parts' bits and group those of the codes,
and a packing order as long as a word's run of codes. Each refusal names the buffer's field and line. The fields:
docs/kernels.md, "Quantized weights".
"""

from __future__ import annotations

from typing import Mapping

from ..errors import SpecError
from .expr import ExpressionError
from .model import Argument, KernelSpec, QuantizedWeights

# The types B may have when the kernel takes it quantized: those in which every (q - z) * s the case draws is exact.
QUANTIZED_B_TYPES = ("fp16", "bf16")


def quantized_parts(kernel: KernelSpec) -> dict[str, tuple[str, Argument]]:
    """The kernel's buffers of a quantized B by part (codes, scales, zeros): (field path, argument)."""
    return {argument.buffer.quantized.part: (path, argument) for path, argument in kernel.device_buffers()
            if argument.buffer is not None and argument.buffer.quantized is not None}


def codes_of(kernel: KernelSpec) -> QuantizedWeights | None:
    """The codes part of the kernel's quantized B (its bits and group are every part's), or None."""
    found = quantized_parts(kernel).get("codes")
    return found[1].buffer.quantized if found is not None else None


def check_quantized(kernel: KernelSpec) -> None:
    """Refuse, at the buffer's field, a quantized B the kernel's other fields or parts contradict."""
    seen: dict[str, str] = {}
    entries = [(path, argument) for path, argument in kernel.device_buffers()
               if argument.buffer is not None and argument.buffer.quantized is not None]
    if not entries:
        return

    def refuse(path: str, message: str, key: str = "quantized", hint: str | None = None) -> SpecError:
        return SpecError(message, where=kernel.where_field(f"{path}.{key}"), field=f"{kernel.field_path}.{path}.{key}",
                         hint=hint)

    for path, argument in entries:
        weights = argument.buffer.quantized
        operands = kernel.operands
        if operands is None:
            raise refuse(path, f"buffer {argument.name}: a quantized B needs a kernel with typed operands, whose "
                               "B the case draws from the codes", hint="types: {a: fp16} (or bf16)")
        if operands.batch.names or operands.batch.evaluate_int({}) != 1:
            raise refuse(path, f"buffer {argument.name}: a quantized B is one matrix; this kernel has batch: "
                               f"{operands.batch.source}")
        if operands.groups is not None:
            raise refuse(path, f"buffer {argument.name}: a quantized B is one matrix; this kernel's groups each "
                               "have their own B", hint="a quantized B per group (a mixture of experts' quantized "
                                                        "weights) is not described")
        if operands.types.b.name not in QUANTIZED_B_TYPES:
            raise refuse(path, f"buffer {argument.name}: a quantized B is drawn as fp16 or bf16 values, and types: "
                               f"gives B as {operands.types.b.name}", hint="types: {a: fp16} (B follows A)")
        if weights.part in seen:
            raise refuse(path, f"buffer {argument.name}: B's {weights.part} are already buffer {seen[weights.part]}")
        seen[weights.part] = argument.name
    parts = quantized_parts(kernel)
    if "codes" not in parts:
        path, argument = entries[0]
        raise refuse(path, f"buffer {argument.name}: B's {argument.buffer.quantized.part} need a buffer of its codes "
                           "(part: codes, with bits and group)")
    if "scales" not in parts and parts["codes"][1].buffer.quantized.builder is None:
        # A pack builder is given the scales whatever the buffers: it may lay them out beside the codes, in one
        # array (llama.cpp's Q4_0 blocks, {half d; uint8 qs[16]}), where no buffer of scales is passed.
        path, argument = parts["codes"]
        raise refuse(path, f"buffer {argument.name}: B's codes need a buffer of their scales (part: scales): B = "
                           "(codes - zeros) * scales",
                     hint="or lay the codes out with pack: {builder: ...}, which is given the scales and may store "
                          "each group's scale beside its codes in the same buffer")
    codes = parts["codes"][1].buffer.quantized
    if codes.codebook is not None and "zeros" in parts:
        path, argument = parts["zeros"]
        raise refuse(path, f"buffer {argument.name}: B's codes are looked up in a codebook (B = codebook[q] * s, "
                           f"{parts['codes'][1].name}'s codebook), which takes no zero points")
    if codes.codebook is None and "codebook" in parts:
        path, argument = parts["codebook"]
        raise refuse(path, f"buffer {argument.name}: holds B's codebook, but the codes "
                           f"({parts['codes'][1].name}) give none", hint="codebook: nf4 on the codes part")
    for path, argument in entries:
        weights = argument.buffer.quantized
        if weights.bits is not None and weights.bits != codes.bits:
            raise refuse(path, f"buffer {argument.name}: bits {weights.bits}, but the codes ({parts['codes'][1].name})"
                               f" have {codes.bits}", "quantized.bits")
        if weights.group is not None and codes.group is not None and \
                not _same(weights.group, codes.group, kernel.params):
            raise refuse(path, f"buffer {argument.name}: group {weights.group.source}, but the codes "
                               f"({parts['codes'][1].name}) have {codes.group.source}", "quantized.group")
        if weights.order is not None and codes.bits is not None and len(weights.order) != 32 // codes.bits:
            raise refuse(path, f"buffer {argument.name}: pack.order lists {len(weights.order)} positions, but a "
                               f"32-bit word holds {32 // codes.bits} codes of {codes.bits} bits", "quantized.pack")
    if kernel.operands is not None:
        for path, argument in kernel.device_buffers():
            scales = argument.buffer.scales if argument.buffer is not None else None
            if scales is not None and scales.operand == "b":
                held = (f"buffer {parts['scales'][1].name}" if "scales" in parts
                        else f"laid out in buffer {parts['codes'][1].name} by its builder")
                raise refuse(path, f"buffer {argument.name}: B is quantized (its scales are {held}); block scales "
                                   "of B would scale it twice", "scales")


def _same(one, other, params: Mapping[str, int | str]) -> bool:
    """Whether two group expressions say the same: equal values where both read only the params (``group`` and
    ``128`` with params {group: 128}; a param's true or false counts as 1 or 0, as in every expression), else the
    same text (one reading M, N or K is known only per shape)."""
    known = {name: int(value) if isinstance(value, bool) else value for name, value in params.items()
             if isinstance(value, (int, float))}
    if one.names <= set(known) and other.names <= set(known):
        try:
            return one.evaluate(known) == other.evaluate(known)
        except ExpressionError:     # a division by zero, say: the per-case plan names it
            pass
    return one.source.replace(" ", "") == other.source.replace(" ", "")
