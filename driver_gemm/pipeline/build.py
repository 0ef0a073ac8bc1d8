"""Before any GPU work: every case planned once, the kernels worth compiling compiled, in parallel.

`plan_cases` evaluates every case's launch (no compiler output needed) and,
once `compile_spec` has built what can run, completes each plan with its
kernel's resources. `refused_everywhere` names the kernels no shape can
launch: they are never compiled. `check_offline` is the same launch check for
a machine without a GPU, so that a spec's mistakes are reported before a GPU
is asked for.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os

from ..cuda.compile import Cubin, compile_source
from ..cuda.occupancy import ArchLimits, arch_limits
from ..errors import CompileError
from ..spec.model import KernelSpec, Spec
from .cases import Case, cases_of, kernels_of, kernels_on
from .plan import CasePlan, plan_launch, with_resources

Compiled = dict[str, "Cubin | CompileError"]


def launch_plans(spec: Spec, limits: ArchLimits) -> dict[tuple[str, str], CasePlan]:
    """Every kernel's launch plan on every shape, keyed by (kernel label, shape label); no compiler output needed."""
    scalars = dict(spec.scalars)
    return {(kernel.label, shape.label): plan_launch(kernel, shape, limits, scalars)
            for shape in spec.shapes for kernel in kernels_on(spec, shape)}


def refused_everywhere(spec: Spec, limits: ArchLimits,
                       plans: dict[tuple[str, str], CasePlan] | None = None) -> set[str]:
    """Labels of the kernels whose launch checks fail on every shape before any compiler output is needed.

    A sweep's `require:` constraints often rule out configurations that the
    source cannot even instantiate (its static_asserts say the same thing):
    those are not compiled, and their cases are Status.INVALID with the constraint
    that failed rather than Status.ERROR with a compiler message. `plans` are
    those of `launch_plans`, when already made.
    """
    plans = launch_plans(spec, limits) if plans is None else plans
    return {kernel.label for kernel in kernels_of(spec)
            if not any(plans[kernel.label, shape.label].valid for shape in spec.shapes
                       if (kernel.label, shape.label) in plans)}


def check_offline(spec: Spec, arch: str = "sm_90") -> list[CasePlan]:
    """The launch plans of `spec` for `arch`'s published limits that fail a check: no GPU, no compiler.

    For ``driver-gemm run`` to call before it asks for a GPU, so that a spec
    whose launches cannot work is reported as such on any machine. An empty
    list means every case passes the checks that need neither.
    """
    return [plan for plan in launch_plans(spec, arch_limits(arch)).values() if not plan.valid]


def compile_spec(spec: Spec, arch: str, jobs: int | None = None, skip: set[str] = frozenset()) -> Compiled:
    """Compile every kernel of `spec` for `arch`, or for its own ``arch``: NVRTC programs, in parallel.

    The value for a kernel label is its `Cubin`, or the `CompileError` that
    its source raised (recorded against each of its cases, not raised). The
    instances of one source are shared out over up to `jobs` programs
    (default: one per CPU, at most 16) compiled on as many threads (NVRTC
    compiles separate programs concurrently), so a sweep of a hundred
    template instances takes minutes off its start. When a program with
    several instances fails, each is compiled alone, so that one bad instance
    does not take its siblings down. Kernels named in `skip` are left out.
    """
    jobs = max(1, jobs or min(os.cpu_count() or 1, 16))
    groups: dict[tuple, list[KernelSpec]] = {}
    for kernel in (k for k in kernels_of(spec) if k.label not in skip):
        groups.setdefault((kernel.source, kernel.options, kernel.target(arch)), []).append(kernel)
    programs = []
    for (source, options, target), kernels in groups.items():
        count = min(jobs, len(kernels))
        programs.extend((source, options, target, kernels[part::count]) for part in range(count))
    compiled: Compiled = {}

    def compile_program(source, options, target, kernels) -> None:
        try:
            cubin: Cubin | CompileError = compile_source(source, [k.instance for k in kernels], target, options)
        except CompileError as exc:
            if len(kernels) > 1:
                for kernel in kernels:
                    compile_program(source, options, target, [kernel])
                return
            cubin = exc
        for kernel in kernels:
            compiled[kernel.label] = cubin

    if len(programs) <= 1:
        for program in programs:
            compile_program(*program)
    else:
        with concurrent.futures.ThreadPoolExecutor(min(jobs, len(programs))) as pool:
            for done in [pool.submit(compile_program, *program) for program in programs]:
                done.result()
    return compiled


def plan_cases(spec: Spec, limits: ArchLimits, arch: str, sm_count: int | None = None,
               skip: set[tuple[str, str]] = frozenset()) -> tuple[list[Case], Compiled]:
    """The cases of `spec` still to run (those keyed in `skip` left out), each with its plan, and what compiled.

    Each kernel case is planned once: its launch before compiling (a kernel
    no shape can launch is not compiled), then, for a kernel that compiled,
    completed with its resources. A case whose kernel was not compiled keeps
    its launch plan; the pipeline records why it cannot run.
    """
    cases = [case for case in cases_of(spec) if case.key not in skip]
    if not cases:
        return [], {}
    plans = launch_plans(spec, limits)
    compiled = compile_spec(spec, arch, skip=refused_everywhere(spec, limits, plans))
    planned = []
    for case in cases:
        if case.kernel is not None:
            plan = plans[case.key]
            cubin = compiled.get(case.kernel.label)
            if isinstance(cubin, Cubin):
                plan = with_resources(plan, cubin.resources_of(case.kernel.instance), limits, sm_count)
            case = dataclasses.replace(case, plan=plan)
        planned.append(case)
    return planned, compiled
