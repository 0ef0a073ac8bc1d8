"""The sampling loop on a fake GPU: stop rules, graph-mode accounting, pipelining, throttled batches."""

import dataclasses
import json
import time

import numpy as np
import pytest

from driver_gemm.measure.clocks import ClockReading
from driver_gemm.measure.stats import StopReason, TimingSummary
from driver_gemm.measure.timing import (_GATE_SOURCE, MAX_BATCH, ThrottlePolicy, batch_size_for, sample_loop)
from driver_gemm.specfile.model import MeasureSettings


class FakeGpu:
    """Runs queued samples in order: `sample_ms(index, batch)` is each sample's time; waiting moves the wall clock.

    It also checks what a real stream would punish: a slot reused while its
    batch is still in flight, or a wait on a slot that was never queued.
    """

    def __init__(self, sample_ms, host_seconds_per_sample=0.0):
        self.sample_ms = sample_ms
        self.host_seconds_per_sample = host_seconds_per_sample
        self.wall = 0.0
        self.times = {}
        self.in_flight = []          # (batch index, slots) not yet waited for, oldest first
        self.batch_sizes = []
        self.log = []
        self.count = 0

    def queue(self, first_slot, count):
        slots = range(first_slot, first_slot + count)
        busy = {slot for _, flight in self.in_flight for slot in flight}
        assert not busy & set(slots), "a slot of a batch still in flight was reused"
        batch = len(self.batch_sizes)
        for slot in slots:
            self.times[slot] = self.sample_ms(self.count, batch)
            self.count += 1
        self.batch_sizes.append(count)
        self.in_flight.append((batch, slots))
        self.wall += count * self.host_seconds_per_sample
        self.log.append(("queue", batch))

    @property
    def running_batch(self):
        return self.in_flight[0][0] if self.in_flight else None

    def wait(self, slot):
        batch, slots = self.in_flight.pop(0)
        assert slot == slots[-1], "the loop must wait for the last sample of the oldest batch"
        self.wall += sum(self.times[s] for s in slots) / 1e3
        self.log.append(("wait", batch))

    def elapsed_ms(self, slot):
        return self.times[slot]

    def now(self):
        return self.wall


def settings(**changes):
    return dataclasses.replace(MeasureSettings(), **changes)


def run(gpu, measure_settings, **kwargs):
    return sample_loop(gpu, measure_settings, now=gpu.now, sleep=kwargs.pop("sleep", lambda s: None), **kwargs)


def test_steady_kernel_stops_on_the_noise_threshold_after_min_time():
    gpu = FakeGpu(lambda i, b: 0.036)
    summary, samples = run(gpu, settings())
    assert summary.stop_reason == StopReason.NOISE_THRESHOLD
    gpu_seconds = summary.total_ms / 1e3
    assert 0.5 <= gpu_seconds <= 0.5 + 2 * MAX_BATCH * 0.036e-3
    assert summary.samples == len(samples) == len(summary.samples_ms)
    assert max(gpu.batch_sizes) == MAX_BATCH
    assert summary.median_ms == pytest.approx(0.036)


def test_graph_mode_budget_counts_whole_replays():
    # 20 launches of 0.05 ms per replay: a sample is 1 ms of GPU time. Counting only the
    # per-launch time would need 10,000 samples for min_time (the timeout at 3 s comes first)
    # and size batches at 32 instead of 20.
    launches, per_launch = 20, 0.05
    gpu = FakeGpu(lambda i, b: launches * per_launch)
    summary, samples = run(gpu, settings(mode="graph", graph_launches=launches), launches_per_sample=launches)
    assert summary.stop_reason == StopReason.NOISE_THRESHOLD
    assert summary.median_ms == pytest.approx(per_launch)
    assert summary.launches_per_sample == launches
    assert 500 <= summary.samples <= 500 + 2 * batch_size_for(1e-3)
    assert set(gpu.batch_sizes[2:]) == {20} == {batch_size_for(launches * per_launch / 1e3)}
    assert gpu.wall < 1.0


def test_batches_are_sized_from_the_whole_sample():
    assert batch_size_for(1e-3) == 20
    assert batch_size_for(36e-6) == MAX_BATCH
    assert batch_size_for(0.5) == 1


def test_noisy_kernel_stops_when_noise_is_stable_not_on_timeout():
    rng = np.random.default_rng(7)
    draws = rng.normal(0.1, 0.004, 100_000)          # 4% noise: never under the 0.5% threshold
    gpu = FakeGpu(lambda i, b: float(draws[i]))
    summary, _ = run(gpu, settings(timeout_s=3.0))
    assert summary.stop_reason == StopReason.NOISE_STABLE
    assert summary.noise > 0.005
    assert 0.5 <= summary.total_ms / 1e3 < 0.6      # stopped right after min_time
    assert gpu.wall < 3.0


def test_timeout_stops_a_case_that_cannot_reach_min_time():
    gpu = FakeGpu(lambda i, b: 50.0)                  # 50 ms samples, min_time 100 s
    summary, _ = run(gpu, settings(min_time_s=100.0, timeout_s=1.0))
    assert summary.stop_reason == StopReason.TIMEOUT
    assert summary.samples >= 3
    assert gpu.wall >= 1.0


def test_max_samples_is_never_exceeded():
    gpu = FakeGpu(lambda i, b: 0.01 * (1 + (i % 7)))
    summary, _ = run(gpu, settings(min_samples=10, max_samples=50, min_time_s=10.0))
    assert summary.stop_reason == StopReason.MAX_SAMPLES
    assert summary.samples == 50 == gpu.count


