"""Deal the cases of a spec out to several GPUs: an estimated cost per case, shapes cut into tasks.

A task is one shape and a group of its kernels; the GPU that takes it also runs the shape's cuBLAS
case(s), so each kernel's % of cuBLAS is measured on the GPU that ran it. `CostModel` estimates a
case's seconds (sampling limits, host work on the operands, fixed costs), recorded times replacing
the estimates where a spec has them (`estimates`); `plan_tasks` picks how finely to cut by
simulating the schedule. The cost model in full: docs/multi-gpu.md.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ..measure.reference import uses_cpu_reference
from ..measure.rounds import round_settings
from ..measure.timing import MIN_SAMPLES_ON_TIMEOUT
from ..specfile.model import MeasureSettings, Shape, Spec
from ..cuda.occupancy import arch_limits
from ..planning.cases import Case, cases_of, dispatched
from ..planning.case_plan import plan_launch
from .estimates import Remembered, recall

# What a task lists beside its baselines' precisions for a shape's operands and reference (`operands_cost`).
OPERANDS = "operands"
# Tasks per GPU tried by `plan_tasks` (about): 1 is a split made in advance, more is finer dealing.
GRANULARITIES = tuple(1 + step / 4 for step in range(45))
# How much longer (as a share of the shortest simulated run) a finer cut may be and still be chosen: insurance
# against what the estimate gets wrong, bought with repeated baselines and operands. Cases priced at what they
# took before (`CostModel.case_s`) are known far better than estimated ones, so a plan priced so takes less insurance
# (a needless split of a large shape repeats its baseline, draw and reference, which cost seconds).
SLACK = 0.02
REMEMBERED_SLACK = 0.005


@dataclass(frozen=True)
class CostModel:
    """Estimated seconds of a case on one GPU, summed from per-step costs (docs/multi-gpu.md).

    The defaults are the costs' sizes on one GPU, so that a first run deals its tasks by estimates of the
    right order; recorded times (`launch_ms`, `case_s`) replace them where known.
    """

    case_overhead_s: float = 0.03       # planning, module load, the record and its trip to the parent
    input_element_s: float = 0.08e-9    # per element of A and B, per case: copied to the GPU
    draw_element_s: float = 0.8e-9      # per element of A and B, per shape and GPU (per case when typed): drawn
    output_element_s: float = 2e-9      # per element of C: poisoned, copied back and checked in float64
    reference_element_s: float = 3.5e-9 # per element of C, per shape and GPU: cuBLAS's product as the reference
    cpu_reference_gflops: float = 100.0 # the host's float64 product, where it is the reference
    kernel_tflops: float = 10.0         # assumed speed of a kernel under test (kernels under test vary widely)
    baseline_tflops: float = 50.0       # assumed speed of a vendor row, where no launch time is recorded
    flush_s: float = 35e-6              # per sample beyond the kernel: the L2 flush, the gate, the events
    task_overhead_s: float = 0.15       # a task: taking it, its planning and compiling (cached)
    run_start_s: float = 3.0            # a run's start: process, imports, compile, its GPU worker process, its end
    cluster_start_s: float = 0.0        # several GPUs on Dask: the cluster's start and stop (local GPUs: none)
    time_cases: bool = True             # False: verify only, one checked launch per case
    # Recorded launch times (kernel label, or its name, or baseline label; shape label) -> ms, used where known.
    launch_ms: dict = field(default_factory=dict, compare=False, hash=False)
    # Recorded wall seconds of whole cases (kernel or baseline label, shape label), used before anything else.
    case_s: dict = field(default_factory=dict, compare=False, hash=False)


def timing_cost(launch_s: float, settings: MeasureSettings, flush_s: float) -> float:
    """Wall seconds of warm-up and sampling for a launch of `launch_s`, under the stop rules of `measure`."""
    launches = settings.graph_launches if settings.mode == "graph" else 1
    gpu_per_sample = launch_s * launches
    per_sample = gpu_per_sample + (flush_s if settings.flush_l2 else 0.0)
    needed = max(settings.min_samples, math.ceil(settings.min_time_s / max(gpu_per_sample, 1e-9)))
    sampling = min(needed, settings.max_samples) * per_sample
    floor = min(MIN_SAMPLES_ON_TIMEOUT, settings.min_samples) * per_sample
    return settings.warmup * per_sample + max(min(sampling, settings.timeout_s), floor)


def launchable(case: Case, spec: Spec) -> bool:
    """Whether `case` gets past its launch checks (its plan, or one made for sm_90's limits): else it costs nothing."""
    if case.kernel is None:
        return True
    plan = case.plan or plan_launch(case.kernel, case.shape, arch_limits("sm_90"), dict(spec.scalars))
    return plan.valid


def case_cost(case: Case, spec: Spec, model: CostModel = CostModel()) -> float:
    """Estimated wall seconds of `case`: fixed cost, host work on the operands, reference, checked launch, timing."""
    if not launchable(case, spec):       # an INVALID row (a `require:` that fails): recorded, never launched
        return model.case_overhead_s
    took = model.case_s.get((case.label, case.shape.label))
    if took is not None:                 # what the case took in an earlier run on a GPU of this model
        return took
    shape = case.shape
    cost = model.case_overhead_s + (shape.M * shape.K + shape.K * shape.N) * model.input_element_s
    checked = not case.is_baseline or uses_cpu_reference(spec.verify, shape, spec.baseline)
    if checked:
        cost += shape.M * shape.N * model.output_element_s
    if not shares_operands(case):        # a typed case draws its own inputs and works out its own reference
        cost += _draw_s(shape, model) + (_reference_s(shape, spec, model) if checked else 0.0)
    recorded = model.launch_ms.get((case.label, shape.label))        # as `estimates` remembers them
    if recorded is None and case.kernel is not None:                  # as a results file names a kernel
        recorded = model.launch_ms.get((case.kernel.name, shape.label))
    launch_s = recorded / 1e3 if recorded is not None else \
        shape.flops / ((model.baseline_tflops if case.is_baseline else model.kernel_tflops) * 1e12)
    cost += launch_s
    if model.time_cases:
        cost += _timing_s(case, spec, launch_s, model)
    return cost


def _timing_s(case: Case, spec: Spec, launch_s: float, model: CostModel) -> float:
    """Wall seconds of timing `case`: alone, or in rounds with its vendor row (``measure.rounds``), each side
    under `rounds.round_settings`."""
    rounds = spec.measure.rounds
    if rounds <= 1 or case.is_baseline or case.baseline_label is None:
        return timing_cost(launch_s, spec.measure, model.flush_s)
    recorded = model.launch_ms.get((case.baseline_label, case.shape.label))
    vendor_s = recorded / 1e3 if recorded is not None else case.shape.flops / (model.baseline_tflops * 1e12)
    share = round_settings(spec.measure, rounds)
    return rounds * (timing_cost(launch_s, share, model.flush_s) + timing_cost(vendor_s, share, model.flush_s))


def shares_operands(case: Case) -> bool:
    """Whether `case` takes its shape's operands and reference as the GPU keeps them (FP32 kernels and cuBLAS)."""
    return case.lt is None and (case.kernel is None or not case.kernel.is_typed)


def _draw_s(shape: Shape, model: CostModel) -> float:
    return (shape.M * shape.K + shape.K * shape.N) * model.draw_element_s


def _reference_s(shape: Shape, spec: Spec, model: CostModel) -> float:
    if uses_cpu_reference(spec.verify, shape, spec.baseline):
        return shape.flops / 1e9 / model.cpu_reference_gflops
    return shape.M * shape.N * model.reference_element_s


def operands_cost(shape: Shape, spec: Spec, model: CostModel = CostModel()) -> float:
    """What a GPU pays once for `shape` before its FP32 cases: drawing A and B and the float64 reference (0 when
    the shape has no such case, or when a case of it is priced at what it took, which includes them)."""
    return _operands_s(shape, [case for case in cases_of(spec) if case.shape == shape], spec, model)


def _operands_s(shape: Shape, cases: list[Case], spec: Spec, model: CostModel) -> float:
    """`operands_cost` of `shape`, whose cases are `cases`."""
    shared = [case for case in cases if shares_operands(case)]
    if not shared or any((case.label, shape.label) in model.case_s for case in shared):
        return 0.0
    return _draw_s(shape, model) + _reference_s(shape, spec, model)


@dataclass(frozen=True)
class Task:
    """Some shapes and some kernels (labels, in spec order): every kernel on every shape, with estimated seconds.

    A large shape makes tasks of one shape and a group of its kernels; small
    shapes are bundled, whole, into one task so that they share its start-up.
    """

    shapes: tuple[Shape, ...]
    kernels: tuple[str, ...]
    kernels_s: float                                          # the kernels' cases
    # What a GPU pays once for each shape it takes, (shape, what, seconds): its cuBLAS case per precision, and
    # its operands and reference (`OPERANDS`).
    baselines: tuple[tuple[Shape, str, float], ...] = ()

    @property
    def estimate_s(self) -> float:
        """The task's seconds on a GPU that has run none of its baselines yet (start-up not included)."""
        return self.kernels_s + sum(seconds for _, _, seconds in self.baselines)

    @property
    def label(self) -> str:
        shapes = ", ".join(shape.label for shape in self.shapes)
        return f"{shapes} [{', '.join(self.kernels)}]" if len(self.shapes) == 1 else shapes

    def spec_of(self, spec: Spec) -> Spec:
        """`spec` cut down to this task: its shapes and its kernels (and their baselines, where the spec has them)."""
        wanted = set(self.kernels)
        kept = [k for k in spec.kernels   # a task names a dispatched kernel by the label its table gives it
                if k.label in wanted or any(dispatched(spec, k, shape)[0].label in wanted for shape in self.shapes)]
        return dataclasses.replace(spec, shapes=self.shapes, kernels=spec.with_members(kept))


@dataclass
class Schedule:
    """A simulated run: which worker ran which task, and when each worker finished."""

    workers: int
    assigned: list[list[Task]] = field(default_factory=list)
    finish_s: list[float] = field(default_factory=list)
    baseline_runs: int = 0                   # cuBLAS cases run, counting each GPU's own

    @property
    def makespan_s(self) -> float:
        return max(self.finish_s, default=0.0)


def shape_costs(spec: Spec, model: CostModel = CostModel()) -> dict[Shape, tuple[list[tuple[str, float, str]], dict]]:
    """Per shape: its kernels (label, estimated seconds, precision) in spec order, and what a GPU pays once for
    it: its baselines' seconds by precision, and its operands' (`OPERANDS`) where they cost anything."""
    out: dict[Shape, tuple[list[tuple[str, float, str]], dict]] = {shape: ([], {}) for shape in spec.shapes}
    for shape, cases in _by_shape(spec).items():
        kernels, baselines = out[shape]
        for case in cases:
            if case.is_baseline:
                baselines[case.precision] = case_cost(case, spec, model)
            else:
                kernels.append((case.label, case_cost(case, spec, model), case.precision))
        operands = _operands_s(shape, cases, spec, model)
        if operands > 0:
            baselines[OPERANDS] = operands
    return out


def _by_shape(spec: Spec) -> dict[Shape, list[Case]]:
    """The spec's cases by shape, in run order."""
    cases: dict[Shape, list[Case]] = {shape: [] for shape in spec.shapes}
    for case in cases_of(spec):
        cases[case.shape].append(case)
    return cases


def single_gpu_s(spec: Spec, model: CostModel = CostModel()) -> float:
    """Estimated seconds of the whole spec on one GPU, as one run (one start-up), from start to exit."""
    return model.run_start_s + sum(sum(case_cost(case, spec, model) for case in cases)
                                   + _operands_s(shape, cases, spec, model) for shape, cases in _by_shape(spec).items())


def remembered_model(spec: Spec, gpus: list[str | None]) -> tuple[CostModel, dict]:
    """The default model, with what earlier runs of `spec` recorded on GPUs of these names (`estimates`: whole
    cases' seconds, launch times); and how many of the spec's cases it knows each way, for the run's settings."""
    known = Remembered()
    for gpu in reversed(list(dict.fromkeys(gpus))):      # the first GPU's figures are taken last: they win
        known.update(recall(spec.name, gpu))
    cases = [(case.label, case.shape.label) for case in cases_of(spec)]
    return (CostModel(launch_ms=known.launch_ms, case_s=known.case_s),
            {"remembered_cases": sum(key in known.case_s for key in cases),
             "remembered_launches": sum(key in known.launch_ms for key in cases), "cases": len(cases)})


def predicted_run_s(spec: Spec, workers: int, model: CostModel = CostModel()) -> float:
    """Estimated seconds of the whole spec on `workers` GPUs, from start to exit: start-up and the simulated tasks."""
    if workers == 1:
        return single_gpu_s(spec, model)
    return model.run_start_s + model.cluster_start_s + simulate_schedule(plan_tasks(spec, workers, model), workers,
                                                                model).makespan_s


def split_shape(shape: Shape, kernels: list[tuple[str, float, str]], baselines: dict[str, float],
                groups: int) -> list[Task]:
    """`kernels` of `shape` dealt into at most `groups` tasks of about equal cost (largest kernel to lightest group)."""
    groups = max(1, min(groups, len(kernels)))
    bins: list[list[tuple[str, float, str]]] = [[] for _ in range(groups)]
    loads = [0.0] * groups
    for kernel in sorted(kernels, key=lambda k: k[1], reverse=True):
        lightest = loads.index(min(loads))
        bins[lightest].append(kernel)
        loads[lightest] += kernel[1]
    order = {label: position for position, (label, _, _) in enumerate(kernels)}
    tasks = []
    for members, load in zip(bins, loads):
        if not members:
            continue
        members.sort(key=lambda k: order[k[0]])
        precisions = [p for p in baselines if p in ("fp32", OPERANDS) or any(k[2] == p for k in members)]
        tasks.append(Task((shape,), tuple(k[0] for k in members), load,
                          tuple((shape, p, baselines[p]) for p in precisions)))
    return tasks


def tasks_at(spec: Spec, target_s: float, model: CostModel = CostModel(), costs: dict | None = None,
             split_s: float | None = None) -> list[Task]:
    """Tasks of about `target_s` each, largest first: large shapes cut into groups of kernels, small ones bundled.

    A shape over `split_s` (default `target_s`), baselines included, is cut
    into groups of about `target_s`; the others are dealt into as many
    bundles as their total makes of `target_s`, each shape to the lightest
    bundle, largest first (with `split_s` infinite, every shape is kept
    whole, a large one in a bundle of its own). `costs` are `shape_costs`,
    when already made.
    """
    split_s = target_s if split_s is None else split_s
    every_kernel = tuple(k.label for k in spec.kernels)
    tasks: list[Task] = []
    small: list[tuple[Shape, float, dict]] = []
    for shape, (kernels, baselines) in (costs or shape_costs(spec, model)).items():
        kernels_s = sum(cost for _, cost, _ in kernels)
        if kernels and kernels_s + sum(baselines.values()) > split_s:
            tasks.extend(split_shape(shape, kernels, baselines, math.ceil(kernels_s / max(target_s, 1e-9))))
        else:
            small.append((shape, kernels_s + sum(baselines.values()), baselines))
    if small:
        count = max(1, round(sum(cost for _, cost, _ in small) / max(target_s, 1e-9)))
        bundles: list[list[tuple[Shape, float, dict]]] = [[] for _ in range(min(count, len(small)))]
        loads = [0.0] * len(bundles)
        for item in sorted(small, key=lambda item: item[1], reverse=True):
            lightest = loads.index(min(loads))
            bundles[lightest].append(item)
            loads[lightest] += item[1]
        tasks.extend(_bundled(bundle, every_kernel, spec) for bundle in bundles if bundle)
    return sorted(tasks, key=lambda t: t.estimate_s, reverse=True)


def _bundled(bundle: list[tuple[Shape, float, dict]], kernels: tuple[str, ...], spec: Spec) -> Task:
    """Whole shapes as one task, in the spec's order."""
    order = {shape: position for position, shape in enumerate(spec.shapes)}
    bundle = sorted(bundle, key=lambda item: order[item[0]])
    baselines = tuple((shape, p, seconds) for shape, _, costs in bundle for p, seconds in costs.items())
    return Task(tuple(shape for shape, _, _ in bundle), kernels,
                sum(cost for _, cost, _ in bundle) - sum(seconds for _, _, seconds in baselines), baselines)


def simulate_schedule(tasks: list[Task], workers: int, model: CostModel = CostModel()) -> Schedule:
    """List scheduling as the cluster does it: each task, in order, to the worker that is free first.

    A worker pays `model.task_overhead_s` per task, and a shape's baselines
    and operands the first time it takes that shape (its worker process,
    which keeps them, is kept between tasks, so no task pays for a process).
    """
    schedule = Schedule(workers, [[] for _ in range(workers)], [0.0] * workers)
    has_run: set[tuple[int, Shape, str]] = set()
    for task in tasks:
        worker = schedule.finish_s.index(min(schedule.finish_s))
        cost = model.task_overhead_s + task.kernels_s
        for shape, precision, seconds in task.baselines:
            if (worker, shape, precision) not in has_run:
                schedule.baseline_runs += precision != OPERANDS
                cost += seconds
                has_run.add((worker, shape, precision))
        schedule.assigned[worker].append(task)
        schedule.finish_s[worker] += cost
    return schedule


def plan_tasks(spec: Spec, workers: int, model: CostModel = CostModel()) -> list[Task]:
    """The tasks to hand out to `workers` GPUs, largest first: the cut whose simulated schedule ends soonest.

    Coarser cuts pay less per task and repeat fewer baselines; finer ones balance better, above all
    against what the estimate gets wrong. Each granularity of `GRANULARITIES` (tasks per GPU) is
    simulated with large shapes cut and with every shape whole, and of the cuts within the slack of the
    shortest (`SLACK`, less where costs are remembered: `REMEMBERED_SLACK`, `remembered_share`) the one
    with the most tasks is kept (on one GPU, the shortest).
    """
    if workers < 1:
        raise ValueError("at least one worker")
    costs = shape_costs(spec, model)
    kernel_total = sum(cost for kernels, _ in costs.values() for _, cost, _ in kernels)
    tried = []
    shape_s = [sum(cost for _, cost, _ in kernels) + sum(paid_once.values())
               for kernels, paid_once in costs.values() if kernels]
    for per_worker in GRANULARITIES:
        target_s = kernel_total / (workers * per_worker)
        # Large shapes cut, or every shape whole and the small ones dealt (the same tasks when none is large).
        for split_s in (None, math.inf) if any(s > target_s for s in shape_s) else (None,):
            tasks = tasks_at(spec, target_s, model, costs, split_s)
            tried.append((simulate_schedule(tasks, workers, model).makespan_s, tasks))
    shortest = min(makespan for makespan, _ in tried)
    if workers == 1:            # nothing to balance: the shortest, the coarser on a tie
        return next(tasks for makespan, tasks in tried if makespan <= shortest + 1e-9)
    slack = SLACK + (REMEMBERED_SLACK - SLACK) * remembered_share(spec, model)
    return max((entry for entry in tried if entry[0] <= shortest * (1 + slack) + 1e-9),
               key=lambda entry: (len(entry[1]), -entry[0]))[1]


def remembered_share(spec: Spec, model: CostModel) -> float:
    """The share of the spec's estimated seconds that `model` prices at what the cases took before."""
    costs = [(case_cost(case, spec, model), (case.label, case.shape.label) in model.case_s) for case in cases_of(spec)]
    total = sum(cost for cost, _ in costs)
    return sum(cost for cost, known in costs if known) / total if total > 0 else 0.0
