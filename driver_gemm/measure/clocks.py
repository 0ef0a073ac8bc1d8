"""The SM clock while samples are taken: read through NVML, judged, summarised; locked only on request.

A GPU that throttles runs a kernel slower for reasons unrelated to the kernel, which a comparison
could call a regression. As nvbench does, a batch of samples under a share of the maximum clock is
dropped and sampling pauses; the clock is read once per batch through NVML (the optional
``nvidia-ml-py``), without which the summary's clock fields stay empty. `lock_sm_clock` needs root,
changes the GPU for every process, and is done only when asked for by name. More: docs/timing.md.
"""

from __future__ import annotations

import atexit
import statistics
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol

from ..errors import DriverGemmError

THROTTLE_THRESHOLD = 0.75           # nvbench's default: a sample under 75% of the maximum SM clock is throttled
THROTTLE_RECOVERY_DELAY_S = 0.05    # nvbench's default pause after a throttled sample

# NVML's clock event reasons (nvml.h, nvmlClocksEventReason*): bit -> name recorded in results.
GPU_IDLE = 0x1
REASON_NAMES = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


class ClockError(DriverGemmError):
    """NVML is missing or refused a request about clocks (locking needs root and a supported GPU)."""


def reason_names(mask: int) -> tuple[str, ...]:
    """The names of the reasons set in an NVML clock event reason mask (unknown bits as hex)."""
    names = [name for bit, name in REASON_NAMES.items() if mask & bit]
    unknown = mask & ~sum(REASON_NAMES)
    if unknown:
        names.append(f"0x{unknown:x}")
    return tuple(names)


@dataclass(frozen=True)
class ClockReading:
    """One reading of the SM clock (MHz) and the reasons NVML gives for it being below its maximum."""

    sm_mhz: int
    reasons: int = 0


class ClockSource(Protocol):
    """Anything that reads the SM clock of the GPU being timed (NVML, or a fake in tests)."""

    reference_mhz: float

    def read(self) -> ClockReading | None: ...


@dataclass
class ClockTracker:
    """Clock readings of one case, one per batch: which batches were throttled, and the summary.

    A batch is throttled when its SM clock is under ``threshold`` of
    ``reference_mhz`` (the maximum SM clock). A reading that NVML marks as
    taken on an idle GPU says nothing about the batch: it never throttles it
    and stays out of the clock figures.
    """

    reference_mhz: float
    threshold: float = THROTTLE_THRESHOLD
    kept_mhz: list[int] = field(default_factory=list)
    lowest_mhz: int | None = None
    batches: int = 0
    throttled_batches: int = 0
    reasons_seen: int = 0

    def is_throttled(self, reading: ClockReading) -> bool:
        if reading.reasons & GPU_IDLE:
            return False
        return reading.sm_mhz < self.threshold * self.reference_mhz

    def record(self, reading: ClockReading | None) -> bool:
        """Note the reading of one batch; True when the batch was throttled (its samples should go)."""
        if reading is None:
            return False
        self.batches += 1
        if reading.reasons & GPU_IDLE:   # read between kernels: not the clock the batch ran at
            return False
        self.reasons_seen |= reading.reasons
        self.lowest_mhz = reading.sm_mhz if self.lowest_mhz is None else min(self.lowest_mhz, reading.sm_mhz)
        if self.is_throttled(reading):
            self.throttled_batches += 1
            return True
        self.kept_mhz.append(reading.sm_mhz)
        return False

    def summary_fields(self) -> dict[str, Any]:
        """The clock fields of a `TimingSummary` (empty when no batch was read)."""
        if not self.batches:
            return {}
        return {
            "sm_clock_mhz": float(statistics.median(self.kept_mhz)) if self.kept_mhz else None,
            "sm_clock_min_mhz": float(self.lowest_mhz) if self.lowest_mhz is not None else None,
            "sm_clock_reference_mhz": float(self.reference_mhz),
            "throttled_fraction": self.throttled_batches / self.batches,
            "throttle_reasons": reason_names(self.reasons_seen),
        }


def _import_nvml():
    try:
        # pynvml: optional
        import pynvml
    except ImportError:
        return None
    return pynvml


def _nvml_handle(nvml, uuid: str, pci_bus_id: str | None):
    """The NVML device of the CUDA device: by UUID (both APIs print it the same way), else by PCI bus id."""
    try:
        return nvml.nvmlDeviceGetHandleByUUID(uuid)
    except nvml.NVMLError:
        if pci_bus_id is None:
            raise
        return nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)


def pci_bus_id(device) -> str | None:
    """The PCI bus id (``domain:bus:device.function``) of a `Device`, as NVML spells it; None if unknown."""
    driver = device.driver
    try:
        handle = driver.cuDeviceGet(device.ordinal)[1]
        status, raw = driver.cuDeviceGetPCIBusId(32, handle)
    except Exception:   # an older binding without the call: the UUID alone must do
        return None
    if int(status) != 0:
        return None
    return bytes(raw).split(b"\x00", 1)[0].decode() if not isinstance(raw, str) else raw.split("\x00", 1)[0]


