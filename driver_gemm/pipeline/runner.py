"""The whole data flow for a spec: plan and compile once, then run each case's steps, in-process or isolated.

`run_spec` is what ``driver-gemm run`` and library users call. It only sequences: `build.plan_cases`
plans and compiles, `funnel.execute_case` runs one case's steps through the error funnel, and
`run_in_process` or a `worker.GpuWorker` runs the cases. Every case ends as a `CaseResult`: any
exception inside it becomes its ERROR record and the run goes on; after a fault that leaves CUDA
unusable an isolated run continues in a new process. Results reach `on_result` as they land.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict
from typing import Callable, Sequence

from ..measure.stats import gflops
from ..results.records import CaseResult, RunResult
from ..spec.model import Shape, Spec
from . import steps as case_steps
from .build import plan_cases
from .cases import Case, left_to_run, not_run_record, ran
from .environment import environment, now
from .funnel import StepsFor, execute_case
from ..cuda.occupancy import limits_from_device
from .session import RunOptions, Session
from .worker import GpuWorker


def run_spec(spec: Spec, *, device: int = 0, isolate: bool = False, options: RunOptions = RunOptions(),
             on_result: Callable[[CaseResult], None] | None = None,
             on_start: Callable[[Case], None] | None = None, result: RunResult | None = None,
             previous: Sequence[CaseResult] = (), context=None, stream=None,
             gpu_worker: GpuWorker | None = None) -> RunResult:
    """Run every kernel of `spec` (and cuBLAS, unless the spec turns it off) on every shape.

    Results go into `result` (a new `RunResult` if none) as they finish and to `on_result`; an
    interrupted run keeps them there. Cases of `previous` (a resumed run) that ran are kept, those
    marked ``not_run`` are run. With ``isolate=True`` cases run in a child process, replaced after a
    fault or hang (only a new process recovers CUDA); in-process a fault ends the run, the rest marked
    not run, and `context` and `stream` may be the caller's own raw handles (used, never destroyed).
    `gpu_worker` is a worker the caller keeps between runs, left open; each worker's start-up seconds go
    to ``result.settings["worker_start_s"]`` and ``worker_start_steps``.
    """
    if isolate and (context is not None or stream is not None):
        raise ValueError("a caller's context or stream can only be used in-process (isolate=False)")
    result = result or RunResult(spec=spec.name, spec_path=str(spec.path) if spec.path else None)
    result.started = now()
    kept = [case for case in previous if ran(case)]
    with contextlib.ExitStack() as stack:
        if isolate and gpu_worker is None:
            gpu_worker = stack.enter_context(GpuWorker(device, options, want_cublas=spec.baseline))
        if isolate and left_to_run(spec, kept):
            gpu_worker.start()
        _run(spec, device, isolate, options, on_result, on_start, result, kept, context, stream, gpu_worker)
    return result


def _run(spec, device, isolate, options, on_result, on_start, result, kept, context, stream,
         gpu_worker: GpuWorker | None) -> None:
    """`run_spec` once its worker (if isolated) is starting: plan, compile, run every case into `result`."""
    from ..cuda.device import read_properties

    worker_starts: list[float] = []
    worker_start_steps: list[dict] = []
    result.settings = run_settings(result, spec, isolate, worker_start_s=worker_starts,
                                   worker_start_steps=worker_start_steps)
    props = read_properties(device)
    result.environment = environment(props)
    cases, compiled = plan_cases(spec, limits_from_device(props), props.arch, props.sm_count,
                                 skip={(case.kernel, case.shape.label) for case in kept})
    baselines: dict[tuple[Shape, str], float] = {(case.shape, case.kernel): case.timing.median_ms
                                                 for case in kept if _is_timed_baseline(case)}
    result.cases.extend(kept)

    def finish(case: CaseResult) -> None:
        if _is_timed_baseline(case):
            baselines[case.shape, case.kernel] = case.timing.median_ms
        # Typed rows (a cuBLASLt row, a typed kernel) have no FP32 peak to be a percentage of.
        fp32 = case.precision == "fp32" and case.operands is None
        _finish_figures(case, baselines.get((case.shape, case.baseline_label)),
                        props.fp32_peak_gflops if fp32 else None)
        case.device = {"name": props.name, "uuid": props.uuid, "ordinal": props.ordinal}
        result.cases.append(case)
        if on_result:
            on_result(case)

    try:
        if isolate:
            started = len(gpu_worker.starts)
            try:
                gpu_worker.run(spec, cases, compiled, finish, on_start)
            finally:
                worker_starts.extend(gpu_worker.starts[started:])
                worker_start_steps.extend(gpu_worker.start_steps[started:])
        else:
            run_in_process(spec, cases, compiled, device, options, finish, on_start, context=context, stream=stream)
    finally:
        result.finished = now()


def run_settings(result: RunResult, spec: Spec, isolate: bool, **more) -> dict:
    """A run's settings: what the caller recorded before (``run --lock-clocks``), the spec's measure, verify and
    scalars, whether cases ran isolated, and `more` (what the driver of the run adds)."""
    return {**result.settings, "measure": asdict(spec.measure), "verify": asdict(spec.verify),
            "scalars": dict(spec.scalars), "isolate": isolate, **more}


def run_in_process(spec: Spec, cases: Sequence[Case], compiled, device: int, options: RunOptions,
                   finish: Callable[[CaseResult], None], on_start: Callable[[Case], None] | None = None, *,
                   context=None, stream=None, session_factory: Callable[..., Session] = Session,
                   steps_for: StepsFor = case_steps.steps_for) -> None:
    """Run `cases` in this process; after a fault that poisons CUDA, the rest are recorded as not run.

    `session_factory` and `steps_for` make the session and each case's steps
    (the real ones by default; a test passes stand-ins).
    """
    session = session_factory(device, spec.baseline, options, context=context, stream=stream)
    try:
        for position, case in enumerate(cases):
            if on_start:
                on_start(case)
            finish(execute_case(session, spec, case, compiled, steps_for))
            if session.device.poisoned:
                for rest in cases[position + 1:]:
                    finish(not_run_record(rest, f"CUDA is unusable in this process after {case.label} at "
                                                f"{case.shape.label} faulted (run isolated to go on past faults)"))
                return
    finally:
        session.close()


def _is_timed_baseline(case: CaseResult) -> bool:
    """A baseline row that passed and was timed: its median is the 100% of the kernels measured against it."""
    return case.is_baseline and case.timing is not None and case.ok


def _finish_figures(case: CaseResult, baseline_ms: float | None, peak: float | None) -> None:
    if case.timing is None:
        return
    case.gflops = gflops(case.shape.flops, case.timing.median_ms)
    if baseline_ms:
        case.pct_cublas = 100.0 * baseline_ms / case.timing.median_ms
    if peak:
        case.pct_peak = 100.0 * case.gflops / peak
