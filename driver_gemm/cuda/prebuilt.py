"""Step 2, for a kernel the spec gives as a binary: a prebuilt CUBIN, fatbin or PTX read as a `Cubin`.

Nothing is compiled: the bytes are kept as ``cuModuleLoadData`` loads them. The planner's needs are read
from them: the symbol ``function:`` names, its parameters and, for machine code, its resources
(`cubin.read_cubin`). A CUBIN is taken for any GPU it runs on (`specfile.archs.machine_code_runs_on`: an
sm_80 one on 8.6 and 8.9 too); of a fatbin, the entry the driver would load (`fatbin.entry_for_arch`), and
where that is PTX, the PTX alone, as a ``.ptx`` file is. PTX has no resources until the driver compiles it: the
plan says so. Building one: docs/kernels.md.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ImageError
from ..specfile.archs import MACHINE_CODE_RULE, compute_capability, is_known_arch, machine_code_runs_on, ptx_runs_on
from .compile import Cubin, normalise_arch
from .cubin import is_elf, read_cubin
from .ptx_check import check_ptx
from .fatbin import (FATBIN_MAGIC, entry_for_arch, is_fatbin, ptx_device_functions, ptx_entries,
                     ptx_param_slots)
from .mangling import find_symbol

from ..specfile.kernels import BINARY_SUFFIXES

# What each kind of image is called in messages, by the suffix that names it.
_KIND_NOUNS = {"cubin": "a CUBIN (an ELF image)", "fatbin": f"a fatbin (0x{FATBIN_MAGIC:08X} header)",
               "ptx": "PTX text"}
# How far into a file its PTX header (.version, .target) is looked for: after the comments a compiler writes.
PTX_HEADER_BYTES = 64 * 1024
_PTX_HEADER = re.compile(rb"^\s*\.version\s+\d+\.\d+\s*$.*?^\s*\.target\s+\w+", re.MULTILINE | re.DOTALL)


def binary_format(path: Path) -> str:
    """``cubin``, ``fatbin`` or ``ptx`` from the file name's suffix; `ImageError` for any other."""
    suffix = path.suffix.lower()
    if suffix not in BINARY_SUFFIXES:
        raise ImageError(f"{path}: a prebuilt kernel ends in {', '.join(BINARY_SUFFIXES)}")
    return suffix[1:]


def content_format(data: bytes) -> str | None:
    """What `data` is by its content: ``cubin`` (ELF magic), ``fatbin`` (its magic) or ``ptx`` (a ``.version``
    then a ``.target`` line near the start); None for anything else."""
    if is_elf(data):
        return "cubin"
    if is_fatbin(data):
        return "fatbin"
    if _PTX_HEADER.search(data[:PTX_HEADER_BYTES]):
        return "ptx"
    return None


