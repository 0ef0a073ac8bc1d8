"""``driver-gemm info``: NVRTC's version and architectures, and each GPU with its limits and FP32 peak."""

from __future__ import annotations

from ..report.lines import say
from .common import Output


def add_parser(commands, **common) -> None:
    commands.add_parser("info", help="the GPU, driver and NVRTC this machine has", **common)


def execute(args, out: Output) -> int:
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..cuda.compile import nvrtc_version, nvrtc_warning, supported_archs
    from ..cuda.device import device_count, read_properties

    say(out.console, f"NVRTC {'.'.join(map(str, nvrtc_version()))}, real architectures "
                     f"{', '.join(f'sm_{a}' for a in supported_archs())}")
    warning = nvrtc_warning()
    if warning:
        say(out.console, f"warning: {warning}")
    for ordinal in range(device_count()):
        props = read_properties(ordinal)
        say(out.console, f"GPU {ordinal}: {props.name} ({props.arch}, {props.sm_count} SMs, "
                         f"{props.clock_khz / 1e6:.2f} GHz, L2 {props.l2_bytes >> 20} MiB, "
                         f"{props.total_memory_bytes / 2**30:.0f} GiB), driver {props.driver_version}, "
                         f"FP32 peak {props.fp32_peak_gflops or 0:,.0f} GFLOP/s, {props.uuid}")
    return 0
