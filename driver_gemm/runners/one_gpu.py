"""The whole data flow for a spec on one GPU: plan and compile once, then run each case's steps.

`run_spec` is what library users call, and `OneGpu` the same behind the `runner.Runner` interface
(``driver-gemm run`` on one GPU). It only sequences: `build.plan_cases` plans and compiles, and the
cases run through `execute.execute_case` in this process (`in_process`) or isolated in a
`worker.GpuWorker`. Every case ends as a `CaseResult`: any exception inside it becomes its ERROR
record and the run goes on; after a fault that leaves CUDA unusable an isolated run continues in a
new process. Results reach `on_result` as they land.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import asdict
from typing import Callable, Sequence

from ..measure.stats import gflops
from ..results.records import CaseDevice, CaseResult, EnergyRecord, RunResult
from ..results.settings import RunSettings
from ..results.text import path_text
from ..errors import FilePath, WrongArgumentType, callback_argument
from ..specfile.load import load_spec
from ..specfile.model import Shape, Spec
from ..planning.build import plan_cases
from ..planning.cases import Case, left_to_run, ran
from .environment import environment, now, provenance
from ..cuda.occupancy import limits_from_device
from ..session.options import Placement, RunOptions
from .in_process import run_in_process
from .runner import Runner
from .worker import GpuWorker
from ..cuda.device import driver_module, read_properties


def run_spec(spec: Spec | FilePath, options: RunOptions = RunOptions(),
             placement: Placement = Placement(), *,
             on_result: Callable[[CaseResult], None] | None = None,
             on_start: Callable[[Case], None] | None = None, result: RunResult | None = None,
             previous: Sequence[CaseResult] = ()) -> RunResult:
    """Run every kernel of `spec` (and cuBLAS, unless the spec turns it off) on every shape.

    `options` says how the run goes beyond its spec (timed or verify only, failure pictures) and
    `placement` where its cases run: the GPU, in-process or isolated in a worker process, a caller's
    context, stream or worker. Results go into `result` (a new `RunResult` if none) as they finish and
    to `on_result` (`on_start` hears of each case first); an interrupted run keeps them there. Cases of
    `previous` (a resumed run) that ran are kept, those marked ``not_run`` are run. Isolated, a worker is
    replaced after a fault or hang (only a new process recovers CUDA) and is started before planning so
    that its start-up overlaps it; in-process, a fault ends the run and the rest are marked not run.
    Each worker's start-up seconds go to ``result.settings.worker_start_s`` and ``worker_start_steps``.
    `spec` may also be the path of a spec file (read with `load_spec`).
    """
    # Checked before the spec is read or a worker started: a dict of options would otherwise fail deep inside.
    if not isinstance(options, RunOptions):
        raise WrongArgumentType(f"run_spec: options is a RunOptions (for instance RunOptions(time=False)), "
                                f"got {type(options).__name__}")
    if not isinstance(placement, Placement):
        raise WrongArgumentType(f"run_spec: placement is a Placement (for instance Placement(device=0, "
                                f"isolate=True)), got {type(placement).__name__}")
    for name, callback in (("on_result", on_result), ("on_start", on_start)):
        callback_argument("run_spec", name, callback, "a function called with each case")
    if result is not None and not isinstance(result, RunResult):
        raise WrongArgumentType(f"run_spec: result is a RunResult to add the cases to, or None, got "
                                f"{type(result).__name__}")
    if isinstance(previous, (str, bytes)) or not all(isinstance(case, CaseResult) for case in previous):
        raise WrongArgumentType("run_spec: previous is the CaseResults of an earlier run (run.cases), got "
                                f"{previous!r:.40}")
    spec = _spec_argument(spec)
    result = result or RunResult(spec=spec.name, spec_path=path_text(spec.path) if spec.path else None)
    result.started = now()
    kept = [case for case in previous if ran(case)]
    with contextlib.ExitStack() as stack:
        if placement.isolate and placement.gpu_worker is None:
            # The driver first: on a machine without one, NoGpuError here, rather than a worker spawned only to
            # fail and find its parent gone (cuInit is asked once per process: _run's call then costs nothing).
            driver_module()
            worker = stack.enter_context(GpuWorker(placement.device, options, want_cublas=spec.baseline))
            placement = dataclasses.replace(placement, gpu_worker=worker)
        if placement.isolate and left_to_run(spec, kept):
            placement.gpu_worker.start()
        _run(spec, options, placement, result, kept, on_result=on_result, on_start=on_start)
    return result


def _spec_argument(spec) -> Spec:
    """`spec` as a `Spec`: one already, or read from its path; `WrongArgumentType` saying what is taken otherwise."""
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        return load_spec(str(spec))
    raise WrongArgumentType(f"run_spec takes a Spec (from load_spec(path) or spec_from_dict(mapping)) or the path of "
                            f"a spec file, got {type(spec).__name__}")


class OneGpu(Runner):
    """The cases on the GPU of `placement` (`run_spec`), in this process or isolated in a worker process as it says.

    With `release_given`, a worker process the caller gave in `placement` (for its last run on it)
    is told to stop once the run is done, so that its exit overlaps what the caller does next; the
    caller still closes it.
    """

    def __init__(self, placement: Placement = Placement(), *, release_given: bool = False):
        self.placement, self.release_given = placement, release_given

    def run(self, spec, options=RunOptions(), *, on_result=None, on_start=None, result=None, previous=()):
        result = run_spec(spec, options, self.placement, on_result=on_result, on_start=on_start, result=result,
                          previous=previous)
        if self.release_given and self.placement.gpu_worker is not None:
            self.placement.gpu_worker.release()
        return result


def _run(spec: Spec, options: RunOptions, placement: Placement, result: RunResult, kept: list[CaseResult], *,
         on_result: Callable[[CaseResult], None] | None, on_start: Callable[[Case], None] | None) -> None:
    """`run_spec` once its worker (if isolated) is starting: plan, compile, run every case into `result`."""
    worker_starts: list[float] = []
    worker_start_steps: list[dict] = []
    result.settings = run_settings(result, spec, placement.isolate, options, worker_start_s=worker_starts,
                                   worker_start_steps=worker_start_steps)
    props = read_properties(placement.device)
    result.environment = environment(props)
    result.provenance = provenance(spec, result.environment, result.settings)
    device = result.environment["device"]
    cases, compiled = plan_cases(spec, limits_from_device(props), props.arch, props.sm_count,
                                 skip={(case.kernel, case.shape.label) for case in kept})
    baselines: dict[tuple[Shape, str], float] = {(case.shape, case.kernel): case.timing.median_ms
                                                 for case in kept if _is_timed_baseline(case)}
    result.cases.extend(kept)

    def finish(case: CaseResult) -> None:
        if _is_timed_baseline(case):
            baselines[case.shape, case.kernel] = case.timing.median_ms
        # % of the peak of the case's own math (FP32 lanes, or a tensor-core kind: `gemm.peaks`).
        _finish_figures(case, baselines.get((case.shape, case.baseline_label)), case.peak_gflops(device))
        case.device = CaseDevice(props.name, props.uuid, props.ordinal)
        result.cases.append(case)
        if on_result:
            on_result(case)

    try:
        if placement.isolate:
            _run_isolated(placement.gpu_worker, spec, cases, compiled, finish, on_start, worker_starts,
                          worker_start_steps)
        else:
            run_in_process(spec, cases, compiled, options, placement, finish, on_start)
    finally:
        result.finished = now()


def _run_isolated(gpu_worker: GpuWorker, spec: Spec, cases: Sequence[Case], compiled,
                  finish: Callable[[CaseResult], None], on_start: Callable[[Case], None] | None,
                  worker_starts: list[float], worker_start_steps: list[dict]) -> None:
    """The cases in `gpu_worker`'s child process, replaced after a fault or a hang; the start-ups of the processes
    it made meanwhile go to `worker_starts` and `worker_start_steps`."""
    started = len(gpu_worker.starts)
    try:
        gpu_worker.run(spec, cases, compiled, finish, on_start)
    finally:
        worker_starts.extend(gpu_worker.starts[started:])
        worker_start_steps.extend(gpu_worker.start_steps[started:])


def run_settings(result: RunResult, spec: Spec, isolate: bool, options: RunOptions | None = None,
                 **more) -> RunSettings:
    """A run's settings: what the caller recorded before (``run --lock-clocks``), the spec's measure, verify and
    scalars, whether cases ran isolated, the vendor rows' algorithm choice and the timer of `options`, and `more`
    (fields the driver of the run fills)."""
    if options is not None:
        more = {"baseline_algorithm": options.baseline_choice.as_json(), "timer": options.timer, **more}
    return dataclasses.replace(result.settings, measure=asdict(spec.measure), verify=asdict(spec.verify),
                               scalars=dict(spec.scalars), isolate=isolate, **more)


def _is_timed_baseline(case: CaseResult) -> bool:
    """A baseline row that passed and was timed: its median is the 100% of the kernels measured against it."""
    return case.is_baseline and case.timing is not None and case.ok


def _finish_figures(case: CaseResult, baseline_ms: float | None, peak: float | None) -> None:
    """GFLOP/s, energy, % of peak, and % of the vendor row: of the vendor's time in the rounds the case shared
    with it where it was timed so (``measure.rounds``), else of the vendor row's own median."""
    if case.timing is None:
        return
    case.gflops = gflops(case.flops, case.timing.median_ms)
    case.energy = EnergyRecord.of(case.timing, case.flops)
    if case.timed_in_rounds is not None:
        case.pct_cublas = case.timed_in_rounds.pct_vendor
    elif baseline_ms:
        case.pct_cublas = 100.0 * baseline_ms / case.timing.median_ms
    if peak:
        case.pct_peak = 100.0 * case.gflops / peak
