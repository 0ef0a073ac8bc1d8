"""Cases spread over the GPUs of several machines (or, for a library caller, of one) on Dask.

``driver-gemm run --scheduler ADDRESS`` comes here (``--devices`` on one machine needs no Dask:
`local_gpus`). The spec is cut into tasks (`schedule.plan_tasks`) that the scheduler hands to
whichever single-threaded worker, one per GPU, is free; each keeps one `GpuWorker` process for the
run, and `gpu_tasks` runs and lands a task's cases. Dask is an optional extra
(``pip install driver-gemm[dask]``); setting up a cluster: docs/multi-gpu.md.
"""

from __future__ import annotations

import contextlib
import json
import queue
from typing import Callable
from uuid import uuid4

from ..errors import DriverGemmError, NoGpuError, UsageError
from ..results.records import CaseResult, RunResult
from ..specfile.model import Spec
from .environment import environment
from .gpu_tasks import GpuBaselines, ResultCollector, begin_run, run_part, run_task_on, tasks_to_run
from .runner import Runner
from .schedule import CostModel, Task, remembered_model
from ..session.state import RunOptions
from .worker import GpuWorker
from ..cuda.device import read_properties


class DaskUnavailable(DriverGemmError):
    """Dask (distributed) is not installed."""


class SchedulerUnreachable(NoGpuError):
    """No Dask scheduler answered at the address given: the run has no GPU to go to (exit code 3, as without one)."""


# A Dask worker's own state, kept between the tasks of a run: the baselines each GPU it
# drives has run, per run (its event topic) and GPU ordinal; and the worker process that runs each GPU's
# cases, kept between tasks.
_GPU_BASELINES: dict[tuple[str, int], GpuBaselines] = {}
STOP_WAIT_S = 10.0          # how long an interrupted run waits for the workers to stop their GPUs' processes
_GPU_WORKERS: dict[int, GpuWorker] = {}


def gpu_worker_of(device: int, options: RunOptions, want_cublas: bool,
                  make_worker: Callable[..., GpuWorker] = GpuWorker) -> GpuWorker:
    """This Dask worker's `GpuWorker` for `device`: made on first use, kept for every later task of the run."""
    held = _GPU_WORKERS.get(device)
    if held is not None and held.options != options:    # left by an earlier run with other options
        held.close()
        held = None
    if held is None:
        held = _GPU_WORKERS[device] = make_worker(device, options, want_cublas=want_cublas)
    return held


def _start_gpu_worker(ordinals: dict[str, int], options: RunOptions, want_cublas: bool,
                      make_worker: Callable[..., GpuWorker]) -> None:
    """On a Dask worker, before any task: spawn its GPU's worker process (it starts while the client plans)."""
    # Dask: optional, only for a run on a cluster
    from distributed import get_worker

    gpu_worker_of(ordinals[get_worker().address], options, want_cublas, make_worker).start()


def _end_of_run(ordinals: dict[str, int], topic: str) -> dict:
    """On a Dask worker, after the run (finished or not): forget its baselines, stop its GPU's process; how many it
    started, and their start-up (nothing when it kept none). The cluster may outlive the run (``--scheduler``)."""
    # Dask: optional, only for a run on a cluster
    from distributed import get_worker

    for key in [key for key in _GPU_BASELINES if key[0] == topic]:
        del _GPU_BASELINES[key]
    held = _GPU_WORKERS.pop(ordinals[get_worker().address], None)
    if held is None:
        return {}
    held.close()
    return held.starts_to_report()


def run_task(part: Callable, ordinals: dict[str, int], spec: Spec, task: Task, isolate: bool,
             options: RunOptions, previous: list[dict], topic: str,
             make_worker: Callable[..., GpuWorker] | None = GpuWorker, uuids: dict[str, str | None] | None = None) -> dict:
    """A task on the GPU of whichever worker the scheduler chose; each case is also sent as an event on `topic`.

    The shapes' baselines this worker already ran (or that `previous`, a
    resumed run's records, holds for this GPU) are reused, not run again
    (`gpu_tasks.run_task_on`).
    """
    # Dask: optional, only for a run on a cluster
    from distributed import get_worker

    worker = get_worker()
    device = ordinals[worker.address]
    gpu_baselines = _GPU_BASELINES.setdefault((topic, device), GpuBaselines(device, (uuids or {}).get(worker.address)))

    def landed(case: CaseResult) -> None:
        worker.log_event(topic, {"case": json.dumps(case.as_dict()), "device": device})   # msgpack-safe text

    gpu_worker = gpu_worker_of(device, options, spec.baseline, make_worker) if isolate and make_worker else None
    report = run_task_on(gpu_baselines, part, spec, task, options, [CaseResult.from_dict(c) for c in previous], landed,
                         gpu_worker, isolate)
    return {"worker": worker.address, **report}


