"""Run one case under NVIDIA compute-sanitizer in a child process and read back what it found.

The child is ``driver-gemm run`` on the one case, in-process, verify only
(one checked launch, no timing loop) and without cuBLAS, so that every
finding belongs to the kernel under test. Findings are parsed from the
sanitizer's report: what happened, in which kernel and source line, which
block and thread, at which address.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from ..errors import NoGpuError, ToolMissingError, UsageError
from ..results.records import CaseResult, RunResult, SanitizerRecord
from ..results.text import path_text
from ..results.settings import RunSettings
from ..specfile.model import Spec
from ..status import Status
from ..cuda.device import device_count

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
_PREFIX = "========="
_AT = re.compile(r"\bat (?:0x[0-9a-f]+ in )?(?P<function>.+?)\+0x[0-9a-f]+(?: in (?P<where>[^\s\[]+))?")
_THREAD = re.compile(r"[Tt]hread \((?P<thread>\d+,\d+,\d+)\)")
_BLOCK = re.compile(r"[Bb]lock \((?P<block>\d+,\d+,\d+)\)")
_ADDRESS = re.compile(r"(?:[Aa]ddress|[Aa]ccess at) (?P<address>0x[0-9a-f]+)")
_NOT_FINDINGS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "Saved host backtrace",
                 "Host Frame", "Target application returned")


@dataclass
class Finding:
    """One error the sanitizer reported."""

    kind: str
    kernel: str | None = None
    location: str | None = None
    block: tuple[int, ...] | None = None
    thread: tuple[int, ...] | None = None
    address: str | None = None
    detail: str = ""

    def line(self) -> str:
        parts = [self.kind]
        if self.kernel:
            parts.append(f"in {self.kernel}" + (f" ({self.location})" if self.location else ""))
        if self.block is not None:
            parts.append(f"block {self.block} thread {self.thread}")
        if self.address:
            parts.append(f"address {self.address}")
        return ", ".join(parts)


def _triple(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def parse_report(text: str) -> list[Finding]:
    """Findings from compute-sanitizer's output: a record starts at an unindented ``=========`` line."""
    findings: list[Finding] = []
    current: Finding | None = None
    for raw in text.splitlines():
        if not raw.startswith(_PREFIX):
            continue
        body = raw[len(_PREFIX):]
        stripped = body.strip()
        if not stripped:
            continue
        if not body.startswith("     "):   # a new record
            if any(stripped.startswith(word) for word in _NOT_FINDINGS) or stripped.startswith("No "):
                current = None
                continue
            current = Finding(kind=stripped.removeprefix("Error: ").rstrip(" :"))
            findings.append(current)
        elif current is None or stripped.startswith(_NOT_FINDINGS):
            continue
        # Where: "at KERNEL+0xOFFSET in FILE:LINE", on the first line (racecheck's "Race reported")
        # or a detail line ("at ...", "Write Thread (x,y,z) at ..."); block and thread likewise.
        match = _AT.search(stripped)
        if match and current.kernel is None:
            current.kernel, current.location = match.group("function"), match.group("where")
        match = _BLOCK.search(stripped)
        if match and current.block is None:
            current.block = _triple(match.group("block"))
        match = _THREAD.search(stripped)
        if match and current.thread is None:
            current.thread = _triple(match.group("thread"))
        match = _ADDRESS.search(stripped)
        if match and current.address is None:
            current.address = match.group("address")
        if not current.detail and body.startswith("     ") and not stripped.startswith(("at ", "by thread")):
            current.detail = stripped
    return findings


def sanitizer_path() -> str | None:
    return shutil.which("compute-sanitizer")


def _require_sanitizer() -> str:
    executable = sanitizer_path()
    if executable is None:
        raise ToolMissingError("--sanitize needs compute-sanitizer, which is not on the PATH "
                               "(it comes with the CUDA toolkit)")
    return executable