def test_next_batch_is_queued_before_the_previous_one_is_waited_for():
    gpu = FakeGpu(lambda i, b: 0.2)
    run(gpu, settings(min_time_s=0.1))
    waits = [i for i, entry in enumerate(gpu.log) if entry[0] == "wait"]
    for position in waits[:-1]:
        batch = gpu.log[position][1]
        assert ("queue", batch + 1) in gpu.log[:position], "batch k+1 must be queued while batch k runs"
    assert not gpu.in_flight, "every queued batch is read before returning"


def test_no_sample_is_lost_or_invented():
    values = [0.1 + 0.001 * (i % 13) for i in range(10_000)]
    gpu = FakeGpu(lambda i, b: values[i])
    summary, samples = run(gpu, settings(min_time_s=0.2))
    assert samples == values[:gpu.count]


class FakeClocks:
    """NVML on the fake GPU: the batches in `throttled` run at half the clock (and twice as slowly)."""

    def __init__(self, gpu, throttled, reference_mhz=1980, reasons=0x4):
        self.gpu, self.throttled, self.reference_mhz, self.reasons = gpu, throttled, reference_mhz, reasons

    def read(self):
        if self.gpu.running_batch in self.throttled:
            return ClockReading(sm_mhz=self.reference_mhz // 2, reasons=self.reasons)
        return ClockReading(sm_mhz=self.reference_mhz)


def test_throttled_batches_are_discarded_and_recorded():
    throttled = {3, 4, 5}
    gpu = FakeGpu(lambda i, b: 0.2 if b in throttled else 0.1)
    clocks = FakeClocks(gpu, throttled)
    pauses = []
    summary, samples = run(gpu, settings(min_time_s=0.2), clocks=clocks, sleep=pauses.append)
    assert max(samples) == pytest.approx(0.1), "no sample of a throttled batch is kept"
    assert summary.discarded_samples == sum(gpu.batch_sizes[b] for b in throttled)
    assert pauses == [ThrottlePolicy().recovery_delay_s] * 3
    assert summary.throttled_fraction == pytest.approx(3 / len(gpu.batch_sizes))
    assert summary.sm_clock_mhz == 1980 and summary.sm_clock_min_mhz == 990
    assert summary.sm_clock_reference_mhz == 1980
    assert summary.throttle_reasons == ("sw_power_cap",)
    assert summary.total_ms / 1e3 >= 0.2, "discarded samples do not count toward min_time"


def test_a_gpu_throttled_throughout_still_ends_on_the_timeout():
    gpu = FakeGpu(lambda i, b: 1.0)
    clocks = FakeClocks(gpu, throttled=range(10**6))
    summary, samples = run(gpu, settings(timeout_s=0.5), clocks=clocks)
    assert summary.stop_reason == StopReason.TIMEOUT
    assert summary.throttled_fraction == 1.0 and summary.sm_clock_mhz is None
    assert samples and summary.samples == len(samples)


def test_a_gpu_that_throttles_after_two_samples_still_ends_on_the_timeout():
    gpu = FakeGpu(lambda i, b: 1.0)
    clocks = FakeClocks(gpu, throttled=range(2, 10**6))
    summary, samples = run(gpu, settings(timeout_s=0.5), clocks=clocks)
    assert summary.stop_reason == StopReason.TIMEOUT
    assert summary.samples == 2 and summary.discarded_samples > 0


def test_a_lower_threshold_keeps_the_batches():
    gpu = FakeGpu(lambda i, b: 0.1)
    clocks = FakeClocks(gpu, throttled={2})
    summary, _ = run(gpu, settings(min_time_s=0.1), clocks=clocks, throttle=ThrottlePolicy(threshold=0.4))
    assert summary.discarded_samples == 0 and summary.throttled_fraction == 0.0


def test_summary_carries_wall_time_and_survives_json():
    gpu = FakeGpu(lambda i, b: 0.0361234 + 0.0001 * (i % 3))
    summary, samples = run(gpu, settings(min_time_s=0.05), clocks=FakeClocks(gpu, throttled=set()), started=-1.5)
    assert summary.wall_s == pytest.approx(gpu.wall + 1.5)
    assert summary.samples_ms[0] == 0.03612
    again = TimingSummary.from_dict(json.loads(json.dumps(summary.as_dict())))
    assert again == summary


def test_gate_kernel_compiles(tmp_path, monkeypatch):
    from driver_gemm.cuda.compile import compile_text

    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path))
    cubin = compile_text(_GATE_SOURCE, "hold_stream.cu", ["hold_stream"], "sm_90")
    assert cubin.symbol("hold_stream") == "hold_stream" and cubin.image


@pytest.mark.gpu
def test_releasing_a_later_gate_opens_an_earlier_one():
    from driver_gemm.cuda.device import Device
    from driver_gemm.measure.timing import LaunchGate

    with Device(0) as device:
        stream = device.stream()
        gate = LaunchGate(device, stream)
        gate.hold()
        gate.hold()                   # two gates queued; only the second ticket is released
        end = device.event()
        end.record(stream)
        gate.release()
        began = time.perf_counter()
        end.synchronize()
        assert time.perf_counter() - began < 1.0, "an earlier gate waited for its own release"
        gate.close()


@pytest.mark.gpu
def test_measure_on_the_gpu_records_samples_and_wall_time():
    import driver_gemm as dg
    from conftest import SPECS
    from gpu_specs import with_measure

    spec = dg.load_spec(SPECS / "seed.yaml").select(["v1"], ["1024x512x1024"])
    spec = with_measure(dataclasses.replace(spec, baseline=False), min_time_s=0.05, timeout_s=1.0)
    timing = dg.run_spec(spec).cases[0].timing
    assert timing.stop_reason in {reason.value for reason in StopReason}
    assert len(timing.samples_ms) == timing.samples and timing.wall_s > 0
