"""Step 2 of the data flow: kernel source to CUBIN with NVRTC, with the compiler's resource report.

Every source is compiled for one real architecture, never to PTX: PTX from a newer NVRTC may be
newer than the driver understands, while a CUBIN for the exact architecture always loads. ptxas's
``-v`` report (registers, barriers, stack, spills, static shared memory) is parsed and kept with
the binary. A compile error becomes a `CompileError` quoting file, line, source line and message.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import pickle
import re
import shlex
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from cuda.bindings import nvrtc
from cuda.pathfinder import DynamicLibNotFoundError

from . import bounded, cache, headers
from .check import check
from .cubin import CubinImage, KernelImage, ParamSlot, read_cubin
from .fatbin import cubin_bytes
from .mangling import demangle
from .regular_files import FileTooLarge, NotRegularFile, read_regular_file
from .ptx_facts import KernelPtxFacts, attach_ignored_setmaxnreg, ptx_facts
from .resources import KernelResources, parse_ptxas_report
from ..errors import (ArgumentError, CompileError, DriverGemmError, FilePath, ToolMissingError, UnknownInstance,
                      WrongArgumentType, WrongArgumentValue, flag_argument, path_argument)
from ..kernel_names import is_mangled
from ..source_text import directive_text, includes_in
from ..specfile.kernels import TARGET_OPTIONS, source_line_column
from .compile_diagnostics import format_compile_error

BASE_OPTIONS = ("-std=c++17", "-lineinfo", "-Xptxas", "-v")
_STANDARD_OPTION = re.compile(r"^--?std(=|$)")
_log = logging.getLogger(__name__)


def base_options(extra_options: Iterable[str]) -> tuple[str, ...]:
    """`BASE_OPTIONS` less its C++ standard where the kernel's options name one: the kernel's own wins, and nvcc
    would warn on every compile of two."""
    if any(_STANDARD_OPTION.match(option) for option in extra_options):
        return tuple(option for option in BASE_OPTIONS if not _STANDARD_OPTION.match(option))
    return BASE_OPTIONS


# ptxas dropping a kernel's setmaxnreg instructions, which leaves its registers where they were compiled:
# "ptxas info : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register count at entry."
# (no __launch_bounds__ or maxnreg), or C7507 "... 'setmaxnreg' ignored to maintain minimum register requirements.".
# The line names no kernel: ptxas prints it before the report of any of the program's functions.
_SETMAXNREG_IGNORED = re.compile(r"^.*\((C75\d\d)\)[^\n]*'setmaxnreg' ignored[^\n]*$", re.MULTILINE)


def ignored_setmaxnreg(log: str) -> tuple[tuple[str, str], ...]:
    """ptxas's lines in a compile's `log` saying that it ignored a kernel's ``setmaxnreg`` (C7507, C7508), each as
    its code and its text from the code on, in the log's order; empty where it ignored none."""
    return tuple((match.group(1), match.group(0)[match.start(1) - match.start(0) - 1:].strip())
                 for match in _SETMAXNREG_IGNORED.finditer(log))


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
    # symbol -> its TMA copies and cluster, read from the compiler's PTX (None: not known, as for a prebuilt CUBIN)
    ptx_facts: Mapping[str, KernelPtxFacts] | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        # The image's size, not its bytes: a repr in a log or a traceback would be several times the image itself.
        return (f"Cubin(arch={self.arch!r}, origin={self.origin!r}, image_format={self.image_format!r}, "
                f"image={len(self.image):,} bytes, instances={list(self.lowered_names)!r}, "
                f"options={self.options!r}, log={len(self.log):,} chars, from_cache={self.from_cache!r})")

    def symbol(self, instance: str) -> str:
        """The mangled symbol of `instance`, a name expression this image was compiled for, written as it was given
        to the compile; `UnknownInstance` (a `KeyError` too) naming those it holds for any other."""
        symbol = self.lowered_names.get(instance) if isinstance(instance, str) else None
        if symbol is None:
            held = ", ".join(self.lowered_names) or "none"
            raise UnknownInstance(f"Cubin: no instance {instance!r:.200} in this {self.origin} image for "
                                     f"{self.arch}; it holds {held:.2000} (an instance is named as it was written "
                                     "for the compile, spaces included)")
        return symbol

    def resources_of(self, instance: str) -> KernelResources:
        return self.resources.get(self.symbol(instance), KernelResources())

    @property
    def resources_known(self) -> bool:
        """False for PTX: the driver compiles it when loading, so its resources are known only then."""
        return self.image_format != "ptx"

    def kernel_image(self, instance: str) -> KernelImage | None:
        """What the compiled image says about `instance` (parameters, resources); None for PTX."""
        symbol = self.symbol(instance)   # an instance not compiled is named before the image is read
        if self.image_format == "ptx":
            return None
        return _parsed(self.image, self.arch, self.origin).kernel(symbol)

    def constant_variables(self) -> Mapping[str, bytes] | None:
        """The source's ``__constant__`` variables in the image, symbol -> their initial bytes; None for PTX (known
        at load)."""
        if self.image_format == "ptx":
            return None
        return _parsed(self.image, self.arch, self.origin).constants

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
    """The loaded NVRTC's (major, minor); `ToolMissingError` where there is no NVRTC library to load."""
    major, minor = check(_nvrtc_loaded(nvrtc.nvrtcVersion), "nvrtcVersion")
    return int(major), int(minor)


def supported_archs() -> list[int]:
    return [int(a) for a in check(_nvrtc_loaded(nvrtc.nvrtcGetSupportedArchs), "nvrtcGetSupportedArchs")]


