"""The case pipeline on the CPU: steps sequenced through the error funnel with stand-in sessions and steps,
cases planned once, resumes that re-run what never ran, workers that never start, and owned handles."""

from __future__ import annotations

import gc
import time

import pytest

from driver_gemm.cuda.check import cuda_error
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import ArgumentError, DriverGemmError, ToolMissingError, UsageError
from driver_gemm.planning import build
from driver_gemm.planning.build import check_offline, plan_cases
from driver_gemm.planning.cases import cases_of, new_record, ran
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.runners.in_process import run_in_process
from driver_gemm.session.options import Placement, RunOptions
from driver_gemm.runners.worker import run_isolated
from driver_gemm.specfile.model import Shape
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from conftest import SPECS
from test_spec import MINIMAL, write


class FakeDevice:
    def __init__(self):
        self.poisoned = False
        self.closed = False

    def mark_poisoned(self, error):
        self.poisoned = self.poisoned or error.is_sticky


class FakeSession:
    """What the runner needs of a session, without a GPU."""

    made: list["FakeSession"] = []

    def __init__(self, ordinal, want_cublas, options, *, context=None, stream=None):
        self.device = FakeDevice()
        self.closed = False
        FakeSession.made.append(self)

    @property
    def poisoned(self):
        return self.device.poisoned

    def close(self):
        self.closed = True


def seed_spec():
    return load_spec(SPECS / "seed.yaml").select(["v1", "v2"], ["1024x512x1024"])


def passing(run):
    run.record.status = Status.PASS


def steps_raising(failing_index: int, exception: BaseException):
    def explode(run):
        raise exception

    def steps_for(case):
        if case.index == failing_index:
            return [("plan", passing), ("load", explode), ("time", passing)]
        return [("plan", passing), ("time", passing)]
    return steps_for


def run_fake(spec, steps_for):
    finished, started = [], []
    run_in_process(spec, cases_of(spec), {}, RunOptions(), Placement(), finished.append, started.append,
                   session_factory=FakeSession, steps_for=steps_for)
    return finished, started


def test_a_plain_exception_in_a_step_is_that_cases_error_and_the_run_goes_on():
    spec = seed_spec()
    cases = cases_of(spec)
    assert [c.label for c in cases] == ["cublas", "v1", "v2[TILE=32]"]
    finished, started = run_fake(spec, steps_raising(1, RuntimeError("boom")))
    assert [r.kernel for r in finished] == ["cublas", "v1", "v2[TILE=32]"] == [c.label for c in started]
    assert [r.status for r in finished] == [Status.PASS, Status.ERROR, Status.PASS]
    assert finished[1].message == "RuntimeError: boom"
    # the step that raised was timed and the ones after it never ran
    assert set(finished[1].phases) == {"plan", "load"} and set(finished[2].phases) == {"plan", "time"}
    assert all(seconds >= 0 for seconds in finished[1].phases.values())
    assert FakeSession.made[-1].closed


def test_a_driver_gemm_error_reads_as_it_is():
    finished, _ = run_fake(seed_spec(), steps_raising(2, ArgumentError("argument N: 2147483648 does not fit int32")))
    assert finished[2].status == Status.ERROR and finished[2].message == "argument N: 2147483648 does not fit int32"


def test_a_fault_in_process_marks_the_rest_not_run_and_a_resume_runs_them_again():
    fault = cuda_error("cuStreamSynchronize", "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access")
    assert fault.is_sticky and isinstance(fault, DriverGemmError)
    finished, _ = run_fake(seed_spec(), steps_raising(1, fault))
    faulted, rest = finished[1], finished[2]
    assert faulted.status == Status.ERROR and "CUDA_ERROR_ILLEGAL_ADDRESS" in faulted.message
    assert "unusable" in faulted.message and ran(faulted)
    assert rest.status == Status.ERROR and rest.not_run and not ran(rest) and "v1" in rest.message
    # as read back from a case log, and from an older log that only has the message
    again = type(rest).from_dict(rest.as_dict())
    assert not ran(again)
    older = again.as_dict()
    older.pop("not_run")
    assert not ran(type(rest).from_dict(older))
    assert ran(new_record(cases_of(seed_spec())[2], Status.ERROR, "cuModuleLoadData failed"))


def test_every_case_is_planned_once_before_it_runs(monkeypatch):
    spec = load_spec(SPECS / "seed.yaml").select(shapes=["1024x512x1024", "1001x513x777"])
    calls = []
    real = build.plan_launch
    monkeypatch.setattr(build, "plan_launch", lambda *args, **kw: calls.append(args[:2]) or real(*args, **kw))
    cases, compiled = plan_cases(spec, arch_limits("sm_90"), "sm_90", 132)
    kernel_cases = [c for c in cases if c.kernel is not None]
    assert len(calls) == len(kernel_cases) == len(spec.kernels) * len(spec.shapes)
    for case in kernel_cases:
        assert case.plan.valid and case.plan.resources is not None and case.plan.occupancy is not None
        assert case.plan == plan_case(case.kernel, case.shape, arch_limits("sm_90"),
                                      compiled[case.kernel.label].resources_of(case.kernel.instance),
                                      dict(spec.scalars), 132)
    # cases that already ran (a resume) are neither planned into the list nor run
    done = {cases[0].key, cases[1].key}
    rest, _ = plan_cases(spec, arch_limits("sm_90"), "sm_90", 132, skip=done)
    assert [c.key for c in rest] == [c.key for c in cases[2:]]


def test_an_argument_that_does_not_fit_its_c_type_is_invalid_in_the_plan(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL))
    kernel = spec.kernels[0]
    plan = plan_case(kernel, Shape(64, 2**31, 16), arch_limits("sm_90"))
    assert not plan.valid
    message = " ".join(str(p) for p in plan.problems)
    assert "argument N = 2147483648 does not fit int32" in message and "signature[4]" in message
    assert "N" not in plan.argument_values


