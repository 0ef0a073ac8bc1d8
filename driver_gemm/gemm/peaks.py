"""Dense peak throughput per math kind and architecture, and the fewest bytes a GEMM of given types moves.

A peak is SMs x operations per clock per SM x the SM clock, so the same row
gives the peak at the GPU's maximum clock and at the clock a case measured.
The rates are per SM per clock for dense matrices (no 2:4 sparsity), as
NVIDIA's architecture whitepapers give them:

- sm_80: "NVIDIA A100 Tensor Core GPU Architecture" (2020), tables 1 and 3:
  A100, 108 SMs at 1410 MHz: 19.5 TFLOPS FP32, 156 TF32, 312 FP16/BF16, 624 INT8 TOPS.
- sm_86: "NVIDIA Ampere GA102 GPU Architecture" (2021), appendix A, RTX A6000:
  84 SMs at 1800 MHz: 38.7 TFLOPS FP32, 77.4 TF32, 154.8 FP16/BF16 (FP32 accumulate), 309.7 INT8 TOPS.
- sm_89: "NVIDIA Ada GPU Architecture" (2023), appendix A, RTX 6000 Ada:
  142 SMs at 2505 MHz: 91.1 TFLOPS FP32, 182.1 TF32, 364.2 FP16/BF16, 728.5 FP8, 728.5 INT8 TOPS.
- sm_90: "NVIDIA H100 Tensor Core GPU Architecture" (2022), table 2, H100 SXM5:
  132 SMs: 66.9 TFLOPS FP32 at 1980 MHz; 494.7 TF32, 989.4 FP16/BF16, 1978.9 FP8, 1978.9 INT8 TOPS at
  1830 MHz (the tensor figures are quoted at the lower boost clock the part holds under tensor load).

GeForce parts of sm_86 and sm_89 run tensor math that accumulates in FP32
(and TF32) at half these rates (the same whitepapers' GeForce columns):
`peak_gflops` halves them for a device whose name says GeForce.
"""

from __future__ import annotations

import numbers
from math import isfinite
from typing import Mapping

from ..errors import WrongArgumentType, WrongArgumentValue

# The math a GEMM's multiply-adds run on: FP32 FMA lanes (SIMT), or a tensor-core kind.
FP32, TF32, FP16, BF16, FP8, INT8 = "fp32", "tf32", "fp16", "bf16", "fp8", "int8"
MATH_KINDS = (FP32, TF32, FP16, BF16, FP8, INT8)

# Dense operations (a multiply-add is 2) per clock per SM, by architecture and math kind; a kind the
# architecture has no tensor cores for is absent (sm_80 and sm_86 have no FP8).
OPS_PER_CLOCK_PER_SM: dict[str, dict[str, int]] = {
    "sm_80": {FP32: 128, TF32: 1024, FP16: 2048, BF16: 2048, INT8: 4096},
    "sm_86": {FP32: 256, TF32: 512, FP16: 1024, BF16: 1024, INT8: 2048},
    "sm_89": {FP32: 256, TF32: 512, FP16: 1024, BF16: 1024, FP8: 2048, INT8: 2048},
    "sm_90": {FP32: 256, TF32: 2048, FP16: 4096, BF16: 4096, FP8: 8192, INT8: 8192},
}
HALF_RATE_ON_GEFORCE = ("sm_86", "sm_89")   # FP32-accumulating tensor math at half rate on GeForce parts
SOURCE = "SMs x dense operations per clock per SM (NVIDIA's architecture whitepapers) x the SM clock"


def base_arch(arch: str) -> str:
    """``sm_90a`` and ``sm_90`` alike to ``sm_90``: the variant suffix changes instructions, not rates."""
    return arch.rstrip("af") if arch.startswith("sm_") else arch


def math_kind(types: Mapping[str, str] | None, precision: str = "fp32") -> str:
    """The math a case runs on, from its operand types (`GemmTypes.as_dict`; None: an FP32 GEMM) and precision."""
    if not types:
        return TF32 if precision == TF32 else FP32
    a = types.get("a", FP32)
    if a in ("e4m3", "e5m2"):
        return FP8
    if a == "uint8":        # the same IMMA rate as int8
        return INT8
    if a in (FP16, BF16, INT8, TF32):
        return a
    return TF32 if precision == TF32 else FP32


def ops_per_clock_per_sm(arch: str, math: str, device_name: str = "", accumulate: str = FP32) -> int | None:
    """Dense operations per clock per SM of `math` on `arch`; None where the table has no figure.

    On a GeForce part of an architecture in `HALF_RATE_ON_GEFORCE`, tensor math
    that accumulates in FP32 (TF32 always does) counts at half rate.
    """
    rate = OPS_PER_CLOCK_PER_SM.get(base_arch(arch), {}).get(math)
    if rate is None:
        return None
    halved = (math == TF32 or (math in (FP16, BF16, FP8) and accumulate == FP32))
    if halved and base_arch(arch) in HALF_RATE_ON_GEFORCE and "geforce" in device_name.lower():
        return rate // 2
    return rate


