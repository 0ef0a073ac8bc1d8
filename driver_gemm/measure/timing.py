"""Time a launch the way nvbench's cold measurement does (step 4b of the data flow).

Per sample: flush L2, record an event, launch, record an event. Batches of samples wait behind a
one-thread gate kernel until the host has queued them all, so no sample includes the host's launch
cost, and are pipelined so the GPU never idles; sampling stops on noise, time or count, with the
reason recorded. Optional SM clock reads drop throttled batches. The recipe: docs/timing.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, ContextManager, Protocol

from ..cuda.compile import compile_text
from ..cuda.device import Device, DeviceBuffer, Stream
from ..cuda.check import check
from ..errors import ArgumentError, CudaError
from ..cuda.launch import LaunchConfig, PackedArguments, PreparedLaunch
from ..cuda.module import Module
from ..specfile.model import MeasureSettings
from ..specfile.sample_patterns import SamplePattern
from .clocks import GPU_IDLE, THROTTLE_RECOVERY_DELAY_S, THROTTLE_THRESHOLD, ClockSource, ClockTracker
from .stats import NoiseHistory, StopReason, TimingSummary, summarize

# Never stop on the timeout before this many samples: a median needs a few.
MIN_SAMPLES_ON_TIMEOUT = 3
MAX_BATCH = 32              # samples queued behind one gate (well under the driver's queue depth)
BATCH_GPU_SECONDS = 0.02    # aim for batches of about this much kernel time
ONE_BY_ONE_BATCH_S = 0.25   # a pattern that rests between samples: batches of about this much rest

_GATE_SOURCE = r"""
// Holds its stream until the host raises *release to at least `ticket` (or about `patience`
// clock cycles pass, so that a host that died cannot hang the GPU).
extern "C" __global__ void hold_stream(const volatile int* release, int ticket, long long patience)
{
    const long long start = clock64();
    while (*release < ticket && clock64() - start < patience) {
    }
}
"""


class L2Flusher:
    """Evicts the L2 cache between samples by writing a buffer twice its size.

    Writing (cuMemsetD32Async) rather than reading needs no kernel of our own;
    the buffer is twice the L2 so that no line of the inputs survives.
    """

    def __init__(self, device: Device, stream: Stream):
        self.stream = stream
        self.device = device
        self.buffer: DeviceBuffer = device.alloc(2 * max(device.properties.l2_bytes, 1 << 20))
        self.larger: DeviceBuffer | None = None     # a sample pattern's own flush (do-bench's 256 MB), made once
        self._word = 0

    def flush(self) -> None:
        self._word = (self._word + 1) & 0xFFFF  # a changing value, in case a no-op write is ever skipped
        self.buffer.fill_u32(self._word, self.stream)

    def writing(self, nbytes: int, zeros: bool = False) -> Callable[[], None]:
        """A flush that writes `nbytes` (a sample pattern's): the L2 flush itself for its own size or none for 0.
        `zeros` writes zeros every time, as Triton's ``cache.zero_()`` does (the data written moves the power the
        flush draws, and so the clock of the GEMM after it)."""
        if nbytes <= 0:
            return lambda: None
        if nbytes <= self.buffer.nbytes and not zeros:
            return self.flush if nbytes == self.buffer.nbytes else (lambda: self._fill(self.buffer, nbytes))
        if self.larger is None or self.larger.nbytes < nbytes:
            if self.larger is not None:
                self.larger.close()
            self.larger = self.device.alloc(nbytes)
        larger = self.larger
        return lambda: self._fill(larger, nbytes, zeros)

    def _fill(self, buffer: DeviceBuffer, nbytes: int, zeros: bool = False) -> None:
        self._word = (self._word + 1) & 0xFFFF
        buffer.fill_u32(0 if zeros else self._word, self.stream, nbytes)

    def close(self) -> None:
        self.buffer.close()
        if self.larger is not None:
            self.larger.close()


class LaunchGate:
    """A one-thread kernel that blocks a stream until the host opens it (nvbench's blocking kernel).

    Each `hold` queues a gate with the next ticket; `release` raises the shared
    word to that ticket, which opens it and every earlier gate still queued.
    """

    def __init__(self, device: Device, stream: Stream):
        cubin = compile_text(_GATE_SOURCE, "hold_stream.cu", ["hold_stream"], device.properties.arch)
        self.module = Module(device, cubin)
        self.kernel = self.module.kernel("hold_stream")
        self.stream = stream
        self.flag = device.mapped_word()
        self.patience = 5 * device.properties.clock_khz * 1000   # about five seconds of cycles
        self.ticket = 0
        self._held: PreparedLaunch | None = None   # the last gate's arguments, alive past its launch

    def hold(self) -> None:
        self.ticket += 1
        arguments = PackedArguments(["ptr", "int32", "int64"], [self.flag.address, self.ticket, self.patience])
        self._held = PreparedLaunch(self.kernel, LaunchConfig.of([1], [1]), arguments, self.stream)
        self._held.launch()

    def release(self) -> None:
        self.flag.set(self.ticket)

    def close(self) -> None:
        self.release()
        self.flag.close()
        self.module.close()


class CapturedLaunches:
    """`count` launches captured from a stream into a CUDA graph; each replay runs them back to back."""

    def __init__(self, device: Device, stream: Stream, launch: Callable[[], None], count: int):
        driver = device.driver
        self.driver, self.stream, self.count = driver, stream, count
        check(driver.cuStreamBeginCapture(stream.handle,
                                          driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
              "cuStreamBeginCapture")
        try:
            for _ in range(count):
                launch()
        finally:
            graph = check(driver.cuStreamEndCapture(stream.handle), "cuStreamEndCapture")
        try:
            self.executable = device.instantiate_graph(graph)   # owned by the device, like every handle
        finally:
            check(driver.cuGraphDestroy(graph), "cuGraphDestroy")

    def replay(self) -> None:
        self.executable.launch(self.stream)

    def close(self) -> None:
        self.executable.close()


class KernelTimer(Protocol):
    """What times samples other than by their events (`cupti_timer.CuptiRecorder`): a block of collection per
    case, and a sampler made with `EventSampler`'s arguments."""

    def collecting(self) -> ContextManager: ...

    def sampler(self, *args, **kwargs) -> "EventSampler": ...


class SampleQueue(Protocol):
    """What the sampling loop needs from the GPU: queue timed samples into slots, wait, read them.

    `EventSampler` is the CUDA one; tests give the loop a fake with a fake clock.
    """

    def queue(self, first_slot: int, count: int) -> None: ...

    def wait(self, slot: int) -> None: ...

    def elapsed_ms(self, slot: int) -> float: ...


class EventSampler:
    """Queues batches of timed samples (flush, event, launch, event) behind the gate; reads their events.

    `pattern` (`specfile.sample_patterns.SamplePattern`) sets what a sample is: a burst times its launches
    together between one event pair; a pattern with a pause queues each sample alone after the GPU has
    rested (`sleep`), and reads `clocks` while that sample runs (`read_clock`).
    """

    def __init__(self, device: Device, stream: Stream, launch: Callable[[], None], flush: Callable[[], None],
                 gate: LaunchGate | None, slots: int = 2 * MAX_BATCH, *, pattern: SamplePattern = SamplePattern(),
                 clocks: ClockSource | None = None, sleep: Callable[[float], None] = time.sleep):
        self.stream, self.launch, self.flush, self.gate = stream, launch, flush, gate
        self.pattern, self.clocks, self.sleep = pattern, clocks, sleep
        self.readings: dict = {}          # one-by-one patterns: the clock read during each sample, by slot
        self.starts, self.ends = [], []
        try:
            for _ in range(slots):
                self.starts.append(device.event())
                self.ends.append(device.event())
        except BaseException:
            self.close()
            raise

    def queue(self, first_slot: int, count: int) -> None:
        if self.pattern.one_by_one:
            for slot in range(first_slot, first_slot + count):
                self.sleep(self.pattern.pause_ms / 1e3)     # the GPU rests: nothing of ours is queued
                self._queue(slot, slot + 1)
                self.readings[slot] = self.clocks.read() if self.clocks is not None else None   # while it runs
                self.ends[slot].synchronize()
            return
        self._queue(first_slot, first_slot + count)

    def _launch_sample(self, slot: int) -> None:
        for _ in range(self.pattern.launches):
            self.launch()

    def _queue(self, first: int, end: int) -> None:
        stream, flush = self.stream, self.flush
        if self.gate is not None:
            self.gate.hold()
        try:
            for slot in range(first, end):
                flush()
                self.starts[slot].record(stream)
                self._launch_sample(slot)
                self.ends[slot].record(stream)
        finally:
            if self.gate is not None:
                self.gate.release()

    def read_clock(self, first_slot: int, count: int):
        """The clock of the batch in these slots, read while it runs: now, for samples queued back to back (it is
        the batch in flight); the last reading taken during one of its samples that NVML did not mark idle, for
        one-by-one patterns (it has run)."""
        if self.clocks is None:
            return None
        if not self.pattern.one_by_one:
            return self.clocks.read()
        taken = [self.readings.get(slot) for slot in range(first_slot, first_slot + count)]
        busy = [reading for reading in taken if reading is not None and not reading.reasons & GPU_IDLE]
        return (busy or [reading for reading in taken if reading is not None] or [None])[-1]

    def wait(self, slot: int) -> None:
        self.ends[slot].synchronize()

    def elapsed_ms(self, slot: int) -> float:
        return self.ends[slot].elapsed_ms_since(self.starts[slot])

    def close(self) -> None:
        for event in self.starts + self.ends:
            event.close()


@dataclass(frozen=True)
class ThrottlePolicy:
    """nvbench's throttle handling: drop batches under `threshold` of the maximum clock, then pause."""

    threshold: float = THROTTLE_THRESHOLD
    recovery_delay_s: float = THROTTLE_RECOVERY_DELAY_S


class EnergyWindow:
    """The GPU's energy counter read when sampling begins and when it ends (every batch waited for): the energy,
    seconds and launches of the window go into the summary. Without a counter (no NVML, or a GPU without one),
    the summary is left as it is."""

    def __init__(self, clocks, now: Callable[[], float] = time.perf_counter):
        self.read = getattr(clocks, "energy_mj", None) if clocks is not None else None
        self.now = now
        self.began = now()
        self.start_mj = self.read() if self.read is not None else None

    def close(self, summary: TimingSummary, launches_per_sample: int) -> TimingSummary:
        end_mj = self.read() if self.start_mj is not None else None
        if end_mj is None or end_mj < self.start_mj:      # no reading, or a counter that went back (a reset)
            return summary
        launches = (summary.samples + summary.discarded_samples) * launches_per_sample
        return dataclasses.replace(summary, energy_j=(end_mj - self.start_mj) / 1e3,
                                   energy_window_s=round(self.now() - self.began, 6), energy_launches=launches)


def batch_size_for(sample_seconds: float) -> int:
    """Samples per batch for samples of `sample_seconds` of GPU time each (a whole graph replay in graph mode)."""
    # (the small addend keeps 0.02 / 0.001 at 20 when the mean carries a rounding error)
    return max(1, min(MAX_BATCH, int(BATCH_GPU_SECONDS / max(sample_seconds, 1e-9) + 1e-6)))


def one_by_one_batch(pattern: SamplePattern) -> int:
    """The most samples a batch holds: `MAX_BATCH`, or for a pattern that rests before each sample as many as
    rest within `ONE_BY_ONE_BATCH_S` (at least one), so that the stop rules are checked that often."""
    if not pattern.one_by_one:
        return MAX_BATCH
    return max(1, min(MAX_BATCH, int(ONE_BY_ONE_BATCH_S * 1e3 / pattern.pause_ms)))


def stop_reason(settings: MeasureSettings, samples: int, gpu_seconds: float, noise: NoiseHistory,
                wall_seconds: float) -> StopReason | None:
    """Why sampling should stop now, or None to go on (the stop rules of docs/timing.md)."""
    if samples >= settings.max_samples:
        return StopReason.MAX_SAMPLES
    if samples >= settings.min_samples and gpu_seconds >= settings.min_time_s:
        if noise.relative_stdev <= settings.max_noise:
            return StopReason.NOISE_THRESHOLD
        if noise.is_stable():
            return StopReason.NOISE_STABLE
    if wall_seconds >= settings.timeout_s and samples >= min(MIN_SAMPLES_ON_TIMEOUT, settings.min_samples):
        return StopReason.TIMEOUT
    return None


def sample_loop(queue: SampleQueue, settings: MeasureSettings, *, launches_per_sample: int = 1,
                clocks: ClockSource | None = None, throttle: ThrottlePolicy = ThrottlePolicy(),
                now: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep,
                started: float | None = None) -> tuple[TimingSummary, list[float]]:
    """Take samples from `queue` until a stop rule holds; return the summary and the samples (ms per launch).

    Two halves of `MAX_BATCH` slots alternate: one batch is read while the
    next runs. `now` and `sleep` are the wall clock and the pause (injected for
    tests); `started` is when the case's timing began (warm-up included) for
    the wall time recorded; the timeout counts from the first sample. A queue with ``final_times`` (the
    CUPTI sampler) gives every sample's figure once the last is read; its `elapsed_ms` steers the stop rules.
    """
    began = now()
    started = began if started is None else started
    samples: list[float] = []
    throttled_samples: list[float] = []
    kept_reads: list[int] = []         # for each sample (and throttled one), its place in the order they were read
    throttled_reads: list[int] = []
    reads = 0
    noise = NoiseHistory()
    tracker = ClockTracker(clocks.reference_mhz, throttle.threshold) if clocks is not None else None
    gpu_seconds = 0.0
    batch = 1                          # the first sample sizes the batches that follow
    batch_limit = one_by_one_batch(settings.pattern)
    half = 0
    pending: tuple[int, int] | None = None
    reason: StopReason | None = None
    while True:
        queued = None
        in_flight = pending[1] if pending else 0
        room = settings.max_samples - len(samples) - in_flight
        if reason is None and room > 0:
            count = min(batch, room, batch_limit)
            queue.queue(half * MAX_BATCH, count)
            queued = (half * MAX_BATCH, count)
            half ^= 1
        if pending is None:
            if queued is None:
                break
            pending = queued
            continue
        first, count = pending
        reading = _clock_reading(queue, clocks, first, count)    # taken while `pending` runs
        queue.wait(first + count - 1)
        times = [queue.elapsed_ms(slot) for slot in range(first, first + count)]
        order = range(reads, reads + count)
        reads += count
        if tracker is not None and tracker.record(reading):
            throttled_samples.extend(t / launches_per_sample for t in times)
            throttled_reads.extend(order)
            sleep(throttle.recovery_delay_s)
        else:
            kept_reads.extend(order)
            for elapsed in times:
                per_launch = elapsed / launches_per_sample
                samples.append(per_launch)
                noise.add(per_launch)
                gpu_seconds += elapsed / 1e3      # the whole sample ran on the GPU, every launch of it
        pending = queued
        if reason is None:
            wall = now() - began
            reason = stop_reason(settings, len(samples), gpu_seconds, noise, wall)
            if reason is None and throttled_samples and wall >= settings.timeout_s:
                reason = StopReason.TIMEOUT   # too few unthrottled samples: report what there is rather than hang
            if samples:
                batch = batch_size_for(gpu_seconds / len(samples))
        if pending is None:
            break
    final_times = getattr(queue, "final_times", None)    # a kernel timer's figures, read after the last sample
    if final_times is not None:
        durations = final_times()
        samples = [durations[index] / launches_per_sample for index in kept_reads]
        throttled_samples = [durations[index] / launches_per_sample for index in throttled_reads]
    kept = samples or throttled_samples
    extra = tracker.summary_fields() if tracker is not None else {}
    summary = summarize(kept, reason or StopReason.MAX_SAMPLES, launches_per_sample=launches_per_sample,
                        wall_s=now() - started, discarded_samples=len(throttled_samples) if samples else 0,
                        **extra)
    return summary, kept


def _clock_reading(queue: SampleQueue, clocks: ClockSource | None, first_slot: int, count: int):
    if clocks is None:
        return None
    read = getattr(queue, "read_clock", None)     # a sampler that reads the clock itself (one-by-one patterns)
    return read(first_slot, count) if read is not None else clocks.read()


def measure(launch: Callable[[], None], device: Device, stream: Stream, settings: MeasureSettings,
            flusher: L2Flusher | None = None, gate: LaunchGate | None = None, *,
            clocks: ClockSource | None = None, throttle: ThrottlePolicy = ThrottlePolicy(),
            timer: KernelTimer | None = None) -> tuple[TimingSummary, list[float]]:
    """Time `launch` (which enqueues one launch on `stream`); return the summary and the raw samples (ms).

    `clocks` (from `clocks.open_device_clocks(device)`, opened once per run)
    adds the SM clock of every batch and drops throttled batches per
    `throttle`; without it the summary's clock fields are None. In graph mode
    a sample is one replay of a CUDA graph of `graph_launches` launches and
    the recorded time is per launch. A `launch` with resets (a
    `cuda.launch.PreparedLaunch` whose kernel has device buffers of its own)
    has them enqueued before every warm-up launch and every sample, ahead of
    the L2 flush and the start event, so that no sample times them; graph
    mode and a pattern of several launches per sample, whose launches run
    back to back, refuse such a launch. `timer` (a `cupti_timer.CuptiRecorder`)
    times each sample by its kernels' own durations instead of its events.
    """
    started = time.perf_counter()
    resets = getattr(launch, "resets", None)
    if settings.mode == "graph":
        if resets:
            raise ArgumentError("measure.mode: graph replays its launches back to back, with no reset of the "
                                "kernel's own device buffers between them: time this kernel with mode: events")
        captured = CapturedLaunches(device, stream, launch, settings.graph_launches)
        try:
            return _measure(captured.replay, device, stream, settings, flusher, gate, settings.graph_launches,
                            clocks, throttle, started, timer=timer)
        finally:
            captured.close()
    pattern = settings.pattern
    if resets and pattern.launches > 1:
        raise ArgumentError(f"measure.samples: {pattern.launches} launches a sample run back to back, with no reset "
                            "of the kernel's own device buffers between them: time this kernel with one launch a "
                            "sample (flush, flush-idle or do-bench)")
    return _measure(launch, device, stream, settings, flusher, gate, pattern.launches, clocks, throttle, started,
                    pattern, timer=timer)


def _measure(launch, device, stream, settings, flusher, gate, launches_per_sample, clocks, throttle, started,
             pattern: SamplePattern = SamplePattern(), *, timer: KernelTimer | None = None):
    flush = flusher.writing(pattern.flush_bytes(flusher.buffer.nbytes, settings.flush_l2), pattern.writes_zeros) \
        if flusher is not None else (lambda: None)
    if getattr(launch, "resets", None):
        flush = _reset_then(launch.reset, flush)
    for _ in range(settings.warmup):
        flush()
        launch()
    stream.synchronize()
    with timer.collecting() if timer is not None else contextlib.nullcontext():
        make = timer.sampler if timer is not None else EventSampler
        sampler = make(device, stream, launch, flush, gate, pattern=pattern, clocks=clocks)
        try:
            window = EnergyWindow(clocks)
            summary, kept = sample_loop(sampler, settings, launches_per_sample=launches_per_sample, clocks=clocks,
                                        throttle=throttle, started=started)
            return window.close(summary, launches_per_sample), kept
        except BaseException:
            try:
                stream.synchronize()   # a batch still queued must not outlive its events
            except CudaError:
                pass                   # the error on its way out already says what went wrong
            raise
        finally:
            sampler.close()


def _reset_then(reset: Callable[[], None], flush: Callable[[], None]) -> Callable[[], None]:
    """What runs before each sample's start event: the kernel's buffers reset, then L2 flushed (so that the
    reset's writes are evicted too and the sample stays cold)."""
    def prepare() -> None:
        reset()
        flush()
    return prepare
