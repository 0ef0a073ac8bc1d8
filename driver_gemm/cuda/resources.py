"""What ptxas reported for each compiled kernel: registers, barriers, shared memory, stack and spills.

``-Xptxas -v`` makes ptxas print, per entry function, its resources; they are
parsed from the NVRTC log into a `KernelResources` per mangled name and kept
with the binary. The planner reads them without compiling anything itself.
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass

from ..errors import WrongArgumentType, WrongArgumentValue


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reported for one kernel (bytes unless said otherwise). The spill bytes are None where they are
    unknown: a prebuilt image records none."""

    registers: int = 0
    barriers: int = 0
    static_shared_bytes: int = 0
    stack_bytes: int = 0
    spill_store_bytes: int | None = 0
    spill_load_bytes: int | None = 0
    constant_bytes: int = 0

    def __post_init__(self) -> None:
        # Resources made by hand (a rig's plan_case) are held to what ptxas reports: whole numbers of at least 0,
        # the spills None where unknown; a plan would otherwise meet a wrong kind deep inside its arithmetic.
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if value is None and name in ("spill_store_bytes", "spill_load_bytes"):
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                unknown = " or None (not known)" if name.startswith("spill_") else ""
                raise WrongArgumentType(f"KernelResources.{name}: a whole number{unknown}, got {value!r:.40} "
                                        f"({type(value).__name__})")
            if value < 0:
                raise WrongArgumentValue(f"KernelResources.{name}: at least 0, got {value}")
            object.__setattr__(self, name, int(value))   # NumPy's as a plain int, as a results file writes it

    @property
    def spills(self) -> bool:
        """Whether the kernel is known to spill (False where its spills are unknown)."""
        return bool(self.spill_store_bytes or self.spill_load_bytes)

    @property
    def spills_known(self) -> bool:
        return self.spill_store_bytes is not None and self.spill_load_bytes is not None

    def as_dict(self) -> dict[str, int | None]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}



_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(.*)")


def parse_ptxas_report(log: str) -> dict[str, KernelResources]:
    """Resources per mangled kernel name from a ``-Xptxas -v`` log.

    ptxas prints, per entry function, a "Compiling entry function" line, a
    "Function properties" line followed by the stack/spill line, and a "Used N
    registers, used B barriers, S bytes smem, C bytes cmem[0]" line.
    """
    found: dict[str, dict[str, int]] = {}
    current = None
    for line in log.splitlines():
        match = _ENTRY.search(line) or _PROPERTIES.search(line)
        if match:
            current = match.group(1)
            found.setdefault(current, {})
            continue
        if current is None:
            continue
        match = _FRAME.search(line)
        if match:
            stack, stores, loads = (int(g) for g in match.groups())
            found[current].update(stack_bytes=stack, spill_store_bytes=stores, spill_load_bytes=loads)
            continue
        match = _USED.search(line)
        if match:
            entry = found[current]
            entry["registers"] = int(match.group(1))
            rest = match.group(2)
            for pattern, key in ((r"used (\d+) barriers", "barriers"), (r"(\d+) bytes smem", "static_shared_bytes"),
                                 (r"(\d+) bytes cmem\[0\]", "constant_bytes")):
                value = re.search(pattern, rest)
                if value:
                    entry[key] = int(value.group(1))
    return {name: KernelResources(**values) for name, values in found.items()}
