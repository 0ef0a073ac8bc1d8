"""Step 2 of the data flow: kernel source to CUBIN with NVRTC, with the compiler's resource report.

Every source is compiled for one real architecture, never to PTX: PTX from a newer NVRTC may be
newer than the driver understands, while a CUBIN for the exact architecture always loads. ptxas's
``-v`` report (registers, barriers, stack, spills, static shared memory) is parsed and kept with
the binary. A compile error becomes a `CompileError` quoting file, line, source line and message.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from cuda.bindings import nvrtc

from . import cache, headers
from .check import check
from .cubin import CubinImage, KernelImage, ParamSlot, read_cubin
from .fatbin import cubin_bytes
from .resources import KernelResources, parse_ptxas_report
from ..errors import CompileError

BASE_OPTIONS = ("-std=c++17", "-lineinfo", "-Xptxas", "-v")
_INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)', re.MULTILINE)


@dataclass(frozen=True)
class Cubin:
    """A compiled source: the CUBIN image, the mangled name of each instance, and each kernel's resources."""

    image: bytes
    arch: str
    lowered_names: Mapping[str, str]          # name expression -> mangled symbol
    resources: Mapping[str, KernelResources]  # mangled symbol -> ptxas report
    log: str
    options: tuple[str, ...]
    nvrtc_version: tuple[int, int]            # the version of the compiler named by `origin`
    compile_seconds: float = 0.0
    from_cache: bool = field(default=False, compare=False)
    origin: str = "nvrtc"                     # nvrtc, nvcc, or prebuilt (a binary the spec names)
    image_format: str = "cubin"               # what `image` is, as cuModuleLoadData gets it: cubin, fatbin, ptx
    ptx_params: Mapping[str, tuple[ParamSlot, ...]] = field(default_factory=dict)  # PTX only: symbol -> slots

    def symbol(self, instance: str) -> str:
        return self.lowered_names[instance]

    def resources_of(self, instance: str) -> KernelResources:
        return self.resources.get(self.symbol(instance), KernelResources())

    @property
    def resources_known(self) -> bool:
        """False for PTX: the driver compiles it when loading, so its resources are known only then."""
        return self.image_format != "ptx"

    def kernel_image(self, instance: str) -> KernelImage | None:
        """What the compiled image says about `instance` (parameters, resources); None for PTX."""
        if self.image_format == "ptx":
            return None
        return _parsed(self.image, self.arch, self.origin).kernel(self.symbol(instance))

    def param_slots(self, instance: str) -> tuple[ParamSlot, ...]:
        """The (ordinal, offset, size) of each parameter of `instance`, read from the image, not the spec.

        Raises `ImageError` when the image cannot be read."""
        if self.image_format == "ptx":
            return self.ptx_params[self.symbol(instance)]
        return self.kernel_image(instance).params


@functools.lru_cache(maxsize=64)
def _parsed(image: bytes, arch: str, origin: str) -> CubinImage:
    return read_cubin(cubin_bytes(image, arch, f"{origin} image"), f"{origin} image for {arch}")


# NVRTC 13.0 addresses shared memory through 64-bit generic pointers where nvcc 13.0 uses 32-bit
# shared-window ones (more registers, more address arithmetic); from 13.1 the two emit the same SASS.
NVRTC_MATCHES_NVCC = (13, 1)


def nvrtc_warning(version: tuple[int, int] | None = None) -> str | None:
    """A one-line warning when the loaded NVRTC (or `version`) is older than 13.1; None otherwise."""
    version = version or nvrtc_version()
    if tuple(version) >= NVRTC_MATCHES_NVCC:
        return None
    return (f"NVRTC {version[0]}.{version[1]} addresses shared memory with 64-bit pointers where nvcc uses "
            "32-bit ones, which makes kernels slower than nvcc's; install NVRTC 13.1 or newer "
            "(nvidia-cuda-nvrtc) for code identical to nvcc's")


