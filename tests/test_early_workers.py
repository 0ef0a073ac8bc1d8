"""`driver-gemm run` spawns its GPUs' worker processes before it reads its specs or asks the CUDA driver anything.

A worker's start (interpreter, imports, context, cuBLAS) and the command's
own imports, spec reading and cuInit each take a noticeable time: spawned
first, they overlap. A child spawned that early only
imports until the command has read its specs and tells it whether to load
cuBLAS (`begin`); a command that ends before that kills it without its
having touched a GPU. Checked here with stand-ins for the worker, the
driver and the runners, by the order in which things happen and by what
each runner is handed.
"""

import pytest

import driver_gemm.cli.run as run_command
import driver_gemm.cuda.device as device
import driver_gemm.cuda.presence as presence
import driver_gemm.runners.local_gpus as local_gpus
import driver_gemm.runners.one_gpu as runner
import driver_gemm.runners.worker as worker
from driver_gemm.cli.main import main
from driver_gemm.errors import NoGpuError

from conftest import SPECS

SEED = str(SPECS / "seed.yaml")


class Recorder:
    def __init__(self):
        self.events = []
        self.workers = {}
        self.handed = None
        self.release_given = []     # per run on several GPUs: whether its workers may stop once done


@pytest.fixture
def recorder(monkeypatch):
    record = Recorder()

    class StandInWorker:
        def __init__(self, ordinal, options, *, want_cublas=True):
            self.ordinal, self.want_cublas = ordinal, want_cublas
            self.cancelled = self.closed = False
            record.workers[ordinal] = self

        def start(self):
            record.events.append(f"spawn {self.ordinal}")

        def begin(self, want_cublas):
            record.events.append(f"begin {self.ordinal}")
            self.want_cublas = want_cublas

        def cancel(self):
            self.cancelled = True

        def release(self):
            record.events.append(f"release {self.ordinal}")

        def close(self, wait=True):
            self.closed, self.waited = True, wait

    def count():
        record.events.append("cuInit")
        return 2

    class OnGpus:
        def __init__(self, devices, *, gpu_workers=None, release_given=False):
            record.handed = gpu_workers
            record.release_given.append(release_given)

        def run(self, spec, options, **kwargs):
            record.events.append("run on GPUs")
            return kwargs["result"]

    def on_one_gpu(spec, options, placement, **kwargs):
        record.events.append("run on one GPU")
        record.handed = placement.gpu_worker
        return kwargs["result"]

    def read_specs(*args, **kwargs):
        record.events.append("specs read")
        return load_specs(*args, **kwargs)

    load_specs = run_command.load_specs
    monkeypatch.setattr(run_command, "load_specs", read_specs)
    monkeypatch.setattr(presence, "driver_library_present", lambda: True)
    monkeypatch.setattr(device, "device_count", count)
    monkeypatch.setattr(worker, "GpuWorker", StandInWorker)
    monkeypatch.setattr(local_gpus, "LocalGpus", OnGpus)
    monkeypatch.setattr(runner, "run_spec", on_one_gpu)
    return record


def ran(argv, capsys) -> None:
    """`main(argv)` ran to its end: the stand-in runs record no case (exit 1: nothing passed), and nothing failed."""
    assert main(argv) == 1
    assert "internal error" not in capsys.readouterr().err


def test_the_workers_of_named_gpus_are_spawned_before_the_specs_are_read_and_handed_to_the_run(recorder, tmp_path,
                                                                                            capsys):
    ran(["run", SEED, "-q", "--device", "0,1", "--json", str(tmp_path / "run.json")], capsys)
    assert recorder.events[:6] == ["spawn 0", "spawn 1", "specs read", "begin 0", "begin 1", "cuInit"]
    assert "run on GPUs" in recorder.events
    assert set(recorder.handed) == {0, 1} and all(w.want_cublas for w in recorder.handed.values())
    assert recorder.release_given == [True]    # the only spec: each GPU's worker may stop as soon as it is done
    assert all(w.closed and not w.cancelled for w in recorder.workers.values())


def test_one_gpu_gets_its_worker_too(recorder, tmp_path, capsys):
    ran(["run", SEED, "-q", "--device", "1", "--no-baseline", "--json", str(tmp_path / "run.json")], capsys)
    assert recorder.events[:4] == ["spawn 1", "specs read", "begin 1", "cuInit"]
    assert recorder.handed is recorder.workers[1] and not recorder.handed.want_cublas
    assert recorder.events[-2:] == ["run on one GPU", "release 1"]     # told to stop before the results are written
    assert recorder.handed.closed


