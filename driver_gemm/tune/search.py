"""A tune on a GPU, in order: plan and prune, compile ahead, then search each kernel family on each shape.

`prepare_cases` needs no GPU: every configuration is planned on every shape, pruned before
compiling (`prepare.prune_plans`), compiled in parallel and pruned again on its resources (spills,
zero occupancy). `tune_spec` opens one `Session`, makes the evaluation callback
(`evaluate.Evaluator`) and runs the strategy over every (family, shape) group with
`strategies.search_all`. Exhaustive prunes only what cannot launch, so it measures every valid
configuration.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Callable

from ..cuda.compile import Cubin
from ..cuda.occupancy import ArchLimits, limits_from_device
from ..errors import FilePath, WrongArgumentType, callback_argument, flag_argument, ordinal_argument
from ..results.text import path_text
from ..planning.build import Compiled, compile_spec, launch_plans
from ..planning.cases import Case, new_record
from ..planning.case_plan import with_resources
from ..results.records import CaseDevice, CaseResult, RunResult
from ..results.settings import RunSettings
from ..specfile.load import load_spec
from ..specfile.model import Shape, Spec
from ..status import Status
from .prepare import Pruned, prune_plans
from .strategies import (STRATEGIES, Budget, Configuration, Exhaustive, SearchResult, Strategy, make_strategy,
                         search_all)
from ..cuda.device import read_properties
from ..runners.environment import environment, now, provenance
from .evaluate import Evaluator
from ..session.state import Session
from .tune_cache import TuningCache, tuning_key


@dataclass
class PreparedTune:
    """The cases worth measuring (by kernel label and shape label), what compiled, and what was pruned."""

    cases: dict[tuple[str, str], Case]
    compiled: Compiled
    pruned: list[Pruned] = field(default_factory=list)
    pruned_records: list[CaseResult] = field(default_factory=list)

    def groups(self, spec: Spec) -> list[tuple[list[Configuration], Shape]]:
        """Per shape (in the spec's order), per kernel family: the configurations to search."""
        out: list[tuple[list[Configuration], Shape]] = []
        for shape in spec.shapes:
            families: dict[str, list[Configuration]] = {}
            for kernel in spec.kernels:
                if (kernel.label, shape.label) in self.cases:
                    families.setdefault(kernel.name, []).append(Configuration(kernel.label, dict(kernel.params)))
            out.extend((space, shape) for space in families.values())
        return out


def prepare_cases(spec: Spec, limits: ArchLimits, arch: str, sm_count: int | None = None, *,
                  allow_spills: bool = False, compile: Callable[..., Compiled] = compile_spec) -> PreparedTune:
    """Plan, prune, compile what is left, and prune again with the compiler's report (see the module's docstring)."""
    by_label = {kernel.label: kernel for kernel in spec.kernels}
    plans = launch_plans(spec, limits)
    launchable, pruned = prune_plans(plans.values(), allow_spills=True)
    wanted = {plan.kernel.label for plan in launchable}
    compiled = compile(spec, arch, skip={label for label in by_label if label not in wanted})
    completed = []
    for plan in launchable:
        cubin = compiled.get(plan.kernel.label)
        if isinstance(cubin, Cubin):
            plan = with_resources(plan, cubin.resources_of(plan.kernel.instance), limits, sm_count)
        completed.append(plan)
    kept, pruned_late = prune_plans(completed, allow_spills=allow_spills)
    pruned += pruned_late
    cases = {(plan.kernel.label, plan.shape.label): Case(index, plan.kernel, plan.shape, plan.kernel.precision, plan)
             for index, plan in enumerate(kept)}
    shapes = {shape.label: shape for shape in spec.shapes}
    records = [new_record(Case(0, by_label[p.kernel], shapes[p.shape], by_label[p.kernel].precision),
                          Status.INVALID, f"pruned before compiling: {p.reason}") for p in pruned]
    return PreparedTune(cases, compiled, pruned, records)


def tune_spec(spec: Spec | FilePath, strategy: Strategy | str = "exhaustive", budget: Budget = Budget(), *,
              device: int = 0, fresh: bool = False, result: RunResult | None = None,
              on_result: Callable[[CaseResult], None] | None = None,
              on_screen: Callable[[dict], None] | None = None) -> tuple[RunResult, list[SearchResult]]:
    """Tune `spec` on GPU `device` with `strategy` within `budget`; every full measurement goes to `result`.

    `spec` is a `Spec`, a spec file or a shipped spec's name; `strategy` a
    `Strategy` or its name (``exhaustive``, ``random``, ``halving``, ``tpe``).
    What ``driver-gemm tune`` then shows and writes is `pick_winners` of the
    returned run and `winners_spec`.
    Screens (fidelity below 1) go to ``result.settings.tune["screens"]``,
    never to its cases. The tuning cache answers what it knows unless
    `fresh`. A fault that poisons the process ends the search with
    `tune.evaluate.TuneAborted`; `result` keeps what was measured.
    """
    # Every argument before the spec is read or the driver asked: a GPU-less machine still catches a mistake, and a
    # strategy given where the budget goes (tune_spec("seed", 5)) is named rather than found deep in the search.
    if not isinstance(spec, (Spec, str, os.PathLike)):
        raise WrongArgumentType(f"tune_spec: spec is a Spec (from load_spec or spec_from_dict), the path of a spec "
                                f"file or a shipped spec's name, got {type(spec).__name__}")
    if not isinstance(strategy, (Strategy, str)):
        raise WrongArgumentType(f"tune_spec: strategy is a Strategy or its name ({', '.join(STRATEGIES)}), got "
                                f"{strategy!r:.40} ({type(strategy).__name__})")
    if not isinstance(budget, Budget):
        raise WrongArgumentType(f"tune_spec: budget is a Budget (such as Budget(seconds=300) or "
                                f"Budget(configurations=20)), got {budget!r:.40} ({type(budget).__name__})")
    device = ordinal_argument("tune_spec", "device", device)
    fresh = flag_argument("tune_spec", "fresh", fresh)
    if result is not None and not isinstance(result, RunResult):
        raise WrongArgumentType(f"tune_spec: result is a RunResult to add the cases to, or None, got "
                                f"{type(result).__name__}")
    for name, callback in (("on_result", on_result), ("on_screen", on_screen)):
        callback_argument("tune_spec", name, callback)
    if isinstance(strategy, str):
        strategy = make_strategy(strategy)
    if not isinstance(spec, Spec):
        spec = load_spec(spec)
    result = result or RunResult(spec=spec.name, spec_path=path_text(spec.path) if spec.path else None)
    result.started = now()
    props = read_properties(device)
    result.environment = environment(props)
    screens: list[dict] = []
    result.settings = RunSettings(measure=dataclasses.asdict(spec.measure), verify=dataclasses.asdict(spec.verify),
                                  scalars=dict(spec.scalars), isolate=False,
                                  tune={"strategy": strategy.name, "budget_s": budget.seconds,
                                        "budget_configurations": budget.configurations, "screens": screens})
    result.provenance = provenance(spec, result.environment, result.settings)
    limits = limits_from_device(props)
    prepared = prepare_cases(spec, limits, props.arch, props.sm_count,
                             allow_spills=isinstance(strategy, Exhaustive))

    def record(case: CaseResult) -> None:
        result.cases.append(case)
        if on_result:
            on_result(case)

    def note(screen: dict) -> None:
        screens.append(screen)
        if on_screen:
            on_screen(screen)

    for case in prepared.pruned_records:
        record(case)
    cache = TuningCache(fresh=fresh)
    session = Session(device, spec.baseline)
    session.wait_for_cublas()          # a search times from its first step: its cuBLAS library loaded first
    evaluator = None
    try:
        evaluator = Evaluator(session, spec, prepared.cases, prepared.compiled, record=record, note=note,
                              cache=cache, cache_key=lambda case: tuning_key(
                                  spec, case.kernel, case.shape, result.environment, props.arch,
                                  case.plan.buffers if case.plan is not None else None),
                              device_info=CaseDevice(props.name, props.uuid, props.ordinal),
                              peak_gflops=props.fp32_peak_gflops, device_properties=result.environment.get("device"))
        searches = search_all(prepared.groups(spec), strategy, evaluator, budget)
    finally:
        session.close()
        result.finished = now()
        result.settings.tune["cache"] = {"hits": cache.hits, "misses": cache.misses}
        if evaluator is not None:     # where the search's time went, by kind of work
            result.settings.tune["work"] = {"counts": dict(evaluator.counts), "seconds": evaluator.seconds}
    return result, searches
