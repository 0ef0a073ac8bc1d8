"""The GPU architectures a kernel's ``arch:`` may name.

Real architectures (compute capabilities) NVIDIA has shipped for NVRTC targets:
Volta (7.0, 7.2), Turing (7.5), Ampere (8.0, 8.6, 8.7, 8.8), Ada (8.9),
Hopper (9.0), Blackwell (10.0, 10.1, 10.3, 10.7, 11.0, 12.0, 12.1); NVRTC 13.5
lists 75 to 121 from ``nvrtcGetSupportedArchs`` (CUDA 13 dropped 7.0 and 7.2,
which older toolkits still compile). The ``a`` suffix names an
architecture-specific target (from Hopper on: wgmma, tcgen05), ``f`` a
family-specific one (CUDA 12.9 on, Blackwell families). Whether the installed
NVRTC can build a given one is the compiler's to say; this list only refuses
names that are no GPU at all.
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