def _nvrtc_loaded(call):
    """`call()`, the first NVRTC call of a command (the bindings load the library on it), with no library found
    said as a missing tool: nothing compiles without it."""
    try:
        return call()
    except DynamicLibNotFoundError as exc:
        looked_for = str(exc).split(":", 1)[0]     # e.g. Failure finding "libnvrtc.so.13 or libnvrtc.so.12"
        raise ToolMissingError(f"NVRTC, the compiler of every kernel source, is not installed ({looked_for}): install "
                               "the nvidia-cuda-nvrtc wheel (pip install 'nvidia-cuda-nvrtc>=13.1,<14'), or put a "
                               "CUDA toolkit's lib64 folder on LD_LIBRARY_PATH") from None


def normalise_arch(arch: str | int) -> str:
    """``90``, ``"90"``, ``"sm_90"``, ``"sm90"`` or ``"compute_90"`` to ``"sm_90"``; a real arch is required."""
    text = str(arch).strip().lower()
    match = re.fullmatch(r"(?:sm_?|compute_)?(\d{2,3})([af]?)", text)
    if not match:
        raise CompileError(f"not a GPU architecture: {arch!r} (expected e.g. sm_90)")
    return f"sm_{match.group(1)}{match.group(2)}"


def compile_source(path: FilePath, instances: Iterable[str], arch: str = "sm_90",
                   extra_options: Iterable[str] = (), *, use_cache: bool = True,
                   allow_outside_headers: bool = False, project: Path | None = None) -> Cubin:
    """Compile the kernel source at `path` for `arch`, instantiating every name expression in `instances`.

    Results are cached on disk (see `driver_gemm.cache`) under a key made of
    the source and every local header it can include (by path and digest),
    the options, the architecture and the NVRTC version. Local headers obey
    the rules sources do (see `scan_headers`): inside the source's project
    (`project`, the spec's, where one is given) or an ``-I`` folder unless
    `allow_outside_headers`, regular files of at most ``MAX_SOURCE_BYTES``.
    `project` and the ``-I`` folders of `extra_options` must exist (else `WrongArgumentValue`).
    """
    # compile_text checks these again: checked here first so that a mistake is named as compile_source's
    # Their tuples are passed on: a generator or iterator given here is read once, by the check.
    instances, extra_options, use_cache = _check_compile_arguments("compile_source", instances, extra_options,
                                                                   use_cache, allow_outside_headers)
    _arch_argument("compile_source", arch)
    path = Path(path_argument("compile_source", "path", path))
    project = folder_argument("compile_source", "project", project)
    _include_option_folders("compile_source", extra_options)
    source = read_source(path)
    return compile_text(source, path.name, instances, arch, extra_options,
                        include_dir=path.resolve().parent, use_cache=use_cache, display_path=str(path),
                        allow_outside_headers=allow_outside_headers, project=project)


def option_tuple(options: Iterable[str] | str | None, function: str | None = None) -> tuple[str, ...]:
    """Compiler options as a tuple: a string is split as a shell would split it (``"-DX=1 -DY=2"``), never taken
    character by character; a mistake is named as `function`'s extra_options where one is given."""
    said = f"{function}: extra_options: compiler options" if function else "compiler options"
    if options is None:
        return ()
    if isinstance(options, str):
        try:
            return tuple(shlex.split(options))
        except ValueError as exc:   # an unclosed quote
            raise WrongArgumentValue(f"{said} {options!r}: {exc}") from None
    # bytes are iterable, but as numbers ("got 45 (int)" for b"-DX=1"): say what was given instead
    if isinstance(options, (bytes, bytearray, memoryview)) or not isinstance(options, Iterable):
        raise WrongArgumentType(f"{said} are a list of strings (or one string), got {type(options).__name__}")
    try:
        options = tuple(options)
    except TypeError:              # iterable in name only, as a 0-d NumPy array is
        raise WrongArgumentType(f"{said} are a list of strings (or one string), got {options!r:.40} "
                                f"({type(options).__name__})") from None
    wrong = [option for option in options if not isinstance(option, str)]
    if wrong:
        raise WrongArgumentType(f"{said} are strings, got {wrong[0]!r} ({type(wrong[0]).__name__})")
    return options


def source_is_path(function: str, source: "str | os.PathLike[str]") -> bool:
    """Whether `function`'s `source` (the path of a kernel source or its text) is a path: a path object is; text
    holding a newline or ``__global__`` is a kernel's text; other text is a path when a file is there. Anything
    else is an `ArgumentError` naming both readings (a suffix tells nothing: a header is a .cuh, a one-line
    kernel may end in ".cu")."""
    if isinstance(source, os.PathLike):
        return True
    if "\n" in source or "__global__" in source:
        return False
    try:
        if Path(source).is_file():
            return True
    except (OSError, ValueError):   # a name too long for a file, a NUL: not a path at all
        pass
    raise ArgumentError(f"{function}: no kernel source file {source!r:.80}, nor a kernel's text (which holds a "
                        "newline or __global__)",
                        hint="give the path of a kernel source file, or its CUDA C++ text")


def _check_compile_arguments(function: str, instances: object, extra_options: object, use_cache: object,
                             allow_outside_headers: object) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """The instances (their names, once each), options and cache permission `function` was given, checked and named
    as its arguments: a str of instances would be read as one name per character, the text "no" as a yes."""
    flag_argument(function, "allow_outside_headers", allow_outside_headers)
    use_cache = flag_argument(function, "use_cache", use_cache)
    if isinstance(instances, str) or not isinstance(instances, Iterable):
        raise WrongArgumentType(f"{function}: instances are the kernels' names (a list of str), got "
                                f"{type(instances).__name__}")
    try:
        given = tuple(instances)   # read once: a generator would be empty for the compile
    except TypeError:              # iterable in name only, as a 0-d NumPy array is
        raise WrongArgumentType(f"{function}: instances are the kernels' names (a list of str), got "
                                f"{instances!r:.40} ({type(instances).__name__})") from None
    wrong = [instance for instance in given if not isinstance(instance, str)]
    if wrong:
        raise WrongArgumentType(f"{function}: instances are the kernels' names (str), got {wrong[0]!r} "
                                f"({type(wrong[0]).__name__})")
    names = tuple(dict.fromkeys(given))
    options = option_tuple(extra_options, function)  # type: ignore[arg-type]  # option_tuple checks the kind
    _refuse_target_options(function, options)
    return names, options, use_cache


