"""Several GPUs of one machine without Dask: one thread per GPU taking tasks from one list, checked with stand-in GPUs.

The GPU side is a stand-in: `plan_part` plans and tags each case with its
GPU; `serving_part` runs the cases on a real `GpuWorker` whose child runs
the real serving loop with a stand-in session (`test_gpu_worker`), so
process lifetimes, crashes and hangs are real.
"""

import json
import multiprocessing
import subprocess
import sys
import threading
import time

import pytest

from driver_gemm.planning.cases import cases_of, not_run_record
from driver_gemm.runners.local_gpus import LocalGpus
from driver_gemm.runners.schedule import CostModel, plan_tasks
from driver_gemm.session.state import RunOptions
from driver_gemm.results.records import RunResult
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from conftest import ROOT, SPECS
from fake_gpus import check_baselines, paced_part
from test_gpu_worker import make_fake_worker, pid_of, serving_part, spec_of


def describe_stand_in(device):
    return {"device": {"name": f"GPU {device}", "uuid": f"GPU-{device}"}}


def recording(part, baselines_run):
    """`part`, noting (shape, GPU) of every baseline it runs in `baselines_run` (the collector keeps a row only once)."""
    def recorded_part(subspec, options, placement, previous, on_result):
        def ran(case):
            if case.is_baseline:
                baselines_run.append((case.shape.label, placement.device))
            on_result(case)
        return part(subspec, options, placement, previous, ran)
    return recorded_part


def run_planned(spec, part=paced_part, *, on_result=None, result=None, previous=(), **kwargs):
    """`spec` verified on stand-in GPUs 0 and 1 by `part`; `kwargs` go to `LocalGpus`."""
    runner = LocalGpus([0, 1], **{"part": part, "describe": describe_stand_in, "make_worker": None, **kwargs})
    return runner.run(spec, RunOptions(time=False), on_result=on_result, result=result, previous=previous)


def kernel_keys(cases):
    return sorted((c.kernel, c.shape.label) for c in cases if not c.is_baseline)


def expected_keys(spec):
    return sorted(c.key for c in cases_of(spec) if not c.is_baseline)


def test_every_case_runs_once_and_lands_on_the_callers_thread_with_both_gpus_described_first():
    spec = load_spec(SPECS / "seed.yaml").select(shapes=["1024x512x1024", "1001x513x777", "64x64x64", "7x5x3"])
    seen, threads, gpus_known = [], set(), []

    def landed(case):
        seen.append(case)
        threads.add(threading.current_thread().name)
        gpus_known.append(len(run_holder[0].environment.get("gpus", [])))

    run_holder = [RunResult(spec=spec.name, spec_path=None)]
    run = run_planned(spec, on_result=landed, result=run_holder[0])
    assert run is run_holder[0]
    assert kernel_keys(run.cases) == expected_keys(spec) and len(kernel_keys(run.cases)) == 20
    assert sorted(id(c) for c in seen) == sorted(id(c) for c in run.cases)   # each landed case passed on once
    assert threads == {threading.main_thread().name}           # on_result only ever on the caller's thread
    assert set(gpus_known) == {2}                               # both GPUs described before the first case
    check_baselines(run)
    assert {case.device.ordinal for case in run.cases} == {0, 1}
    assert [gpu["device"]["name"] for gpu in run.environment["gpus"]] == ["GPU 0", "GPU 1"]
    tasks = run.settings.tasks
    assert sorted(t["task"] for t in tasks) == sorted(t.label for t in plan_tasks(spec, 2))
    assert all(t["device"] in (0, 1) and t["worker"] == f"gpu-{t['device']}" and t["wall_s"] >= 0 for t in tasks)
    assert run.started and run.finished


def test_a_large_shape_is_shared_and_each_gpu_measures_its_own_baseline():
    spec = load_spec(SPECS / "seed.yaml").select(shapes=["8192x8192x8192", "64x64x64"])
    # Its kernels known to take 20 s each there: the shape is cut, and its tasks are the first two dealt.
    model = CostModel(task_overhead_s=0.0, case_s={(k.label, "8192x8192x8192"): 20.0 for k in spec.kernels})
    planned = plan_tasks(spec, 2, model)
    assert [task.shapes[0].label for task in planned[:2]] == ["8192x8192x8192"] * 2
    baselines_run = []
    run = run_planned(spec, part=recording(paced_part, baselines_run), model=model)
    big = [c for c in run.cases if c.shape.label == "8192x8192x8192" and not c.is_baseline]
    assert {c.device.ordinal for c in big} == {0, 1}
    assert sorted(baselines_run) == sorted(set(baselines_run))       # each GPU ran a shape's baseline once
    assert {key for key in baselines_run if key[0] == "8192x8192x8192"} == {("8192x8192x8192", 0),
                                                                          ("8192x8192x8192", 1)}
    assert kernel_keys(run.cases) == expected_keys(spec)
    check_baselines(run)


