"""What the machine code is: a CUBIN disassembled, and a short instruction mix counted per kernel.

The counts that explain a GEMM's speed are few: the math (FFMA, HMMA, HGMMA/QGMMA), shared and
global loads by width, stores, barriers and the total. They are static counts (each instruction
once, however often a loop runs it), enough to compare two builds of a kernel. ``cuobjdump -sass``
is used when found, else ``nvdisasm`` (on PATH or in the CUDA wheels' ``nvidia/cu13/bin``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ImageError, ToolMissingError

TOOLS = ("cuobjdump", "nvdisasm")
MIX_COLUMNS = ("FFMA", "HMMA", "HGMMA", "QGMMA", "LDS", "LDS.64", "LDS.128", "LDSM", "LDG", "LDG.64", "LDG.128",
               "LDGSTS", "STG", "BAR", "total")
DISASSEMBLE_TIMEOUT_S = 120

_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)")
_CUOBJDUMP_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_NVDISASM_FUNCTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")


@dataclass(frozen=True)
class InstructionMix:
    """Static instruction counts of one kernel, by the categories of `MIX_COLUMNS`."""

    counts: dict[str, int] = field(default_factory=dict)

    def __getitem__(self, column: str) -> int:
        return self.counts.get(column, 0)

    def as_dict(self) -> dict[str, int]:
        return {column: self[column] for column in MIX_COLUMNS}


def find_tool(name: str) -> Path | None:
    """`name` (cuobjdump or nvdisasm) on PATH, else in an installed NVIDIA wheel's ``bin``; None when absent."""
    found = shutil.which(name)
    if found:
        return Path(found)
    try:
        # the nvidia namespace package: optional, only to find nvdisasm
        import nvidia
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", ()):
        for candidate in sorted(Path(root).glob(f"cu*/bin/{name}"), reverse=True):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    return None


def find_disassembler() -> tuple[str, Path] | None:
    """The first of cuobjdump, nvdisasm that is installed, as (name, path)."""
    for name in TOOLS:
        path = find_tool(name)
        if path is not None:
            return name, path
    return None


def classify(opcode: str, modifiers: str) -> str | None:
    """The `MIX_COLUMNS` column an instruction counts in (besides ``total``), or None.

    Loads are split by width: ``.64`` and ``.128`` among the modifiers, every
    narrower one (32 bits, or a byte or half with ``.U8``/``.S16``...) in the plain column.
    """
    parts = set(modifiers.split(".")) - {""}
    if opcode in ("FFMA", "HMMA", "HGMMA", "QGMMA", "LDSM", "LDGSTS", "STG", "BAR"):
        return opcode
    if opcode in ("LDS", "LDG"):
        width = "128" if "128" in parts else "64" if "64" in parts else None
        return f"{opcode}.{width}" if width else opcode
    return None


def parse_disassembly(text: str) -> dict[str, InstructionMix]:
    """The instruction mix of every function in cuobjdump ``-sass`` or nvdisasm output, by symbol."""
    counts: dict[str, Counter] = {}
    current: Counter | None = None
    for line in text.splitlines():
        header = _CUOBJDUMP_FUNCTION.match(line) or _NVDISASM_FUNCTION.match(line)
        if header:
            current = counts.setdefault(header.group(1), Counter())
            continue
        match = _INSTRUCTION.search(line) if current is not None else None
        if not match:
            continue
        opcode, modifiers = match.groups()
        if opcode == "NOP":   # padding after the final branch
            continue
        current["total"] += 1
        column = classify(opcode, modifiers)
        if column:
            current[column] += 1
    return {symbol: InstructionMix(dict(counter)) for symbol, counter in counts.items()}


def tma_copies(text: str) -> dict[str, tuple[tuple[int, str], ...]]:
    """The (rank, instruction) of every tensor-map copy (UTMALDG, UTMASTG, UTMAREDG, UTMAPF ``.<N>D``) of each
    function in cuobjdump ``-sass`` or nvdisasm output, by symbol. SASS names no parameter: the copies are
    the kernel's, not a map's."""
    copies: dict[str, list[tuple[int, str]]] = {}
    current: list | None = None
    for line in text.splitlines():
        header = _CUOBJDUMP_FUNCTION.match(line) or _NVDISASM_FUNCTION.match(line)
        if header:
            current = copies.setdefault(header.group(1), [])
            continue
        match = _INSTRUCTION.search(line) if current is not None else None
        if not match or not match.group(1).startswith("UTMA"):
            continue
        rank = re.search(r"\.([1-5])D\b", match.group(2))
        if rank:
            current.append((int(rank.group(1)), match.group(1) + match.group(2)))
    return {symbol: tuple(found) for symbol, found in copies.items()}


# Instructions that read or write shared memory: loads, stores and atomics, asynchronous copies into it (LDGSTS,
# TMA, bulk copies) and warpgroup MMAs, whose B operand (and often A) is read from it.
SHARED_MEMORY_OPCODES = frozenset({"LDS", "STS", "LDSM", "STSM", "ATOMS", "LDGSTS", "UTMALDG", "UTMASTG", "UTMAREDG",
                                   "UBLKCP", "UBLKRED", "HGMMA", "QGMMA", "IGMMA", "BGMMA"})


def shared_memory_instructions(text: str) -> dict[str, tuple[str, ...]]:
    """The distinct `SHARED_MEMORY_OPCODES` each function of cuobjdump ``-sass`` or nvdisasm output uses, in the
    order first met, by symbol (an empty tuple for a function that touches no shared memory)."""
    found: dict[str, dict[str, None]] = {}
    current: dict[str, None] | None = None
    for line in text.splitlines():
        header = _CUOBJDUMP_FUNCTION.match(line) or _NVDISASM_FUNCTION.match(line)
        if header:
            current = found.setdefault(header.group(1), {})
            continue
        match = _INSTRUCTION.search(line) if current is not None else None
        if match and match.group(1) in SHARED_MEMORY_OPCODES:
            current[match.group(1)] = None
    return {symbol: tuple(opcodes) for symbol, opcodes in found.items()}


def disassemble(cubin: bytes) -> str:
    """The SASS text of a CUBIN, from cuobjdump or nvdisasm; `ToolMissingError` when neither is installed."""
    tool = find_disassembler()
    if tool is None:
        raise ToolMissingError("disassembling needs cuobjdump or nvdisasm (the CUDA toolkit, or the "
                               "nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm wheels); neither was found")
    name, path = tool
    with tempfile.TemporaryDirectory(prefix="driver-gemm-sass-") as folder:
        image = Path(folder) / "kernel.cubin"
        image.write_bytes(cubin)
        command = [str(path), "-sass", str(image)] if name == "cuobjdump" else [str(path), "-c", str(image)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=DISASSEMBLE_TIMEOUT_S)
    if done.returncode != 0:
        raise ImageError(f"{name} could not disassemble the image: {(done.stderr or done.stdout).strip()[-300:]}")
    return done.stdout


def instruction_mix(cubin: bytes) -> dict[str, InstructionMix]:
    """The instruction mix of each kernel of a CUBIN (ELF bytes), by mangled symbol."""
    return parse_disassembly(disassemble(cubin))
