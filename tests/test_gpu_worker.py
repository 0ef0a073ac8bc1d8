"""The worker process of a GPU lives for the whole run: one per GPU, kept between batches, replaced after a crash.

The child runs the real serving loop (`worker.serve`) with a stand-in session
and case executor, so that process lifetimes, crashes, faults and hangs can be
checked without a GPU. Each record's message names the process and session
that ran it.
"""

import dataclasses
import functools
import os
import time

import pytest

from driver_gemm.planning.cases import cases_of, new_record, ran
from driver_gemm.session.options import RunOptions
from driver_gemm.runners.worker import GpuWorker
from driver_gemm.results.records import CaseDevice
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from conftest import SPECS

SESSIONS_MADE = 0


class FakeSession:
    """What a case needs of a session here: whether CUDA is poisoned, and a close."""

    def __init__(self, device, want_cublas, options):
        global SESSIONS_MADE
        SESSIONS_MADE += 1
        self.serial = SESSIONS_MADE
        self.want_cublas = want_cublas
        self.poisoned = False
        self.start_steps = {"driver_and_context_s": 0.25, "cublas_s": 0.5}

    def close(self):
        pass


def fake_execute(session, spec, case, compiled):
    """v1 at 1001x513x777 kills the process, v2 there poisons CUDA, v3 there hangs; the rest pass."""
    if case.shape.label == "1001x513x777":
        if case.label.startswith("v1"):
            os._exit(9)
        if case.label.startswith("v2"):
            session.poisoned = True
            return new_record(case, Status.ERROR, f"pid={os.getpid()} session={session.serial} illegal address")
        if case.label.startswith("v3"):
            time.sleep(60)
    return new_record(case, Status.PASS, f"pid={os.getpid()} session={session.serial} cublas={session.want_cublas}")


def fails_to_start(connection, *args):
    connection.send(("fatal", "NoGpuError: no CUDA driver on this machine"))
    connection.close()


def make_fake_worker(device, options, *, want_cublas=True):
    return GpuWorker(device, options, want_cublas=want_cublas, child_args=(FakeSession, fake_execute))


def spec_of(kernels, shapes, case_timeout_s=300.0):
    spec = load_spec(SPECS / "seed.yaml").select(kernels, shapes)
    return dataclasses.replace(spec, measure=dataclasses.replace(spec.measure, case_timeout_s=case_timeout_s))


def pid_of(record):
    return next(int(word[4:]) for word in record.message.split() if word.startswith("pid="))


def batches(spec):
    """The cases of `spec`, one batch per shape (as tasks of a run on several GPUs would be)."""
    cases = cases_of(spec)
    return [[c for c in cases if c.shape == shape] for shape in spec.shapes]


def test_one_process_and_one_session_serve_every_batch():
    spec = spec_of(["v0", "v4"], ["1024x512x1024", "64x64x64", "7x5x3"])
    finished = []
    with make_fake_worker(0, RunOptions()) as worker:
        for batch in batches(spec):
            worker.run(spec, batch, {}, finished.append)
    assert [(r.kernel, r.shape.label) for r in finished] == [(c.label, c.shape.label) for c in cases_of(spec)]
    assert all(r.status == Status.PASS for r in finished)
    assert len({pid_of(r) for r in finished}) == 1 and {r.message.split()[1] for r in finished} == {"session=1"}
    assert worker.processes_started == 1 and len(worker.starts) == 1


@pytest.mark.parametrize("want_cublas", [True, False])
def test_a_child_spawned_before_its_specs_makes_its_session_only_when_told_and_as_told(want_cublas):
    spec = spec_of(["v0"], ["64x64x64"])
    finished = []
    with make_fake_worker(0, RunOptions(), want_cublas=None) as worker:
        worker.start()
        time.sleep(3.0)                     # its imports take about a second (more on a loaded machine): then it waits
        worker.begin(want_cublas)
        worker.run(spec, cases_of(spec), {}, finished.append)
    assert len(finished) == len(cases_of(spec)) and all(r.status == Status.PASS for r in finished)
    assert {tuple(r.message.split()[1:]) for r in finished} == {("session=1", f"cublas={want_cublas}")}
    steps = worker.start_steps[0]
    assert steps["waiting_for_the_specs_s"] > 0.5 and steps["interpreter_and_imports_s"] < 2.5
    assert worker.processes_started == 1