def test_a_resumed_run_keeps_what_ran_and_each_gpu_reuses_only_its_own_baselines():
    spec = load_spec(SPECS / "seed.yaml").select(shapes=["1024x512x1024", "64x64x64"])
    first = run_planned(spec)
    kept = [c for c in first.cases if c.shape.label == "1024x512x1024" or c.is_baseline]
    gave_up = [not_run_record(case, "the worker process did not start") for case in cases_of(spec)
               if case.shape.label == "64x64x64" and not case.is_baseline]
    baselines_run = []
    seen = []
    resumed = run_planned(spec, part=recording(paced_part, baselines_run), previous=kept + gave_up, on_result=seen.append)
    assert seen and all(c.shape.label == "64x64x64" for c in seen)      # nothing that ran is run again
    had = {(c.shape.label, c.device.ordinal) for c in kept if c.is_baseline}
    assert ("64x64x64", 0) in had or ("64x64x64", 1) in had
    assert not set(baselines_run) & had                  # a GPU's own baselines of the earlier run are reused
    assert kernel_keys(resumed.cases) == expected_keys(spec)
    assert not any(c.not_run for c in resumed.cases)
    check_baselines(resumed)


def test_a_free_gpu_takes_the_next_task():
    spec = load_spec(SPECS / "seed.yaml").select(
        shapes=["1024x512x1024", "1001x513x777", "64x64x64", "7x5x3", "8192x8192x8192", "4096x4096x4096"])
    model = CostModel(task_overhead_s=0.0)
    planned = plan_tasks(spec, 2, model)
    assert len(planned) >= 4

    def slow_on_gpu_0(subspec, options, placement, *args):
        return paced_part(subspec, options, placement, *args, seconds=1.5 if placement.device == 0 else 0.05)

    run = run_planned(spec, part=slow_on_gpu_0, model=model)
    tasks = run.settings.tasks
    assert sorted(t["task"] for t in tasks) == sorted(t.label for t in planned)      # each taken once
    per_gpu = {device: [t for t in tasks if t["device"] == device] for device in (0, 1)}
    assert len(per_gpu[0]) == 1 and len(per_gpu[1]) == len(planned) - 1   # the fast GPU took all the rest
    assert kernel_keys(run.cases) == expected_keys(spec)
    check_baselines(run)


def test_an_error_on_one_gpu_ends_the_run_and_keeps_what_the_other_finished():
    spec = load_spec(SPECS / "seed.yaml").select(shapes=["1024x512x1024", "1001x513x777", "64x64x64", "7x5x3"])

    first_landed = threading.Event()

    def broken_on_gpu_1(subspec, options, placement, *args):
        if placement.device == 1:
            first_landed.wait(30)          # once GPU 0 has a finished case
            raise RuntimeError("the part failed on GPU 1")
        return paced_part(subspec, options, placement, *args)

    def landed(case):
        seen.append(case)
        first_landed.set()

    result = RunResult(spec=spec.name, spec_path=None)
    seen = []
    with pytest.raises(RuntimeError, match="failed on GPU 1"):
        run_planned(spec, part=broken_on_gpu_1, result=result, on_result=landed)
    assert result.cases and all(c.device.ordinal == 0 for c in result.cases)
    assert len(seen) == len(result.cases) and result.finished


def test_an_interrupt_keeps_every_finished_case_and_stops_the_gpus_at_once():
    # v3 at 1001x513x777 hangs for 60 s in its worker process; the rest pass at once.
    spec = spec_of(["v3", "v4"], ["1001x513x777", "1024x512x1024", "64x64x64", "7x5x3"])
    model = CostModel(task_overhead_s=0.0)
    hanging = ("v3", "1001x513x777")
    # What can finish: every case but the hanging one and those after it in its task (the other GPU takes the
    # tasks that GPU would have taken next).
    stuck = next(cases_of(task.spec_of(spec)) for task in plan_tasks(spec, 2, model)
                 if any((c.kernel and c.kernel.name, c.shape.label) == hanging for c in cases_of(task.spec_of(spec))))
    at = next(i for i, c in enumerate(stuck) if (c.kernel and c.kernel.name, c.shape.label) == hanging)
    others = set(expected_keys(spec)) - {c.key for c in stuck[at:]}
    seen = []

    def landed(case):
        seen.append(case)
        if {(c.kernel, c.shape.label) for c in seen if not c.is_baseline} == others:
            import _thread
            threading.Timer(0.5, _thread.interrupt_main).start()    # Ctrl-C while v3 hangs on its GPU

    result = RunResult(spec=spec.name, spec_path=None)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        LocalGpus([0, 1], part=serving_part, describe=describe_stand_in, make_worker=make_fake_worker,
                  model=model).run(spec, result=result, on_result=landed)
    assert time.monotonic() - started < 8        # not the 60 s of the hanging case, nor a wait for its thread
    assert set(kernel_keys(result.cases)) == others            # every finished case, nothing made up for v3
    assert all(c.status == Status.PASS for c in result.cases)
    assert len(seen) == len(result.cases) and result.finished
    assert not multiprocessing.active_children()                # every GPU's worker process is gone


