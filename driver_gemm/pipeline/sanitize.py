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

from ..errors import ToolMissingError

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


def sanitize_case(spec_path: Path, kernel: str, shape: str, tool: str, device: int = 0,
                  timeout_s: float = 600.0) -> dict:
    """Run `kernel` at `shape` of the spec under `tool`; return the case's result with ``sanitizer`` findings."""
    if tool not in TOOLS:
        raise ValueError(f"unknown sanitizer tool {tool!r} (one of {', '.join(TOOLS)})")
    executable = sanitizer_path()
    if executable is None:
        raise ToolMissingError("compute-sanitizer is not on the PATH (it comes with the CUDA toolkit)")
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
            return {"status": "TIMEOUT", "sanitizer": {"tool": tool, "findings": [],
                                                       "message": f"no answer after {timeout_s:g} s"}}
        findings = parse_report(done.stdout + "\n" + done.stderr)
        cases = json.loads(out.read_text())["cases"] if out.exists() else []
    case = cases[0] if cases else {"status": "ERROR", "message": done.stderr.strip().splitlines()[-1:]}
    case["sanitizer"] = {"tool": tool, "findings": [asdict(f) for f in findings],
                         "summary": [f.line() for f in findings[:10]], "exit_code": done.returncode}
    return case