def nvrtc_version() -> tuple[int, int]:
    major, minor = check(nvrtc.nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


def supported_archs() -> list[int]:
    return [int(a) for a in check(nvrtc.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs")]


def normalise_arch(arch: str | int) -> str:
    """``90``, ``"90"``, ``"sm_90"``, ``"sm90"`` or ``"compute_90"`` to ``"sm_90"``; a real arch is required."""
    text = str(arch).strip().lower()
    match = re.fullmatch(r"(?:sm_?|compute_)?(\d{2,3})([af]?)", text)
    if not match:
        raise CompileError(f"not a GPU architecture: {arch!r} (expected e.g. sm_90)")
    return f"sm_{match.group(1)}{match.group(2)}"


def compile_source(path: str | Path, instances: Iterable[str], arch: str = "sm_90",
                   extra_options: Iterable[str] = (), *, use_cache: bool = True) -> Cubin:
    """Compile the kernel source at `path` for `arch`, instantiating every name expression in `instances`.

    Results are cached on disk (see `driver_gemm.cache`) under a key made of
    the source and the headers it includes, the options, the architecture and
    the NVRTC version.
    """
    path = Path(path)
    source = read_source(path)
    return compile_text(source, path.name, instances, arch, extra_options,
                        include_dir=path.resolve().parent, use_cache=use_cache, display_path=str(path))


def compile_text(source: str, name: str, instances: Iterable[str], arch: str = "sm_90",
                 extra_options: Iterable[str] = (), *, include_dir: Path | None = None,
                 use_cache: bool = True, display_path: str | None = None) -> Cubin:
    """Compile CUDA C++ `source` (called `name` in diagnostics); see `compile_source`."""
    arch = normalise_arch(arch)
    instances = tuple(dict.fromkeys(instances))
    extra_options = tuple(extra_options)
    options = (f"--gpu-architecture={arch}", *BASE_OPTIONS, *extra_options)
    if include_dir is not None:
        options += (f"--include-path={include_dir}",)
    options += headers.search_options()   # after the kernel's own folders: the stand-ins, then the toolkit's
    version = nvrtc_version()
    folders = ([include_dir] if include_dir else []) + include_folders(extra_options)
    local = local_headers(source, folders) if folders else {}
    key = cache.key_for(source=source, name=name, headers=local, instances=instances,
                        options=_portable(options, include_dir) + headers.cache_tokens(), arch=arch,
                        nvrtc_version=version)
    if use_cache:
        cached = cache.load(key)
        if cached is not None:
            restored = from_cache_header(*cached)
            if restored is not None:
                return restored
    cubin = _compile(source, name, instances, arch, options, version, display_path or name)
    if use_cache:
        cache.store(key, cache_header(cubin), cubin.image)
    return cubin


def cache_header(cubin: Cubin) -> dict:
    """What the disk cache keeps beside a compiled image (see `from_cache_header`)."""
    return {
        "arch": cubin.arch,
        "lowered_names": dict(cubin.lowered_names),
        "resources": {name: r.as_dict() for name, r in cubin.resources.items()},
        "log": cubin.log,
        "options": list(cubin.options),
        "nvrtc_version": list(cubin.nvrtc_version),
        "compile_seconds": cubin.compile_seconds,
        "origin": cubin.origin,
    }


def from_cache_header(header: dict, image: bytes) -> Cubin | None:
    """A cached entry back as a `Cubin`; None for an entry of another layout (it is then rewritten)."""
    try:
        return Cubin(image=image, arch=header["arch"], lowered_names=header["lowered_names"],
                     resources={name: KernelResources(**r) for name, r in header["resources"].items()},
                     log=header["log"], options=tuple(header["options"]),
                     nvrtc_version=tuple(header["nvrtc_version"]), compile_seconds=header["compile_seconds"],
                     from_cache=True, origin=header.get("origin", "nvrtc"))
    except (KeyError, TypeError, AttributeError):
        return None


# NVRTC compiling in several threads of one process sometimes hands back an empty program log (NVRTC
# 13.5 on a many-core machine), and with it goes ptxas's report of each kernel's registers and shared
# memory. Such a compile is done once more; if the report is still missing, the resources are read from
# the CUBIN itself (all but the spills).
REPORT_ATTEMPTS = 2


def _compile(source, name, instances, arch, options, version, display_path) -> Cubin:
    for _ in range(REPORT_ATTEMPTS):
        cubin = _compile_once(source, name, instances, arch, options, version, display_path)
        missing = [symbol for symbol in cubin.lowered_names.values() if symbol not in cubin.resources]
        if not missing:
            return cubin
    image = _parsed(cubin.image, arch, cubin.origin)
    resources = dict(cubin.resources)
    resources.update({symbol: image.kernel(symbol).resources for symbol in missing})
    note = (f"driver-gemm: ptxas's report of {', '.join(missing)} was missing from NVRTC's log "
            f"{REPORT_ATTEMPTS} times; registers, barriers, shared memory and stack are read from the CUBIN "
            f"(spills are not in it: taken as 0)")
    return dataclasses.replace(cubin, resources=resources, log=(cubin.log + "\n" + note).lstrip("\n"))


def _compile_once(source, name, instances, arch, options, version, display_path) -> Cubin:
    started = time.perf_counter()
    program = check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        for instance in instances:
            check(nvrtc.nvrtcAddNameExpression(program, instance.encode()), f"nvrtcAddNameExpression({instance})")
        encoded = [o.encode() for o in options]
        status, = nvrtc.nvrtcCompileProgram(program, len(encoded), encoded)
        log = _program_log(program)
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(format_compile_error(log, source, display_path, status.name, options),
                               log=log, options=options)
        lowered = {}
        for instance in instances:
            symbol = check(nvrtc.nvrtcGetLoweredName(program, instance.encode()), f"nvrtcGetLoweredName({instance})")
            lowered[instance] = symbol.decode()
        size = check(nvrtc.nvrtcGetCUBINSize(program), "nvrtcGetCUBINSize")
        image = bytearray(size)
        check(nvrtc.nvrtcGetCUBIN(program, image), "nvrtcGetCUBIN")
    finally:
        check(nvrtc.nvrtcDestroyProgram(program), "nvrtcDestroyProgram")
    return Cubin(bytes(image), arch, lowered, parse_ptxas_report(log), log, tuple(options), version,
                 time.perf_counter() - started)


def _program_log(program) -> str:
    size = check(nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
    buffer = b" " * size
    check(nvrtc.nvrtcGetProgramLog(program, buffer), "nvrtcGetProgramLog")
    return buffer.rstrip(b"\x00").decode(errors="replace")


def _portable(options: tuple[str, ...], include_dir: Path | None) -> tuple[str, ...]:
    """Options without the search path driver-gemm adds, so a cache moved between checkouts still hits (what
    those folders hold enters the key by itself: the headers' texts, `headers.cache_tokens`)."""
    return tuple(o for o in options if not o.startswith("--include-path="))


def read_source(path: Path, what: str = "kernel source") -> str:
    """The UTF-8 text of a source or header (without a byte-order mark, which NVRTC reads as a stray token); a
    `CompileError` naming the file when it cannot be read as such."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise CompileError(f"cannot read {what} {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise CompileError(f"{what} {path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                           f"{exc.start:,})") from None


def include_folders(options: Iterable[str]) -> list[Path]:
    """The folders a kernel's own options put on the search path (``-IDIR``, ``--include-path=DIR``)."""
    folders = []
    for option in options:
        option = option.strip()
        for prefix in ("--include-path=", "-I"):
            if option.startswith(prefix) and option[len(prefix):].strip():
                folders.append(Path(option[len(prefix):].strip()))
                break
    return folders


def local_headers(source: str, include_dirs: Path | Iterable[Path],
                  seen: dict[str, str] | None = None) -> dict[str, str]:
    """The text of every header reachable from `source` that `include_dirs` hold (they change the binary):
    ``#include "..."`` looked up beside the including file and then in the folders, ``#include <...>`` in the
    folders (the toolkit's and the C library's headers are keyed by version instead)."""
    folders = [include_dirs] if isinstance(include_dirs, Path) else list(include_dirs)
    seen = {} if seen is None else seen
    for quoted, angled in _INCLUDE.findall(source):
        header = quoted or angled
        candidates = ([folders[0]] if quoted else []) + folders[1:] + ([] if quoted else folders[:1])
        for folder in candidates:
            candidate = folder / header
            if candidate.is_file():
                if header not in seen:   # keyed by the name as written, so that the key holds no paths
                    seen[header] = read_source(candidate, "header")
                    local_headers(seen[header], [candidate.parent, *folders[1:]], seen)
                break
    return seen


# ----------------------------------------------------------------------------------- diagnostics

_DIAGNOSTIC = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<kind>error|warning|catastrophic error)"
                         r"(?P<rest>.*)$")


def format_compile_error(log: str, source: str, display_path: str, status: str,
                         options: Iterable[str] = ()) -> str:
    """A compile failure as a reader needs it: each error with its file:line, the source line and a marker.

    NVRTC's log has lines ``name.cu(LINE): error: MESSAGE`` followed by the
    offending source line and a caret; we rebuild that view with the real path
    and the line number in front of the quoted source line.
    """
    lines = source.splitlines()
    out = [f"{display_path}: compilation failed ({status})"]
    shown = 0
    for entry in log.splitlines():
        match = _DIAGNOSTIC.match(entry.strip())
        if not match or match.group("kind") == "warning":
            continue
        number = int(match.group("line"))
        message = match.group("rest").lstrip(": ").strip()
        if "name expression" in message or "which instance of function template" in message \
                or "which instance of overloaded function" in message:
            # About the template instance asked for, not about a line of the file (NVRTC's line is spurious).
            out.append(f"  {display_path}: error: {message} (check the spec's function and params against "
                       "the template's parameters; one of several overloads is picked by its parameter types, "
                       "function: name(const float*, int))")
            shown += 1
            continue
        file_path, file_lines = _diagnosed_file(match.group("file").strip(), display_path, lines)
        out.append(f"  {file_path}:{number}: error: {message}")
        if 1 <= number <= len(file_lines):
            out.append(f"    {number:5d} | {file_lines[number - 1]}")
        shown += 1
        if shown == 10:
            out.append("  ... (more errors in the full log)")
            break
    if shown == 0:
        out.append("  " + "\n  ".join(log.strip().splitlines()[-15:]))
    out.extend(f"  hint: {hint}" for hint in compile_hints(log))
    out.append(f"  options: {' '.join(options)}")
    return "\n".join(out)


def _diagnosed_file(logged: str, display_path: str, lines: list[str]) -> tuple[str, list[str]]:
    """The path and lines of the file a diagnostic is about: the program itself, or a header it includes
    (NVRTC names a header by the path it found it at)."""
    if logged in (display_path, Path(display_path).name):
        return display_path, lines
    header = Path(logged) if Path(logged).is_absolute() else Path(display_path).parent / logged
    try:
        return str(header), header.read_text(errors="replace").splitlines()
    except OSError:
        return logged, []


_MISSING_HEADER = re.compile(r'(?:cannot|could not) open source file "([^"]+)"')
_HOST_CODE = ("host functions are not allowed in JIT mode", "__host__ function is not allowed in JIT mode")


def compile_hints(log: str) -> list[str]:
    """What to do about the failures NVRTC's `log` shows that come from the file's setting, not its kernels:
    headers it could not find, and host code (NVRTC compiles device code only)."""
    hints = [headers.missing_header_hint(name) for name in dict.fromkeys(_MISSING_HEADER.findall(log))]
    if any(marker in log for marker in _HOST_CODE):
        hints.append("NVRTC compiles device code only, and this file has host code (main, a launcher, cudaMalloc): "
                     "build it with compiler: nvcc, or put the host code inside #ifndef __CUDACC_RTC__ ... #endif "
                     "(NVRTC defines __CUDACC_RTC__); functions without __host__/__device__ in a header library "
                     "(CUTLASS's and CuTe's constexpr helpers) compile as device functions with options: "
                     "[-default-device]")
    return hints
