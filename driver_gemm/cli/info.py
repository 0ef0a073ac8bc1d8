"""``driver-gemm info``: NVRTC's version and architectures (and which of them ``plan --arch`` has tables for), and
each GPU with its limits and FP32 peak."""

from __future__ import annotations

from typing import Iterable

from ..cuda.launch_attributes import CLUSTER_ARCH_MIN, NON_PORTABLE_CLUSTER_SIZE, PORTABLE_CLUSTER_SIZE
from ..cuda.occupancy import ArchLimits, known_arches, limits_from_device
from ..report.lines import say
from .common import Output


def add_parser(commands, **common) -> None:
    commands.add_parser("info", help="the GPU, driver and NVRTC this machine has, and each GPU's limits", **common)


def execute(args, out: Output) -> int:
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..cuda.compile import nvrtc_version, nvrtc_warning, supported_archs
    from ..cuda.device import device_count, read_properties

    say(out.console, nvrtc_line(nvrtc_version(), supported_archs(), known_arches()))
    warning = nvrtc_warning()
    if warning:
        say(out.console, f"warning: {warning}")
    for ordinal in range(device_count()):
        props = read_properties(ordinal)
        say(out.console, f"GPU {ordinal}: {props.name} ({props.arch}, {props.sm_count} SMs, "
                         f"{props.clock_khz / 1e6:.2f} GHz, L2 {props.l2_bytes >> 20} MiB, "
                         f"{props.total_memory_bytes / 2**30:.0f} GiB), driver {props.driver_version}, "
                         f"FP32 peak {props.fp32_peak_gflops or 0:,.0f} GFLOP/s, {props.uuid}")
        limits = limits_from_device(props)
        say(out.console, f"  limits: {limits_text(limits)}")
        for note in limits.notes:
            say(out.console, f"  note: {note}")
    return 0


def nvrtc_line(version: Iterable[int], archs: Iterable[int], tables: Iterable[str]) -> str:
    """NVRTC's version and the real architectures it compiles for, with those `plan --arch` cannot plan for (no
    limits table among `tables`): such a GPU is planned only on itself, from its driver's limits."""
    names = [f"sm_{arch}" for arch in archs]
    untabled = [name for name in names if name not in set(tables)]
    line = f"NVRTC {'.'.join(map(str, version))}, real architectures {', '.join(names)}"
    if not untabled:
        return line + "; plan --arch has a table for each"
    return (line + f"; plan --arch has a table for each but {', '.join(untabled)}, which "
            f"{'is' if len(untabled) == 1 else 'are'} planned only on such a GPU, from its driver's limits")


def limits_text(limits: ArchLimits) -> str:
    """What bounds a launch's configuration and occupancy on one GPU, in one line: threads, warps and blocks an SM,
    registers, shared memory an SM and a block (without and with the opt-in, and the per-block reserve), block
    barriers an SM where they count, and the largest cluster."""
    kib = 1024
    barriers = f", {limits.barriers_per_sm} block barriers" if limits.barriers_per_sm else ""
    return (f"an SM holds {limits.max_threads_per_sm:,} threads, {limits.max_warps_per_sm} warps, "
            f"{limits.max_blocks_per_sm} blocks{barriers}; registers {limits.registers_per_sm:,} an SM, "
            f"{limits.registers_per_block:,} a block, {limits.max_registers_per_thread} a thread; shared memory "
            f"{limits.shared_per_sm / kib:g} KiB an SM, {limits.default_shared_per_block / kib:g} KiB a block "
            f"({limits.max_shared_per_block / kib:g} KiB with the opt-in), "
            f"{limits.reserved_shared_per_block / kib:g} KiB reserved a block; a block at most "
            f"{limits.max_threads_per_block:,} threads; {cluster_text(limits.compute_capability)}; from the "
            f"{limits.source}")


def cluster_text(compute_capability: tuple[int, int]) -> str:
    """The largest thread-block cluster a launch may ask for on an architecture."""
    major, minor = compute_capability
    if major * 10 + minor < CLUSTER_ARCH_MIN:
        return "no clusters"
    return (f"clusters of up to {PORTABLE_CLUSTER_SIZE} blocks ({NON_PORTABLE_CLUSTER_SIZE} non-portable, where the "
            "kernel opts in and the GPU allows)")
