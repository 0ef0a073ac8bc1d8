"""Step 2, for a kernel the spec gives as a binary: a prebuilt CUBIN, fatbin or PTX read as a `Cubin`.

Nothing is compiled: the bytes are kept as ``cuModuleLoadData`` loads them (the driver picks a
fatbin's entry and JIT-compiles PTX). The planner's needs are read from them: the symbol
``function:`` names, its parameters and, for machine code, its resources (`cubin.read_cubin`). PTX
has no resources until the driver compiles it: the plan says so. Building one: docs/kernels.md.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ImageError
from .compile import Cubin, normalise_arch
from .cubin import read_cubin
from .ptx_check import check_ptx
from .fatbin import cubin_bytes, is_fatbin, ptx_entries, ptx_param_slots
from .mangling import find_symbol

from ..specfile.kernels import BINARY_SUFFIXES


def binary_format(path: Path) -> str:
    """``cubin``, ``fatbin`` or ``ptx`` from the file name's suffix; `ImageError` for any other."""
    suffix = path.suffix.lower()
    if suffix not in BINARY_SUFFIXES:
        raise ImageError(f"{path}: a prebuilt kernel ends in {', '.join(BINARY_SUFFIXES)}")
    return suffix[1:]


def load_binary(path: str | Path, instances: list[str], arch: str) -> Cubin:
    """Read the prebuilt kernel binary at `path` for `arch`, resolving each name in `instances` to a symbol.

    An instance is what the spec's ``function:`` (with its params) names: a
    plain name, a template-id or a mangled symbol. The file's content must be
    what its suffix says (a ``.cubin`` an ELF image, a ``.fatbin`` a fatbin
    with a CUBIN for `arch`, a ``.ptx`` PTX text); anything else is an
    `ImageError` naming the file.
    """
    path = Path(path)
    arch = normalise_arch(arch)
    declared = binary_format(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImageError(f"cannot read kernel binary {path}: {exc.strerror}") from None
    if declared == "ptx":
        return _from_ptx(data, path, instances, arch)
    if declared == "fatbin" and not is_fatbin(data):
        raise ImageError(f"{path}: not a fatbin (its suffix says it is one)")
    if declared == "cubin" and data[:4] != b"\x7fELF":
        raise ImageError(f"{path}: not a CUBIN (no ELF header; its suffix says it is one)")
    image = read_cubin(cubin_bytes(data, arch, str(path)), str(path))
    if declared == "cubin" and image.arch.rstrip("af") != arch.rstrip("af"):
        raise ImageError(f"{path}: the CUBIN is for {image.arch}, the target is {arch} (a CUBIN runs only on "
                         "its own architecture)")
    lowered = {instance: find_symbol(instance, image.kernels, str(path)) for instance in instances}
    resources = {symbol: image.kernels[symbol].resources for symbol in lowered.values()}
    return Cubin(image=data, arch=arch, lowered_names=lowered, resources=resources, log="", options=(),
                 nvrtc_version=(0, 0), origin="prebuilt", image_format=declared)


def _from_ptx(data: bytes, path: Path, instances: list[str], arch: str) -> Cubin:
    try:
        text = data.rstrip(b"\x00").decode("ascii")
    except UnicodeDecodeError:
        raise ImageError(f"{path}: not PTX text (not ASCII)") from None
    entries = ptx_entries(text)
    if not entries:
        raise ImageError(f"{path}: no .entry in this PTX")
    lowered = {instance: find_symbol(instance, entries, str(path)) for instance in instances}
    slots = {symbol: ptx_param_slots(entries[symbol]) for symbol in lowered.values()}
    unchecked = check_ptx(text, arch, path)     # an ImageError with the PTX's line for what nvJitLink refuses
    # cuModuleLoadData reads PTX as a NUL-terminated string.
    return Cubin(image=text.encode() + b"\x00", arch=arch, lowered_names=lowered, resources={}, log=unchecked or "",
                 options=(), nvrtc_version=(0, 0), origin="prebuilt", image_format="ptx", ptx_params=slots)


def ptx_target(ptx: bytes) -> tuple[str | None, str | None]:
    """The ``.version`` (PTX ISA) and ``.target`` of PTX text, for messages about what a driver can JIT."""
    text = ptx.decode("ascii", errors="replace")
    version = re.search(r"^\s*\.version\s+(\d+\.\d+)", text, re.MULTILINE)
    target = re.search(r"^\s*\.target\s+(\w+)", text, re.MULTILINE)
    return (version.group(1) if version else None), (target.group(1) if target else None)
