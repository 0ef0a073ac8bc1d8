"""Hardware counters per case: Nsight Compute (``ncu``) over the NVTX range the case already emits.

`ncu_command` wraps a command that runs one case so that ncu profiles only the first launch of the
case's kernel in its range, with the fixed `METRICS` and ``--clock-control none`` (ncu must not
lock a shared GPU's clocks, and the timings beside the counters were taken at its own clocks).
`run_ncu` runs it, `parse_ncu_csv` reads ``--csv --page raw`` and `summarize` keeps what the case's
JSON stores. Profiling never changes a case's status. Using it: docs/debugging.md.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..errors import DriverGemmError, ToolMissingError

NVTX_DOMAIN = "driver-gemm"       # driver_gemm.cuda.nvtx.DOMAIN

# Metric names of Nsight Compute for sm_90 (Hopper), fixed so that cases compare.
DURATION = "gpu__time_duration.sum"
ACHIEVED_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
L2_BYTES = "lts__t_bytes.sum"
SHARED_BANK_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"
FMA_PIPE = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
TENSOR_PIPE = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle",
                 "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction",
                 "not_selected", "selected", "short_scoreboard", "sleeping", "tex_throttle", "wait")
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
STALLS = tuple(f"{STALL_PREFIX}{reason}{STALL_SUFFIX}" for reason in STALL_REASONS)
METRICS = (DURATION, ACHIEVED_OCCUPANCY, DRAM_READ, DRAM_WRITE, L2_BYTES, SHARED_BANK_CONFLICTS, FMA_PIPE,
           TENSOR_PIPE, *STALLS)

# To microseconds and bytes. The command asks ncu for base units (--print-units base: nanoseconds and
# bytes); a unit cell left empty means that base unit, and both spellings of each unit are read.
_TIME_UNITS = {"": 1e-3, "nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
               "second": 1e6, "s": 1e6}
_BYTE_UNITS = {"": 1, "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
               "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}


class ProfileError(DriverGemmError):
    """ncu ran but gave no usable counters (it failed, or profiled nothing in the case's range)."""


@dataclass(frozen=True)
class ProfiledLaunch:
    """One kernel launch as ncu reported it: its identity and every metric, with units."""

    kernel: str
    grid: str
    block: str
    values: Mapping[str, float | None]
    units: Mapping[str, str] = field(default_factory=dict)


def find_ncu() -> str:
    """The ncu executable: ``$DRIVER_GEMM_NCU``, else ``ncu`` on the PATH; a `ToolMissingError` otherwise."""
    configured = os.environ.get("DRIVER_GEMM_NCU")
    found = configured if configured and os.path.isfile(configured) else shutil.which("ncu")
    if not found:
        raise ToolMissingError("--profile needs Nsight Compute's ncu: install Nsight Compute (it comes with the "
                               "CUDA toolkit) and put ncu on the PATH, or set DRIVER_GEMM_NCU to it; "
                               "the run itself does not need it")
    return found


def nvtx_range(label: str, shape_label: str) -> str:
    """The ``--nvtx-include`` filter of a case's range, as `session.execute.execute_case` names it."""
    return f"{NVTX_DOMAIN}@{label} {shape_label}/"


def ncu_command(target: Sequence[str], label: str, shape_label: str, function: str, *, ncu: str = "ncu",
                metrics: Sequence[str] = METRICS, nvtx: bool = True, launch_skip: int = 0) -> list[str]:
    """ncu around `target`, profiling the first launch of `function` in the case's NVTX range.

    With ``nvtx=False`` (the nvtx package is not installed, so there are no
    ranges, or the range's name holds a character ncu's filter reads as
    syntax: `nvtx_filter_safe`) it profiles the launch of `function` after
    `launch_skip` others of it instead.
    """
    where = (["--nvtx", "--nvtx-include", nvtx_range(label, shape_label)] if nvtx
             else ["--launch-skip", str(launch_skip)])
    return [ncu, "--clock-control", "none", *where, "--kernel-name", f"regex:{function}", "--launch-count", "1",
            "--metrics", ",".join(metrics), "--print-units", "base", "--csv", "--page", "raw", *target]


def nvtx_filter_safe(label: str, shape_label: str) -> bool:
    """Whether a case's range name can go into ``--nvtx-include`` as it is: ncu's filter syntax gives
    ``/`` (push/pop ranges), ``@`` (domains), ``[`` and ``]`` (stack anchors), ``*`` and ``\\`` a meaning,
    and a kernel label with params holds brackets."""
    return not any(character in f"{label} {shape_label}" for character in "/@[]*\\,")


def run_ncu(command: Sequence[str], timeout_s: float = 600.0) -> list[ProfiledLaunch]:
    """Run an `ncu_command` and parse what it printed; a `ProfileError` when it fails or finds nothing."""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise ToolMissingError(f"cannot run {command[0]}: not found") from None
    except subprocess.TimeoutExpired:
        raise ProfileError(f"ncu did not finish in {timeout_s:.0f} s") from None
    launches = parse_ncu_csv(done.stdout)
    if done.returncode != 0 or not launches:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise ProfileError(f"ncu exited with {done.returncode} and profiled {len(launches)} launch(es)"
                           + (f": {tail}" if tail else ""))
    return launches


def parse_ncu_csv(text: str) -> list[ProfiledLaunch]:
    """The launches of ncu's ``--csv --page raw`` output: one per launch row.

    The format: ncu's own lines (``==PROF==``) may come first, then a header row of quoted names (launch
    columns, then one per metric), a row of units, and one row per launch, every value quoted, numbers
    with thousands separators (``"1,234,567"``); a metric ncu could not collect reads ``"n/a"``.
    """
    rows = ncu_csv_table(text)
    if len(rows) < 2:
        return []
    header, units = rows[0], rows[1]
    column = {name: index for index, name in enumerate(header)}
    launches = []
    for row in rows[2:]:
        if len(row) != len(header):
            continue
        values = {name: ncu_number(row[index]) for name, index in column.items() if "__" in name}
        launches.append(ProfiledLaunch(
            kernel=row[column["Kernel Name"]] if "Kernel Name" in column else "",
            grid=row[column["Grid Size"]] if "Grid Size" in column else "",
            block=row[column["Block Size"]] if "Block Size" in column else "",
            values=values,
            units={name: units[index] for name, index in column.items() if "__" in name}))
    return launches


def ncu_csv_table(text: str, first_column: str = "ID") -> list[list[str]]:
    """The rows of the CSV table in ncu's output whose header row begins with `first_column` (``ID`` on the raw
    page, ``Address`` on the source page), header first; ncu's own lines before it are skipped. [] where there is
    no such table."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f'"{first_column}"')), None)
    return [] if start is None else list(csv.reader(io.StringIO("\n".join(lines[start:]))))


def ncu_number(text: str) -> float | None:
    """A value as ncu's CSV prints it (quoted, with thousands separators), or None where it is no number (n/a)."""
    cleaned = text.strip().replace(",", "")
    try:
        return float(cleaned)
    except ValueError:
        return None


def summarize_profile(launch: ProfiledLaunch, flops: int | None = None) -> dict:
    """The counters kept with a case: duration, achieved occupancy, DRAM and L2 bytes, shared-memory bank
    conflicts, FMA and tensor pipe utilisation, the top 3 warp stall reasons, and (given the case's FLOPs)
    the measured arithmetic intensity, FLOPs per DRAM byte."""
    value, units = launch.values, launch.units

    def scaled(name: str, table: Mapping[str, float]) -> float | None:
        if value.get(name) is None:
            return None
        return value[name] * table.get(units.get(name, ""), 1.0)

    dram_read, dram_write = scaled(DRAM_READ, _BYTE_UNITS), scaled(DRAM_WRITE, _BYTE_UNITS)
    dram = None if dram_read is None or dram_write is None else dram_read + dram_write
    stalls = sorted(((reason, value.get(name)) for reason, name in zip(STALL_REASONS, STALLS)
                     if value.get(name) is not None and reason != "selected"),
                    key=lambda item: -item[1])
    return {
        "kernel": launch.kernel,
        "duration_us": scaled(DURATION, _TIME_UNITS),
        "achieved_occupancy_pct": value.get(ACHIEVED_OCCUPANCY),
        "dram_bytes": dram,
        "l2_bytes": scaled(L2_BYTES, _BYTE_UNITS),
        "shared_bank_conflicts": value.get(SHARED_BANK_CONFLICTS),
        "fma_pipe_pct": value.get(FMA_PIPE),
        "tensor_pipe_pct": value.get(TENSOR_PIPE),
        "top_stalls": [{"reason": reason, "cycles_per_issue": cycles} for reason, cycles in stalls[:3]],
        "arithmetic_intensity": flops / dram if flops and dram else None,
        "metrics": dict(value),
    }
