"""The CUPTI timer without a GPU: kernel records matched to each sample's host bracket through the API calls
that launched them, a fake cupti module standing in for cupti-python; the command line refusing --timer cupti
where cupti-python is missing."""

from __future__ import annotations

import enum
import importlib.util
from types import SimpleNamespace

import pytest

from driver_gemm.measure import cupti_timer
from driver_gemm.measure.cupti_timer import CuptiRecorder, CuptiUnavailable, kernel_times
from driver_gemm.measure.timing import sample_loop
from driver_gemm.specfile.model import MeasureSettings
from driver_gemm.specfile.sample_patterns import SamplePattern

from conftest import SPECS


def test_a_brackets_time_is_the_sum_of_the_kernels_its_calls_launched():
    api = [(100, 1), (150, 2), (300, 3), (400, 4)]                 # (call start, correlation id)
    kernels = [(1000, 1800, 1), (1800, 1900, 2), (2000, 2500, 3), (9000, 9100, 99)]
    assert kernel_times([(90, 200), (250, 350), (390, 450)], api, kernels) == [
        pytest.approx(0.0009), pytest.approx(0.0005), None]        # 800 + 100 ns; 500 ns; call 4 launched nothing


def test_calls_on_a_brackets_edges_belong_to_it_and_order_does_not_matter():
    assert kernel_times([(100, 200)], [(200, 7), (100, 6)], [(0, 10, 7), (0, 30, 6)]) == [pytest.approx(4e-5)]


class ActivityKind(enum.IntEnum):
    CONCURRENT_KERNEL = 10
    DRIVER = 2
    RUNTIME = 3


class FakeCupti:
    """cupti.cupti's activity API: a clock, records made by `launch`, handed over on a forced flush."""

    ActivityKind = ActivityKind
    ActivityFlag = SimpleNamespace(FLUSH_FORCED=1)

    def __init__(self):
        self.now, self.correlation, self.pending, self.enabled, self.calls = 0, 0, [], set(), []

    def activity_register_callbacks(self, requested, completed):
        self.requested, self.completed = requested, completed
        assert requested() == (cupti_timer.BUFFER_BYTES, 0)

    def activity_enable(self, kind):
        self.enabled.add(kind)

    def activity_disable(self, kind):
        self.enabled.discard(kind)

    def get_timestamp(self):
        self.now += 10
        return self.now

    def activity_flush_all(self, flag):
        self.calls.append(("flush", flag))
        done, self.pending = self.pending, []
        self.completed(done)

    def finalize(self):
        self.calls.append(("finalize",))

    def launch(self, duration_ns, kernels=1):
        """A library call that launches `kernels` kernels of `duration_ns` each."""
        assert self.enabled == {ActivityKind.CONCURRENT_KERNEL, ActivityKind.DRIVER, ActivityKind.RUNTIME}
        self.correlation += 1
        self.now += 1
        self.pending.append(SimpleNamespace(kind=ActivityKind.DRIVER, start=self.now, end=self.now + 1,
                                            correlation_id=self.correlation))
        for index in range(kernels):
            self.pending.append(SimpleNamespace(kind=ActivityKind.CONCURRENT_KERNEL, start=10_000 * self.correlation,
                                                end=10_000 * self.correlation + duration_ns,
                                                correlation_id=self.correlation, name=f"k{index}"))


class FakeEvent:
    def record(self, stream):
        pass

    def synchronize(self):
        pass

    def elapsed_ms_since(self, start):
        return 1.0

    def close(self):
        pass


def sampler(fake, launch, pattern="flush"):
    recorder = CuptiRecorder(fake)
    device = SimpleNamespace(event=FakeEvent)
    gate = SimpleNamespace(hold=lambda: fake.launch(5), release=lambda: None)   # the gate is a kernel too
    stream = SimpleNamespace(synchronize=lambda: None)
    return recorder, recorder.sampler(device, stream, launch, lambda: None, gate,
                                      pattern=SamplePattern.parse(pattern))


def test_each_sample_is_timed_by_its_own_kernels_and_not_by_the_gate_or_its_events():
    fake = FakeCupti()
    durations = iter([2000, 3000, 4000, 5000])
    recorder, made = sampler(fake, lambda: fake.launch(next(durations)))
    with recorder.collecting():
        made.queue(0, 2)
        made.queue(2, 2)          # in flight while the first batch is read
        made.wait(1)
        assert [made.elapsed_ms(slot) for slot in (0, 1)] == [1.0, 1.0]      # the events steer the loop
        assert fake.calls == []                                            # and no record is read meanwhile
        made.wait(3)
        assert [made.elapsed_ms(slot) for slot in (3, 2)] == [1.0, 1.0]
        assert made.final_times() == [pytest.approx(0.002), pytest.approx(0.003), pytest.approx(0.005),
                                      pytest.approx(0.004)]                  # in the order they were read
    assert fake.enabled == set() and ("flush", 0) in fake.calls
    recorder.close()
    assert fake.calls[-1] == ("finalize",)


