"""Cases spread over several GPUs of one machine, or over the GPUs of several machines, on Dask.

Each shape and all its cases (cuBLAS first, so % of cuBLAS is measured on the
same GPU) go to one GPU; shapes are dealt out so that the GPUs get about the
same number of FLOPs. Every GPU is driven by one Dask worker, which runs its
part with `run_spec` exactly as a single-GPU run would (isolated worker
processes included), so the results are the same set of cases, each tagged
with the GPU that ran it.

Dask is an optional extra (``pip install driver-gemm[dask]``); with
``dask-cuda`` installed, a single machine gets its one-worker-per-GPU
cluster from it. For several machines, start a scheduler and, on every
machine, one worker per GPU (``dask-cuda-worker``, or ``dask worker`` with
``CUDA_VISIBLE_DEVICES`` set), and pass the scheduler's address. Workers
must be allowed to start processes (``distributed.worker.daemon: false``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

from .errors import DriverGemmError
from .results import CaseResult, RunResult
from .runner import RunOptions, _now
from .spec import Shape, Spec


class DaskUnavailable(DriverGemmError):
    """Dask (distributed) is not installed."""


def partition_shapes(spec: Spec, parts: int) -> list[list[Shape]]:
    """Deal the shapes into `parts` groups of about equal work (largest first, to the lightest group)."""
    cases_per_shape = len(spec.kernels) + int(spec.baseline)
    groups: list[list[Shape]] = [[] for _ in range(max(1, parts))]
    loads = [0] * len(groups)
    for shape in sorted(spec.shapes, key=lambda s: s.flops, reverse=True):
        lightest = loads.index(min(loads))
        groups[lightest].append(shape)
        loads[lightest] += shape.flops * cases_per_shape
    return [sorted(group, key=spec.shapes.index) for group in groups if group]


def run_part(spec: Spec, shapes: list[str], device: int, isolate: bool, options: RunOptions) -> dict:
    """What a Dask worker runs: the spec on some shapes, on one GPU; the results as plain data."""
    from .runner import run_spec

    return run_spec(spec.select(shapes=shapes), device=device, isolate=isolate, options=options).as_dict()


@dataclass
class Assignment:
    """One part of the run: which worker, which GPU ordinal on that worker, which shapes."""

    worker: str
    device: int
    shapes: list[Shape]


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
    with dask.config.set({"distributed.worker.daemon": False}):   # workers start our case processes
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
                   part: Callable = run_part) -> RunResult:
    """Run `spec` with its shapes dealt out over `workers` (address, GPU ordinal); gather every case."""
    from distributed import as_completed

    groups = partition_shapes(spec, len(workers))
    assignments = [Assignment(worker, device, shapes) for (worker, device), shapes in zip(workers, groups)]
    result = RunResult(spec=spec.name, spec_path=str(spec.path) if spec.path else None, started=_now(),
                       settings={"devices": [{"worker": a.worker, "device": a.device,
                                              "shapes": [s.label for s in a.shapes]} for a in assignments]})
    futures = {client.submit(part, spec, [s.label for s in a.shapes], a.device, isolate, options,
                             workers=[a.worker], allow_other_workers=False, pure=False): a for a in assignments}
    environments = []
    for future in as_completed(futures):
        data = future.result()
        environments.append(data.get("environment", {}))
        for case in data["cases"]:
            finished = CaseResult.from_dict(case)
            result.cases.append(finished)
            if on_result:
                on_result(finished)
    order = {(s.label): i for i, s in enumerate(spec.shapes)}
    result.cases.sort(key=lambda c: order.get(c.shape.label, len(order)))
    result.environment = {"gpus": environments, **(environments[0] if environments else {})}
    result.finished = _now()
    return result
