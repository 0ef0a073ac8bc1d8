"""What a task of a run on several GPUs reuses, how it runs, and how its cases land, whoever drives the GPUs.

Both drivers (threads of this process, `local_gpus`; Dask workers, `distribute`) share it:
`GpuBaselines` remembers the baselines a GPU has run and `run_task_on` runs a task there, skipping
those and what a resumed run holds; on the caller's side `ResultCollector` puts each case into the
`RunResult` once, naming in each kernel row's ``measured_against`` its own GPU's baseline;
`begin_run` fills the run's environment first, `tasks_to_run` drops the tasks a resume finished.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

from ..results.records import BaselineRow, CaseResult, RunResult, case_key
from ..results.text import path_text
from ..specfile.model import Spec
from ..planning.cases import cases_of, ran
from .environment import now, provenance
from .one_gpu import run_settings, run_spec
from .schedule import CostModel, Task, plan_tasks
from ..session.options import Placement, RunOptions
from .worker import GpuWorker


def run_part(spec: Spec, options: RunOptions, placement: Placement, previous: list[CaseResult],
             on_result: Callable[[CaseResult], None]) -> dict:
    """A GPU's part: `spec` (a task's) on one GPU, skipping `previous`; the results as plain data."""
    return run_spec(spec, options, placement, previous=previous, on_result=on_result).as_dict()


def same_gpu(case: CaseResult, device: int, uuid: str | None) -> bool:
    """Whether `case` ran on this GPU: by UUID where both are known, else by ordinal."""
    if uuid and case.device.uuid:
        return case.device.uuid == uuid
    return case.device.ordinal == device


@dataclass
class TaskInputs:
    """What a task runs on one GPU: its subspec, and the records it takes as done (`reused` baselines, `kept` cases)."""

    subspec: Spec
    reused: list[CaseResult]
    kept: list[CaseResult]

    @property
    def previous(self) -> list[CaseResult]:
        return self.reused + self.kept

    @property
    def skipped(self) -> set[tuple[str, str]]:
        return {case_key(case) for case in self.previous}


class GpuBaselines:
    """One GPU's own baselines during a run, (shape label, precision) -> record, and the GPU's UUID once a case names it.

    A GPU runs a shape's baseline the first time it takes the shape; every
    later task of the same GPU on that shape reuses it, and so does a resumed
    run whose earlier records hold one from this GPU.
    """

    def __init__(self, device: int, uuid: str | None = None):
        self.device = device
        # Known from the start where the GPU was described: several machines' GPUs can share an ordinal.
        self.uuid: str | None = uuid
        self.baselines: dict[tuple[str, str], dict] = {}

    def inputs_of(self, spec: Spec, task: Task, earlier: Sequence[CaseResult]) -> TaskInputs:
        """`task`'s subspec, the baselines this GPU has for it, and the kernel cases of `earlier` (a resumed run's) in it."""
        subspec = task.spec_of(spec)
        cases = cases_of(subspec)
        reused = []
        for shape in subspec.shapes:
            for precision in {c.precision for c in cases if c.shape == shape and c.is_baseline}:
                known = self.baselines.get((shape.label, precision))
                if known is None:
                    known = next((c.as_dict() for c in earlier if c.is_baseline and c.shape == shape and c.ok
                                  and c.precision == precision and same_gpu(c, self.device, self.uuid)), None)
                if known is not None:
                    reused.append(CaseResult.from_dict(known))
        mine = {case.key for case in cases}
        kept = [c for c in earlier if not c.is_baseline and case_key(c) in mine]
        return TaskInputs(subspec, reused, kept)

    def remember(self, cases: Sequence[dict]) -> None:
        """Note the passing baselines among a task's new `cases`, and the GPU's UUID, for the GPU's later tasks."""
        for case in cases:
            record = CaseResult.from_dict(case)
            if record.is_baseline and record.ok:
                self.baselines[record.shape.label, record.precision] = case
            if record.device.uuid:
                self.uuid = record.device.uuid


def run_task_on(gpu_baselines: GpuBaselines, part: Callable, spec: Spec, task: Task, options: RunOptions,
                earlier: Sequence[CaseResult], on_result: Callable[[CaseResult], None],
                gpu_worker: GpuWorker | None, isolate: bool = True) -> dict:
    """`task` on the GPU of `gpu_baselines` with `part`; each case to `on_result` as it finishes; the task's report
    as plain data.

    The report holds the GPU, the environment the part saw, the task's new
    cases (``cases``), the baselines it reused (``reused``), its label, its
    estimate and its wall seconds.
    """
    started = time.monotonic()
    inputs = gpu_baselines.inputs_of(spec, task, earlier)
    placement = Placement(gpu_baselines.device, isolate, gpu_worker=gpu_worker)
    data = part(inputs.subspec, options, placement, inputs.previous, on_result)
    skipped = inputs.skipped
    new = [c for c in data["cases"] if (c["kernel"], c["shape"]["label"]) not in skipped]
    gpu_baselines.remember(new)
    return {"device": gpu_baselines.device, "environment": data.get("environment", {}), "cases": new,
            "reused": [c.as_dict() for c in inputs.reused], "task": task.label,
            "estimate_s": round(task.estimate_s, 3), "wall_s": round(time.monotonic() - started, 3)}