def test_a_child_never_told_to_begin_ends_quietly_and_cannot_be_sent_cases():
    spec = spec_of(["v0"], ["64x64x64"])
    worker = make_fake_worker(0, RunOptions(), want_cublas=None)
    worker.start()
    with pytest.raises(AssertionError, match="`begin` was not called"):
        worker.run(spec, cases_of(spec), {}, lambda record: None)
    started = time.monotonic()
    worker.close()                          # the pipe's end is its cue: no kill after a wait is needed
    assert time.monotonic() - started < 4.0 and worker.starts == []


def test_a_worker_let_go_without_waiting_closes_its_session_and_exits_on_its_own():
    spec = spec_of(["v0"], ["64x64x64"])
    worker = make_fake_worker(0, RunOptions())
    worker.run(spec, cases_of(spec), {}, lambda record: None)
    process = worker._process
    worker.release()                                  # its work done: told to stop
    started = time.monotonic()
    worker.close(wait=False)
    assert time.monotonic() - started < 0.5          # not waited for
    process.join(10)
    assert process.exitcode == 0                      # it ended by itself, not killed


def test_a_worker_not_told_to_stop_is_ended_even_without_waiting():
    spec = spec_of(["v0"], ["64x64x64"])
    worker = make_fake_worker(0, RunOptions())
    worker.run(spec, cases_of(spec), {}, lambda record: None)
    process = worker._process
    worker.close(wait=False)                          # e.g. a run cut short: nothing is left running
    assert not process.is_alive() and worker._process is None


def test_a_crash_is_an_error_row_and_a_new_process_takes_the_rest_and_the_later_batches():
    spec = spec_of(["v0", "v1", "v4"], ["1024x512x1024", "1001x513x777", "64x64x64"])
    finished = []
    with make_fake_worker(0, RunOptions()) as worker:
        for batch in batches(spec):
            worker.run(spec, batch, {}, finished.append)
    by_key = {(r.kernel.split("[")[0], r.shape.label): r for r in finished}
    assert len(finished) == len(cases_of(spec))
    crashed = by_key["v1", "1001x513x777"]
    assert crashed.status == Status.ERROR and "died (exit code 9) while running this case" in crashed.message
    assert ran(crashed)                                   # a resume does not run it again
    first, second = pid_of(by_key["v0", "1024x512x1024"]), pid_of(by_key["v4", "1001x513x777"])
    assert first != second and pid_of(by_key["v0", "1001x513x777"]) == first
    assert all(pid_of(r) == second for r in finished if r.shape.label == "64x64x64")   # kept for the next batch
    assert worker.processes_started == 2 and len(worker.starts) == 2


def test_after_a_fault_that_poisons_cuda_the_rest_run_in_a_fresh_process():
    spec = spec_of(["v0", "v2", "v4"], ["1001x513x777", "64x64x64"])
    finished = []
    with make_fake_worker(0, RunOptions()) as worker:
        for batch in batches(spec):
            worker.run(spec, batch, {}, finished.append)
    poisoned = next(r for r in finished if r.kernel.startswith("v2") and r.shape.label == "1001x513x777")
    after = [r for r in finished if r.kernel.startswith("v4") or r.shape.label == "64x64x64"]
    assert "illegal address" in poisoned.message
    assert {pid_of(r) for r in after} and pid_of(poisoned) not in {pid_of(r) for r in after}
    assert len({pid_of(r) for r in after}) == 1 and all(r.status == Status.PASS for r in after)
    assert worker.processes_started == 2


