"""Step 4b of the data flow: time a launch the way nvbench's cold measurement does.

The recipe, per case: check it once (done by the runner), warm up, then for
each sample flush the L2 cache, record an event, launch once, record another
event, and read the time between them. Stop once there are at least
`min_samples` samples, at least `min_time_s` of measured GPU time and the
relative noise is under `max_noise`; or when `timeout_s` of wall time has gone
or `max_samples` are taken, whichever comes first. The reason is recorded.
"""

from __future__ import annotations

import time
from typing import Callable

from .device import Device, DeviceBuffer, Stream
from .spec import MeasureSettings
from .stats import RunningNoise, TimingSummary, summarize

# Never stop on the timeout before this many samples: a median needs a few.
MIN_SAMPLES_ON_TIMEOUT = 3


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


def measure(launch: Callable[[], None], device: Device, stream: Stream, settings: MeasureSettings,
            flusher: L2Flusher | None = None) -> tuple[TimingSummary, list[float]]:
    """Time `launch` (which enqueues one launch on `stream`); return the summary and the raw samples (ms)."""
    for _ in range(settings.warmup):
        if flusher is not None and settings.flush_l2:
            flusher.flush()
        launch()
    stream.synchronize()

    start, end = device.event(), device.event()
    try:
        samples: list[float] = []
        noise = RunningNoise()
        gpu_seconds = 0.0
        began = time.perf_counter()
        reason = "max_samples"
        while len(samples) < settings.max_samples:
            if flusher is not None and settings.flush_l2:
                flusher.flush()
            start.record(stream)
            launch()
            end.record(stream)
            end.synchronize()
            elapsed = end.elapsed_ms_since(start)
            samples.append(elapsed)
            noise.add(elapsed)
            gpu_seconds += elapsed / 1e3
            if (len(samples) >= settings.min_samples and gpu_seconds >= settings.min_time_s
                    and noise.relative_stdev <= settings.max_noise):
                reason = "converged"
                break
            if (time.perf_counter() - began >= settings.timeout_s
                    and len(samples) >= min(MIN_SAMPLES_ON_TIMEOUT, settings.min_samples)):
                reason = "timeout"
                break
        return summarize(samples, reason), samples
    finally:
        start.close()
        end.close()
