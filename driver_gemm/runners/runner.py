"""The ways of running a spec's planned cases on one GPU, behind one small interface.

A `Runner` takes the cases `planning.build.plan_cases` made and hands each
case's record to `finish` as it lands: `InProcessRunner` runs them in this
process, `IsolatedRunner` in a child process (`worker.GpuWorker`) that a
faulting kernel cannot take down. `one_gpu.run_spec` picks one; a run on
several GPUs (`local_gpus`, `distribute`) deals its tasks to one such run per GPU.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..planning.cases import Case
from ..results.records import CaseResult
from ..specfile.model import Spec
from ..session.options import Placement, RunOptions
from .in_process import run_in_process
from .worker import GpuWorker


class Runner:
    """Runs planned cases on one GPU; each record goes to `finish` in order, whatever happens to its case."""

    def run(self, spec: Spec, cases: Sequence[Case], compiled, finish: Callable[[CaseResult], None],
            on_start: Callable[[Case], None] | None = None) -> None:
        raise NotImplementedError


class InProcessRunner(Runner):
    """The cases in this process, on a caller's CUDA context and stream if it gives them; a fault ends the run."""

    def __init__(self, options: RunOptions, placement: Placement):
        self.options, self.placement = options, placement

    def run(self, spec, cases, compiled, finish, on_start=None) -> None:
        run_in_process(spec, cases, compiled, self.options, self.placement, finish, on_start)


class IsolatedRunner(Runner):
    """The cases in the child process of `gpu_worker`, replaced after a fault or a hang; its starts are recorded."""

    def __init__(self, gpu_worker: GpuWorker, worker_starts: list[float], worker_start_steps: list[dict]):
        self.gpu_worker, self.worker_starts, self.worker_start_steps = gpu_worker, worker_starts, worker_start_steps

    def run(self, spec, cases, compiled, finish, on_start=None) -> None:
        started = len(self.gpu_worker.starts)
        try:
            self.gpu_worker.run(spec, cases, compiled, finish, on_start)
        finally:
            self.worker_starts.extend(self.gpu_worker.starts[started:])
            self.worker_start_steps.extend(self.gpu_worker.start_steps[started:])
