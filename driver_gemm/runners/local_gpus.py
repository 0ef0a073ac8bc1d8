"""Cases spread over several GPUs of this machine: one thread per GPU in this process, no cluster to start.

The spec is cut into tasks (`schedule.plan_tasks`) in one shared list; each GPU's thread takes the
next whenever its `GpuWorker` process is free, so a wrong estimate is absorbed by the GPU that ends
early. Finished cases come back through a queue and land on the caller's thread (`gpu_tasks`), so
`on_result` runs there and Ctrl-C keeps every finished case. Dask, for several machines:
`distribute`. How it works: docs/multi-gpu.md.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections import deque
from typing import Callable, Sequence

from .. import timeline
from ..results.records import CaseResult
from ..specfile.model import Spec
from ..planning.cases import left_to_run
from .environment import environment
from .gpu_tasks import GpuBaselines, ResultCollector, begin_run, run_part, run_task_on, tasks_to_run
from .runner import Runner
from .schedule import CostModel, Task, remembered_model
from ..session.state import RunOptions
from .worker import GpuWorker
from ..cuda.device import read_properties

# How often the caller's thread, waiting for cases, looks for a pending Ctrl-C.
POLL_S = 0.2
# How long, after an interrupt or an error, the caller waits for each GPU's thread to wind down.
STOP_WAIT_S = 10.0


class TaskList:
    """The run's tasks in the order they are to be taken, shared by the GPUs' threads; `stop` empties it."""

    def __init__(self, tasks: Sequence[Task], gpus: int = 1):
        self._tasks = deque(tasks)
        self._lock = threading.Lock()
        self._working = gpus                 # GPUs whose worker process can run cases
        self.stopped = threading.Event()

    def take(self) -> Task | None:
        """The next task, or None when none is left or the run is stopping."""
        with self._lock:
            if self.stopped.is_set() or not self._tasks:
                return None
            return self._tasks.popleft()

    def retire(self) -> bool:
        """A GPU whose worker process cannot start leaves the tasks to the others: True while another GPU works;
        False for the last (it then takes the tasks anyway and records them as not run: none is left unrecorded)."""
        with self._lock:
            self._working -= 1
            return self._working > 0

    def stop(self) -> None:
        with self._lock:
            self.stopped.set()
            self._tasks.clear()


def thread_name(device: int) -> str:
    """What ``settings.tasks`` and ``environment["gpus"]`` call the thread that drives GPU `device`."""
    return f"gpu-{device}"


def describe_gpu(device: int) -> dict:
    """The environment of GPU `device`, read here (no context is made)."""
    return environment(read_properties(device))


class LocalGpus(Runner):
    """The cases on the GPUs `devices` of this machine, a task at a time to whichever is free.

    As `distribute.DaskWorkers`: GPUs described first (`describe`), cases landing in the result and
    passed to `on_result` (from the caller's thread) as they finish, `previous`'s finished cases and
    own baselines kept, tasks planned with `model` (default: `schedule.remembered_model`), each GPU's
    worker process (`make_worker`; None: `part` needs none) kept to its last task, start-ups in
    ``result.settings.gpu_workers``. `gpu_workers` are the caller's own, by GPU, started earlier:
    used and left to the caller to close; with `release_given` (the caller's last run with them)
    each is told to stop once its GPU has no task left. Cases start on other threads: no `on_start`.
    """

    def __init__(self, devices: Sequence[int], *, gpu_workers: dict[int, GpuWorker] | None = None,
                 release_given: bool = False, model: CostModel | None = None, part: Callable = run_part,
                 describe: Callable[[int], dict] = describe_gpu,
                 make_worker: Callable[..., GpuWorker] | None = GpuWorker):
        self.devices = list(devices)
        self.given = dict(gpu_workers or {})
        self.release_given, self.model, self.part, self.describe = release_given, model, part, describe
        self.make_worker = make_worker

    def run(self, spec, options=RunOptions(), *, on_result=None, on_start=None, result=None, previous=()):
        devices, given, make_worker, model = self.devices, self.given, self.make_worker, self.model
        gpu_workers = {device: given.get(device) or make_worker(device, options, want_cublas=spec.baseline)
                       for device in devices} if make_worker and left_to_run(spec, previous) else {}
        with contextlib.ExitStack() as stack:
            for device, gpu_worker in gpu_workers.items():
                if device not in given:
                    stack.callback(gpu_worker.close)  # each GPU's thread tells its own to stop; this waits for it
                gpu_worker.start()                    # now (if not already): its start-up overlaps what follows
            host = environment()
            described = [(thread_name(device), device, self.describe(device)) for device in devices]
            result, kept = begin_run(spec, result, previous, host, described)
            if model is None:
                model, result.settings.estimates = remembered_model(
                    spec, [((environment_of or {}).get("device") or {}).get("name")
                           for _, _, environment_of in described])
            tasks = TaskList(tasks_to_run(spec, kept, len(devices), model), len(devices))
            timeline.mark("tasks dealt", first=True)
            uuids = {device: (environment_of or {}).get("device", {}).get("uuid")
                     for _, device, environment_of in described}
            _drive(spec, devices, tasks, gpu_workers, self.part, options, kept,
                   ResultCollector(result, kept, on_result), uuids,
                   keep_open=set() if self.release_given else set(given))
        return result


def _drive(spec: Spec, devices: list[int], tasks: TaskList, gpu_workers: dict[int, GpuWorker], part: Callable,
           options: RunOptions, kept: list[CaseResult], collector: ResultCollector, uuids: dict[int, str | None],
           keep_open: set[int] | frozenset[int] = frozenset()) -> None:
    """One thread per GPU takes tasks from `tasks`; their cases land here, on the caller's thread, as they finish."""
    events: queue.SimpleQueue = queue.SimpleQueue()

    def drive(device: int) -> None:
        """A GPU's thread: its tasks, one after the other, until the list is empty; then its worker process is
        told to stop (unless the caller keeps it: `keep_open`)."""
        gpu_baselines = GpuBaselines(device, uuids.get(device))
        gpu_worker = gpu_workers.get(device)

        def finished(case: CaseResult) -> None:
            if not tasks.stopped.is_set():        # after a stop, the cases cut short are not results
                events.put(("case", device, case.as_dict()))

        try:
            # Before its first task: a GPU whose worker process cannot start takes none while another GPU works.
            if gpu_worker is not None and gpu_worker.wait_ready() is not None and tasks.retire():
                return
            while (task := tasks.take()) is not None:
                report = run_task_on(gpu_baselines, part, spec, task, options, kept, finished, gpu_worker)
                if not tasks.stopped.is_set():
                    events.put(("task", device, report))
            timeline.mark(f"{thread_name(device)} out of tasks")
        except BaseException as error:  # noqa: BLE001 - the caller's thread re-raises it
            events.put(("error", device, error))
        finally:
            # Told to stop, not waited for: its exit overlaps the other GPUs' last cases (`close` waits for it).
            if gpu_worker is not None and device not in keep_open:
                gpu_worker.release()
            events.put(("done", device, None))

    threads = [threading.Thread(target=drive, args=(device,), name=f"driver-gemm {thread_name(device)}",
                                daemon=True) for device in devices]
    running = len(threads)

    def handle(kind: str, device: int, payload) -> None:
        nonlocal running
        if kind == "case":
            collector.add(payload, device)
        elif kind == "task":
            collector.task_done(payload, thread_name(device))
        elif kind == "error":
            raise payload
        else:
            running -= 1

    completed = False
    try:
        for thread in threads:
            thread.start()
        while running:
            try:      # a wait with a timeout: a Ctrl-C that the OS hands to another thread is seen here too
                handle(*events.get(timeout=POLL_S))
            except queue.Empty:
                pass
        completed = True
    finally:
        if not completed:       # interrupted, or a GPU's thread failed: stop every GPU, keep what finished
            tasks.stop()
            for gpu_worker in gpu_workers.values():
                gpu_worker.cancel()
            for thread in threads:
                if thread.ident is not None:
                    thread.join(STOP_WAIT_S)
            _collect_the_rest(events, collector)
        if gpu_workers:
            collector.result.settings.gpu_workers = [
                {"worker": thread_name(device), "device": device, **held.starts_to_report()}
                for device, held in gpu_workers.items()]
        collector.finish(spec)


def _collect_the_rest(events: queue.SimpleQueue, collector: ResultCollector) -> None:
    """After a stop: the cases and tasks the GPUs finished before it, still in the queue."""
    while True:
        try:
            kind, device, payload = events.get_nowait()
        except queue.Empty:
            return
        if kind == "case":
            collector.add(payload, device)
        elif kind == "task":
            collector.task_done(payload, thread_name(device))