def folder_argument(function: str, name: str, value: object) -> Path | None:
    """`function`'s folder argument `name` (None: not given) as a Path: `WrongArgumentType` for a value that is no
    path, `WrongArgumentValue` where no folder is there. NVRTC skips a search folder that does not exist, and a
    project that does not exist holds no header, so a mistyped folder would show only as a header not found."""
    if value is None:
        return None
    folder = Path(path_argument(function, name, value))
    if not folder.is_dir():
        raise WrongArgumentValue(f"{function}: {name} {os.fspath(folder)!r:.120} is no folder ({_what_is_at(folder)})")
    return folder


def _what_is_at(path: Path) -> str:
    return "a file is there" if path.exists() else "nothing is there"


def _include_option_folders(function: str, options: tuple[str, ...]) -> None:
    """`WrongArgumentValue` for an ``-I`` option of `options` naming no folder, as the spec reader refuses it."""
    for index, option in enumerate(options):
        for folder in include_folders((option,)):
            if not folder.is_dir():
                raise WrongArgumentValue(f"{function}: extra_options[{index}]: option {option!r:.120} names no "
                                         f"folder ({_what_is_at(folder)})")


def _arch_argument(function: str, arch: object) -> str:
    """`function`'s `arch` normalised (`normalise_arch`); `WrongArgumentType` for a value of another kind."""
    if isinstance(arch, bool) or not isinstance(arch, (str, int)):
        raise WrongArgumentType(f"{function}: arch is a GPU architecture such as 'sm_90' (or 90), got {arch!r:.40} "
                                f"({type(arch).__name__})")
    return normalise_arch(arch)


def _refuse_target_options(function: str, options: tuple[str, ...]) -> None:
    """`WrongArgumentValue` for an option that sets the target (``-arch=sm_80``): the image would be another
    architecture's, its resources too, while labelled with `arch`. The spec reader refuses the same options."""
    for index, option in enumerate(options):
        name = re.split(r"[=\s]", option.strip(), maxsplit=1)[0]
        if name in TARGET_OPTIONS:
            raise WrongArgumentValue(f"{function}: extra_options[{index}]: option {option!r} sets the target "
                                     "architecture, which is the arch= argument (such as arch='sm_90', or 'sm_90a' for "
                                     "arch-specific instructions)")


# A lone surrogate: a str can hold one (not one decoded from bytes), but UTF-8 cannot encode it for NVRTC.
_SURROGATE = re.compile("[\ud800-\udfff]")


def refuse_nul(source: str, name: str) -> None:
    """A `CompileError` at the line and column of a NUL character in `source`: NVRTC reads its text as a C string,
    so everything after one would silently not be compiled."""
    position = source.find("\x00")
    if position >= 0:
        line, column = source_line_column(source, position)
        raise CompileError(f"{name}:{line}:{column}: a NUL character (offset {position}) in the source: NVRTC "
                           "would stop reading there")
    surrogate = _SURROGATE.search(source)
    if surrogate:
        line, column = source_line_column(source, surrogate.start())
        raise CompileError(f"{name}:{line}:{column}: a lone surrogate {surrogate.group()!r} in the source, which "
                           "UTF-8 cannot encode for NVRTC")


def _refuse_odd_names(function: str, **names: str) -> None:
    """`WrongArgumentType` for a name holding a NUL or a lone surrogate: NVRTC reads names as C strings."""
    for argument, text in names.items():
        if "\x00" in text or _SURROGATE.search(text):
            raise WrongArgumentType(f"{function}: {argument} {text!r} holds a NUL character or a lone surrogate, "
                                    "which NVRTC cannot be given")


_LONE_CR = re.compile(r"\r(?!\n)")


def compile_text(source: str, name: str, instances: Iterable[str], arch: str = "sm_90",
                 extra_options: Iterable[str] = (), *, include_dir: Path | None = None,
                 use_cache: bool = True, display_path: str | None = None,
                 allow_outside_headers: bool = False, project: Path | None = None) -> Cubin:
    """Compile CUDA C++ `source` (called `name` in diagnostics); see `compile_source`."""
    for argument, value in (("source", source), ("name", name)):
        if not isinstance(value, str):
            raise WrongArgumentType(f"compile_text: {argument} is text, got {type(value).__name__}")
    instances, extra_options, use_cache = _check_compile_arguments("compile_text", instances, extra_options,
                                                                   use_cache, allow_outside_headers)
    include_dir = folder_argument("compile_text", "include_dir", include_dir)
    project = folder_argument("compile_text", "project", project)
    _include_option_folders("compile_text", extra_options)
    if display_path is not None:   # the name every message and log line gives the source
        display_path = path_argument("compile_text", "display_path", display_path)
    arch = _arch_argument("compile_text", arch)
    _refuse_odd_names("compile_text", name=name, **{f"instances[{index}]": instance
                                                    for index, instance in enumerate(instances)},
                      **{f"extra_options[{index}]": option for index, option in enumerate(extra_options)})
    refuse_nul(source, display_path or name)
    # NVRTC ends lines at LF only: a file saved with bare CRs would be one line, its first // comment the rest.
    source = _LONE_CR.sub("\n", source)
    options = (f"--gpu-architecture={arch}", *base_options(extra_options), *extra_options)
    if include_dir is not None:
        options += (f"--include-path={include_dir}",)
    options += headers.search_options()   # after the kernel's own folders: the stand-ins, then the toolkit's
    version = nvrtc_version()
    folders = ([include_dir] if include_dir else []) + include_folders(extra_options)
    found = scan_headers(source, display_path or name, folders, allow_outside=allow_outside_headers,
                         project=project, pre_includes=pre_included_files(extra_options))
    key = cache.key_for(source=source, name=name, headers=found.texts, instances=instances,
                        options=_portable(options, include_dir) + headers.cache_tokens(), arch=arch,
                        nvrtc_version=version)
    use_cache = use_cache and found.cacheable
    if use_cache:
        restored = load_cached(key, instances)
        if restored is not None:
            _log.debug("%s: %d kernel(s) for %s from the disk cache", display_path or name, len(instances), arch)
            return restored
    try:
        cubin = _compile(source, name, instances, arch, options, version, display_path or name, found.paths)
    except CompileError as exc:
        if exc.log:
            _log.debug("%s: NVRTC's whole log:\n%s", display_path or name, exc.log)
        raise
    if instances:
        _log.info("%s: %d kernel(s) compiled for %s in %.2f s", display_path or name, len(instances), arch,
                  cubin.compile_seconds)
    else:   # no kernel: the types a spec's sizeof reads, or the source alone
        _log.info("%s: compiled for %s in %.2f s without a kernel (the types a sizeof reads, or the source alone)",
                  display_path or name, arch, cubin.compile_seconds)
    if use_cache and not changed_while_compiling(
            display_path or name, found,
            lambda: scan_headers(source, display_path or name, folders, allow_outside=allow_outside_headers,
                                 project=project, pre_includes=pre_included_files(extra_options))):
        store_cached(key, cubin)
    return cubin