def test_a_case_past_its_timeout_is_stopped_and_the_rest_go_on():
    spec = spec_of(["v3", "v4"], ["1001x513x777", "64x64x64"], case_timeout_s=2.0)
    finished = []
    with make_fake_worker(0, RunOptions()) as worker:
        for batch in batches(spec):
            worker.run(spec, batch, {}, finished.append)
    hung = next(r for r in finished if r.kernel.startswith("v3") and r.shape.label == "1001x513x777")
    assert hung.status == Status.TIMEOUT and "no result after 2 s" in hung.message
    rest = [r for r in finished if r is not hung]
    assert len(rest) == len(cases_of(spec)) - 1 and all(r.status == Status.PASS for r in rest)
    assert worker.processes_started == 2


def test_a_worker_that_cannot_start_gives_up_later_batches_at_once():
    spec = spec_of(["v4"], ["1024x512x1024", "64x64x64"])
    finished = []
    with GpuWorker(0, RunOptions(), target=fails_to_start) as worker:
        for batch in batches(spec):
            worker.run(spec, batch, {}, finished.append)
    assert len(finished) == len(cases_of(spec))
    assert all(r.not_run and "could not start on the GPU: NoGpuError" in r.message for r in finished)
    assert worker.processes_started == 1


# ----------------------------------------------------------------------------------- on Dask

def serving_part(spec, options, placement, previous, on_result):
    """A stand-in for a GPU worker's part that runs its cases on the Dask worker's kept GPU worker."""
    device, gpu_worker = placement.device, placement.gpu_worker
    skip = {(c.kernel, c.shape.label) for c in previous}
    records = [c.as_dict() for c in previous]

    def finish(record):
        record.device = CaseDevice(f"GPU {device}", f"GPU-{device}", device)
        on_result(record)
        records.append(record.as_dict())

    gpu_worker.run(spec, [c for c in cases_of(spec) if c.key not in skip], {}, finish)
    return {"environment": {}, "cases": records}


def describe_stand_in(ordinals):
    from distributed import get_worker
    return {"device": {"name": f"GPU {ordinals[get_worker().address]}"}}


@pytest.mark.parametrize("kernels, shapes, crashes", [
    (["v1", "v2", "v3", "v4"], ["1024x512x1024", "64x64x64", "8192x8192x8192", "4096x4096x4096", "2048x2048x2048"],
     False),
    (["v0", "v1", "v4"], ["1024x512x1024", "1001x513x777", "64x64x64", "7x5x3", "8192x8192x8192"], True),
])
def test_each_gpu_keeps_one_worker_process_for_every_task_of_a_run(kernels, shapes, crashes):
    distributed = pytest.importorskip("distributed")
    from driver_gemm.runners.distribute import _GPU_WORKERS, DaskWorkers
    from driver_gemm.runners.schedule import CostModel, plan_tasks

    spec = spec_of(kernels, shapes)
    model = CostModel(task_overhead_s=0.0)
    assert len(plan_tasks(spec, 2, model)) > 2                 # more tasks than GPUs: some GPU takes several
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        workers = list(zip(sorted(client.scheduler_info()["workers"]), [0, 1]))
        run = DaskWorkers(client, workers, part=serving_part, describe=describe_stand_in,
                          make_worker=functools.partial(make_fake_worker), model=model).run(spec)
    assert sorted((c.kernel, c.shape.label) for c in run.cases if not c.is_baseline) == \
        sorted(c.key for c in cases_of(spec) if not c.is_baseline)
    tasks_per_gpu = {d: sum(t["device"] == d for t in run.settings.tasks) for d in (0, 1)}
    assert sum(tasks_per_gpu.values()) > 2
    held = {entry["device"]: entry for entry in run.settings.gpu_workers}
    assert not _GPU_WORKERS                                     # stopped at the end of the run
    for device in (0, 1):
        pids = {pid_of(c) for c in run.cases if c.device.ordinal == device and "pid=" in c.message}
        assert len(pids) == held[device]["processes"]           # every task of a GPU on the same process
    crashed = [c for c in run.cases if c.status == Status.ERROR]
    if crashes:
        assert len(crashed) == 1 and "died (exit code 9)" in crashed[0].message
        assert sorted(entry["processes"] for entry in held.values()) == [1, 2]
    else:
        assert not crashed and all(entry["processes"] == 1 for entry in held.values())


