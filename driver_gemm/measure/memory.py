"""What one case needs of host and device memory, and whether the machine has it, asked before anything is allocated.

A case draws its operands on the host, works out a float64 reference there, keeps a host copy of its output
and holds A, B and C (and cuBLAS's reference product) on the GPU. Their sizes follow from the shape (and, for a
typed case, from the operands' layout and types) alone, so a shape too large for the machine is refused with the
figures before the first byte is allocated: at plan time against the host's physical memory and the largest
GPU of the target architecture, and again in the process that runs the case against what it really has
(`/proc/meminfo`'s MemAvailable, ``cuMemGetInfo``). The figures are upper bounds: they count the temporary float64
copies NumPy makes for the reference and the comparison.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..cuda.check import check

INT32_MAX = 2**31 - 1     # cuBLAS's SGEMM takes M, N and K as int

# The memory of the largest part of each architecture, for a plan made without its GPU: a shape that does not fit
# there fits on no GPU of that architecture. (Decimal gigabytes as the parts are sold; the driver reports a little
# less.)
LARGEST_PART_BYTES = {
    "sm_70": 32 * 10**9, "sm_75": 48 * 10**9, "sm_80": 80 * 10**9, "sm_86": 48 * 10**9, "sm_87": 64 * 10**9,
    "sm_89": 48 * 10**9, "sm_90": 141 * 10**9, "sm_100": 192 * 10**9, "sm_103": 288 * 10**9,
    "sm_110": 128 * 10**9, "sm_120": 96 * 10**9, "sm_121": 128 * 10**9,
}

# Device memory a session holds besides a case's operands: the L2 flusher's buffer, cuBLAS(Lt)'s workspace, the
# context's own reservations.
DEVICE_OVERHEAD_BYTES = 1 << 30


@dataclass(frozen=True)
class MemoryNeeds:
    """Bytes a case allocates, by what they hold, on the host and on the GPU."""

    host: dict[str, int] = field(default_factory=dict)
    device: dict[str, int] = field(default_factory=dict)

    @property
    def host_bytes(self) -> int:
        return sum(self.host.values())

    @property
    def device_bytes(self) -> int:
        return sum(self.device.values())


def fp32_needs(M: int, N: int, K: int, *, reads_c: bool) -> MemoryNeeds:
    """An untyped case (or a cuBLAS row) on M x N x K: float32 A, B (and C0), the float64 reference and its
    float64 copies of A and B, the output's host copy and the comparison's float64 difference; on the GPU, A, B, C
    and cuBLAS's reference product."""
    a, b, c = M * K, K * N, M * N
    host = {"A": 4 * a, "B": 4 * b}
    if reads_c:
        host["C"] = 4 * c
    host["the reference"] = 8 * c + 8 * (a + b) + (8 * c if reads_c else 0)
    host["the output's copies"] = 4 * c + 8 * c
    device = {"A": 4 * a, "B": 4 * b, "C": 4 * c, "the reference": 4 * c}
    return MemoryNeeds(host, device)


def typed_needs(operands, types, *, reads_c: bool) -> MemoryNeeds:
    """A typed case (or a cuBLASLt row): its inputs as float64 values and as laid out in their types, the float64
    reference, the output read back (raw, codes and values) and compared; on the GPU, A, B and C as laid out (a
    Gram product's one input and C).

    `operands` is a `gemm.operands.GemmOperands`, `types` a `gemm.dtypes.GemmTypes`.
    """
    # each operand's own count of matrices: a grouped GEMM's B has one per group where its A and C may have one
    values = {key: 8 * layout.batch * layout.rows * layout.cols
              for key, layout in (("A", operands.a), ("B", operands.b), ("C", operands.c))}
    laid_out = {"A": operands.a.elements * types.a.storage_bytes, "B": operands.b.elements * types.b.storage_bytes,
                "C": operands.c.elements * types.c.storage_bytes}
    gram = getattr(operands, "gram", None)
    if gram is not None:    # a Gram product's tied operand is the other's buffer: nothing of its own is laid out
        del laid_out[gram.tied.upper()]
    host = {"A": values["A"] + laid_out.get("A", 0), "B": values["B"] + laid_out.get("B", 0)}
    if reads_c:
        host["C"] = values["C"] + laid_out["C"]
    host["the reference"] = values["C"] + values["A"] + values["B"]
    host["the output's copies"] = 2 * laid_out["C"] + 2 * values["C"]
    return MemoryNeeds(host, dict(laid_out))


