"""Step 4b of the data flow: time a launch the way nvbench's cold measurement does.

The recipe, per case: check it once (done by the runner), warm up, then take
samples in batches. A batch is queued behind a gate, a tiny kernel that holds
the stream until the host has queued the whole batch: for each sample, an L2
flush, an event, the launch, an event. Released, the batch runs back to back,
so each event pair brackets its kernel alone and not the host's few
microseconds of launch overhead (without the gate, an idle GPU records the
first event as soon as it arrives, then waits for the launch). Sampling stops
once there are at least `min_samples` samples, at least `min_time_s` of
measured GPU time and the relative noise is under `max_noise`; or when
`timeout_s` of wall time has gone or `max_samples` are taken. The reason is
recorded.
"""

from __future__ import annotations

import time
from typing import Callable

from ..cuda.compile import compile_text
from ..cuda.device import Device, DeviceBuffer, Stream
from ..cuda.check import check
from ..cuda.launch import LaunchConfig, PackedArguments, PreparedLaunch
from ..cuda.module import Module
from ..spec.model import MeasureSettings
from .stats import RunningNoise, TimingSummary, summarize

# Never stop on the timeout before this many samples: a median needs a few.
MIN_SAMPLES_ON_TIMEOUT = 3
MAX_BATCH = 32              # samples queued behind one gate (well under the driver's queue depth)
BATCH_GPU_SECONDS = 0.02    # aim for batches of about this much kernel time

_GATE_SOURCE = r"""
// Holds its stream until the host sets *release (or about `patience` clock cycles pass,
// so that a host that died cannot hang the GPU).
extern "C" __global__ void hold_stream(const volatile int* release, long long patience)
{
    const long long start = clock64();
    while (*release == 0 && clock64() - start < patience) {
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
        self.buffer: DeviceBuffer = device.alloc(2 * max(device.properties.l2_bytes, 1 << 20))
        self._word = 0

    def flush(self) -> None:
        self._word = (self._word + 1) & 0xFFFF  # a changing value, in case a no-op write is ever skipped
        self.buffer.fill_u32(self._word, self.stream)

    def close(self) -> None:
        self.buffer.close()


class LaunchGate:
    """A one-thread kernel that blocks a stream until the host opens it (nvbench's blocking kernel)."""

    def __init__(self, device: Device, stream: Stream):
        cubin = compile_text(_GATE_SOURCE, "hold_stream.cu", ["hold_stream"], device.properties.arch)
        self.module = Module(device, cubin)
        self.flag = device.mapped_word()
        patience = 5 * device.properties.clock_khz * 1000   # about five seconds of cycles
        arguments = PackedArguments(["ptr", "int64"], [self.flag.address, patience])
        self._hold = PreparedLaunch(self.module.kernel("hold_stream"), LaunchConfig.of([1], [1]), arguments, stream)

    def hold(self) -> None:
        self.flag.set(0)
        self._hold.launch()

    def release(self) -> None:
        self.flag.set(1)

    def close(self) -> None:
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


def measure(launch: Callable[[], None], device: Device, stream: Stream, settings: MeasureSettings,
            flusher: L2Flusher | None = None, gate: LaunchGate | None = None) -> tuple[TimingSummary, list[float]]:
    """Time `launch` (which enqueues one launch on `stream`); return the summary and the raw samples (ms).

    In graph mode a sample is one replay of a CUDA graph of `graph_launches`
    launches, divided by their number: the launches run with no host gaps
    between them, and only the first of each replay follows an L2 flush.
    """
    if settings.mode == "graph":
        captured = CapturedLaunches(device, stream, launch, settings.graph_launches)
        try:
            return _sample(captured.replay, device, stream, settings, flusher, gate, settings.graph_launches)
        finally:
            captured.close()
    return _sample(launch, device, stream, settings, flusher, gate, 1)


def _sample(launch, device, stream, settings, flusher, gate, launches_per_sample: int):
    flush = flusher.flush if flusher is not None and settings.flush_l2 else (lambda: None)
    for _ in range(settings.warmup):
        flush()
        launch()
    stream.synchronize()

    events = [(device.event(), device.event()) for _ in range(MAX_BATCH)]
    try:
        samples: list[float] = []
        noise = RunningNoise()
        gpu_seconds = 0.0
        began = time.perf_counter()
        batch = 1                      # the first sample sizes the batches that follow
        reason = "max_samples"
        while len(samples) < settings.max_samples:
            batch = min(batch, settings.max_samples - len(samples))
            if gate is not None:
                gate.hold()
            try:
                for start, end in events[:batch]:
                    flush()
                    start.record(stream)
                    launch()
                    end.record(stream)
            finally:
                if gate is not None:
                    gate.release()
            events[batch - 1][1].synchronize()
            stop = None
            for start, end in events[:batch]:
                elapsed = end.elapsed_ms_since(start) / launches_per_sample
                samples.append(elapsed)
                noise.add(elapsed)
                gpu_seconds += elapsed / 1e3
            if (len(samples) >= settings.min_samples and gpu_seconds >= settings.min_time_s
                    and noise.relative_stdev <= settings.max_noise):
                stop = "converged"
            elif (time.perf_counter() - began >= settings.timeout_s
                  and len(samples) >= min(MIN_SAMPLES_ON_TIMEOUT, settings.min_samples)):
                stop = "timeout"
            if stop:
                reason = stop
                break
            per_sample = max(gpu_seconds / len(samples), 1e-6)
            batch = max(1, min(MAX_BATCH, int(BATCH_GPU_SECONDS / per_sample)))
        return summarize(samples, reason), samples
    finally:
        for start, end in events:
            start.close()
            end.close()