def peak_gflops(arch: str, math: str, sm_count: int, clock_mhz: float, device_name: str = "",
                accumulate: str = FP32) -> float | None:
    """The dense peak of `math` in GFLOP/s (GOP/s for INT8) of `sm_count` SMs at `clock_mhz`; None when unknown."""
    rate = ops_per_clock_per_sm(arch, math, device_name, accumulate)
    if rate is None or not sm_count or not clock_mhz:
        return None
    return sm_count * rate * clock_mhz / 1e3


# The fields of a results file's ``device`` object that a peak reads: the kinds they hold, and those in words.
DEVICE_FIELD_KINDS = {"arch": ((str,), "text"), "compute_capability": ((list, tuple), "list (major, minor)"),
                      "sm_count": ((numbers.Integral,), "whole number"), "clock_khz": ((numbers.Real,), "number"),
                      "name": ((str,), "text"), "fp32_lanes_per_sm": ((numbers.Integral,), "whole number")}


def check_device_object(function: str, device: object, clock_mhz: object = None) -> None:
    """`WrongArgumentType`/`WrongArgumentValue` naming `function` where `device` is not a results file's ``device``
    object (the whole environment, a results file, another kind) or `clock_mhz` no clock: each would give no peak
    (None) or a wrong one without a word. A device object lacking fields is no mistake: its peak is unknown."""
    if not isinstance(device, Mapping):
        raise WrongArgumentType(f"{function}: device is a results file's device object (a dict, such as "
                                f"run.environment['device']), got {device!r:.40} ({type(device).__name__})")
    held = [key for key in ("device", "environment", "cases") if key in device]
    if held:   # what holds a device object: no field of one
        raise WrongArgumentValue(f"{function}: device is a results file's device object, got a mapping that holds "
                                 f"{held[0]!r} (the run's environment or the whole file?): pass "
                                 "run.environment['device']")
    for key, (kinds, kind_words) in DEVICE_FIELD_KINDS.items():
        value = device.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            raise WrongArgumentType(f"{function}: device[{key!r}] is a {kind_words}, got {value!r:.40} "
                                    f"({type(value).__name__})")
    if clock_mhz is not None:
        if isinstance(clock_mhz, bool) or not isinstance(clock_mhz, numbers.Real):
            raise WrongArgumentType(f"{function}: clock_mhz is a clock in MHz (a number), or None, got "
                                    f"{clock_mhz!r:.40} ({type(clock_mhz).__name__})")
        if not (isfinite(clock_mhz) and float(clock_mhz) >= 0):
            raise WrongArgumentValue(f"{function}: clock_mhz is a clock in MHz (0 or more), got {clock_mhz}")


def device_peak_gflops(device: Mapping, math: str, accumulate: str = FP32,
                       clock_mhz: float | None = None, function: str = "device_peak_gflops") -> float | None:
    """`peak_gflops` of a results file's ``device`` object (``arch``, ``sm_count``, ``clock_khz``, ``name``), at
    its maximum clock unless `clock_mhz` says another. None where the object lacks what a peak needs or the
    table has no figure; a `device` that is no device object is refused, named as `function`'s."""
    check_device_object(function, device, clock_mhz)
    arch = device.get("arch")
    capability = device.get("compute_capability")
    if not arch and capability and len(capability) == 2:     # (major, minor), as the driver gives it
        arch = f"sm_{capability[0]}{capability[1]}"
    if clock_mhz is None:
        clock_mhz = (device.get("clock_khz") or 0) / 1e3
    peak = peak_gflops(arch or "", math, device.get("sm_count") or 0, clock_mhz, device.get("name") or "",
                       accumulate)
    if peak is None and math == FP32 and device.get("fp32_lanes_per_sm") and device.get("sm_count"):
        # an architecture the table does not hold: the FP32 lanes the device's record gives (cuda.occupancy)
        peak = device["sm_count"] * 2 * device["fp32_lanes_per_sm"] * clock_mhz / 1e3 or None
    return peak


# Bytes per element of each type name a results file's ``operands.types`` holds.
ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "e4m3": 1, "e5m2": 1, "int8": 1, "uint8": 1,
                 "int32": 4}


def bytes_moved(M: int, N: int, K: int, types: Mapping[str, str] | None = None) -> int:
    """The fewest bytes a GEMM moves through DRAM: A and B read once, C written once, each in its own type
    (`types` as `GemmTypes.as_dict` writes them; None: all float32)."""
    types = types or {}
    a = ELEMENT_BYTES.get(types.get("a", "fp32"), 4)
    b = ELEMENT_BYTES.get(types.get("b", types.get("a", "fp32")), 4)
    c = ELEMENT_BYTES.get(types.get("c", "fp32"), 4)
    return a * M * K + b * K * N + c * M * N