def test_sizes_whose_products_reach_2_to_the_31_are_noted_for_int32_kernels(tmp_path):
    kernel = load_spec(write(tmp_path, MINIMAL)).kernels[0]
    big = plan_case(kernel, Shape(65536, 32768, 64), arch_limits("sm_90"))
    assert big.valid and any("C (M*N) = 2147483648" in note and "int32" in note for note in big.notes)
    small = plan_case(kernel, Shape(1024, 1024, 1024), arch_limits("sm_90"))
    assert not any("2**31" in note for note in small.notes)


def test_check_offline_finds_launch_mistakes_without_a_gpu_or_compiler(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "compile_source", lambda *a, **k: pytest.fail("compile=False must not compile"))
    assert check_offline(seed_spec(), compile=False) == []
    broken = load_spec(write(tmp_path, MINIMAL.replace("block: [BN / TN, BM / TM]", "block: [BN, BM]")))
    refused = check_offline(broken, compile=False)
    assert len(refused) == 1 and "4096 threads per block" in str(refused[0].problems[0])


# ----------------------------------------------------------------------------------- worker processes
# Entry points for the spawned child: module-level so that a spawned process can import them.

def worker_that_fails_at_startup(connection, *args):
    connection.send(("fatal", "NoGpuError: no CUDA driver on this machine"))
    connection.close()


def worker_that_exits_at_startup(connection, *args):
    raise SystemExit(7)


def worker_that_stays_silent(connection, *args):
    time.sleep(30)


@pytest.mark.parametrize("target, timeout, reason", [
    (worker_that_fails_at_startup, 60, "could not start on the GPU: NoGpuError: no CUDA driver"),
    (worker_that_exits_at_startup, 60, "exited with code 7 before it was ready"),
    (worker_that_stays_silent, 3, "no word from it after 3 s"),
])
def test_a_worker_that_never_starts_is_reported_as_such_not_as_a_timeout(target, timeout, reason):
    spec = seed_spec()
    finished, starts = [], []
    run_isolated(spec, cases_of(spec), {}, 0, RunOptions(), finished.append, worker_starts=starts,
                 target=target, startup_timeout_s=timeout)
    assert [r.kernel for r in finished] == ["cublas", "v1", "v2[TILE=32]"]
    for record in finished:
        assert record.status == Status.ERROR and record.not_run and not ran(record)
        assert "the worker process did not start" in record.message and reason in record.message
    assert starts == []


# ------------------------------------------------------------------------------------------- handles

def test_a_session_that_fails_halfway_closes_what_it_made(monkeypatch):
    from driver_gemm.session import state as session_module

    made = []

    class Device:
        def __init__(self, ordinal, context=None):
            self.closed = False
            made.append(self)

        def stream(self, handle=None):
            return object()

        def close(self):
            self.closed = True

    def no_flusher(device, stream):
        raise RuntimeError("out of memory for the L2 flush buffer")

    monkeypatch.setattr(session_module, "Device", Device)
    monkeypatch.setattr(session_module, "L2Flusher", no_flusher)
    with pytest.raises(RuntimeError, match="L2 flush"):
        session_module.Session(0, want_cublas=True)
    assert len(made) == 1 and made[0].closed


def test_a_finalizer_that_fails_warns_instead_of_raising():
    from driver_gemm.cuda.device import Owned

    class Owner:
        poisoned = False

        def adopt(self, child):
            self.child = child

    def release():
        raise cuda_error("cuMemFree", "CUDA_ERROR_INVALID_CONTEXT")

    owner = Owner()
    Owned(owner, release)
    with pytest.warns(ResourceWarning, match="CUDA_ERROR_INVALID_CONTEXT"):
        del owner.child
        gc.collect()
    closed_by_hand = Owned(owner, release)
    with pytest.raises(DriverGemmError, match="cuMemFree"):
        closed_by_hand.close()
    assert closed_by_hand.closed
    closed_by_hand.close()    # once released (or tried), closing again does nothing


def test_usage_and_tool_errors_sit_in_the_funnel_with_their_exit_codes():
    from driver_gemm.errors import NoGpuError, SpecError

    assert issubclass(UsageError, SpecError)              # exit 2, like a spec mistake
    assert issubclass(ToolMissingError, NoGpuError)       # exit 3, like a missing driver
    assert issubclass(ArgumentError, DriverGemmError)


# ------------------------------------------------------------------------------------------ on a GPU

@pytest.mark.gpu
def test_a_run_records_seconds_per_step_and_worker_start():
    from driver_gemm.runners.one_gpu import run_spec

    spec = load_spec(SPECS / "seed.yaml").select(["v2"], ["127x33x65"])
    run = run_spec(spec, RunOptions(time=False), Placement(isolate=True))
    assert [c.status for c in run.cases] == [Status.PASS, Status.PASS]
    kernel = run.cases[1]
    assert set(kernel.phases) == {"plan", "load", "memory", "inputs", "reference", "launch_verify", "diagnose",
                                  "time"}
    assert set(run.cases[0].phases) == {"load", "memory", "inputs", "launch_verify", "diagnose", "time", "keep"}
    assert len(run.settings.worker_start_s) == 1 and run.settings.worker_start_s[0] > 0
    steps = run.settings.worker_start_steps[0]
    assert {"interpreter_and_imports_s", "driver_and_context_s", "stream_flush_gate_s", "nvml_s"} <= set(steps)
    assert "cublas_s" not in steps      # the library loads while the first case draws; its first use waits for it
    assert sum(steps.values()) <= run.settings.worker_start_s[0] + 0.01
