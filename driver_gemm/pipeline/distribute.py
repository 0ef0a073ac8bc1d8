"""Cases spread over several GPUs of one machine, or over the GPUs of several machines, on Dask.

Each shape and all its cases (cuBLAS first, so % of cuBLAS is measured on the
same GPU) is one Dask task. Every GPU is driven by one single-threaded Dask
worker, and the scheduler hands a worker its next shape only when it is free,
largest shapes first: a case's time is set by the measurement's sample and
time limits more than by its FLOPs, so no split made in advance would stay
even, while handing out as GPUs free up does. Each task runs `run_spec`
exactly as a single-GPU run would (isolated worker processes included), so
the results are the same set of cases, each tagged with the GPU that ran it.

Dask is an optional extra (``pip install driver-gemm[dask]``); with
``dask-cuda`` installed, a single machine gets its one-worker-per-GPU
cluster from it. For several machines, start a scheduler and, on every
machine, one worker per GPU (``dask-cuda-worker``, or ``dask worker`` with
``CUDA_VISIBLE_DEVICES`` set), and pass the scheduler's address. Workers
must be allowed to start processes (``distributed.worker.daemon: false``).
"""

from __future__ import annotations

import contextlib
from typing import Callable

from ..errors import DriverGemmError
from ..results.records import CaseResult, RunResult
from ..spec.model import Shape, Spec
from .environment import environment, now
from .runner import run_spec
from .session import RunOptions


class DaskUnavailable(DriverGemmError):
    """Dask (distributed) is not installed."""


def largest_first(spec: Spec) -> list[Shape]:
    """The order in which shapes are handed out: most FLOPs first, so that no big shape is left for the end."""
    return sorted(spec.shapes, key=lambda s: s.flops, reverse=True)


def run_part(spec: Spec, shapes: list[str], device: int, isolate: bool, options: RunOptions) -> dict:
    """A GPU worker's part: the spec on some shapes, on one GPU; the results as plain data."""
    return run_spec(spec.select(shapes=shapes), device=device, isolate=isolate, options=options).as_dict()


def _run_shape_here(part: Callable, ordinals: dict[str, int], spec: Spec, shape: str, isolate: bool,
                    options: RunOptions) -> tuple[str, int, dict]:
    """The task of one shape: run it on the GPU of whichever worker the scheduler chose."""
    from distributed import get_worker

    worker = get_worker().address
    device = ordinals[worker]
    return worker, device, part(spec, [shape], device, isolate, options)


@contextlib.contextmanager
def gpu_cluster(devices: list[int] | None = None, scheduler: str | None = None):
    """A Dask client with one worker per GPU, and the GPU ordinal each worker should use.

    `scheduler` connects to a running cluster (one GPU per worker, ordinal 0
    on each). Otherwise a local cluster is started for `devices`: dask-cuda's
    LocalCUDACluster when it is installed (each worker sees only its GPU, as
    ordinal 0), else one plain worker process per GPU, told its ordinal.
    """
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise DaskUnavailable("several GPUs need Dask: pip install driver-gemm[dask]") from None
    if scheduler is not None:
        with Client(scheduler) as client:
            workers = sorted(client.scheduler_info()["workers"])
            yield client, [(worker, 0) for worker in workers]
        return
    devices = list(devices or [0])
    # Workers start our case processes (not daemons); the scheduler keeps unstarted shapes queued
    # until a worker is free rather than assigning them all at submission.
    with dask.config.set({"distributed.worker.daemon": False, "distributed.scheduler.worker-saturation": 1.0}):
        try:
            from dask_cuda import LocalCUDACluster
            cluster = LocalCUDACluster(CUDA_VISIBLE_DEVICES=devices, threads_per_worker=1)
            ordinals = [0] * len(devices)
        except ImportError:
            cluster = LocalCluster(n_workers=len(devices), threads_per_worker=1, processes=True)
            ordinals = devices
        with cluster, Client(cluster) as client:
            client.wait_for_workers(len(devices))
            workers = sorted(client.scheduler_info()["workers"])
            yield client, list(zip(workers, ordinals))


def run_on_workers(spec: Spec, client, workers: list[tuple[str, int]], *, isolate: bool = True,
                   options: RunOptions = RunOptions(), on_result: Callable[[CaseResult], None] | None = None,
                   part: Callable = run_part, result: RunResult | None = None) -> RunResult:
    """Run `spec` on `workers` (address, GPU ordinal), a shape at a time to whichever is free; gather every case.

    Cases land in `result` (a new `RunResult` if none) shape by shape as GPUs
    finish them, so a caller interrupted with Ctrl-C keeps every finished
    shape in it. Before the first case is handed to `on_result`, the run's
    environment (the GPUs heard from so far) and settings are filled in, so a
    case log's header written then describes the run.
    """
    from distributed import as_completed

    ordinals = dict(workers)
    result = result or RunResult(spec=spec.name, spec_path=str(spec.path) if spec.path else None)
    result.started = now()
    result.environment = environment()
    shapes = largest_first(spec)
    # Higher priority runs first; one task per worker at a time, so a free GPU takes the next shape.
    futures = {client.submit(_run_shape_here, part, ordinals, spec, shape.label, isolate, options,
                             priority=len(shapes) - rank, pure=False): shape.label
               for rank, shape in enumerate(shapes)}
    ran: dict[tuple[str, int], list[str]] = {}          # (worker, GPU) -> shapes, in the order run
    environments: dict[tuple[str, int], dict] = {}
    order = {s.label: i for i, s in enumerate(spec.shapes)}
    try:
        for future in as_completed(futures):
            worker, device, data = future.result()
            ran.setdefault((worker, device), []).append(futures[future])
            environments.setdefault((worker, device), data.get("environment", {}))
            _describe(result, ran, environments)
            for case in data["cases"]:
                finished = CaseResult.from_dict(case)
                result.cases.append(finished)
                if on_result:
                    on_result(finished)
    finally:
        result.cases.sort(key=lambda c: order.get(c.shape.label, len(order)))
        result.finished = now()
    return result


def _describe(result: RunResult, ran: dict[tuple[str, int], list[str]],
              environments: dict[tuple[str, int], dict]) -> None:
    """The run's settings (which GPU ran which shapes) and environment (every GPU's) from what is known so far."""
    result.settings = {"devices": [{"worker": worker, "device": device, "shapes": labels}
                                   for (worker, device), labels in sorted(ran.items())]}
    gpus = [environments[key] for key in sorted(environments)]
    result.environment = {**result.environment, "gpus": gpus, **(gpus[0] if gpus else {})}