def _environment_here(ordinals: dict[str, int]) -> dict:
    """The environment of the GPU this worker drives (called once per worker before any task)."""
    # Dask: optional, only for a run on a cluster
    from distributed import get_worker

    device = ordinals[get_worker().address]
    return environment(read_properties(device))


@contextlib.contextmanager
def gpu_cluster(devices: list[int] | None = None, scheduler: str | None = None):
    """A Dask client with one worker per GPU, and the GPU ordinal each worker should use.

    `scheduler` connects to a running cluster (one GPU per worker, ordinal 0
    on each). Otherwise a local cluster is started for `devices`: dask-cuda's
    LocalCUDACluster when it is installed (each worker sees only its GPU, as
    ordinal 0), else one plain worker process per GPU, told its ordinal.
    """
    try:
        # Dask: optional, only for a run on a cluster
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise DaskUnavailable("several GPUs need Dask: pip install driver-gemm[dask]") from None
    if scheduler is not None:
        with _connected(scheduler) as client:
            workers = sorted(client.scheduler_info()["workers"])
            yield client, [(worker, 0) for worker in workers]
        return
    devices = list(devices or [0])
    # Workers start our case processes (not daemons); the scheduler keeps unstarted shapes queued
    # until a worker is free rather than assigning them all at submission.
    with dask.config.set({"distributed.worker.daemon": False, "distributed.scheduler.worker-saturation": 1.0}):
        try:
            # Dask: optional, only for a run on a cluster
            from dask_cuda import LocalCUDACluster
            cluster = LocalCUDACluster(CUDA_VISIBLE_DEVICES=devices, threads_per_worker=1)
            ordinals = [0] * len(devices)
        except ImportError:
            cluster = LocalCluster(n_workers=len(devices), threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            ordinals = devices
        with cluster, Client(cluster) as client:
            client.wait_for_workers(len(devices))
            workers = sorted(client.scheduler_info()["workers"])
            yield client, list(zip(workers, ordinals))


def _connected(scheduler: str):
    """A Dask client connected to `scheduler`, or an error naming the address: `SchedulerUnreachable` where nothing
    answers there, a `UsageError` where Dask cannot use the address as given."""
    # Dask: optional, only for a run on a cluster
    from distributed import Client
    from distributed.security import Security

    scheme = scheduler.partition("://")[0] if "://" in scheduler else "tcp"
    if scheme in ("tls", "wss") and Security().get_connection_args("client")["ssl_context"] is None:
        raise UsageError(f"{scheduler}: a {scheme}:// scheduler needs Dask's TLS settings for a client, and none are "
                         "set: give distributed.comm.tls.ca-file, .client.cert and .client.key in Dask's "
                         "configuration (or DASK_DISTRIBUTED__COMM__TLS__CA_FILE and the like), or use tcp://",
                         field="--scheduler")
    try:
        return Client(scheduler)
    except OSError as exc:      # Dask's connect timeout (30 s by default), a refused connection, an unknown host
        raise SchedulerUnreachable(f"no Dask scheduler answered at {scheduler}: {exc} (is the scheduler running, "
                                   "and its port open to this machine?)") from None
    except (TypeError, ValueError) as exc:   # an address Dask cannot use: an unknown scheme, a backend not installed
        raise UsageError(f"{scheduler}: Dask cannot connect to this address ({type(exc).__name__}: {exc})",
                         field="--scheduler") from None


class DaskWorkers(Runner):
    """The cases on the Dask `workers` (address, GPU ordinal) of `client`, a task at a time to whichever is free.

    Each worker first describes its GPU (`describe`), so the case log's header describes every GPU.
    Cases land in the result as they finish and go to `on_result`, so an interrupted caller keeps
    every finished case; cases of `previous` (a resumed run) that ran are kept, and a GPU reuses its
    own baselines from it. Tasks are planned with `model` (default: what the spec's cases took
    before on GPUs of these models, `schedule.remembered_model`). With `isolate` each worker keeps
    one GPU worker process (`make_worker`; None: `part` needs none) for the run; their start-ups go
    to ``result.settings.gpu_workers``. `gpu_cluster` gives a client and its workers. Cases start on
    the workers: no `on_start`.
    """

    def __init__(self, client, workers: list[tuple[str, int]], *, isolate: bool = True,
                 model: CostModel | None = None, part: Callable = run_part,
                 describe: Callable[[dict[str, int]], dict] | None = None,
                 make_worker: Callable[..., GpuWorker] | None = GpuWorker):
        self.client, self.workers, self.isolate, self.model, self.part = client, list(workers), isolate, model, part
        self.describe, self.make_worker = describe or _environment_here, make_worker

    def run(self, spec, options=RunOptions(), *, on_result=None, on_start=None, result=None, previous=()):
        # Dask: optional, only for a run on a cluster
        from distributed import wait

        client, workers, isolate, part = self.client, self.workers, self.isolate, self.part
        describe, make_worker, model = self.describe, self.make_worker, self.model
        ordinals = dict(workers)
        host = environment()
        pinned = {"pure": False, "allow_other_workers": False}
        starting = [client.submit(_start_gpu_worker, ordinals, options, spec.baseline, make_worker,
                                  workers=[address], **pinned) for address, _ in workers if make_worker and isolate]
        described = [client.submit(describe, ordinals, workers=[address], **pinned) for address, _ in workers]
        environments = client.gather(described)                           # side by side
        client.gather(starting)
        result, kept = begin_run(spec, result, previous, host,
                                 [(address, ordinal, environments[i]) for i, (address, ordinal) in enumerate(workers)],
                                 isolate)
        if model is None:
            model, result.settings.estimates = remembered_model(
                spec, [((described_gpu or {}).get("device") or {}).get("name") for described_gpu in environments])
        tasks = tasks_to_run(spec, kept, len(workers), model)
        topic = f"driver-gemm-{uuid4().hex}"
        arrived: queue.SimpleQueue = queue.SimpleQueue()
        client.subscribe_topic(topic, lambda event: arrived.put(event[1]))
        previous_data = [case.as_dict() for case in kept]
        uuids = {address: (environments[i] or {}).get("device", {}).get("uuid")
                 for i, (address, _) in enumerate(workers)}
        # Higher priority runs first; one task per worker at a time, so a free GPU takes the next task.
        futures = [client.submit(run_task, part, ordinals, spec, task, isolate, options, previous_data, topic,
                                 make_worker, uuids, priority=len(tasks) - rank, pure=False)
                   for rank, task in enumerate(tasks)]
        collector = ResultCollector(result, kept, on_result)

        def drain() -> None:
            while True:
                try:
                    event = arrived.get_nowait()
                except queue.Empty:
                    return
                collector.add(json.loads(event["case"]), event["device"])

        completed = False
        try:
            pending = set(futures)
            while pending:
                try:
                    finished, pending = wait(pending, timeout=0.5, return_when="FIRST_COMPLETED")
                except TimeoutError:        # none finished: land the cases that arrived meanwhile
                    finished = set()
                drain()
                for future in finished:
                    report = future.result()
                    collector.task_done(report, report["worker"])      # with any case whose event has not arrived
            drain()
            completed = True
        finally:
            _end_on_workers(client, workers, ordinals, topic, futures, completed, starting, result)
            client.unsubscribe_topic(topic)
            collector.finish(spec)
        return result


def _end_on_workers(client, workers, ordinals, topic, futures, completed: bool, starting, result: RunResult) -> None:
    """Every worker forgets the run and stops its GPU's process: on success, with their figures in the settings;
    after an interrupt or a failed task, the rest cancelled and the stop a best effort that hides no first error."""
    # Dask: optional, only for a run on a cluster
    from distributed import wait

    pinned = {"pure": False, "allow_other_workers": False}
    if completed:
        stopped = client.gather([client.submit(_end_of_run, ordinals, topic, workers=[address], **pinned)
                                 for address, _ in workers])
        if starting:
            result.settings.gpu_workers = [{"worker": address, "device": ordinals[address], **held}
                                              for (address, _), held in zip(workers, stopped)]
        return
    try:
        client.cancel(futures)
        wait([client.submit(_end_of_run, ordinals, topic, workers=[address], **pinned) for address, _ in workers],
             timeout=STOP_WAIT_S)
    except Exception:  # noqa: BLE001 - the error or interrupt that ended the run is the one to report
        pass
