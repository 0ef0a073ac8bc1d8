"""Kernel-only sample times from CUPTI activity records (``run --timer cupti``), beside the event timer.

Each sample's launches are bracketed on the host by CUPTI timestamps; the driver and runtime API
records of calls made inside a bracket name (by correlation id) the kernels it launched, and the
sample is the sum of their durations, with no front-end time around them (a split-K reduction
counts; memsets and gaps do not). Samples are taken as the event timer takes them, and the records
are read once, after the last, so that the GPU never waits on the host (docs/timing.md says why).
``cupti-python`` (the ``cupti`` extra) is imported only for this timer; `kernel_times` is the pure
part, tested without a GPU.
"""

from __future__ import annotations

import bisect
import contextlib
import threading
from typing import Iterable

from ..errors import DriverGemmError
from .timing import EventSampler

BUFFER_BYTES = 8 << 20        # each activity buffer CUPTI asks for (its samples use 8 MB)
FLUSH_FORCED = 1              # CUPTI_ACTIVITY_FLAG_FLUSH_FORCED (cupti.ActivityFlag): hand back buffers not yet full


class CuptiUnavailable(DriverGemmError):
    """``--timer cupti`` without NVIDIA's cupti-python, or CUPTI refusing to record."""


def load_cupti():
    """The ``cupti.cupti`` bindings; `CuptiUnavailable` saying how to get them."""
    try:
        # cupti-python: an optional extra, imported only for --timer cupti
        from cupti import cupti
    except ImportError as exc:
        raise CuptiUnavailable(f"--timer cupti needs NVIDIA's cupti-python (pip install 'driver-gemm[cupti]'): "
                               f"{exc}") from None
    return cupti


def kernel_times(brackets: Iterable[tuple[int, int]], api_calls: Iterable[tuple[int, int]],
                 kernels: Iterable[tuple[int, int, int]]) -> list[float | None]:
    """Per host bracket (start, end in CUPTI ns): the summed duration (ms) of the kernels launched by API calls
    that began inside it, or None where no kernel was found.

    `api_calls` are (start, correlation id) of driver and runtime API records;
    `kernels` (start, end, correlation id) of kernel records.
    """
    calls = sorted(api_calls)
    starts = [start for start, _ in calls]
    by_call: dict[int, list[tuple[int, int]]] = {}
    for start, end, correlation in kernels:
        by_call.setdefault(correlation, []).append((start, end))
    out: list[float | None] = []
    for begin, end in brackets:
        inside = calls[bisect.bisect_left(starts, begin):bisect.bisect_right(starts, end)]
        spans = [span for _, correlation in inside for span in by_call.get(correlation, ())]
        out.append(sum(stop - start for start, stop in spans) / 1e6 if spans else None)
    return out