def load_binary(path: str | Path, instances: list[str], arch: str) -> Cubin:
    """Read the prebuilt kernel binary at `path` for `arch`, resolving each name in `instances` to a symbol.

    An instance is what the spec's ``function:`` (with its params) names: a
    plain name, a template-id or a mangled symbol. The file's content must be
    what its suffix says (a ``.cubin`` an ELF image that runs on `arch`, a
    ``.fatbin`` a fatbin with a CUBIN that runs there or PTX the driver
    JIT-compiles for it, a ``.ptx`` PTX text); anything else is an `ImageError`
    naming the file and, where the content shows it, what the file is.
    """
    path = Path(path)
    arch = normalise_arch(arch)
    declared = binary_format(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImageError(f"cannot read kernel binary {path}: {exc.strerror}") from None
    found = content_format(data)
    if found is not None and found != declared:
        raise ImageError(f"{path}: {_KIND_NOUNS[found]}, not {_KIND_NOUNS[declared]} as its suffix says: name it "
                         f".{found}")
    if declared == "ptx":
        return _from_ptx(data, path, instances, arch)
    if declared == "fatbin":
        if found is None:
            raise ImageError(f"{path}: not a fatbin (no 0x{FATBIN_MAGIC:08X} header; its suffix says it is one)")
        entry = entry_for_arch(data, arch, str(path))
        if entry.kind == "ptx":     # the driver JIT-compiles it: planned as that PTX alone would be
            return _from_ptx(entry.data(str(path)), path, instances, arch, f"the fatbin's {entry.arch} PTX")
        image = read_cubin(entry.data(str(path)), str(path))
    else:
        if found is None:
            raise ImageError(f"{path}: not a CUBIN (no ELF header; its suffix says it is one)")
        image = read_cubin(data, str(path))
        if not _runs_on(image.arch, arch):
            raise ImageError(f"{path}: the CUBIN is for {image.arch}, which does not run on {arch}: "
                             f"{MACHINE_CODE_RULE}; build it for {arch} or an earlier minor of its major, or plan "
                             f"it for the GPU it was built for (plan --arch {image.arch.rstrip('af')})")
    lowered = {instance: find_symbol(instance, image.kernels, str(path), image.device_functions)
               for instance in instances}
    # An image records no spill bytes: unknown, not 0, where a stack frame could hold spills (the plan notes it)
    resources = {symbol: image.kernels[symbol].resources for symbol in lowered.values()}
    return Cubin(image=data, arch=arch, lowered_names=lowered, resources=resources, log="", options=(),
                 nvrtc_version=(0, 0), origin="prebuilt", image_format=declared)


def _runs_on(image_arch: str, arch: str) -> bool:
    try:
        return machine_code_runs_on(image_arch, arch)
    except ValueError:   # an image whose architecture field is no real one: refused as not running there
        return False


def _from_ptx(data: bytes, path: Path, instances: list[str], arch: str, within: str = "") -> Cubin:
    where = f"{path} ({within})" if within else str(path)
    text = _ptx_text(data, where)
    entries = ptx_entries(text)
    if not entries:
        functions = ptx_device_functions(text)
        raise ImageError(f"{where}: no .entry (kernel) in this PTX" + (
            f"; its .func {', '.join(functions)} are device functions, which cannot be launched" if functions
            else ""))
    lowered = {instance: find_symbol(instance, entries, where, ptx_device_functions(text)) for instance in instances}
    slots = {symbol: ptx_param_slots(entries[symbol]) for symbol in lowered.values()}
    checked_for = _ptx_arch(text, arch, where)
    unchecked = check_ptx(text, checked_for, where)     # an ImageError with the PTX's line for what nvJitLink refuses
    # cuModuleLoadData reads PTX as a NUL-terminated string.
    return Cubin(image=text.encode() + b"\x00", arch=arch, lowered_names=lowered, resources={}, log=unchecked or "",
                 options=(), nvrtc_version=(0, 0), origin="prebuilt", image_format="ptx", ptx_params=slots)


# A control character that is no white space of PTX: the NUL that ends the text for the driver (cuModuleLoadData reads
# a NUL-terminated string) and the others, which no PTX holds and a checker's message would echo to the terminal.
_CONTROL = re.compile(rb"[\x00-\x08\x0e-\x1f\x7f]")


def _ptx_text(data: bytes, where: str) -> str:
    """The PTX as text: ptxas and the driver read ASCII only, so a non-ASCII byte or a control character (a NUL
    within the text above all) is refused at its line."""
    stripped = data.rstrip(b"\x00")   # the NULs that end a PTX string as compilers write it
    if stripped.startswith(b"\xef\xbb\xbf"):
        raise ImageError(f"{where}:1: not PTX text: it begins with a UTF-8 byte-order mark (bytes EF BB BF, which "
                         "some editors write), which ptxas and the driver refuse: save it as ASCII without one")
    control = _CONTROL.search(stripped)
    if control is not None:
        offset, byte = control.start(), stripped[control.start()]
        line = stripped.count(b"\n", 0, offset) + 1
        what = ("a NUL byte: the driver reads PTX as a NUL-terminated string and would stop there" if byte == 0 else
                f"the control character 0x{byte:02X}, which no PTX holds")
        raise ImageError(f"{where}:{line}: not PTX text: offset {offset} holds {what} (a binary file, or text "
                         "damaged in a copy: build the PTX again)")
    try:
        return stripped.decode("ascii")
    except UnicodeDecodeError as exc:
        line = stripped.count(b"\n", 0, exc.start) + 1
        raise ImageError(f"{where}:{line}: not PTX text: byte 0x{stripped[exc.start]:02X} is not ASCII, which ptxas "
                         "and the driver refuse (a non-ASCII .file path or comment: rename or remove it)") from None


def _ptx_arch(text: str, arch: str, where: str) -> str:
    """The architecture to check the PTX for on a GPU of `arch`: `arch` itself, or the PTX's own ``.target`` where
    that is arch- or family-specific code of a GPU it runs on (``sm_90a`` PTX, as Triton writes for Hopper, runs on
    an sm_90 target's H100). A ``.target`` that no GPU of `arch` JIT-compiles is refused here, saying why."""
    _, target = ptx_target(text.encode())
    if target is None or not is_known_arch(target):     # the checker says what it makes of it
        return arch
    try:
        runs = ptx_runs_on(target, arch)
        (major, minor, suffix), (gpu_major, gpu_minor, _) = compute_capability(target), compute_capability(arch)
    except ValueError:    # a target of another form than sm_NN: the checker decides
        return arch
    if runs:
        return target if suffix else arch
    if (major, minor) > (gpu_major, gpu_minor):
        raise ImageError(f"{where}: the PTX's .target {target} is newer than the target {arch}, and a GPU "
                         f"JIT-compiles PTX only of its own or an older architecture: plan it for {target} "
                         f"(arch: {target}), or build the PTX for {arch} or older")
    runs_on = (f"only a GPU of compute capability {major}.{minor}" if suffix == "a"
               else f"only GPUs of compute capability {major}.{minor} and later minors of {major}.x")
    raise ImageError(f"{where}: the PTX's .target {target} is {'arch' if suffix == 'a' else 'family'}-specific "
                     f"code, which {runs_on} JIT-compiles, not {arch}: plan it for one of those (arch: {target}), "
                     "or build it for a plain target (compute_NN)")


def ptx_target(ptx: bytes) -> tuple[str | None, str | None]:
    """The ``.version`` (PTX ISA) and ``.target`` of PTX text, for messages about what a driver can JIT."""
    text = ptx.decode("ascii", errors="replace")
    version = re.search(r"^\s*\.version\s+(\d+\.\d+)", text, re.MULTILINE)
    target = re.search(r"^\s*\.target\s+(\w+)", text, re.MULTILINE)
    return (version.group(1) if version else None), (target.group(1) if target else None)