@pytest.mark.parametrize("placement", [["--device", "0,1"], ["--device", "0"]])
def test_with_several_specs_the_workers_stop_only_after_the_last(recorder, tmp_path, monkeypatch, placement, capsys):
    monkeypatch.chdir(tmp_path)                 # several specs: their results go to ./results
    ran(["run", SEED, str(SPECS / "fast.yaml"), "-q", "--no-baseline", *placement], capsys)
    runs = [event for event in recorder.events if event.startswith(("run on", "release"))]
    if "," in placement[1]:
        assert runs == ["run on GPUs"] * 2 and recorder.release_given == [False, True]
    else:
        assert runs == ["run on one GPU", "run on one GPU", "release 0"]


def test_when_the_driver_then_finds_no_gpu_the_workers_are_killed_and_the_exit_says_so(recorder, monkeypatch,
                                                                                       capsys):
    def no_gpu():
        recorder.events.append("cuInit")
        raise NoGpuError("the CUDA driver is installed but sees no GPU")

    monkeypatch.setattr(device, "device_count", no_gpu)
    code = main(["run", SEED, "-q", "--device", "0,1"])
    assert code == 3 and "sees no GPU" in capsys.readouterr().err
    assert recorder.events[:6] == ["spawn 0", "spawn 1", "specs read", "begin 0", "begin 1", "cuInit"]
    assert all(w.cancelled and w.closed for w in recorder.workers.values())


@pytest.mark.parametrize("problem", ["a spec that does not parse", "an option that contradicts the spec count"])
def test_a_command_that_ends_in_bad_input_kills_its_early_workers_before_they_touch_a_gpu(recorder, tmp_path,
                                                                                         problem, capsys):
    broken = tmp_path / "broken.yaml"
    broken.write_text("kernels: [\n")
    argv = (["run", str(broken), "-q", "--device", "0,1"] if problem.startswith("a spec")
            else ["run", SEED, SEED, "-q", "--device", "0,1", "--json", str(tmp_path / "run.json")])
    assert main(argv) == 2 and "driver-gemm:" in capsys.readouterr().err
    assert recorder.events[:2] == ["spawn 0", "spawn 1"]
    assert not any(event.startswith(("begin", "cuInit")) for event in recorder.events)
    assert all(w.cancelled and w.closed for w in recorder.workers.values())


@pytest.mark.parametrize("extra", [["--in-process"], ["--device", "all"]])
def test_no_early_worker_where_the_run_makes_none_or_the_gpus_are_not_known_yet(recorder, tmp_path, extra):
    main(["run", SEED, "-q", "--json", str(tmp_path / "run.json"), *extra])
    assert not recorder.workers and recorder.events[:2] == ["specs read", "cuInit"]


def test_no_early_worker_without_the_drivers_library(recorder, monkeypatch, tmp_path):
    monkeypatch.setattr(presence, "driver_library_present", lambda: False)
    main(["run", SEED, "-q", "--json", str(tmp_path / "run.json")])
    assert not recorder.workers and recorder.events[:2] == ["specs read", "cuInit"]


def test_without_the_library_the_driver_never_answers():
    present = presence.driver_library_present()
    try:
        device.device_count()
        reason = None
    except NoGpuError as exc:
        reason = str(exc)
    if not present:            # e.g. this CI machine: then cuInit fails too, saying why
        assert reason is not None and "no CUDA driver" in reason
    else:                      # a GPU machine: the library loads; the driver answers or says what is missing
        assert reason is None or "GPU" in reason


def test_early_workers_of_a_resumed_run_with_nothing_left_are_ended_unbegun(recorder):
    from driver_gemm.cli.run import _begin_early_workers
    from driver_gemm.planning.cases import cases_of, new_record
    from driver_gemm.session.options import RunOptions
    from driver_gemm.specfile import load_spec
    from driver_gemm.status import Status

    spec = load_spec(SEED).select(["v0"], ["7x5x3"])
    done = [new_record(case, Status.PASS) for case in cases_of(spec)]
    spawned = {ordinal: worker.GpuWorker(ordinal, RunOptions(), want_cublas=None) for ordinal in (0, 1)}
    assert _begin_early_workers(dict(spawned), [spec], done) == {}
    assert all(w.cancelled and w.want_cublas is None for w in spawned.values())
    again = {0: worker.GpuWorker(0, RunOptions(), want_cublas=None)}
    assert _begin_early_workers(dict(again), [spec], done[:0]) == again
    assert again[0].want_cublas is spec.baseline and not again[0].cancelled
    assert recorder.events == ["begin 0"]