def test_the_sampling_loop_reports_the_kernel_times_of_the_samples_it_kept():
    fake = FakeCupti()
    durations = iter(range(1000, 100_000, 1000))
    recorder, made = sampler(fake, lambda: fake.launch(next(durations)))
    settings = MeasureSettings(min_samples=4, max_samples=4, min_time_s=0.0, timeout_s=10.0)
    with recorder.collecting():
        summary, kept = sample_loop(made, settings)
    assert kept == [pytest.approx(0.001 * n) for n in range(1, 5)]     # CUPTI's, not the events' 1.0 ms
    assert summary.median_ms == pytest.approx(0.0025)


def test_a_burst_sums_its_launches_and_a_split_k_matmul_its_kernels():
    fake = FakeCupti()
    recorder, made = sampler(fake, lambda: fake.launch(1000, kernels=2), pattern="burst:3:1")
    made.sleep = lambda seconds: None
    with recorder.collecting():
        made.queue(0, 1)
        made.wait(0)
        made.elapsed_ms(0)
        assert made.final_times() == [pytest.approx(0.006)]   # 3 launches x 2 kernels x 1 us (per launch: / 3)


def test_a_sample_without_kernel_records_says_so():
    fake = FakeCupti()
    recorder, made = sampler(fake, lambda: None)
    with recorder.collecting():
        made.queue(0, 1)
        made.wait(0)
        made.elapsed_ms(0)
        with pytest.raises(CuptiUnavailable, match="CUPTI recorded no kernel .* --timer events"):
            made.final_times()


def test_zero_length_kernel_records_are_refused_as_a_version_mismatch_not_timed():
    fake = FakeCupti()
    recorder, made = sampler(fake, lambda: fake.launch(0))      # records laid out otherwise read as start == end
    with recorder.collecting():
        made.queue(0, 1)
        made.wait(0)
        made.elapsed_ms(0)
        with pytest.raises(CuptiUnavailable, match="zero-length .* --timer events"):
            made.final_times()


def test_cupti_refusing_is_a_clear_error():
    fake = FakeCupti()

    def refuse(kind):
        raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")

    fake.activity_enable = refuse
    recorder = CuptiRecorder(fake)
    with pytest.raises(CuptiUnavailable, match="cuptiActivityEnable: CUPTI_ERROR_MULTIPLE"):
        with recorder.collecting():
            pass


@pytest.mark.skipif(importlib.util.find_spec("cupti") is not None, reason="cupti-python is installed here")
def test_without_cupti_python_the_timer_says_how_to_get_it(capsys):
    from driver_gemm.cli import main

    with pytest.raises(CuptiUnavailable, match=r"pip install 'driver-gemm\[cupti\]'"):
        cupti_timer.load_cupti()
    assert main(["run", str(SPECS / "seed.yaml"), "--timer", "cupti"]) == 3
    assert "--timer cupti needs NVIDIA's cupti-python" in capsys.readouterr().err


@pytest.mark.gpu
def test_cupti_and_events_time_a_long_launch_alike(driver_gemm_device):
    """On a GPU with cupti-python: cuBLASLt BF16 at 2048^3 timed by both timers (a kernel, not a memset: CUPTI's
    kernel records are what the timer reads). CUPTI times the kernel alone; an event pair also holds a few us of
    the front end (docs/timing.md). The two timers compared at 4096^3 are gpu_check.sh's step cupti."""
    pytest.importorskip("cupti")
    import numpy as np

    from driver_gemm.gemm import operands
    from driver_gemm.gemm.dtypes import parse_types
    from driver_gemm.gemm.operands import gemm_operands, parse_layout
    from driver_gemm.measure import cublaslt
    from driver_gemm.measure.timing import L2Flusher, LaunchGate, measure
    from driver_gemm.specfile.model import MeasureSettings

    device = driver_gemm_device
    stream = device.stream()
    types = parse_types({"a": "bf16"})
    gemm = gemm_operands(2048, 2048, 2048, orders=parse_layout("NN"))
    inputs = operands.make_typed_inputs(gemm, types, seed=3)
    A = device.upload(np.frombuffer(operands.input_bytes(gemm.a, inputs.a, types.a), np.uint8), stream)
    B = device.upload(np.frombuffer(operands.input_bytes(gemm.b, inputs.b, types.b), np.uint8), stream)
    C = device.alloc(gemm.c.elements * types.c.storage_bytes)
    flusher, gate = L2Flusher(device, stream), LaunchGate(device, stream)
    recorder = CuptiRecorder()
    try:
        with cublaslt.CublasLtMatmul(device, stream) as lt:
            launch = lt.prepare(cublaslt.plan_matmul(types, gemm), A, B, C)
            settings = MeasureSettings(min_samples=20, timeout_s=1.0)
            events, _ = measure(launch, device, stream, settings, flusher, gate)
            kernels, samples = measure(launch, device, stream, settings, flusher, gate, timer=recorder)
        assert len(samples) >= 20
        front_end_ms = events.median_ms - kernels.median_ms
        assert -0.02 * events.median_ms < front_end_ms < 0.005, (kernels.median_ms, events.median_ms)
    finally:
        recorder.close()
        gate.close()
        flusher.close()
