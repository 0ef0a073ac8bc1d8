"""A prebuilt PTX checked before any GPU sees it: compiled for the target offline, its errors quoted by line.

The driver JIT-compiles PTX only when a run loads it. nvJitLink (the ``nvidia-nvjitlink`` wheel, a dependency, so
found wherever the package installs) compiles PTX for a target with the same grammar and target rules, offline and
without a GPU, so a misspelt instruction (``ld.glbal.f33``) or an unknown target (``.target sm_999``) is refused at
plan time with the PTX line. It runs in a child process, bounded in time and memory like every compile
(`bounded`). Where nvJitLink's library is missing, ptxas (the CUDA toolkit's, on PATH or under ``$CUDA_HOME/bin``)
does the same check; where neither is found, the PTX is left to the driver and a note says so. A PTX of an ISA newer
than the checker knows, or a target it does not know, is left to the driver too (a note names the checker's
version): the driver that loads it may be newer.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from . import bounded
from ..errors import ImageError

CHECK_TIMEOUT_S = 120
_DIAGNOSTIC = re.compile(r"^ptxas [^,]*?(?:, line (\d+);)?\s*(error|fatal)\s*: (.*)$")
_TOO_NEW = re.compile(r"Unsupported \.version|PTX ISA version", re.IGNORECASE)
_NOT_A_CAUSE = re.compile(r"^Ptx assembly aborted|^ERROR NVJITLINK_", re.IGNORECASE)


def find_ptxas() -> Path | None:
    """ptxas on PATH, else under ``$CUDA_HOME`` or ``$CUDA_PATH``; None when there is none."""
    found = shutil.which("ptxas")
    if found:
        return Path(found)
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(variable)
        if home and (Path(home) / "bin" / "ptxas").is_file():
            return Path(home) / "bin" / "ptxas"
    return None


def check_ptx(text: str, arch: str, path: Path | str) -> str | None:
    """Raise `ImageError` naming `path`'s first bad lines when nvJitLink (else ptxas) refuses `text` for `arch`;
    else a note when the PTX could not be checked here (None when it was)."""
    verdict = nvjitlink_check(text, arch)
    if verdict is not None:
        return verdict.outcome(text, path)
    ptxas = find_ptxas()
    if ptxas is None:
        return ("PTX not checked before loading: neither nvJitLink (the nvidia-nvjitlink wheel) nor ptxas (the CUDA "
                "toolkit's) is here to compile it")
    return ptxas_check(ptxas, text, arch).outcome(text, path)


class Verdict:
    """What one checker said of a PTX: `status` ``ok``, ``refused`` (with its `log`; a refusal of the PTX's
    ``.version`` reads as too new), ``arch`` (the target unknown to the checker) or ``unchecked`` (`log` says why)."""

    def __init__(self, checker: str, status: str, log: str = ""):
        self.checker, self.status, self.log = checker, status, log

    def outcome(self, text: str, path: Path | str) -> str | None:
        """None for a PTX that passed, a note for one left to the driver; `ImageError` for one refused."""
        status = "too-new" if self.status == "refused" and _TOO_NEW.search(self.log) else self.status
        if status == "ok":
            return None
        first = _clipped(next((line.strip() for line in self.log.splitlines() if line.strip()), ""))
        if status == "too-new":
            cause = _DIAGNOSTIC.match(first)
            return (f"PTX not checked before loading: its ISA is newer than this {self.checker} knows "
                    f"({cause.group(3).strip() if cause else first}); the driver decides")
        if status == "arch":
            return f"PTX not checked before loading: this {self.checker} does not know the target ({first})"
        if status == "unchecked":
            return f"PTX not checked before loading: {_clipped(self.log)}"
        raise ImageError(describe_errors(self.log, text, str(path), self.checker))


def nvjitlink_check(text: str, arch: str) -> Verdict | None:
    """nvJitLink's verdict on `text` compiled for `arch`, in a bounded child process; None where its library is
    not found."""
    memory = bounded.compile_bounds().memory_bytes or 0
    command, env = bounded.python_child("driver_gemm.cuda.nvjitlink_child", arch, str(memory))
    try:
        done = bounded.run_bounded(command, text.encode(), CHECK_TIMEOUT_S, env=env)
    except bounded.ChildStopped as stopped:
        if stopped.reason != "time":    # an interrupt stopping every compile: it goes on
            raise
        return Verdict("nvJitLink", "unchecked", f"nvJitLink ran past {CHECK_TIMEOUT_S} s")
    try:
        said = json.loads(done.stdout)
    except ValueError:
        tail = " ".join(done.stderr.decode(errors="replace").strip().splitlines()[-2:])
        return Verdict("nvJitLink", "unchecked",
                       f"nvJitLink's check ended with status {done.returncode} and no answer ({tail or 'no output'})")
    if not said["found"]:
        return None
    checker = "nvJitLink {}.{}".format(*said["version"])
    return Verdict(checker, said["status"], said["log"])


def ptxas_check(ptxas: Path, text: str, arch: str) -> Verdict:
    """ptxas's verdict on `text` assembled for `arch`, bounded in time."""
    with tempfile.TemporaryDirectory(prefix="driver-gemm-ptx-") as folder:
        source = Path(folder) / "kernel.ptx"
        source.write_text(text)
        command = [str(ptxas), f"-arch={arch}", str(source), "-o", os.devnull]
        try:
            done = bounded.run_bounded(command, None, CHECK_TIMEOUT_S, cwd=folder)
        except bounded.ChildStopped as stopped:
            if stopped.reason != "time":
                raise
            return Verdict("ptxas", "unchecked", f"ptxas ran past {CHECK_TIMEOUT_S} s")
    if done.returncode == 0:
        return Verdict("ptxas", "ok")
    return Verdict("ptxas", "refused", (done.stdout + done.stderr).decode(errors="replace"))