def test_each_start_says_where_its_seconds_went():
    spec = spec_of(["v0"], ["64x64x64", "1001x513x777"])
    with make_fake_worker(0, RunOptions()) as worker:
        cases = cases_of(spec)
        worker.run(spec, [c for c in cases if c.shape.label == "64x64x64"], {}, lambda record: None)
        worker.run(spec, [c for c in cases if c.shape.label != "64x64x64"], {}, lambda record: None)
    assert worker.processes_started == 1 and len(worker.start_steps) == len(worker.starts) == 1
    steps = worker.start_steps[0]
    # The child's own parts as its session reports them; before them, the interpreter and its imports,
    # measured from the parent's spawn to the child's entry on the machine's one monotonic clock.
    assert steps["driver_and_context_s"] == 0.25 and steps["cublas_s"] == 0.5
    assert 0 < steps["interpreter_and_imports_s"] <= worker.starts[0]


def test_a_child_that_only_says_ready_has_no_breakdown():
    from driver_gemm.runners.worker import start_steps

    assert start_steps(("ready",), 10.0) == {}
    assert start_steps(("ready", {"entered": 12.5, "steps": {"cublas_s": 0.3, "bad": "x"}}), 10.0) == \
        {"interpreter_and_imports_s": 2.5, "cublas_s": 0.3}
    assert start_steps(("ready", {"entered": 9.0}), 10.0) == {"interpreter_and_imports_s": 0.0}


def test_a_kept_worker_reports_each_process_in_the_first_run_it_serves():
    spec = spec_of(["v0"], ["64x64x64"])
    with make_fake_worker(0, RunOptions()) as worker:
        worker.start()                     # spawned before the run, as `driver-gemm run` does
        worker.run(spec, cases_of(spec), {}, lambda record: None)
        first = worker.starts_to_report()  # a run's report, made at its end
        assert first["processes"] == 1 and len(first["worker_start_s"]) == len(first["start_steps"]) == 1
        worker.run(spec, cases_of(spec), {}, lambda record: None)     # the next spec of the command
        assert worker.starts_to_report() == {"processes": 0, "worker_start_s": [], "start_steps": []}


def test_a_released_worker_leaves_on_its_own_and_later_work_gets_a_new_process():
    from driver_gemm import timeline

    timeline.forget()
    spec = spec_of(["v0", "v4"], ["1024x512x1024", "64x64x64"])
    first, second = batches(spec)
    finished = []
    with make_fake_worker(3, RunOptions()) as worker:
        worker.run(spec, first, {}, finished.append)
        child = worker._process
        worker.release()                   # returns at once; the child closes its session and exits by itself
        worker.release()                   # said once
        child.join(20)
        assert child.exitcode == 0
        worker.run(spec, second, {}, finished.append)
    assert all(r.status == Status.PASS for r in finished) and len(finished) == len(cases_of(spec))
    assert pid_of(finished[0]) != pid_of(finished[-1]) and worker.processes_started == 2
    # The first process's moments (its session made by its own clock, before the parent heard it was ready),
    # then its stop; "last case" moved on with the second process's cases.
    assert list(timeline.marks()) == ["gpu-3 spawned", "gpu-3 session made", "gpu-3 ready", "gpu-3 first case",
                                      "gpu-3 told to stop", "gpu-3 last case"]


def test_an_interrupt_ends_the_child_quietly_with_its_session_closed():
    from driver_gemm.runners.worker import serve

    closed, sent = [], []

    class Session(FakeSession):
        def close(self):
            closed.append("session")

    class Connection:
        def __init__(self):
            self.messages = [("run", None, ["a case"], None)]

        def recv(self):
            return self.messages.pop(0)

        def send(self, message):
            sent.append(message[0])

        def close(self):
            closed.append("connection")

    def interrupted(session, spec, case, compiled):
        raise KeyboardInterrupt          # Ctrl-C reached the child's process group mid-case

    assert serve(Connection(), 0, RunOptions(), True, Session, interrupted) is None
    assert sent == ["ready", "start"] and closed == ["session", "connection"]