def test_a_crash_in_one_gpus_process_loses_no_case_of_either_gpu():
    # v1 at 1001x513x777 kills its worker process: an ERROR row, and a new process takes that GPU's rest.
    spec = spec_of(["v0", "v1", "v4"], ["1024x512x1024", "1001x513x777", "64x64x64", "7x5x3", "8192x8192x8192"])
    model = CostModel(task_overhead_s=0.0)
    assert len(plan_tasks(spec, 2, model)) > 2
    run = LocalGpus([0, 1], part=serving_part, describe=describe_stand_in, make_worker=make_fake_worker,
                    model=model).run(spec)
    assert kernel_keys(run.cases) == expected_keys(spec)
    crashed = [c for c in run.cases if c.status == Status.ERROR]
    assert len(crashed) == 1 and "died (exit code 9)" in crashed[0].message
    assert all(c.status == Status.PASS for c in run.cases if c is not crashed[0])
    held = {entry["device"]: entry for entry in run.settings.gpu_workers}
    assert sorted(entry["processes"] for entry in held.values()) == [1, 2]
    for device in (0, 1):
        pids = {pid_of(c) for c in run.cases if c.device.ordinal == device and "pid=" in c.message}
        assert len(pids) == held[device]["processes"]           # every task of a GPU on its kept process(es)
        assert len(held[device]["worker_start_s"]) == held[device]["processes"]
    assert sum(t["device"] == d for t in run.settings.tasks for d in (0, 1)) == len(run.settings.tasks)
    assert not multiprocessing.active_children()


CLI_WITHOUT_A_GPU = """
import functools, json, sys, time
sys.path[:0] = [{tests!r}]
import driver_gemm.cuda.device as device
import driver_gemm.runners.local_gpus as local_gpus
from fake_gpus import plan_part
from driver_gemm.cli.main import main

def paced_part(*args, **kwargs):
    time.sleep(0.2)
    return plan_part(*args, **kwargs)

device.device_count = lambda: 2          # two stand-in GPUs, run by plan_part
local_gpus.LocalGpus = functools.partial(
    local_gpus.LocalGpus, part=paced_part, make_worker=None,
    describe=lambda ordinal: {{"device": {{"name": f"GPU {{ordinal}}"}}}})
code = main(["run", {spec!r}, "-q", "-s", "1024x512x1024", "-s", "64x64x64", "--device", "0,1",
             "--json", {out!r}])
print(json.dumps({{"code": code, "dask": sorted(m for m in sys.modules if m.split(".")[0] in ("dask", "distributed"))}}))
"""


def test_devices_on_one_machine_run_without_dask(tmp_path):
    out = tmp_path / "run.json"
    script = CLI_WITHOUT_A_GPU.format(tests=str(ROOT / "tests"), spec=str(SPECS / "seed.yaml"), out=str(out))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"code": 0, "dask": []}
    run = json.loads(out.read_text())
    assert {c["device"]["ordinal"] for c in run["cases"]} == {0, 1}
    assert len([c for c in run["cases"] if c["kernel"] != "cublas"]) == 10
    header = json.loads(out.with_suffix(".jsonl").read_text().splitlines()[0])
    assert [gpu["device"]["name"] for gpu in header["environment"]["gpus"]] == ["GPU 0", "GPU 1"]
    # Where the run's time went: the command's own moments, then each GPU's thread running out of tasks.
    moments = run["settings"]["timeline_s"]
    assert list(moments)[:2] == ["specs read", "driver answered"] and list(moments)[-1] == "writing results"
    assert {"gpu-0 out of tasks", "gpu-1 out of tasks"} <= set(moments)
    assert list(moments.values()) == sorted(moments.values()) and moments["writing results"] < 60
    assert run["settings"]["estimates"] == {"remembered_cases": 0, "remembered_launches": 0, "cases": 12}