def changed_while_compiling(what: str, found: HeaderScan, scan_again: Callable[[], HeaderScan],
                            source: str | None = None, read_again: Callable[[], str] | None = None) -> bool:
    """Whether a file the compile of `what` read from disk changed while it compiled, said in a warning: the key
    was made from the texts `found` read first, the compiler read them again, so its build is stored under that
    key only when reading them once more (`scan_again()`, and `read_again()` for a `source` the compiler reads
    from disk too) gives the same texts (ccache's rule, "file modified during compile: not cached")."""
    try:
        texts = scan_again().texts
        changed = sorted(label for label in {*texts, *found.texts} if texts.get(label) != found.texts.get(label))
        if source is not None and read_again is not None and read_again() != source:
            changed.insert(0, what)
    except (OSError, DriverGemmError) as exc:   # a header gone, or now refused: the build is of no known text
        changed = [f"a header ({exc})"]
    if changed:
        _log.warning("%s: %s changed on disk while it compiled, so this build is kept out of the compile cache "
                     "(the compiler read the text it found then)", what, ", ".join(changed[:3])
                     + (f" and {len(changed) - 3} more" if len(changed) > 3 else ""))
    return bool(changed)


def load_cached(key: str, instances: Iterable[str]) -> Cubin | None:
    """The cached `Cubin` of `key`, or None unless the entry is this key's own and holds every instance.

    An entry's checksum proves only that it is whole: one renamed from
    another key, or rewritten with its checksum, must still name this key,
    lower every instance asked for, and hold each lowered symbol in its image.
    """
    cached = cache.load(key)
    if cached is None:
        return None
    header, image = cached
    if header.get("key") != key:
        return None
    cubin = from_cache_header(header, image)
    if cubin is None or not isinstance(cubin.lowered_names, dict) or not all(
            isinstance(cubin.lowered_names.get(instance), str) for instance in instances):
        return None
    if cubin.image_format == "cubin":
        try:
            parsed = _parsed(cubin.image, cubin.arch, cubin.origin)
            for instance in instances:
                parsed.kernel(cubin.symbol(instance))
        except Exception:   # any failure to read an image that came from disk means: not this entry
            return None
    return cubin


def store_cached(key: str, cubin: Cubin) -> None:
    cache.store(key, {**cache_header(cubin), "key": key}, cubin.image)


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
        "ptx_facts": ({name: facts.as_dict() for name, facts in cubin.ptx_facts.items()}
                      if cubin.ptx_facts is not None else None),
    }


def from_cache_header(header: dict, image: bytes) -> Cubin | None:
    """A cached entry back as a `Cubin`; None for an entry of another layout, or one whose values are not of the
    types `cache_header` writes (it is then rewritten)."""
    if not _typed_as_written(header):
        return None
    try:
        return Cubin(image=image, arch=header["arch"], lowered_names=header["lowered_names"],
                     resources={name: KernelResources(**r) for name, r in header["resources"].items()},
                     log=header["log"], options=tuple(header["options"]),
                     nvrtc_version=tuple(header["nvrtc_version"]), compile_seconds=header["compile_seconds"],
                     from_cache=True, origin=header.get("origin", "nvrtc"),
                     ptx_facts=({name: KernelPtxFacts.from_dict(facts) for name, facts in header["ptx_facts"].items()}
                                if header.get("ptx_facts") is not None else None))
    except (KeyError, TypeError, AttributeError, ValueError, IndexError):
        return None


