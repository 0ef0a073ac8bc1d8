"""SM clocks through NVML, on a fake NVML: finding the GPU, readings, throttle judgement, locking and its reset."""

import dataclasses

import pytest

from driver_gemm.errors import DriverGemmError
from driver_gemm.measure import clocks
from driver_gemm.measure.clocks import (ClockError, ClockReading, ClockTracker, lock_sm_clock, open_nvml_clocks,
                                        reason_names)

UUID = "GPU-12345678-9abc-def0-1234-56789abcdef0"


class FakeNvml:
    """The few pynvml calls driver-gemm makes, on one GPU; records every call that changes something."""

    NVML_CLOCK_SM = 1

    class NVMLError(Exception):
        pass

    def __init__(self, *, uuid=UUID, bus_id="00000000:19:00.0", max_mhz=1980, current_mhz=1755, reasons=0,
                 may_lock=True, old_reasons_call=False):
        self.uuid, self.bus_id, self.max_mhz, self.current_mhz = uuid, bus_id, max_mhz, current_mhz
        self.reasons, self.may_lock = reasons, may_lock
        self.calls = []
        self.started = 0
        if not old_reasons_call:
            self.nvmlDeviceGetCurrentClocksEventReasons = lambda handle: self.reasons

    def nvmlInit(self):
        self.started += 1

    def nvmlShutdown(self):
        self.started -= 1

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid != self.uuid:
            raise self.NVMLError("Not Found")
        return "handle"

    def nvmlDeviceGetHandleByPciBusId(self, bus_id):
        if bus_id != self.bus_id:
            raise self.NVMLError("Not Found")
        return "handle"

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        assert clock == self.NVML_CLOCK_SM
        return self.max_mhz

    def nvmlDeviceGetClockInfo(self, handle, clock):
        assert clock == self.NVML_CLOCK_SM
        return self.current_mhz

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return self.reasons

    def nvmlDeviceSetGpuLockedClocks(self, handle, low, high):
        if not self.may_lock:
            raise self.NVMLError("Insufficient Permissions")
        self.calls.append(("lock", low, high))

    def nvmlDeviceResetGpuLockedClocks(self, handle):
        self.calls.append(("reset",))


def test_opens_by_uuid_and_reads_clock_and_reasons():
    nvml = FakeNvml(reasons=0x4 | 0x20)
    source = open_nvml_clocks(UUID, nvml=nvml)
    assert source.reference_mhz == 1980
    assert source.read() == ClockReading(sm_mhz=1755, reasons=0x24)
    source.close()
    source.close()
    assert nvml.started == 0, "NVML is shut down once, however often close is called"


def test_falls_back_to_the_pci_bus_id_and_the_older_reasons_call():
    nvml = FakeNvml(uuid="GPU-other", old_reasons_call=True, reasons=0x8)
    source = open_nvml_clocks(UUID, pci_bus_id="00000000:19:00.0", nvml=nvml)
    assert source.read().reasons == 0x8


def test_no_nvml_or_no_such_gpu_means_no_clock_source(monkeypatch):
    monkeypatch.setattr(clocks, "_import_nvml", lambda: None)
    assert open_nvml_clocks(UUID) is None
    nvml = FakeNvml(uuid="GPU-other")
    assert open_nvml_clocks(UUID, pci_bus_id="0000:01:00.0", nvml=nvml) is None
    assert nvml.started == 0


def test_reference_falls_back_to_the_cuda_clock_rate():
    nvml = FakeNvml()

    def no_max(handle, clock):
        raise nvml.NVMLError("Not Supported")

    nvml.nvmlDeviceGetMaxClockInfo = no_max
    assert open_nvml_clocks(UUID, nvml=nvml, fallback_reference_mhz=1980.0).reference_mhz == 1980.0
    assert open_nvml_clocks(UUID, nvml=nvml) is None


def test_a_reading_that_fails_is_none_not_an_error():
    nvml = FakeNvml()
    source = open_nvml_clocks(UUID, nvml=nvml)

    def broken(handle, clock):
        raise nvml.NVMLError("GPU is lost")

    nvml.nvmlDeviceGetClockInfo = broken
    assert source.read() is None


def test_tracker_judges_against_the_threshold_and_ignores_idle_readings():
    tracker = ClockTracker(reference_mhz=2000, threshold=0.75)
    assert not tracker.record(ClockReading(1980))
    assert not tracker.record(ClockReading(1500))              # exactly 75%: not under it
    assert tracker.record(ClockReading(1499, reasons=0x4))
    assert not tracker.record(ClockReading(300, reasons=0x1))  # idle: says nothing about the batch
    assert not tracker.record(None)
    fields = tracker.summary_fields()
    assert fields["sm_clock_mhz"] == 1740.0                    # median of the batches kept: 1980, 1500
    assert fields["sm_clock_min_mhz"] == 1499.0                # the idle reading is no batch's clock
    assert fields["throttled_fraction"] == 0.25
    assert fields["throttle_reasons"] == ("sw_power_cap",)
    assert ClockTracker(reference_mhz=2000).summary_fields() == {}
    idle_only = ClockTracker(reference_mhz=2000)
    idle_only.record(ClockReading(210, reasons=0x1))
    assert idle_only.summary_fields()["sm_clock_mhz"] is None
    assert idle_only.summary_fields()["sm_clock_min_mhz"] is None


