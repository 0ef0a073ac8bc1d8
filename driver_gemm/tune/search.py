"""A tune on a GPU, in order: plan and prune, compile ahead, then search each kernel family on each shape.

`prepare_cases` needs no GPU: every configuration is planned on every shape, pruned before
compiling (`prepare.prune_plans`), compiled in parallel and pruned again on its resources (spills,
zero occupancy). `tune_spec` opens one `Session`, makes the evaluation callback
(`evaluate.Evaluator`) and runs the strategy over every (family, shape) group with
`strategies.search_all`. Exhaustive prunes only what cannot launch, so it measures every valid
configuration.

A family with a ``dispatch:`` table has one configuration per shape, the one its table picks (its own
kernel's or a member's), as `run` plans it: that configuration is measured under the family's name,
and nothing else of the family is searched (`dispatched_families_note` says so).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from typing import Callable

from ..cuda.compile import Cubin
from ..cuda.occupancy import ArchLimits, limits_from_device
from ..errors import FilePath, WrongArgumentType, callback_argument, flag_argument, ordinal_argument
from ..results.text import path_text
from ..planning.build import Compiled, compile_spec, launch_plans
from ..planning.cases import Case, cases_of, kernels_of, new_record
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

_log = logging.getLogger(__name__)


def family_of(case: Case) -> str:
    """The kernel family `case` is searched in and its winner named by: a table's family for a configuration its
    ``dispatch:`` table picked (a member's too), else the kernel's name (as `planning.cases.new_record` names it)."""
    if case.dispatch is not None and case.dispatch.table:
        return case.dispatch.table
    return case.kernel.name if case.kernel is not None else case.label


def dispatched_families_note(spec: Spec) -> str | None:
    """What a tune does with `spec`'s kernel families that have a ``dispatch:`` table, or None where none has: each
    is measured as its table picks per shape, under its name, and not searched."""
    tables = [name for name in spec.dispatch if any(kernel.name == name for kernel in spec.kernels)]
    if not tables:
        return None
    described = []
    for name in tables:
        members = spec.dispatch[name].members
        described.append(f"{name} (members {', '.join(members)})" if members else name)
    return (f"{', '.join(described)}: a dispatch table picks one configuration per shape, so tune measures the "
            "table's pick under the family's name and searches no other configuration of it; to search such a "
            "family, tune the sweep spec its table came from")


@dataclass
class PreparedTune:
    """The cases worth measuring (by kernel label and shape label), what compiled, and what was pruned."""

    cases: dict[tuple[str, str], Case]
    compiled: Compiled
    pruned: list[Pruned] = field(default_factory=list)
    pruned_records: list[CaseResult] = field(default_factory=list)

    def groups(self, spec: Spec) -> list[tuple[list[Configuration], Shape]]:
        """Per shape (in the spec's order), per kernel family (`family_of`): the configurations to search. A
        family with a ``dispatch:`` table has the one its table picks on the shape."""
        by_shape: dict[str, dict[str, list[Configuration]]] = {}
        for (label, shape_label), case in self.cases.items():
            families = by_shape.setdefault(shape_label, {})
            families.setdefault(family_of(case), []).append(Configuration(label, dict(case.kernel.params)))
        return [(space, shape) for shape in spec.shapes for space in by_shape.get(shape.label, {}).values()]


def prepare_cases(spec: Spec, limits: ArchLimits, arch: str, sm_count: int | None = None, *,
                  allow_spills: bool = False, compile: Callable[..., Compiled] = compile_spec) -> PreparedTune:
    """Plan, prune, compile what is left, and prune again with the compiler's report (see the module's docstring).

    Each case is the one `run` plans (`planning.cases.cases_of`): a configuration a ``dispatch:`` table picks
    carries its choice, so that its record is named by the family."""
    planned = {case.key: case for case in cases_of(spec) if not case.is_baseline}
    plans = launch_plans(spec, limits)
    launchable, pruned = prune_plans(plans.values(), allow_spills=True)
    wanted = {plan.kernel.label for plan in launchable}
    compiled = compile(spec, arch, skip={kernel.label for kernel in kernels_of(spec)} - wanted)
    completed = []
    for plan in launchable:
        cubin = compiled.get(plan.kernel.label)
        if isinstance(cubin, Cubin):
            plan = with_resources(plan, cubin.resources_of(plan.kernel.instance), limits, sm_count)
        completed.append(plan)
    kept, pruned_late = prune_plans(completed, allow_spills=allow_spills)
    pruned += pruned_late
    cases = {(plan.kernel.label, plan.shape.label):
             dataclasses.replace(planned[plan.kernel.label, plan.shape.label], index=index, plan=plan)
             for index, plan in enumerate(kept)}
    records = [new_record(planned[p.kernel, p.shape], Status.INVALID, f"pruned before compiling: {p.reason}")
               for p in pruned]
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
    if (dispatched := dispatched_families_note(spec)) is not None:
        _log.warning("%s", dispatched)
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
