"""The GPU architectures a kernel's ``arch:`` may name.

Every compute capability NVIDIA has shipped, Volta (7.0) to Blackwell (12.1); the ``a`` suffix
names an architecture-specific target (Hopper on: wgmma, tcgen05), ``f`` a family-specific one
(Blackwell families). Whether the installed NVRTC can build one is the compiler's to say; this
list only refuses names that are no GPU at all.
"""

from __future__ import annotations

_REAL = (70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 107, 110, 120, 121)
_ARCH_SPECIFIC = (90, 100, 101, 103, 110, 120, 121)
_FAMILY_SPECIFIC = (100, 101, 103, 110, 120, 121)

KNOWN_ARCHS: tuple[str, ...] = tuple(
    [f"sm_{cc}" for cc in _REAL]
    + [f"sm_{cc}a" for cc in _ARCH_SPECIFIC]
    + [f"sm_{cc}f" for cc in _FAMILY_SPECIFIC]
)


def is_known_arch(name: str) -> bool:
    """True when `name` (e.g. ``sm_90a``) is a real GPU architecture an NVRTC target can name."""
    return name in KNOWN_ARCHS
