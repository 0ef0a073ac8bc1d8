"""The GPU architectures a kernel's ``arch:`` and ``plan --arch`` may name.

Every compute capability NVIDIA has shipped, Volta (7.0) to Blackwell (12.1); the ``a`` suffix
names an architecture-specific target (Hopper on: wgmma, tcgen05), ``f`` a family-specific one
(Blackwell families). Whether the installed NVRTC can build one is the compiler's to say; this
list only refuses names that are no GPU at all. It is the one list of architectures: those that
``plan --arch`` plans for are the ones of it with a limits table that NVRTC builds
(`driver_gemm.planning.spec_plan.plannable_archs`), and its refusals name only those.
"""

from __future__ import annotations

import re
from typing import Any

from .kinds import kind_name

_REAL = (70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 107, 110, 120, 121)
_ARCH_SPECIFIC = (90, 100, 101, 103, 110, 120, 121)
_FAMILY_SPECIFIC = (100, 101, 103, 110, 120, 121)

KNOWN_ARCHS: tuple[str, ...] = tuple(
    [f"sm_{cc}" for cc in _REAL]
    + [f"sm_{cc}a" for cc in _ARCH_SPECIFIC]
    + [f"sm_{cc}f" for cc in _FAMILY_SPECIFIC]
)
# How an architecture is written: NVRTC's own spelling, ASCII digits only (\d would take full-width ones).
ARCH_FORM = re.compile(r"sm_[0-9]{2,3}[af]?")
FORM_HINT = "write sm_ and the compute capability, then a for an arch-specific or f for a family-specific target: " \
            "sm_90, sm_90a, sm_100f"


def is_known_arch(name: str) -> bool:
    """True when `name` (e.g. ``sm_90a``) is a real GPU architecture an NVRTC target can name."""
    return name in KNOWN_ARCHS


def arch_problem(value: Any, offered: tuple[str, ...] = KNOWN_ARCHS,
                 offered_as: str = "known") -> tuple[str, str] | None:
    """Why `value` is not an architecture a spec's ``arch:`` or ``plan --arch`` may name, and a hint; None when it
    is one. One rule for both: what passes here is what NVRTC is asked to build for. The hint suggests and lists
    only architectures of `offered`, introduced as `offered_as` (``plan --arch`` gives those it plans for), so that
    none it names is then refused."""
    if not isinstance(value, str) or not ARCH_FORM.fullmatch(value):
        near = _near_spelling(value, offered)
        return (f"not a GPU architecture: {kind_name(value)}; one is written such as sm_90a",
                f"did you mean {near}?" if near else FORM_HINT)
    if not is_known_arch(value):
        near = _near_spelling(value, offered)
        return f"unknown architecture {value}", (f"did you mean {near}?" if near
                                                 else f"{offered_as}: {', '.join(offered)}")
    return None


def _near_spelling(value: Any, offered: tuple[str, ...]) -> str | None:
    """The architecture of `offered` that `value` is another spelling of (``SM_90A``, ``sm90``, ``90``,
    ``compute_90``, ``sm_089``), else None."""
    if not isinstance(value, str):
        return None
    match = re.fullmatch(r"(?:sm_?|compute_)?0*([0-9]{2,3})([af]?)", value.strip().lower())
    if match is None:
        return None
    near = f"sm_{match.group(1)}{match.group(2)}"
    return near if near != value and near in offered else None


# Which GPUs run code built for an architecture (CUDA Programming Guide, "Binary Compatibility" and "Feature Set
# Compiler Targets"): machine code for X.y runs on X.z for every z >= y of the same major; a family-specific
# (f) image the same; an architecture-specific (a) one only on X.y. PTX for compute_Xy is JIT-compiled for X.y
# and every later GPU, of any major; arch- and family-specific PTX keep their machine code's rule.
MACHINE_CODE_RULE = ("a CUBIN for sm_XY runs on compute capability X.Y and later minors of the same major (sm_80 "
                     "on 8.6 and 8.9, sm_100 on 10.3; an sm_XYf one likewise), an sm_XYa one only on X.Y")
PTX_RULE = "PTX for compute_XY is JIT-compiled for X.Y and every later GPU (compute_XYa only for X.Y)"
_NUMBERED = re.compile(r"(?:sm|compute|lto)_([0-9]{2,3})([af]?)")


def compute_capability(arch: str) -> tuple[int, int, str]:
    """(major, minor, suffix) of an architecture written ``sm_90a``, ``compute_100f``, ``sm_86``: (9, 0, "a");
    `ValueError` for anything else."""
    match = _NUMBERED.fullmatch(arch)
    if match is None:
        raise ValueError(f"not an architecture: {arch!r}")
    number = int(match.group(1))
    return number // 10, number % 10, match.group(2)


def machine_code_runs_on(image_arch: str, gpu_arch: str) -> bool:
    """Whether machine code built for `image_arch` (``sm_80``, ``sm_90a``, ``sm_100f``) runs on a GPU of
    `gpu_arch`'s compute capability (`MACHINE_CODE_RULE`). A target's own a or f suffix names what it compiles
    for, not another GPU: an sm_90a image runs where the target is sm_90, on the same H100."""
    major, minor, suffix = compute_capability(image_arch)
    gpu_major, gpu_minor, _ = compute_capability(gpu_arch)
    if suffix == "a":
        return (major, minor) == (gpu_major, gpu_minor)
    return major == gpu_major and gpu_minor >= minor


def ptx_runs_on(ptx_arch: str, gpu_arch: str) -> bool:
    """Whether PTX whose target is `ptx_arch` (``.target sm_80``, a fatbin's ``compute_80``) is JIT-compiled for a
    GPU of `gpu_arch`'s compute capability (`PTX_RULE`)."""
    major, minor, suffix = compute_capability(ptx_arch)
    if suffix:
        return machine_code_runs_on(ptx_arch, gpu_arch)
    gpu_major, gpu_minor, _ = compute_capability(gpu_arch)
    return (gpu_major, gpu_minor) >= (major, minor)
