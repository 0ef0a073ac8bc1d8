"""Before the GPU: drop configurations the plan already condemns, and compile the rest in parallel processes.

`prune_plans` keeps the plans worth launching and says why each other was dropped: a failed check
or ``require:`` (INVALID), register spills, or zero blocks per SM. `compile_in_processes` compiles
in a pool of spawned processes: NVRTC holds a lock inside a process, so threads compile one program
at a time while processes compile side by side (``spawn``, so no CUDA or NVRTC state is forked).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..cuda.compile import Cubin, compile_source
from ..errors import CompileError
from ..planning.case_plan import CasePlan


@dataclass(frozen=True)
class Pruned:
    """A configuration on a shape that will not be compiled or launched, and why."""

    kernel: str
    shape: str
    reason: str


def prune_plans(plans: Iterable[CasePlan], *, allow_spills: bool = False) -> tuple[list[CasePlan], list[Pruned]]:
    """The plans worth launching, and a `Pruned` with its reason for every other one.

    A plan without compiled resources can still be pruned for its launch
    checks and constraints; spills and occupancy need the resources.
    """
    kept: list[CasePlan] = []
    pruned: list[Pruned] = []
    for plan in plans:
        reason = _reason(plan, allow_spills)
        if reason is None:
            kept.append(plan)
        else:
            pruned.append(Pruned(plan.kernel.label, plan.shape.label, reason))
    return kept, pruned


def _reason(plan: CasePlan, allow_spills: bool) -> str | None:
    if not plan.valid:
        return f"invalid: {plan.problems[0]}"
    resources = plan.resources
    if resources is not None and resources.spills and not allow_spills:
        return (f"spills registers: {resources.spill_store_bytes} bytes stored, {resources.spill_load_bytes} "
                f"loaded per thread")
    if plan.occupancy is not None and plan.occupancy.blocks_per_sm == 0:
        hint = f" (hint: {plan.occupancy.hint})" if plan.occupancy.hint else ""
        return f"zero occupancy: {plan.occupancy.reason or 'no block fits on an SM'}{hint}"
    return None


@dataclass(frozen=True)
class CompileJob:
    """One NVRTC program: a source file, the template instances it must hold, the target and extra options."""

    source: Path
    instances: tuple[str, ...]
    arch: str
    options: tuple[str, ...] = ()
    allow_outside_headers: bool = False   # as the kernels' spec allows (--allow-outside-sources)
    project: Path | None = None           # the spec's project, where the kernels' headers may be


def compile_in_processes(jobs: Sequence[CompileJob], workers: int | None = None) -> list[Cubin | CompileError]:
    """Compile every job, `workers` spawned processes at a time (default: one per CPU, at most 16).

    The result for each job, in order, is its `Cubin` or the `CompileError`
    it raised (kept, not raised, so that one bad source does not stop the
    others). CUBINs go through the disk cache as in a single process.
    """
    if not jobs:
        return []
    workers = max(1, min(workers or os.cpu_count() or 1, 16, len(jobs)))
    if workers == 1:
        return [_compile_job(job) for job in jobs]
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        outcomes = list(pool.map(_compile_job_portable, jobs))
    return [CompileError(message, log=log, options=tuple(options)) if kind == "error" else value
            for kind, value, message, log, options in outcomes]


def _compile_job(job: CompileJob) -> Cubin | CompileError:
    try:
        return compile_source(job.source, job.instances, job.arch, job.options,
                              allow_outside_headers=job.allow_outside_headers, project=job.project)
    except CompileError as exc:
        return exc


def _compile_job_portable(job: CompileJob):
    """`_compile_job` in a child process: an error travels as its parts (its log would not survive pickling)."""
    outcome = _compile_job(job)
    if isinstance(outcome, CompileError):
        return "error", None, str(outcome), outcome.log, list(outcome.options)
    return "cubin", outcome, "", "", []


def jobs_for(kernels, arch: str, programs_per_source: int = 1) -> list[tuple[CompileJob, list[str]]]:
    """Compile jobs for `kernels` (`KernelSpec`s), grouped by source, options and target, each split into
    up to `programs_per_source` programs; with each job, the labels of the kernels it compiles."""
    groups: dict[tuple, list] = {}
    for kernel in kernels:
        groups.setdefault((kernel.source, tuple(kernel.options), kernel.target(arch), kernel.allow_outside_headers,
                           kernel.project), []).append(kernel)
    out = []
    for (source, options, target, allow_outside_headers, project), members in groups.items():
        count = max(1, min(programs_per_source, len(members)))
        for part in range(count):
            chunk = members[part::count]
            instances = tuple(dict.fromkeys(instance for k in chunk for instance in k.instances))
            out.append((CompileJob(Path(source), instances, target, options,
                                   allow_outside_headers, project),
                        [k.label for k in chunk]))
    return out
