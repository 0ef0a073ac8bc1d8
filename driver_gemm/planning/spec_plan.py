"""The launch plan of a whole spec: every kernel compiled for a target, every case planned. No GPU needed.

The target is an architecture (``sm_90``...) with its published limits, or
the GPU at hand with the limits it reports. Kernels refused on every shape are
not compiled; a source NVRTC rejects is reported once, with its cases left
out of the plan.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import re
from collections.abc import Iterator, Sized
from typing import Iterable, Protocol
from dataclasses import dataclass, field

from ..cuda.compile import Cubin, normalise_arch, nvrtc_version, supported_archs
from ..cuda.fatbin import cubin_bytes
from ..cuda.sass import InstructionMix, instruction_mix
from ..cuda.occupancy import ARCHES, ArchLimits, arch_limits, base_arch, limits_from_device, parse_arch
from ..errors import (CompileError, ConfigError, DriverGemmError, FilePath, NoGpuError, SpecError, UsageError,
                      WrongArgumentType, WrongArgumentValue, flag_argument, ordinal_argument)
from ..specfile.archs import KNOWN_ARCHS
from ..specfile.load import load_spec
from ..results.records import DispatchChoice
from ..specfile.model import KernelSpec, Shape, Spec
from . import build
from .build import Compiled, compile_spec, complete_plan, led_by_spec_line, with_member_check, with_template_order
from .cases import dispatched, kernels_of, picked_text, standalone
from .case_plan import MAX_SM_COUNT, CasePlan, plan_launch
from .sizeof_values import known_type_sizes
from .memory_plan import with_memory_check
from ..cuda.device import read_properties


@dataclass(frozen=True)
class PlanTarget:
    """What the plan is for: the architecture and its limits (the GPU's own when one was read)."""

    arch: str
    limits: ArchLimits
    from_device: bool = False


@dataclass
class SpecPlan:
    """Every planned case of a spec, and the compile errors that kept some kernels out."""

    spec: Spec
    target: PlanTarget
    sm_count: int
    plans: list[CasePlan] = field(default_factory=list)
    compile_errors: list[CompileError] = field(default_factory=list)
    compiled: Compiled = field(default_factory=dict, repr=False)

    @property
    def valid_count(self) -> int:
        return sum(plan.valid for plan in self.plans)

    @property
    def invalid_count(self) -> int:
        return sum(not plan.valid for plan in self.plans)

    @property
    def ok(self) -> bool:
        return not self.compile_errors and not self.invalid_count

    def summary(self) -> str:
        """One line: ``N ok, M INVALID`` (and the compiles that failed, if any)."""
        return plan_summary(self.valid_count, self.invalid_count, len(self.compile_errors))

    def __repr__(self) -> str:
        # Counts, not every plan with its kernel spelled out (hundreds of KB for a spec of 56 cases): the plans are
        # in `plans`, the images in `compiled`.
        return (f"SpecPlan(spec={self.spec.name!r}, arch={self.target.arch!r}, sm_count={self.sm_count}, "
                f"plans={len(self.plans)} ({self.summary()}), compiled={len(self.compiled)} kernel(s))")


def plan_summary(valid: int, invalid: int, compile_errors: int = 0) -> str:
    """`SpecPlan.summary` from the counts: ``N ok, M INVALID`` (and the compiles that failed)."""
    text = f"{valid} ok, {invalid} INVALID"
    if compile_errors:
        text += f", {compile_errors} compile(s) failed"
    return text


def plan_target(arch: str | None = None, device: int = 0) -> PlanTarget:
    """The target named by `arch`; without one, the GPU `device` if there is one, else ``sm_90``.

    Raises `ConfigError` (field ``--arch``) for a name that is no architecture
    or one without a limits table, `UsageError` for one NVRTC cannot build.
    """
    device = ordinal_argument("plan_target", "device", device)
    if arch is None:
        try:
            properties = read_properties(device)
            return PlanTarget(normalise_arch(properties.arch), limits_from_device(properties), from_device=True)
        except NoGpuError:
            arch = "sm_90"
    parse_arch(arch)     # a ConfigError on --arch for what is no architecture at all
    try:
        arch = normalise_arch(arch)
    except CompileError as exc:
        raise UsageError(str(exc), field="--arch") from None
    plannable = plannable_archs()
    if arch not in plannable:
        offered = f"{PLANNABLE_AS}: {', '.join(plannable)}"
        if base_arch(arch) not in ARCHES:
            raise ConfigError(f"no architecture table for {arch} ({offered})", field="--arch",
                              hint="on the GPU itself the limits come from its driver; offline, plan for the nearest "
                                   "of those and give the SM count with --sms")
        if not _nvrtc_builds(arch, _nvrtc_targets()):
            raise UsageError(f"NVRTC {'.'.join(map(str, nvrtc_version()))} cannot compile for {arch} ({offered})",
                             field="--arch")
        raise ConfigError(f"unknown architecture {arch} ({offered})", field="--arch")
    return PlanTarget(arch, arch_limits(arch))


# How a refusal of --arch introduces `plannable_archs`, the same words wherever the refusal is made.
PLANNABLE_AS = "plans are made for"


def plannable_archs() -> tuple[str, ...]:
    """The architectures ``plan --arch`` (`plan_target`) plans for, and the ones every refusal of ``--arch`` names:
    those of `specfile.archs.KNOWN_ARCHS` (the a and f targets too) that have a limits table
    (`cuda.occupancy.ARCHES`) and that the loaded NVRTC builds. An architecture named here is never then refused."""
    supported = _nvrtc_targets()
    return tuple(name for name in KNOWN_ARCHS if base_arch(name) in ARCHES and _nvrtc_builds(name, supported))


def _nvrtc_targets() -> list[int]:
    """The compute capabilities the loaded NVRTC builds (90 for sm_90); empty where no NVRTC answers."""
    try:
        return supported_archs()
    except DriverGemmError:
        return []


def _nvrtc_builds(arch: str, supported: list[int]) -> bool:
    """Whether an NVRTC building `supported` compiles for `arch` (not sm_70 on NVRTC 13); True where no NVRTC
    answered (`supported` empty), whose compile will say so itself."""
    number = int(re.match(r"sm_(\d+)", arch).group(1))
    return not supported or number in supported


def plan_spec(spec: Spec | FilePath, arch: str | None = None, sm_count: int | None = None, *,
              target: PlanTarget | None = None, device: int = 0, allow_outside_sources: bool = False) -> SpecPlan:
    """What ``driver-gemm plan`` shows: every kernel of `spec` compiled for the target, every case planned.

    `spec` is a `Spec`, a spec file or a shipped spec's name (``"fast"``,
    read with `load_spec` and `allow_outside_sources`). The target is `arch`
    (``"sm_90"``), else the GPU `device`, else ``sm_90`` (`plan_target`).
    `sm_count` overrides the target's SM count: the waves column's and the
    `sm_count` that launch expressions read. The result lists the plans in
    spec order (kernel by kernel, shape by shape), each a `CasePlan` with its
    launch, resources, occupancy, waves, problems and notes, and any compile
    errors, one per failed source. A `target` from `plan_target` stands for
    `arch` and `device`: it is given instead of `arch`, never with it.
    """
    flag_argument("plan_spec", "allow_outside_sources", allow_outside_sources)
    device = ordinal_argument("plan_spec", "device", device)
    if target is not None and arch is not None:
        raise WrongArgumentValue(f"plan_spec: arch {arch!r} and a target for {getattr(target, 'arch', target)!r} "
                                 "are both given: give arch, or a target from plan_target(arch)")
    if not isinstance(spec, Spec):
        if not isinstance(spec, (str, os.PathLike)):
            raise WrongArgumentType(f"plan_spec: spec is a Spec (from load_spec or spec_from_dict) or the path of a "
                                    f"spec file, got {type(spec).__name__}")
        spec = load_spec(spec, allow_outside_sources=allow_outside_sources)
    if target is not None and not isinstance(target, PlanTarget):
        raise WrongArgumentType(f"plan_spec: target is a PlanTarget (from plan_target), got {type(target).__name__}")
    if sm_count is not None:
        # numbers.Integral: NumPy's whole numbers too, taken as Python's (docs/embedding.md)
        if isinstance(sm_count, bool) or not isinstance(sm_count, numbers.Integral):
            raise WrongArgumentType(f"plan_spec: sm_count is a whole number of SMs, got {type(sm_count).__name__}")
        sm_count = int(sm_count)
        if not 1 <= sm_count <= MAX_SM_COUNT:   # no correct caller asks this: errors.py
            raise WrongArgumentValue(f"plan_spec: sm_count is 1 to {MAX_SM_COUNT:,}, got {sm_count:,}")
    if target is None:
        try:
            target = plan_target(arch, device)
        except SpecError as exc:
            if exc.field != "--arch":
                raise
            # plan_target speaks to the command line: a library call is told of its own argument
            hint = exc.hint.replace("with --sms", "with sm_count=") if exc.hint else None
            raise type(exc)(exc.message, where=exc.where, field="plan_spec: arch", hint=hint) from None
    stream = plan_stream(spec, sm_count, target=target)
    stream.result.plans = list(stream)
    return stream.result


class PlanStream:
    """The plans of a spec one at a time, in `plan_spec`'s order, for a plan too large to hold: a million cases
    as `CasePlan`s take gigabytes, while their rows can be written as they come.

    `result` is the `SpecPlan` with every kernel compiled and the compile errors known, its `plans` empty;
    `count` is how many plans iterating yields. Iterating again plans every case again.
    """

    def __init__(self, spec: Spec, target: PlanTarget, sm_count: int | None = None) -> None:
        limits = target.limits if not sm_count else dataclasses.replace(target.limits,
                                                                        typical_sm_count=sm_count)
        self.result = SpecPlan(spec, target, sm_count or limits.typical_sm_count)
        self._limits, self._sm_count = limits, sm_count
        self._scalars, self._host = dict(spec.scalars), build.host_total()
        self._written_scalars = spec.written_scalars   # which of them the spec wrote (the rest are defaults)
        self._pairs, self._picked = _kernel_shapes(spec)
        known_type_sizes((kernel for kernel, _ in self._pairs), target.arch)   # one compile per program
        skip = {kernel.label for kernel, cases in self._pairs if all(self._launch(*case).refused_before_compiling
                                                                     for case in cases)}
        compiled = compile_spec(spec, target.arch, skip=skip)
        self.result.compiled = compiled
        failed: dict[str, list[KernelSpec]] = {}   # message -> the kernels it kept out
        errors: dict[str, CompileError] = {}
        for kernel, _ in self._pairs:
            cubin = compiled.get(kernel.label)
            if isinstance(cubin, CompileError):
                # One error per distinct failure, not per template instance or program: the instances of a
                # failed program are compiled again one by one and mostly fail the same way.
                failed.setdefault(str(cubin), []).append(kernel)
                errors.setdefault(str(cubin), cubin)
        self.result.compile_errors = [_with_kernels(errors[message], kernels) for message, kernels in failed.items()]
        self.count = sum(len(cases) for kernel, cases in self._pairs
                         if not isinstance(compiled.get(kernel.label), CompileError))

    @property
    def labels(self) -> list[str]:
        """The labels of the kernels whose plans iterating yields, in order."""
        compiled = self.result.compiled
        return [kernel.label for kernel, _ in self._pairs if not isinstance(compiled.get(kernel.label), CompileError)]

    def not_compiled(self) -> Iterator[tuple[KernelSpec, Shape, CompileError]]:
        """The cases iterating leaves out, each (kernel, shape, its kernel's compile error), in spec order: for a
        table of the plan that names every case, planned or not."""
        compiled = self.result.compiled
        for kernel, cases in self._pairs:
            error = compiled.get(kernel.label)
            if isinstance(error, CompileError):
                for case_kernel, shape in cases:
                    yield case_kernel, shape, error

    def picked(self, kernel: KernelSpec, shape: Shape) -> tuple[str, DispatchChoice] | None:
        """For a case a ``dispatch:`` table picked, the table's kernel and its entry and rule (as its plan's
        `picked_by` holds them); None for any other case."""
        return self._picked.get((kernel.label, shape.label))

    def _launch(self, kernel: KernelSpec, shape) -> CasePlan:
        """The case's launch and memory checked, before compiling (`build.launch_plans` for one case), and a table's
        member checked to compute its family's GEMM on this shape (`cases.member_problem`)."""
        plan = with_template_order(with_memory_check(plan_launch(kernel, shape, self._limits, self._scalars,
                                                                 written_scalars=self._written_scalars),
                                                     self._host, self._limits.arch))
        return with_member_check(self.result.spec, kernel, shape, plan)

    def __iter__(self) -> Iterator[CasePlan]:
        compiled = self.result.compiled
        for kernel, cases in self._pairs:
            cubin = compiled.get(kernel.label)
            if isinstance(cubin, CompileError):
                continue
            for case in cases:
                plan = complete_plan(self._launch(*case), cubin, self._limits, self._sm_count)
                picked = self._picked.get((case[0].label, case[1].label))
                yield plan if picked is None else _picked_plan(plan, *picked)


def plan_stream(spec: Spec, sm_count: int | None = None, *, target: PlanTarget) -> PlanStream:
    """`plan_spec` for `target` with its plans yielded one at a time (`PlanStream`): the kernels compiled and the
    compile errors known now, each case planned as it is asked for, so memory stays bounded at any size."""
    return PlanStream(spec, target, sm_count)


class _Cases(Sized, Iterable, Protocol):
    """A kernel's cases: (kernel, shape) pairs that can be counted and read."""


def _picked_plan(plan: CasePlan, family: str, choice: DispatchChoice) -> CasePlan:
    """`plan` picked by `family`'s table, led by a note saying which entry picked it and by which rule."""
    return dataclasses.replace(plan, notes=[picked_text(family, choice), *plan.notes], picked_by=(family, choice))


# By (kernel label, shape label), the kernel whose table picked a case's configuration, and the entry and rule.
_Picks = dict[tuple[str, str], tuple[str, DispatchChoice]]


def _kernel_shapes(spec: Spec) -> tuple[list[tuple[KernelSpec, _Cases]], _Picks]:
    """Every kernel configuration (as `kernels_of` lists them) with its cases in spec order, each the (kernel,
    shape) it is planned with. Without ``dispatch:`` that is every kernel on every shape, yielded as asked for; a
    dispatched kernel runs on the shapes its table picks it for. Second, by (kernel label, shape label), why each
    dispatched case runs the configuration it runs: the table's kernel, and the entry and rule that picked it
    (`specfile.dispatch`), so that a plan answers "why these params here" as well as "what they launch"."""
    if not spec.dispatch:
        kernels = list({kernel.label: kernel for kernel in spec.kernels}.values())
        return [(kernel, _EveryShape(kernel, spec.shapes)) for kernel in kernels], {}
    on: dict[str, dict[int, KernelSpec]] = {}
    picked: _Picks = {}
    families = standalone(spec)
    for index, shape in enumerate(spec.shapes):
        for family in families:               # `kernels_on`, keeping each table's choice
            kernel, choice = dispatched(spec, family, shape)
            on.setdefault(kernel.label, {})[index] = kernel
            if choice is not None:
                picked[(kernel.label, shape.label)] = (family.name, choice)
    # `on` holds each configuration once, in the order `kernels_of` gives, its shapes in spec order
    pairs: list[tuple[KernelSpec, _Cases]] = [
        (next(iter(by_index.values())), [(kernel, spec.shapes[index]) for index, kernel in by_index.items()])
        for by_index in on.values()]
    return pairs, picked


class _EveryShape:
    """One kernel's cases on every shape, as (kernel, shape), made as they are read."""

    def __init__(self, kernel: KernelSpec, shapes) -> None:
        self._kernel, self._shapes = kernel, shapes

    def __len__(self) -> int:
        return len(self._shapes)

    def __iter__(self):
        kernel = self._kernel
        return ((kernel, shape) for shape in self._shapes)


def _with_kernels(error: CompileError, kernels: list[KernelSpec]) -> CompileError:
    """`error` led by the spec's line of the kernel entry it kept out (and how many more it kept out)."""
    return led_by_spec_line(error, kernels)


def instruction_mixes(planned: SpecPlan) -> dict[str, InstructionMix | str]:
    """Each compiled kernel's instruction mix (`cuda.sass`), by kernel label; a string says why there is none.

    Needs cuobjdump or nvdisasm (`ToolMissingError` otherwise). Each image is
    disassembled once, however many kernels it holds.
    """
    by_image: dict[int, dict[str, InstructionMix]] = {}
    out: dict[str, InstructionMix | str] = {}
    for kernel in kernels_of(planned.spec):
        built = planned.compiled.get(kernel.label)
        if not isinstance(built, Cubin):
            out[kernel.label] = "not compiled"
            continue
        if not built.resources_known:
            out[kernel.label] = "PTX: no machine code until the driver compiles it"
            continue
        if id(built) not in by_image:
            by_image[id(built)] = instruction_mix(cubin_bytes(built.image, built.arch))
        out[kernel.label] = by_image[id(built)].get(built.symbol(kernel.instance), "not in the disassembly")
    return out
