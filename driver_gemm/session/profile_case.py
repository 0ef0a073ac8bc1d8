"""``run --profile``: one finished case run again, alone, in a child process under Nsight Compute.

The child runs only that case, once, checked, untimed and without its baseline, so the launch ncu
profiles (chosen by the case's NVTX range, else by the kernel's name) is the case's own. Clocks
are never touched (``--clock-control none``), and a profile never changes the case's status: a
failure is stored as ``{"error": ...}`` instead of counters. More: docs/debugging.md.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from ..cuda import nvtx as ranges
from ..errors import DriverGemmError
from ..kernel_names import split_overload
from ..measure.profile import ncu_command, nvtx_filter_safe, run_ncu, summarize_profile
from ..results.records import CaseResult
from ..specfile.model import Spec


def child_command(spec: Spec, case: CaseResult, device: int, json_path: Path) -> list[str]:
    """The ``driver-gemm run`` that runs `case` alone, checked once and not timed."""
    if spec.path is None:
        raise DriverGemmError("--profile runs the case again from its spec file; this spec has none")
    kernel = case.name if case.dispatch else case.kernel     # a dispatched kernel is selected by its name
    return [sys.executable, "-m", "driver_gemm", "run", str(spec.path), "-k", kernel, "-s", case.shape.label,
            "--no-baseline", "--no-timing", "--in-process", "-q", "--device", str(device),
            "--json", str(json_path)]


def profile_command(spec: Spec, case: CaseResult, ncu: str, device: int, json_path: Path) -> list[str]:
    """ncu around `child_command`, by the case's NVTX range where it can, else by its function name."""
    function = split_overload(case.instance or case.kernel)[0].split("<")[0]
    nvtx = ranges.enabled() and nvtx_filter_safe(case.kernel, case.shape.label)
    return ncu_command(child_command(spec, case, device, json_path), case.kernel, case.shape.label, function,
                       ncu=ncu, nvtx=nvtx, launch_skip=0)


def profile_case(spec: Spec, case: CaseResult, ncu: str, *, device: int = 0, timeout_s: float = 600.0) -> dict:
    """The counters of one launch of `case` (`measure.profile.summarize_profile`), or ``{"error": message}``."""
    try:
        with tempfile.TemporaryDirectory(prefix="driver-gemm-profile-") as folder:
            command = profile_command(spec, case, ncu, device, Path(folder) / "case.json")
            launches = run_ncu(command, timeout_s)
    except DriverGemmError as error:
        return {"error": str(error)}
    profile = summarize_profile(launches[0], flops=case.flops)
    profile["selected_by"] = "nvtx" if "--nvtx-include" in command else "kernel-name"
    return profile