def test_reason_names():
    assert reason_names(0) == ()
    assert reason_names(0x1 | 0x40) == ("gpu_idle", "hw_thermal_slowdown")
    assert reason_names(0x4 | 0x10000) == ("sw_power_cap", "0x10000")


def test_lock_sets_then_resets_even_on_error():
    nvml = FakeNvml()
    with pytest.raises(RuntimeError):
        with lock_sm_clock(UUID, "max", nvml=nvml) as mhz:
            assert mhz == 1980 and nvml.calls == [("lock", 1980, 1980)]
            raise RuntimeError("a case failed")
    assert nvml.calls == [("lock", 1980, 1980), ("reset",)]
    assert nvml.started == 0


def test_lock_refusals_are_clear_errors(monkeypatch):
    with pytest.raises(ClockError, match="needs root"):
        with lock_sm_clock(UUID, 1500, nvml=FakeNvml(may_lock=False)):
            pass
    with pytest.raises(ClockError, match="whole number of MHz"):
        with lock_sm_clock(UUID, "fast", nvml=FakeNvml()):
            pass
    monkeypatch.setattr(clocks, "_import_nvml", lambda: None)
    with pytest.raises(ClockError, match="nvml") as caught:
        with lock_sm_clock(UUID):
            pass
    assert isinstance(caught.value, DriverGemmError)


@pytest.mark.gpu
def test_nvml_finds_the_cuda_device_and_reads_its_clock():
    pytest.importorskip("pynvml")
    from driver_gemm.cuda.device import Device
    from driver_gemm.measure.clocks import open_device_clocks

    with Device(0) as device:
        source = open_device_clocks(device)
        assert source is not None, "NVML is installed but did not find the CUDA device by UUID or PCI bus id"
        with source:
            reading = source.read()
            assert source.reference_mhz >= device.properties.clock_khz / 1000 * 0.5
            assert reading is not None and 0 < reading.sm_mhz <= source.reference_mhz * 1.01


# ------------------------------------------------------------------------------------- run --lock-clocks

def _cli_with_fakes(monkeypatch, nvml, ran):
    """`driver-gemm run` with a fake GPU, NVML and run: what ran, and under which lock, is recorded."""
    import types

    from driver_gemm.cli import run as run_command
    from driver_gemm.cuda import device
    from driver_gemm.runners import one_gpu as runner

    monkeypatch.setattr(clocks, "_import_nvml", lambda: nvml)
    monkeypatch.setattr(device, "read_properties", lambda ordinal: types.SimpleNamespace(uuid=UUID))
    monkeypatch.setattr(device, "device_count", lambda: 2)
    monkeypatch.setattr(run_command, "_check_before_asking_for_a_gpu", lambda specs, out: None)

    def fake_run_spec(spec, options, placement, *, result, on_result, **kwargs):
        from driver_gemm.measure.stats import summarize
        from driver_gemm.results.records import CaseResult
        from driver_gemm.status import Status

        ran.append(list(nvml.calls))
        result.settings = dataclasses.replace(result.settings, measure={})
        result.environment = {"device": {"name": "fake"}}
        case = CaseResult(kernel="cublas", name="cublas", shape=spec.shapes[0], status=Status.PASS,
                          timing=summarize([1.0, 1.0, 1.0]))
        result.cases.append(case)
        on_result(case)

    monkeypatch.setattr(runner, "run_spec", fake_run_spec)


def test_run_lock_clocks_holds_the_lock_for_the_run_records_it_and_resets(tmp_path, monkeypatch):
    import json

    from driver_gemm.cli import main

    nvml, ran = FakeNvml(), []
    _cli_with_fakes(monkeypatch, nvml, ran)
    out = tmp_path / "r.json"
    main(["run", "--lock-clocks", "1500", "--json", str(out), "-q"])
    assert ran == [[("lock", 1500, 1500)]]                       # locked while the run ran
    header = json.loads(out.with_suffix(".jsonl").read_text().splitlines()[0])
    assert header["settings"]["locked_sm_clock_mhz"] == {"0": 1500}   # in the case log's header too
    assert nvml.calls == [("lock", 1500, 1500), ("reset",)] and nvml.started == 0
    assert json.loads(out.read_text())["settings"]["locked_sm_clock_mhz"] == {"0": 1500}


@pytest.mark.parametrize("argv, code, message", [
    (["--lock-clocks", "fast"], 2, "give a clock in MHz"),
    (["--lock-clocks", "max", "--scheduler", "tcp://x:1"], 2, "GPUs are elsewhere"),
    (["--lock-clocks", "max"], 3, "needs root"),
    (["--lock-clocks", "max", "--device", "0,7"], 2, "no GPU 7 on this machine"),
    (["--lock-clocks", "max", "--sanitize", "memcheck"], 2, "takes no --lock-clocks"),
    (["--resume", "x.jsonl.gz"], 2, "a compressed results file is for reading"),
])
def test_run_lock_clocks_refusals_run_nothing(tmp_path, monkeypatch, capsys, argv, code, message):
    from driver_gemm.cli import main

    ran = []
    _cli_with_fakes(monkeypatch, FakeNvml(may_lock=False), ran)
    assert main(["run", *argv, "--json", str(tmp_path / "r.json"), "-q"]) == code
    assert message in capsys.readouterr().err and not ran and not (tmp_path / "r.json").exists()
