"""A prebuilt PTX checked before any GPU sees it: assembled by ptxas for the target, its errors quoted by line.

The driver JIT-compiles PTX only when a run loads it; ptxas (the CUDA toolkit's, on PATH or under
``$CUDA_HOME/bin``) applies the same grammar and target rules offline, so a misspelt instruction
(``ld.glbal.f33``) or an unknown target (``.target sm_999``) is refused at plan time with the PTX line. A PTX of an
ISA newer than this ptxas knows is left to the driver (a note says so), and so is any PTX where no ptxas is found.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from . import bounded
from ..errors import ImageError

PTXAS_TIMEOUT_S = 120
_DIAGNOSTIC = re.compile(r"^ptxas [^,]*, line (\d+); (error|fatal)\s*: (.*)$")
_TOO_NEW = re.compile(r"Unsupported \.version|PTX ISA version", re.IGNORECASE)


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
    """Raise `ImageError` naming `path`'s first bad lines when ptxas refuses `text` for `arch`; else a note when the
    PTX could not be checked here (None when it was)."""
    ptxas = find_ptxas()
    if ptxas is None:
        return "PTX not checked before loading: no ptxas here (the CUDA toolkit's) to assemble it"
    with tempfile.TemporaryDirectory(prefix="driver-gemm-ptx-") as folder:
        source = Path(folder) / "kernel.ptx"
        source.write_text(text)
        command = [str(ptxas), f"-arch={arch}", str(source), "-o", os.devnull]
        try:
            done = bounded.run_bounded(command, None, PTXAS_TIMEOUT_S, cwd=folder)
        except bounded.ChildStopped:
            return f"PTX not checked before loading: ptxas ran past {PTXAS_TIMEOUT_S} s"
    if done.returncode == 0:
        return None
    log = (done.stdout + done.stderr).decode(errors="replace")
    if _TOO_NEW.search(log):
        return f"PTX not checked before loading: its ISA is newer than this ptxas ({log.strip().splitlines()[0]})"
    raise ImageError(describe_errors(log, text, str(path)))


def describe_errors(log: str, text: str, path: str) -> str:
    """ptxas's diagnostics as ``path:line: message`` with the line quoted, the first line first; one line each."""
    lines = text.splitlines()
    said = []
    for entry in log.splitlines():
        match = _DIAGNOSTIC.match(entry.strip())
        if not match:
            continue
        number, message = int(match.group(1)), match.group(3).strip()
        quoted = lines[number - 1].strip() if 0 < number <= len(lines) else ""
        said.append(f"{path}:{number}: {message}" + (f"\n  {number} | {quoted}" if quoted else ""))
    if not said:
        said = [f"{path}: ptxas refused it: " + " ".join(log.strip().splitlines()[-3:])]
    head, *rest = said
    return f"{head.splitlines()[0]} (ptxas refuses this PTX)" + "".join(
        "\n" + part for part in ["\n".join(head.splitlines()[1:]), *rest] if part)