def host_available() -> int | None:
    """Bytes of host memory available to a new allocation: MemAvailable of ``/proc/meminfo``, else the free
    physical pages; None when neither can be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def host_total() -> int | None:
    """Bytes of physical memory of this machine (the bound no run here can pass); None when unknown."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def device_available(device) -> int | None:
    """Free bytes on `device` (a `cuda.device.Device`, its context current) by ``cuMemGetInfo``; None if unknown."""
    # lazy: cuda.bindings is imported only where a GPU is used
    from cuda.bindings import driver

    try:
        with device.current():
            free, _ = check(driver.cuMemGetInfo(), "cuMemGetInfo")
    except Exception:   # noqa: BLE001 - a figure that cannot be read leaves only the total to check against
        total = getattr(getattr(device, "properties", None), "total_memory_bytes", None)
        return int(total) if total else None
    return int(free)


def largest_part_bytes(arch: str) -> int | None:
    """The memory of the largest GPU of `arch` (``sm_90a`` counts as ``sm_90``), None for one not in the table."""
    match = re.match(r"sm_\d+", arch)
    return LARGEST_PART_BYTES.get(match.group(0)) if match else None


def gib(count: int) -> str:
    """`count` bytes in GiB, as a person reads it: ``512 GiB``, ``1.5 GiB``, ``0.03 GiB``."""
    value = count / 2**30
    if value >= 10:
        return f"{value:.0f} GiB"
    return f"{value:.1f} GiB" if value >= 1 else f"{value:.2g} GiB"


def gib_apart(first: int, second: int) -> tuple[str, str]:
    """`first` and `second` bytes as `gib` writes them, with as many more decimals as it takes to tell them apart
    where they differ (``24.3 GiB`` needed against ``23.5 GiB`` there, not ``24 GiB`` twice); in bytes where even
    three decimals do not."""
    shown = gib(first), gib(second)
    for decimals in (1, 2, 3):
        if shown[0] != shown[1] or first == second:
            return shown
        shown = f"{first / 2**30:.{decimals}f} GiB", f"{second / 2**30:.{decimals}f} GiB"
    return shown if shown[0] != shown[1] else (f"{first:,} bytes", f"{second:,} bytes")


def _what(parts: dict[str, int]) -> str:
    names = [name for name, count in parts.items() if count]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


def memory_refusal(needs: MemoryNeeds, host: int | None, device: int | None, *, device_name: str = "the GPU",
                   device_overhead: int = DEVICE_OVERHEAD_BYTES, host_word: str = " available") -> str | None:
    """Why a case needing `needs` cannot run with `host` and `device` bytes available (None where unknown), with
    the figures; None when it fits (or nothing is known)."""
    reasons = []
    if host is not None and needs.host_bytes > host:
        needed, available = gib_apart(needs.host_bytes, host)
        reasons.append(f"needs {needed} of host memory for {_what(needs.host)}; this machine has "
                       f"{available}{host_word}")
    if device is not None and needs.device_bytes + device_overhead > device:
        # Figures that round alike are still apart here: the session's overhead (a GiB) is more than rounding hides.
        reasons.append(f"needs {gib(needs.device_bytes)} of GPU memory for {_what(needs.device)} (and about "
                       f"{gib(device_overhead)} for the session); {device_name} has {gib(device)}")
    return "; ".join(reasons) or None


def cublas_size_refusal(M: int, N: int, K: int) -> str | None:
    """Why cuBLAS's SGEMM cannot take M x N x K: it takes each size as a 32-bit int."""
    large = [f"{name} = {value}" for name, value in (("M", M), ("N", N), ("K", K)) if value > INT32_MAX]
    if not large:
        return None
    return f"cuBLAS takes M, N and K as int: {', '.join(large)} exceeds {INT32_MAX}"