class NvmlClocks:
    """The SM clock of one GPU read through NVML; open with `open_nvml_clocks`, close when done."""

    def __init__(self, nvml, handle, reference_mhz: float):
        self.nvml = nvml
        self.handle = handle
        self.reference_mhz = reference_mhz
        self._closed = False

    def read(self) -> ClockReading | None:
        """The SM clock now and its event reasons; None if NVML cannot say (never an exception mid-sampling)."""
        nvml = self.nvml
        try:
            mhz = int(nvml.nvmlDeviceGetClockInfo(self.handle, nvml.NVML_CLOCK_SM))
        except nvml.NVMLError:
            return None
        reasons_call = (getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                        or nvml.nvmlDeviceGetCurrentClocksThrottleReasons)
        try:
            reasons = int(reasons_call(self.handle))
        except nvml.NVMLError:
            reasons = 0
        return ClockReading(sm_mhz=mhz, reasons=reasons)

    def energy_mj(self) -> int | None:
        """The GPU's energy counter (nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver loaded);
        None where NVML or the GPU has none (never an exception mid-sampling)."""
        nvml = self.nvml
        read = getattr(nvml, "nvmlDeviceGetTotalEnergyConsumption", None)
        if read is None:
            return None
        try:
            return int(read(self.handle))
        except nvml.NVMLError:
            return None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.nvml.nvmlShutdown()

    def __enter__(self) -> "NvmlClocks":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_nvml_clocks(uuid: str, *, pci_bus_id: str | None = None, fallback_reference_mhz: float | None = None,
                     nvml=None) -> NvmlClocks | None:
    """Open NVML on the GPU with this UUID (``GPU-...`` as `DeviceProperties.uuid` has it); None without NVML.

    Returns None, never raises, when ``pynvml`` is not installed, NVML does not
    start or the GPU is not found: clocks are extra information, and timing goes
    on without them. The reference clock is NVML's maximum SM clock, else
    `fallback_reference_mhz` (the CUDA device's clock rate / 1000).
    """
    nvml = nvml if nvml is not None else _import_nvml()
    if nvml is None:
        return None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return None
    try:
        handle = _nvml_handle(nvml, uuid, pci_bus_id)
        try:
            reference = float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))
        except nvml.NVMLError:
            reference = 0.0
    except nvml.NVMLError:
        nvml.nvmlShutdown()
        return None
    reference = reference or fallback_reference_mhz
    if not reference:   # no maximum to judge throttling against
        nvml.nvmlShutdown()
        return None
    return NvmlClocks(nvml, handle, reference)


def open_device_clocks(device) -> NvmlClocks | None:
    """`open_nvml_clocks` for a `Device`: found by UUID, then PCI bus id; the CUDA clock rate as fallback."""
    properties = device.properties
    return open_nvml_clocks(properties.uuid, pci_bus_id=pci_bus_id(device),
                            fallback_reference_mhz=properties.clock_khz / 1000 or None)


@contextmanager
def lock_sm_clock(uuid: str, mhz: int | str = "max", *, nvml=None) -> Iterator[int]:
    """Lock the SM clock of the GPU with this UUID for the ``with`` block, then reset it; yields the MHz.

    Only for a machine you administer: it needs root, changes the GPU for every
    process on it, and is never called by driver-gemm unless asked for by name.
    `mhz` is a clock in MHz or ``"max"`` (NVML's maximum SM clock). The reset
    runs when the block ends, on an exception too, and at interpreter exit as
    a safety net. Raises `ClockError` when NVML is missing or refuses (no
    permission, unsupported GPU).
    """
    nvml = nvml if nvml is not None else _import_nvml()
    if nvml is None:
        raise ClockError("locking clocks needs NVML: install driver-gemm's 'nvml' extra (nvidia-ml-py)")
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise ClockError(f"NVML did not start: {exc}") from None
    try:
        handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
        target = int(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)) if mhz == "max" else int(mhz)
        nvml.nvmlDeviceSetGpuLockedClocks(handle, target, target)
    except nvml.NVMLError as exc:
        nvml.nvmlShutdown()
        hint = " (locking clocks needs root)" if "permission" in str(exc).lower() else ""
        raise ClockError(f"could not lock the SM clock of {uuid} to {mhz} MHz: {exc}{hint}") from None
    except ValueError:
        nvml.nvmlShutdown()
        raise ClockError(f"the clock to lock must be a whole number of MHz or 'max', got {mhz!r}") from None

    reset_done = False

    def reset() -> None:
        nonlocal reset_done
        if reset_done:
            return
        reset_done = True
        try:
            nvml.nvmlDeviceResetGpuLockedClocks(handle)
        finally:
            nvml.nvmlShutdown()

    atexit.register(reset)
    try:
        yield target
    finally:
        reset()
        atexit.unregister(reset)    # only once the reset is done: a second Ctrl-C during it still has the net