class CuptiRecorder:
    """CUPTI's activity collection for one process: kernel and API records into lists, while `collecting`.

    Made once per session (`session.state.Session`) and closed with it; CUPTI's activity API is
    process-wide, so one recorder serves every case of a process in turn.
    """

    def __init__(self, cupti=None):
        self.cupti = cupti if cupti is not None else load_cupti()
        kinds = self.cupti.ActivityKind
        self.kernel_kinds = {int(kinds.CONCURRENT_KERNEL)}
        self.api_kinds = {int(kinds.DRIVER), int(kinds.RUNTIME)}
        self.kinds = [kinds.CONCURRENT_KERNEL, kinds.DRIVER, kinds.RUNTIME]
        self.api_calls: list[tuple[int, int]] = []
        self.kernels: list[tuple[int, int, int]] = []
        self.lock = threading.Lock()        # CUPTI may hand over a full buffer on a thread of its own
        self.active = False
        self._call("cuptiActivityRegisterCallbacks", self.cupti.activity_register_callbacks, self._requested,
                   self._completed)

    def _call(self, name: str, function, *args):
        try:
            return function(*args)
        except Exception as exc:  # noqa: BLE001 - cuptiError, whatever its module names it
            raise CuptiUnavailable(f"{name}: {exc}") from None

    @staticmethod
    def _requested():
        return BUFFER_BYTES, 0

    def _completed(self, activities) -> None:
        kernels, calls = [], []
        for activity in activities:
            kind = int(activity.kind)
            if kind in self.kernel_kinds:
                kernels.append((int(activity.start), int(activity.end), int(activity.correlation_id)))
            elif kind in self.api_kinds:
                calls.append((int(activity.start), int(activity.correlation_id)))
        with self.lock:
            self.kernels.extend(kernels)
            self.api_calls.extend(calls)

    def timestamp(self) -> int:
        return int(self.cupti.get_timestamp())

    def flush(self, forced: bool = True) -> None:
        """The records CUPTI holds into the lists: with `forced`, every buffer, records not yet complete
        included (their kernels' timestamps then read 0); without, only buffers whose records are complete."""
        flag = getattr(getattr(self.cupti, "ActivityFlag", None), "FLUSH_FORCED", FLUSH_FORCED) if forced else 0
        self._call("cuptiActivityFlushAll", self.cupti.activity_flush_all, int(flag))

    def complete(self, brackets: list[tuple[int, int]]) -> bool:
        """Whether every bracket has its kernels' records, each with its timestamps filled in."""
        with self.lock:
            times = kernel_times(brackets, self.api_calls, self.kernels)
        return all(value is not None and value > 0 for value in times)

    @contextlib.contextmanager
    def collecting(self):
        """Records kept while in the block (one case's sampling); the lists start empty."""
        with self.lock:
            self.api_calls.clear()
            self.kernels.clear()
        enabled = []
        try:
            for kind in self.kinds:
                self._call("cuptiActivityEnable", self.cupti.activity_enable, kind)
                enabled.append(kind)
            self.active = True
            yield self
        finally:
            self.active = False
            for kind in reversed(enabled):
                self._call("cuptiActivityDisable", self.cupti.activity_disable, kind)
            self.flush()
            with self.lock:
                self.api_calls.clear()
                self.kernels.clear()

    def take(self, brackets: list[tuple[int, int]]) -> list[float | None]:
        """The kernel times of `brackets` (`kernel_times`) from the records so far; the records of calls made before
        the last bracket ended are dropped, those of later calls kept."""
        with self.lock:
            times = kernel_times(brackets, self.api_calls, self.kernels)
            last = max((end for _, end in brackets), default=0)
            used = {correlation for start, correlation in self.api_calls if start <= last}
            self.api_calls = [call for call in self.api_calls if call[0] > last]
            self.kernels = [kernel for kernel in self.kernels if kernel[2] not in used]
        return times

    def sampler(self, *args, **kwargs) -> "CuptiSampler":
        """What `timing.measure` takes its samples with when this recorder times them (`EventSampler`'s
        arguments)."""
        return CuptiSampler(*args, recorder=self, **kwargs)

    def close(self) -> None:
        with contextlib.suppress(CuptiUnavailable):
            self._call("cuptiFinalize", self.cupti.finalize)


class CuptiSampler(EventSampler):
    """`EventSampler`'s samples, each timed by the kernels CUPTI recorded for its launches (see the module)."""

    def __init__(self, *args, recorder: CuptiRecorder, **kwargs):
        super().__init__(*args, **kwargs)
        self.recorder = recorder
        self.brackets: dict[int, tuple[int, int]] = {}     # by slot: the host bracket of its latest sample
        self.read: list[tuple[int, int]] = []               # the brackets of the samples read so far, in order

    def _launch_sample(self, slot: int) -> None:
        begin = self.recorder.timestamp()
        super()._launch_sample(slot)
        self.brackets[slot] = (begin, self.recorder.timestamp())

    def elapsed_ms(self, slot: int) -> float:
        """The sample's event time, for the stop rules; its kernels' time comes from `final_times`."""
        self.read.append(self.brackets[slot])
        return super().elapsed_ms(slot)

    def final_times(self) -> list[float]:
        """The kernel time (ms) of every sample read, in the order `elapsed_ms` read them: after the stream has
        drained, every record is complete."""
        self.stream.synchronize()
        self.recorder.flush(forced=False)
        if not self.recorder.complete(self.read):
            self.recorder.flush()
        times = self.recorder.take(self.read)
        if any(value is None for value in times):
            raise CuptiUnavailable("CUPTI recorded no kernel for a sample's launches (another CUPTI client, such as "
                                   "a profiler, may hold the activity API): time with --timer events")
        if any(value <= 0 for value in times):
            # A kernel takes time: a record of zero length is incomplete, or read with another layout than written
            raise CuptiUnavailable("CUPTI's kernel records read as zero-length (their timestamps were not filled "
                                   "in, or cupti-python reads another CUDA minor's record layout than its libcupti "
                                   "writes): time with --timer events")
        return times
