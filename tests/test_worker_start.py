"""How a GPU worker gets to its first case sooner, on the CPU with stand-ins for the driver's objects.

Its device is opened (cuInit, context) on a thread of its own while it
imports; its session is ready before the cuBLAS library has loaded, which
the first case that needs cuBLAS waits for; and no case is timed while that
loading may still compete with the timing loop.
"""

from __future__ import annotations

import threading
import time

import pytest

import driver_gemm.cuda.device as device_module
from driver_gemm.cuda.device import OpeningDevice, initialise_in_background
from driver_gemm.errors import NoGpuError
from driver_gemm.session import state as session_module
from driver_gemm.session import steps
from driver_gemm.specfile.model import MeasureSettings


class StandInDevice:
    """What a session makes of a device here: a stream, and which thread made its context current."""

    opened: list["StandInDevice"] = []

    def __init__(self, ordinal, context=None, own_context=False):
        self.ordinal, self.closed, self.current_in = ordinal, False, set()
        self.opened_in = threading.current_thread().name
        self.current_in.add(self.opened_in)
        StandInDevice.opened.append(self)

    def make_current(self):
        self.current_in.add(threading.current_thread().name)

    def stream(self, handle=None):
        return object()

    def close(self):
        self.closed = True


class SlowLoad:
    """The cuBLAS library's loading, as a thread that takes `seconds`."""

    def __init__(self, seconds: float):
        self.done = threading.Event()
        self.seconds = seconds

    def start(self) -> threading.Thread:
        def load():
            time.sleep(self.seconds)
            self.done.set()

        thread = threading.Thread(target=load, daemon=True)
        thread.start()
        return thread


@pytest.fixture
def stand_ins(monkeypatch):
    """Session parts that need no GPU; returns the cuBLAS load and the handles made (with whether it was done)."""
    StandInDevice.opened.clear()
    load = SlowLoad(0.4)
    handles = []

    class Handle:
        def __init__(self, device, stream, tf32=False):
            handles.append(load.done.is_set())

    monkeypatch.setattr(device_module, "Device", StandInDevice)
    monkeypatch.setattr(session_module, "Device", StandInDevice)
    monkeypatch.setattr(session_module, "L2Flusher", lambda device, stream: object())
    monkeypatch.setattr(session_module, "LaunchGate", lambda device, stream: object())
    monkeypatch.setattr(session_module, "open_device_clocks", lambda device: None)
    monkeypatch.setattr(session_module, "_load_cublas_library_in_background", load.start)
    monkeypatch.setattr(session_module, "CublasSgemm", Handle)
    return load, handles


def test_a_session_is_ready_before_cublas_has_loaded_and_its_first_use_waits_for_it(stand_ins):
    load, handles = stand_ins
    session = session_module.Session(0, want_cublas=True)
    assert not load.done.is_set()                   # made without waiting for the library
    assert session.cublas is not None and handles == [True]     # the handle, made once the library is in
    assert session.baseline("fp32") is session.cublas and handles == [True]


def test_without_a_baseline_nothing_is_loaded_and_there_is_no_cublas(stand_ins):
    load, handles = stand_ins
    session = session_module.Session(0, want_cublas=False)
    session.wait_for_cublas()
    assert session.cublas is None and handles == [] and not load.done.is_set()


def test_no_case_is_timed_while_the_cublas_library_may_still_be_loading(stand_ins, monkeypatch):
    load, _ = stand_ins
    session = session_module.Session(0, want_cublas=True)
    timed_after_the_load = []

    def measure(*args, **kwargs):
        timed_after_the_load.append(load.done.is_set())
        return "timing", []

    class Run:
        pass

    run = Run()
    run.session, run.launch, run.record = session, None, Run()
    run.spec = Run()
    run.spec.measure = MeasureSettings()
    monkeypatch.setattr(steps, "measure", measure)
    steps.time(run)
    assert timed_after_the_load == [True] and run.record.timing == "timing"


def test_the_device_opened_on_a_thread_is_taken_with_its_context_current_in_the_taker(stand_ins):
    opening = OpeningDevice(3)
    session = session_module.Session(3, want_cublas=False, opening=opening)
    device = StandInDevice.opened[-1]
    assert session.device is device and device.ordinal == 3
    assert device.opened_in != threading.current_thread().name          # made on the opener's thread
    assert threading.current_thread().name in device.current_in          # and current where it is used
    opening.close()
    assert not device.closed                     # taken: the session closes it, not the opener


def test_a_device_opened_and_never_taken_is_closed_by_the_opener(stand_ins):
    opening = OpeningDevice(0)
    opening.close()
    assert StandInDevice.opened[-1].closed


def test_what_opening_the_device_raised_is_raised_to_the_taker(monkeypatch):
    def no_gpu(ordinal, context=None, own_context=False):
        raise NoGpuError("the CUDA driver is installed but sees no GPU")

    monkeypatch.setattr(device_module, "Device", no_gpu)
    opening = OpeningDevice(0)
    with pytest.raises(NoGpuError, match="sees no GPU"):
        opening.take()
    opening.close()                              # nothing was opened: nothing to close, and no error


def test_the_background_cuinit_returns_at_once_and_keeps_its_failure_for_the_real_call(monkeypatch):
    asked = threading.Event()

    def slow_driver():
        asked.set()
        time.sleep(0.5)
        raise NoGpuError("no CUDA driver on this machine")

    monkeypatch.setattr(device_module, "driver_module", slow_driver)
    started = time.monotonic()
    initialise_in_background()
    assert time.monotonic() - started < 0.25 and asked.wait(5)