def begin_run(spec: Spec, result: RunResult | None, previous: Sequence[CaseResult], host: dict,
              described: Sequence[tuple[str, int, dict]], isolate: bool = True) -> tuple[RunResult, list[CaseResult]]:
    """The run's `RunResult`, its environment and settings filled before any case lands; the cases of `previous` kept.

    `described` is (worker, GPU ordinal, that GPU's environment) per GPU: the
    run's environment is `host`'s, the first GPU's, and every GPU's under
    ``gpus``, so a case log's header written with the first case describes
    every GPU. The cases of `previous` that ran go in first, and are returned.
    """
    result = result or RunResult(spec=spec.name, spec_path=path_text(spec.path) if spec.path else None)
    result.started = now()
    kept = [case for case in previous if ran(case)]
    result.cases.extend(kept)
    gpus = [{"worker": worker, "device": ordinal, **described_gpu} for worker, ordinal, described_gpu in described]
    result.environment = {**host, **(described[0][2] if described else {}), "gpus": gpus}
    result.settings = run_settings(result, spec, isolate, tasks=[])
    result.provenance = provenance(spec, result.environment, result.settings)
    return result, kept


def tasks_to_run(spec: Spec, kept: Sequence[CaseResult], gpus: int, model: CostModel = CostModel()) -> list[Task]:
    """The tasks of `spec` for `gpus` GPUs, largest first, less those whose every kernel case `kept` already holds."""
    skipped = {case_key(case) for case in kept if not case.is_baseline}
    return [task for task in plan_tasks(spec, max(1, gpus), model)
            if any((label, shape.label) not in skipped for label in task.kernels for shape in task.shapes)
            or not task.kernels]


class ResultCollector:
    """The caller's side of a run on several GPUs: each case lands in `result` once, measured against its GPU's baseline.

    A baseline lands once per GPU, a kernel case once. A kernel row's
    ``measured_against`` names the baseline (kernel, shape, GPU) of the GPU
    that ran it: one landed earlier, one the GPU reused (`reused`), or one of
    the resumed run's `kept` records. Each landed case is passed to
    `on_result`; call `land` from one thread at a time.
    """

    def __init__(self, result: RunResult, kept: Sequence[CaseResult],
                 on_result: Callable[[CaseResult], None] | None = None):
        self.result = result
        self.on_result = on_result
        self.rows = {row_key(case): case for case in kept}
        self.baselines: dict[tuple, CaseResult] = {}
        for case in kept:
            if case.is_baseline and case.device.known and case.ok:
                self.baselines[gpu_of(case, case.device.ordinal), case.shape.label, case.precision] = case

    def add(self, data: dict, device: int) -> None:
        """A case (as plain data) that GPU `device` finished: into the result and to `on_result`, unless landed already.

        A baseline that failed (or crashed) and that its GPU ran again, passing,
        takes the failed row's place: the GPU's kernels were measured against it.
        """
        case = CaseResult.from_dict(data)
        earlier = self.rows.get(row_key(case))
        if earlier is not None:
            if not (case.is_baseline and case.ok and not earlier.ok):
                return
            self.result.cases.remove(earlier)
        self.rows[row_key(case)] = case
        gpu = gpu_of(case, device)
        if case.is_baseline:
            self.baselines[gpu, case.shape.label, case.precision] = case
        else:
            baseline = self.baselines.get((gpu, case.shape.label, case.precision))
            if baseline is not None:
                case.measured_against = BaselineRow(baseline.kernel, baseline.shape.label, baseline.device,
                                                    baseline.algorithm)
        self.result.cases.append(case)
        if self.on_result:
            self.on_result(case)

    def reused(self, report: dict) -> None:
        """The baselines a task reused (from `run_task_on`'s report): its kernel rows are measured against them."""
        for data in report["reused"]:
            case = CaseResult.from_dict(data)
            self.baselines.setdefault((gpu_of(case, report["device"]), case.shape.label, case.precision), case)

    def task_done(self, report: dict, worker: str) -> None:
        """A finished task's report: its cases not landed yet, and its line in ``settings.tasks``."""
        self.reused(report)
        for case in report["cases"]:
            self.add(case, report["device"])
        self.result.settings.tasks.append({"task": report["task"], "worker": worker, "device": report["device"],
                                            "estimate_s": report["estimate_s"], "wall_s": report["wall_s"]})

    def finish(self, spec: Spec) -> None:
        """The end of the run, however it ended: the cases in the spec's shape order, baselines first; the time."""
        order = {s.label: i for i, s in enumerate(spec.shapes)}
        self.result.cases.sort(key=lambda c: (order.get(c.shape.label, len(order)), not c.is_baseline))
        self.result.finished = now()


def gpu_of(case: CaseResult, device: int | None) -> str | tuple:
    """The GPU that ran `case`: its UUID where the record has one (ordinals repeat across machines), else its ordinal."""
    return case.device.uuid or ("ordinal", device)


def row_key(case: CaseResult) -> tuple:
    """A row of a run on several GPUs: a baseline once per GPU, a kernel case once."""
    return (*case_key(case), case.device.key) if case.is_baseline else case_key(case)