CLI_WITH_A_HANGING_CASE = """
import functools, sys
sys.path[:0] = [{tests!r}]
import driver_gemm.cuda.device as device
import driver_gemm.runners.local_gpus as local_gpus
from test_gpu_worker import make_fake_worker, serving_part
from driver_gemm.cli.main import main

if __name__ == "__main__":     # the worker processes are spawned: they import this as a module
    device.device_count = lambda: 2
    local_gpus.LocalGpus = functools.partial(
        local_gpus.LocalGpus, part=serving_part, make_worker=make_fake_worker,
        describe=lambda ordinal: {{"device": {{"name": f"GPU {{ordinal}}"}}}})
    sys.exit(main(["run", {spec!r}, "-q", "-k", "v3", "-k", "v4", "-s", "1001x513x777", "-s", "64x64x64",
                   "-s", "7x5x3", "--device", "0,1", "--json", {out!r}]))
"""


def test_ctrl_c_on_the_terminal_keeps_the_finished_cases_and_ends_at_once(tmp_path):
    """A real SIGINT to the whole process group (the GPUs' worker processes get it too), as Ctrl-C sends it."""
    import os
    import signal

    from driver_gemm.cli.main import EXIT_INTERRUPTED

    out = tmp_path / "run.json"
    script = tmp_path / "run_cli.py"
    script.write_text(CLI_WITH_A_HANGING_CASE.format(tests=str(ROOT / "tests"), spec=str(SPECS / "seed.yaml"),
                                                     out=str(out)))
    process = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = out.with_suffix(".jsonl")
    deadline = time.monotonic() + 60
    # Every case but v3 at 1001x513x777 (which hangs for 60 s) and v4 there (after it): a header and 7 cases.
    while time.monotonic() < deadline and (not lines.exists() or len(lines.read_text().splitlines()) < 8):
        time.sleep(0.1)
    time.sleep(0.5)
    os.killpg(process.pid, signal.SIGINT)
    signalled = time.monotonic()
    _, stderr = process.communicate(timeout=30)
    assert time.monotonic() - signalled < 5
    assert process.returncode == EXIT_INTERRUPTED, stderr
    assert "interrupted: 7 finished cases kept" in stderr
    run = json.loads(out.read_text())
    assert run["interrupted"] and len(run["cases"]) == 7 and all(c["status"] == "PASS" for c in run["cases"])
    gpus = sorted({c["device"]["ordinal"] for c in run["cases"]})
    if len(gpus) > 1:              # which GPU took the hanging case's task depends on which was ready first
        assert "(GPU 0: " in stderr and ", GPU 1: " in stderr
    assert ("1001x513x777", "v3") not in {(c["shape"]["label"], c["name"]) for c in run["cases"]}


def test_a_gpu_whose_worker_cannot_start_hands_its_tasks_to_the_others():
    """GPU 1's worker process cannot start: GPU 0 runs every case; none is given up while a GPU works."""
    from driver_gemm.runners.worker import GpuWorker
    from test_gpu_worker import FakeSession, fails_to_start, fake_execute

    def make_worker(device, options, *, want_cublas=True):
        if device == 1:
            return GpuWorker(device, options, want_cublas=want_cublas, target=fails_to_start)
        return GpuWorker(device, options, want_cublas=want_cublas, child_args=(FakeSession, fake_execute))

    spec = spec_of(["v0", "v4"], ["1024x512x1024", "64x64x64", "7x5x3", "8192x8192x8192"])
    run = LocalGpus([0, 1], part=serving_part, describe=describe_stand_in, make_worker=make_worker,
                    model=CostModel(task_overhead_s=0.0)).run(spec)
    assert kernel_keys(run.cases) == expected_keys(spec)
    assert all(c.status == Status.PASS and c.device.ordinal == 0 for c in run.cases)
    assert {t["device"] for t in run.settings.tasks} == {0}
    assert not multiprocessing.active_children()


def test_when_no_gpu_can_start_a_worker_every_case_is_recorded_as_not_run():
    from driver_gemm.runners.worker import GpuWorker
    from test_gpu_worker import fails_to_start

    spec = spec_of(["v0", "v4"], ["1024x512x1024", "64x64x64", "7x5x3"])
    run = LocalGpus([0, 1], part=serving_part, describe=describe_stand_in,
                    make_worker=lambda device, options, **kw: GpuWorker(device, options, target=fails_to_start),
                    model=CostModel(task_overhead_s=0.0)).run(spec)
    assert kernel_keys(run.cases) == expected_keys(spec)
    assert all(c.not_run and "did not start" in c.message for c in run.cases)