# What a message quotes of a PTX line or of a checker's diagnostic: a PTX's line may run to megabytes (a data
# array on one line), and a checker's message may echo it whole.
MOST_QUOTED_CHARS = 200
MOST_DIAGNOSTICS = 20


# C0 controls, DEL and C1 controls: what a terminal acts on rather than shows. The same escapes as
# `results.text.printable`, which this layer, below results, cannot import.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_NAMED_CONTROLS = {"\n": "\\n", "\r": "\\r"}


def _clipped(text: str) -> str:
    """`text` as a message quotes it: whole when short, else its start and how much was left out
    (`MOST_QUOTED_CHARS`); a PTX's tabs as spaces, and every other control character as an escape (``\\x1b``), so
    that a PTX or a checker's log never sends one to a terminal."""
    if len(text) > MOST_QUOTED_CHARS:
        text = f"{text[:MOST_QUOTED_CHARS]}... ({len(text) - MOST_QUOTED_CHARS:,} more characters)"
    text = text.replace("\t", " ")   # PTX separates an instruction from its operands with tabs
    return _CONTROL.sub(lambda found: _NAMED_CONTROLS.get(found.group(), f"\\x{ord(found.group()):02x}"), text)


def describe_errors(log: str, text: str, path: str, checker: str = "ptxas") -> str:
    """The checker's diagnostics (ptxas's form, which nvJitLink's log shares) as ``path:line: message`` with the
    line quoted, the first line first; one line each."""
    lines = text.splitlines()
    said = []
    for entry in log.splitlines():
        match = _DIAGNOSTIC.match(entry.strip())
        if not match or _NOT_A_CAUSE.match(match.group(3).strip()):
            continue
        message = _clipped(match.group(3).strip())
        if match.group(1) is None:
            said.append(f"{path}: {message}")
            continue
        number = int(match.group(1))
        quoted = _clipped(lines[number - 1].strip()) if 0 < number <= len(lines) else ""
        said.append(f"{path}:{number}: {message}" + (f"\n  {number} | {quoted}" if quoted else ""))
    if not said:
        kept = [line.strip() for line in log.splitlines() if line.strip() and not _NOT_A_CAUSE.match(line.strip())]
        said = [f"{path}: {checker} refused it: " + (_clipped(" ".join(kept[-3:])) or "no message")]
    if len(said) > MOST_DIAGNOSTICS:
        said = [*said[:MOST_DIAGNOSTICS], f"... and {len(said) - MOST_DIAGNOSTICS:,} more"]
    head, *rest = said
    return f"{head.splitlines()[0]} ({checker} refuses this PTX)" + "".join(
        "\n" + part for part in ["\n".join(head.splitlines()[1:]), *rest] if part)