def _require_gpu(device: int) -> None:
    count = device_count()   # NoGpuError without a driver or a GPU
    if not 0 <= device < count:
        raise NoGpuError(f"no GPU {device} on this machine (it has {count})")


def sanitize_spec(spec: Spec, tool: str, device: int = 0, *,
                  on_case: Callable[[CaseResult, int], None] | None = None, timeout_s: float = 600.0) -> RunResult:
    """Every case of `spec` (kernels by shapes, no cuBLAS) under compute-sanitizer's `tool`, one child each.

    A case with findings is a FAIL whose message lists the first three; its
    ``sanitizer`` field holds them all. Checks first that the tool is
    installed (`ToolMissingError`) and that there is a GPU (`NoGpuError`), so
    that neither turns into an ERROR per case. `on_case(case, findings)` is
    called as each case finishes.
    """
    if tool not in TOOLS:
        raise UsageError(f"unknown sanitizer tool {tool!r} (one of {', '.join(TOOLS)})", field="--sanitize")
    if spec.path is None:
        raise UsageError("--sanitize runs a spec file in a child process: give one", field="--sanitize")
    _require_sanitizer()
    _require_gpu(device)
    result = RunResult(spec=f"{spec.name} under {tool}", spec_path=path_text(spec.path),
                       settings=RunSettings(sanitize=tool))
    for shape in spec.shapes:
        for kernel in spec.kernels:
            data = sanitize_case(spec.path, kernel.label, shape.label, tool, device, timeout_s)
            report = SanitizerRecord.from_json(data.pop("sanitizer"))
            if "shape" in data:
                case = CaseResult.from_dict(data)
            else:   # the child wrote no result: it failed before the case, or timed out
                case = CaseResult(kernel=kernel.label, name=kernel.name, shape=shape,
                                  status=Status(data.get("status", Status.ERROR)),
                                  message=" ".join(data.get("message") or []))
            case.sanitizer = report
            findings = report.findings or []
            if findings:
                case.status = Status.FAIL
                case.message = f"{tool}: {len(findings)} finding(s): " + "; ".join((report.summary or [])[:3])
            result.cases.append(case)
            if on_case:
                on_case(case, len(findings))
    return result


def sanitize_case(spec_path: Path, kernel: str, shape: str, tool: str, device: int = 0,
                  timeout_s: float = 600.0) -> dict:
    """Run `kernel` at `shape` of the spec under `tool`; return the case's result with ``sanitizer`` findings."""
    if tool not in TOOLS:
        raise UsageError(f"unknown sanitizer tool {tool!r} (one of {', '.join(TOOLS)})", field="--sanitize")
    executable = _require_sanitizer()
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "case.json"
        command = [executable, "--tool", tool, "--print-limit", "50",
                   sys.executable, "-m", "driver_gemm", "run", str(spec_path), "--in-process", "--no-timing",
                   "--no-baseline", "--device", str(device), "-k", kernel, "-s", shape, "--json", str(out), "-q"]
        if tool == "racecheck":
            command[3:3] = ["--racecheck-report", "hazard"]
        if tool == "memcheck":
            # Our buffers are allocated back to back, so an overrun of one lands in the next, a valid
            # allocation; padding after each allocation makes such overruns visible.
            command[3:3] = ["--padding", "65536"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"status": "TIMEOUT", "message": [f"no answer from compute-sanitizer after {timeout_s:g} s"],
                    "sanitizer": {"tool": tool, "findings": [], "summary": [],
                                  "message": f"no answer after {timeout_s:g} s"}}
        findings = parse_report(done.stdout + "\n" + done.stderr)
        cases = json.loads(out.read_text())["cases"] if out.exists() else []
    case = cases[0] if cases else {"status": "ERROR", "message": done.stderr.strip().splitlines()[-1:]}
    case["sanitizer"] = {"tool": tool, "findings": [asdict(f) for f in findings],
                         "summary": [f.line() for f in findings[:10]], "exit_code": done.returncode}
    return case
