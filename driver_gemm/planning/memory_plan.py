"""A case's memory checked at plan time: a shape whose operands and reference cannot fit is INVALID before any run.

The host's limit is this machine's physical memory (what is free when the case runs is the worker's to check); the GPU's, without the GPU at hand, is the largest part of
the target architecture (`measure.memory.LARGEST_PART_BYTES`), so that only what fits on no GPU of it is refused
here. The process that runs a case checks again against what its GPU really has free.
"""

from __future__ import annotations

import dataclasses

from ..errors import ConfigError
from ..measure.memory import fp32_needs, largest_part_bytes, memory_refusal, typed_needs
from .case_plan import CasePlan


def memory_needs_of(plan: CasePlan):
    """The `measure.memory.MemoryNeeds` of `plan`'s case; None for a typed case whose operands did not evaluate."""
    kernel, shape = plan.kernel, plan.shape
    if kernel.is_typed:
        if plan.operands is None:
            return None
        beta = float(plan.argument_values.get("beta", 0.0) or 0.0) if kernel.reads_c() else 0.0
        return typed_needs(plan.operands, kernel.operands.types, reads_c=beta != 0.0)
    return fp32_needs(shape.M, shape.N, shape.K, reads_c=kernel.reads_c())


def with_memory_check(plan: CasePlan, host: int | None, arch: str) -> CasePlan:
    """`plan` with a problem when its case needs more than `host` bytes of host memory (this machine's in all) or more
    than the largest GPU of `arch` has."""
    needs = memory_needs_of(plan)
    if needs is None:
        return plan
    device = largest_part_bytes(arch)
    refusal = memory_refusal(needs, host, device, device_name=f"the largest {arch} GPU", host_word=" in all")
    if refusal is None:
        return plan
    kernel = plan.kernel
    problem = ConfigError(f"shape {plan.shape.label} {refusal}", where=kernel.where, field=kernel.field_path,
                          hint="use a smaller shape, or a machine with more memory")
    return dataclasses.replace(plan, problems=[*plan.problems, problem])