def _typed_as_written(header: dict) -> bool:
    """Whether each value of a cache header is of the type `cache_header` writes. The checksum proves only that
    the bytes are whole: a header left by another version, or edited with its checksum redone, could hold a
    register count of "many", which planning would meet far from here."""
    def is_count(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    def is_text_list(value) -> bool:
        return isinstance(value, list) and all(isinstance(item, str) for item in value)

    names, resources, facts = header.get("lowered_names"), header.get("resources"), header.get("ptx_facts")
    seconds = header.get("compile_seconds")
    return (isinstance(header.get("arch"), str) and isinstance(header.get("log"), str)
            and isinstance(header.get("origin", "nvrtc"), str) and is_text_list(header.get("options"))
            and isinstance(names, dict) and is_text_list(list(names.values()))
            and isinstance(resources, dict)
            and all(isinstance(counts, dict) and all(map(is_count, counts.values())) for counts in resources.values())
            and isinstance(header.get("nvrtc_version"), list) and all(map(is_count, header["nvrtc_version"]))
            and isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
            and (facts is None or isinstance(facts, dict) and all(_facts_as_written(item) for item in facts.values())))


def _facts_as_written(facts) -> bool:
    """Whether `facts` are a kernel's PTX facts exactly as `KernelPtxFacts.as_dict` writes them: reading them back
    would turn "false" into True and 2.5 into 2."""
    try:
        return isinstance(facts, dict) and KernelPtxFacts.from_dict(facts).as_dict() == facts
    except (KeyError, TypeError, AttributeError, ValueError, IndexError):
        return False


# NVRTC compiling in several threads of one process sometimes hands back an empty program log (NVRTC
# 13.5 on a many-core machine), and with it goes ptxas's report of each kernel's registers and shared
# memory. Such a compile is done once more; if the report is still missing, the resources are read from
# the CUBIN itself (all but the spills, which it knows only for a kernel without a stack frame).
REPORT_ATTEMPTS = 2


def _compile(source, name, instances, arch, options, version, display_path, quotable=()) -> Cubin:
    for _ in range(REPORT_ATTEMPTS):
        cubin = _compile_bounded(source, name, instances, arch, options, version, display_path, quotable)
        missing = [symbol for symbol in cubin.lowered_names.values() if symbol not in cubin.resources]
        if not missing:
            return cubin
    image = _parsed(cubin.image, arch, cubin.origin)
    resources = dict(cubin.resources)
    resources.update({symbol: image.kernel(symbol).resources for symbol in missing})
    note = (f"driver-gemm: ptxas's report of {', '.join(missing)} was missing from NVRTC's log "
            f"{REPORT_ATTEMPTS} times; registers, barriers, shared memory and stack are read from the CUBIN "
            f"(spills are not in it: 0 for a kernel without a stack frame, else unknown)")
    return dataclasses.replace(cubin, resources=resources, log=(cubin.log + "\n" + note).lstrip("\n"))


def _compile_bounded(source, name, instances, arch, options, version, display_path, quotable=()) -> Cubin:
    """`compile_program` in a child process of its own (`bounded`): past its time or memory bound, or on Ctrl-C,
    the child is killed; a bound reached is a `CompileError` naming the kernel and the bound."""
    limits = bounded.compile_bounds()
    request = pickle.dumps({"source": source, "name": name, "instances": tuple(instances), "arch": arch,
                            "options": tuple(options), "version": tuple(version), "display_path": display_path,
                            "quotable": tuple(quotable)})
    command, env = bounded.python_child("driver_gemm.cuda.compile_child", str(limits.memory_bytes or 0))
    what = f"{display_path} ({', '.join(instances)})"
    try:
        done = bounded.run_bounded(command, request, limits.seconds, env=env)
    except bounded.ChildStopped as exc:
        if exc.reason == "time":
            raise CompileError(f"{what}: the compile (NVRTC, then the reading of its log) was stopped after "
                               f"{limits.seconds:g} s, the time a compile may take "
                               f"(set {bounded.TIMEOUT_VARIABLE} to allow more)", options=tuple(options)) from None
        raise CompileError(f"{what}: the compile was stopped", options=tuple(options)) from None
    try:
        # ("ok", cubin) | ("error", message, log, options) | ("memory",) | ("crashed",)
        outcome: tuple = pickle.loads(done.stdout) if done.stdout else ("crashed",)
    except (pickle.UnpicklingError, EOFError, ValueError):
        outcome = ("crashed",)
    if outcome[0] == "ok":
        return outcome[1]
    memory = f"{limits.memory_bytes >> 20} MiB" if limits.memory_bytes else "the memory it had"
    out_of_memory = outcome[0] == "error" and limits.memory_bytes and (
        "error: out of memory" in outcome[2] or _ptxas_gave_up_alone(outcome[2]))
    if outcome[0] == "error" and not out_of_memory:
        raise CompileError(outcome[1], log=outcome[2], options=outcome[3])
    if out_of_memory or outcome[0] == "memory" or \
            done.returncode in (-signal.SIGABRT, -signal.SIGSEGV, -signal.SIGKILL):
        raise CompileError(f"{what}: NVRTC ran out of memory within {memory}, the address space a compile may have "
                           f"(set {bounded.MEMORY_VARIABLE} to allow more)", options=tuple(options))
    tail = done.stderr.decode(errors="replace").strip()[-500:]
    raise CompileError(f"{what}: NVRTC's process ended with status {done.returncode} without a result"
                       + (f": {tail}" if tail else ""), options=tuple(options))


def _ptxas_gave_up_alone(log: str) -> bool:
    """Whether `log`'s one complaint is ptxas giving up (``ptxas fatal : Ptx assembly aborted due to errors``) with
    no error of its own before it: what ptxas, run inside NVRTC under an address-space cap, says when the cap
    leaves it no memory to work in."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith("ptxas fatal")]
    others = [line for line in lines if "error" in line.lower() and not line.startswith("ptxas fatal")]
    return bool(fatal) and not others


def compile_program(source, name, instances, arch, options, version, display_path, quotable=()) -> Cubin:
    """One NVRTC program compiled in this process (the child's half of `_compile_bounded`)."""
    return _compile_once(source, name, instances, arch, options, version, display_path, quotable)


def _compile_once(source, name, instances, arch, options, version, display_path, quotable=()) -> Cubin:
    started = time.perf_counter()
    program = check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        # A mangled name is no C++ expression: the source's own explicit instantiation builds it, found by name.
        named = [instance for instance in instances if not is_mangled(instance)]
        for instance in named:
            check(nvrtc.nvrtcAddNameExpression(program, instance.encode()), f"nvrtcAddNameExpression({instance})")
        encoded = [o.encode() for o in options]
        status, = nvrtc.nvrtcCompileProgram(program, len(encoded), encoded)
        log = _program_log(program)
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(format_compile_error(log, source, display_path, status.name, options, quotable,
                                                    instances), log=log, options=options)
        lowered = {}
        for instance in named:
            symbol = check(nvrtc.nvrtcGetLoweredName(program, instance.encode()), f"nvrtcGetLoweredName({instance})")
            lowered[instance] = symbol.decode()
        size = check(nvrtc.nvrtcGetCUBINSize(program), "nvrtcGetCUBINSize")
        image = bytearray(size)
        check(nvrtc.nvrtcGetCUBIN(program, image), "nvrtcGetCUBIN")
        for instance in instances:
            if instance in lowered:
                continue
            kernels = read_cubin(bytes(image), display_path).kernels
            if instance not in kernels:
                built = f"only {', '.join(sorted(kernels))}" if kernels else "no kernel"
                twin = long_width_twin(instance, kernels)
                why = (" (a mangled name names a kernel the source instantiates itself, as an explicit instantiation "
                       "does; NVRTC compiles no host launcher)") if twin is None else \
                    f": {long_width_advice(instance, twin, 'nvrtc')}"
                raise CompileError(f"{display_path}: NVRTC's build has no kernel {instance}: the source instantiates "
                                   f"{built}{why}", log=log, options=options)
            lowered[instance] = instance
        facts = _ptx_facts_of(program, set(lowered.values()), log, options)
    finally:
        check(nvrtc.nvrtcDestroyProgram(program), "nvrtcDestroyProgram")
    return Cubin(bytes(image), arch, lowered, parse_ptxas_report(log), log, tuple(options), version,
                 time.perf_counter() - started, ptx_facts=facts)


# A demangled name's long long, as its long (``long long`` and ``5ll`` -> ``long`` and ``5l``), so that two names
# that differ only in how 64-bit integers are spelt compare equal.
_LONG_LONG = re.compile(r"\blong long\b|(?<=\d)(u?)ll\b")


def _long_as_long_long(text: str) -> str:
    return _LONG_LONG.sub(lambda found: "long" if found.group(0).startswith("long") else f"{found.group(1)}l", text)


def long_width_twin(instance: str, kernels: Iterable[str]) -> str | None:
    """The kernel of `kernels` whose mangled name differs from the mangled `instance` only where one has long
    (``l``, ``m``) and the other long long (``x``, ``y``): the same kernel with its 64-bit integers spelt as the other
    compiler spells them (nvcc's int64_t on Linux is long, NVRTC's long long). None where none does."""
    asked = demangle(instance) if is_mangled(instance) else None
    if asked is None:
        return None
    wanted = (_long_as_long_long(asked.name), [_long_as_long_long(param.text) for param in asked.params])
    for kernel in sorted(kernels):
        built = demangle(kernel)
        if built is not None and kernel != instance and \
                (_long_as_long_long(built.name), [_long_as_long_long(param.text) for param in built.params]) == wanted:
            return kernel
    return None


def long_width_advice(instance: str, twin: str, compiler: str) -> str:
    """Why `instance`, a mangled name from one compiler's build, is `twin` in `compiler`'s (``nvrtc`` or ``nvcc``),
    and what to name instead."""
    this, other = ("NVRTC", "nvcc") if compiler == "nvrtc" else ("nvcc", "NVRTC")
    demangled = demangle(twin)
    template_id = f" or its C++ name ({demangled.name})" if demangled is not None else ""
    build = "compiler: nvcc" if compiler == "nvrtc" else "compiler: nvrtc (or leave compiler: out)"
    return (f"the two names differ only in their 64-bit integers, long (l, m) in one and long long (x, y) in the "
            f"other: int64_t and uint64_t are long long under NVRTC and long under nvcc on Linux, so a mangled "
            f"name copied from {other}'s build does not name {this}'s; give function: the name {this} builds "
            f"({twin}){template_id}, or build the kernel with {build}")


def _ptx_facts_of(program, symbols: set[str], log: str, options: Sequence[str]) -> dict[str, KernelPtxFacts]:
    """The TMA copies and cluster of each compiled kernel, from the PTX NVRTC made on the way to the CUBIN, with the
    lines of its `log` saying that ptxas ignored a kernel's setmaxnreg (read against every kernel of the program,
    those not asked for included)."""
    size = check(nvrtc.nvrtcGetPTXSize(program), "nvrtcGetPTXSize")
    text = b" " * size
    check(nvrtc.nvrtcGetPTX(program, text), "nvrtcGetPTX")
    facts = attach_ignored_setmaxnreg(ptx_facts(text.rstrip(b"\0 ").decode(errors="replace")),
                                      ignored_setmaxnreg(log), options)
    return {symbol: facts.get(symbol, KernelPtxFacts()) for symbol in symbols}


def _program_log(program) -> str:
    size = check(nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
    buffer = b" " * size
    check(nvrtc.nvrtcGetProgramLog(program, buffer), "nvrtcGetProgramLog")
    return buffer.rstrip(b"\x00").decode(errors="replace")


def _portable(options: tuple[str, ...], include_dir: Path | None) -> tuple[str, ...]:
    """Options without the search path driver-gemm adds, so a cache moved between checkouts still hits (what
    those folders hold enters the key by itself: the headers' texts, `headers.cache_tokens`)."""
    return tuple(o for o in options if not o.startswith("--include-path="))


def read_source(path: Path, what: str = "kernel source", where: str | None = None) -> str:
    """The UTF-8 text of a source or header (without a byte-order mark, which NVRTC reads as a stray token); a
    `CompileError` naming the file (and `where`, the including file:line) when it cannot be read as such.

    Only a regular file of at most ``MAX_SOURCE_BYTES`` is read: it is opened
    without blocking and checked before a byte is read, so a FIFO or a device
    never hangs and a huge file is refused by its size.
    """
    # not at the top: importing this module need not load the spec package and its YAML parser
    from ..specfile.limits import MAX_SOURCE_BYTES
    place = f"{where}: " if where else ""
    try:
        data = read_regular_file(path, MAX_SOURCE_BYTES)
    except OSError as exc:
        raise CompileError(f"{place}cannot read {what} {path}: {exc.strerror}") from None
    except NotRegularFile as exc:
        raise CompileError(f"{place}{what} {path} is not a regular file ({exc})") from None
    except FileTooLarge as exc:
        raise CompileError(f"{place}{what} {path} is {exc.args[0]:,} bytes, more than the limit of "
                           f"{MAX_SOURCE_BYTES:,} (MAX_SOURCE_BYTES)") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CompileError(f"{place}{what} {path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                           f"{exc.start:,})") from None
    if "\x00" in text:   # NVRTC would read a header only up to it, silently
        line, column = source_line_column(text, text.index("\x00"))
        raise CompileError(f"{place}{what} {path}:{line}:{column}: a NUL character: NVRTC would stop reading there")
    return text


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


@dataclass(frozen=True)
class HeaderScan:
    """The local headers a source can include: `texts` by a path-free label (the cache key's part), their
    resolved `paths` (the only local files a compile error may quote), and whether every include was a literal
    (an ``#include MACRO`` names a file only the preprocessor knows, so such a compile is not cached)."""

    texts: dict[str, str]
    paths: tuple[Path, ...]
    cacheable: bool


MAX_HEADERS = 4096   # local headers one source may reach


def pre_included_files(options: Iterable[str]) -> list[Path]:
    """The files ``--pre-include=FILE`` (or ``-include FILE``) names by an absolute path: the spec writes a
    project's own header so, and a compile reads it before the source, so its text enters the cache key."""
    found = []
    for option in options:
        match = re.fullmatch(r"(?:-include|--pre-include)(?:=|\s+)\s*(\S.*)", option.strip())
        if match and Path(match.group(1).strip()).is_absolute():
            found.append(Path(match.group(1).strip()))
    return found


def headers_read(path: Path, options: Iterable[str], project: Path | None) -> list[Path]:
    """The local headers a compile of the source at `path` with `options` reads, pre-included ones too (the scan
    that keys the compile cache); none where the source cannot be read or scanned (the compile reports why)."""
    options = tuple(options)
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        found = scan_headers(text, str(path), [Path(path).resolve().parent, *include_folders(options)],
                             allow_outside=True, project=project, pre_includes=pre_included_files(options))
    except (OSError, DriverGemmError):
        return []
    return sorted(found.paths)


def scan_headers(source: str, source_name: str, folders: Iterable[Path], *,
                 allow_outside: bool = False, project: Path | None = None,
                 pre_includes: Iterable[Path] = ()) -> HeaderScan:
    """Every local header reachable from `source`, looked up as NVRTC does: ``#include "..."`` beside the
    including file and then in `folders`, ``#include <...>`` in `folders` (the first folder is the source's own,
    the others its ``-I`` ones; the toolkit's and the stand-ins' headers are keyed by version instead).

    Each header found is held to a source's rules, with a `CompileError` naming
    the including file:line and the header: its resolved path inside the
    source's project or one of the ``-I`` folders (which the spec vetted),
    unless `allow_outside`; a regular file (a FIFO or a device is never
    opened for reading); at most ``MAX_SOURCE_BYTES``. Every file of a given
    path is keyed once, by its path relative to the project (or to its ``-I``
    folder), so two headers of one name in two folders both enter the key.
    `pre_includes` (absolute paths, `pre_included_files`) are read as headers the source includes first.
    """
    # not at the top: importing this module need not load the spec package and its YAML parser
    from ..specfile.project import project_root
    folders = [Path(folder) for folder in folders]
    own = folders[0] if folders else None
    # the spec's project where it is known (its sources are held to it), else the source folder's own
    roots = [("-I0:", project.resolve() if project is not None else project_root(own))] if own is not None else []
    roots += [(f"-I{index}:", folder.resolve()) for index, folder in enumerate(folders[1:], 1)]
    texts: dict[str, str] = {}
    seen: set[Path] = set()

    def visit(header: str, quoted: bool, where: str, here: Path | None) -> tuple[str, str, Path] | None:
        """The header an include names, held to the rules and read; None where it is not a local file (the
        toolkit's or a stand-in, or missing: NVRTC's to find or report) or was read already."""
        candidates = ([here] if quoted and here is not None else []) + folders
        if Path(header).is_absolute():   # read from where it says, whatever the search path
            candidates = [Path(Path(header).anchor)]
        elif ".." in Path(header).parts and not allow_outside and not _found_in(header, candidates):
            # Not the project's own: NVRTC would look for it in the toolkit's folders, and '..' climbs out of them.
            raise CompileError(f"{where}: header {header} climbs out of the folders it is looked for in with "
                               "'..', so it cannot be held to the kernel's project or the toolkit (hint: name "
                               "it from an -I folder of the project, or pass --allow-outside-sources "
                               "(allow_outside_sources=True); to compile_source or compile_text, "
                               "allow_outside_headers=True)")
        for folder in candidates:
            candidate = Path(folder) / header
            try:   # what NVRTC would open: anything there but a folder (a FIFO too, refused below)
                if not candidate.exists() or candidate.is_dir():
                    continue
                resolved = candidate.resolve()
            except (OSError, ValueError, RuntimeError):   # a NUL, a name too long, a symlink loop
                continue
            if resolved in seen:
                return None
            label = _label(resolved, roots)
            if label is None and not allow_outside:
                inside = ", ".join(str(root) for _, root in roots) or "no folder"
                raise CompileError(f"{where}: header {header} is {resolved}, outside the kernel's project and "
                                   f"its -I folders ({inside}) (hint: keep headers inside the project, or pass "
                                   "--allow-outside-sources (allow_outside_sources=True); to compile_source or "
                                   "compile_text, allow_outside_headers=True)")
            if len(seen) >= MAX_HEADERS:
                raise CompileError(f"{where}: header {header}: more than {MAX_HEADERS:,} local headers")
            seen.add(resolved)
            label = label or str(resolved)
            if label in texts:   # the same relative path under another root: told apart by the root
                label = next(prefix for prefix, root in roots if resolved.is_relative_to(root)) + label
            texts[label] = read_source(resolved, "header", where)
            return texts[label], str(candidate), resolved.parent
        return None

    pending: list[tuple[str, str, Path | None]] = [(source, source_name, own)]
    for pre_include in pre_includes:   # read before the source, as the compiler reads them
        first = visit(str(pre_include), True, f"{source_name}: --pre-include", None)
        if first is not None:
            pending.append(first)
    computed: list[_ComputedInclude] = []   # every #include MACRO, read once every literal include is
    while pending:
        while pending:
            text, including, here = pending.pop()
            for where, quoted, angled, other in includes_in(text, including):
                if quoted or angled:
                    found = visit(quoted or angled, bool(quoted), where, here)
                    if found is not None:
                        pending.append(found)
                elif other is not None:
                    computed.append(_ComputedInclude(other.strip(), where, here))
        # Every #define of each macro in the source and its headers is held to the rules: which one the
        # preprocessor takes depends on #undef and #if, which are not followed here. A header one names may
        # define more: the loop ends when nothing new is read, each text searched once for each macro.
        read = [source, *texts.values()]
        for include in computed:
            defined = _defined_headers(include.macro, read[include.searched:])
            include.searched, include.defined = len(read), include.defined or bool(defined)
            for quoted, angled in defined:
                found = visit(quoted or angled, bool(quoted), include.where, include.here)
                if found is not None:
                    pending.append(found)
    unresolved = [(include.macro, include.where) for include in computed if not include.defined]
    if unresolved and not allow_outside:
        macro, where = unresolved[0]
        raise CompileError(f"{where}: #include {macro} names its header through a macro whose #define is not a "
                           "plain \"file\" or <file> in the source or its headers, so the header cannot be held to "
                           "the kernel's project (hint: write the header's name in quotes or angle brackets, or "
                           "pass --allow-outside-sources (allow_outside_sources=True); to compile_source or "
                           "compile_text, allow_outside_headers=True)")
    cacheable = not unresolved   # what NVRTC includes through such a macro is not known here: never cached
    return HeaderScan(texts, tuple(seen), cacheable)


@dataclass
class _ComputedInclude:
    """An ``#include MACRO`` of `scan_headers`: where it is, and how far the texts read were searched for its
    ``#define`` (and whether one was found)."""

    macro: str
    where: str
    here: Path | None
    searched: int = 0
    defined: bool = False


def _found_in(header: str, folders: Iterable[Path]) -> bool:
    """Whether `header` names a file (anything but a folder) under one of `folders`."""
    for folder in folders:
        try:
            candidate = Path(folder) / header
            if candidate.exists() and not candidate.is_dir():
                return True
        except (OSError, ValueError, RuntimeError):
            continue
    return False


def _defined_headers(macro: str, texts: Iterable[str]) -> list[tuple[str | None, str | None]]:
    """Every ``"file"`` or ``<file>`` that a computed ``#include MACRO`` or ``#include MACRO(args)`` may name: each
    plain ``#define`` of the macro in `texts`, a function-like macro's parameters replaced by the arguments in a
    ``<...>`` body, as the preprocessor replaces tokens (CUTLASS's ``#define CUDA_STD_HEADER(header)
    <cuda/std/header>``), never inside a ``"..."`` one, a string literal. Empty where none is found."""
    call = re.fullmatch(r"([A-Za-z_]\w*)\s*(?:\(([^()]*)\))?\s*(?://.*|/\*.*)?", macro)
    if call is None:
        return []
    name, arguments = call.group(1), call.group(2)
    parameters = r"\(([^()]*)\)" if arguments is not None else ""
    definition = re.compile(rf'^[ \t]*#[ \t]*define[ \t]+{name}{parameters}[ \t]+(?:"([^"\n]+)"|<([^>\n]+)>)[ \t]*'
                            r'(?://.*)?$', re.MULTILINE)
    headers = []
    for text in texts:
        for found in definition.findall(directive_text(text)):
            if arguments is None:
                quoted, angled = found
            else:
                names, quoted, angled = found
                values = [argument.strip() for argument in arguments.split(",")]
                names = [parameter.strip() for parameter in names.split(",")]
                if len(values) != len(names):
                    continue
                for parameter, value in zip(names, values):   # a string literal is not a token list: only <...>
                    if parameter and angled:
                        angled = re.sub(rf"\b{re.escape(parameter)}\b", lambda _: value, angled)
            headers.append((quoted or None, angled or None))
    return list(dict.fromkeys(headers))


def _label(resolved: Path, roots: list[tuple[str, Path]]) -> str | None:
    for _, root in roots:
        if resolved.is_relative_to(root):
            return resolved.relative_to(root).as_posix()
    return None


def local_headers(source: str, include_dirs: Path | Iterable[Path]) -> dict[str, str]:
    """The text of every local header reachable from `source` (see `scan_headers`), by its path-free label."""
    folders = [include_dirs] if isinstance(include_dirs, Path) else list(include_dirs)
    return scan_headers(source, "<source>", folders).texts if folders else {}


