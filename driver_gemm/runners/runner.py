"""The ways of running a spec's cases, behind one small interface.

A `Runner` runs every case of a spec into one `RunResult` and hands each record to `on_result` as
it lands: `one_gpu.OneGpu` on one GPU (in this process, or isolated in a worker process that a
faulting kernel cannot take down, as its `Placement` says), `local_gpus.LocalGpus` on several GPUs
of this machine, `distribute.DaskWorkers` on the GPU workers of a Dask cluster. ``driver-gemm run``
picks one by its options.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..planning.cases import Case
from ..results.records import CaseResult, RunResult
from ..session.options import RunOptions
from ..specfile.model import Spec


class Runner:
    """Runs the cases of a spec somewhere; each record lands in the run's result and goes to `on_result`."""

    def run(self, spec: Spec, options: RunOptions = RunOptions(), *,
            on_result: Callable[[CaseResult], None] | None = None, on_start: Callable[[Case], None] | None = None,
            result: RunResult | None = None, previous: Sequence[CaseResult] = ()) -> RunResult:
        """Run every kernel of `spec` (and cuBLAS, unless the spec turns it off) on every shape, as `options` say.

        Records go into `result` (a new `RunResult` if none) as they finish and to `on_result`, on the
        caller's thread; an interrupted run keeps every finished one there. `on_start` hears of each
        case first where the runner sees it start (on one GPU). Cases of `previous` (a resumed run)
        that ran are kept, those marked ``not_run`` are run.
        """
        raise NotImplementedError
