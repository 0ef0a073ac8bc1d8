"""Step 2 of the data flow: kernel source to CUBIN with NVRTC, with the compiler's resource report.

Every source is compiled for one real architecture, never to PTX: PTX from a newer NVRTC may be
newer than the driver understands, while a CUBIN for the exact architecture always loads. ptxas's
``-v`` report (registers, barriers, stack, spills, static shared memory) is parsed and kept with
the binary. A compile error becomes a `CompileError` quoting file, line, source line and message.
"""

from __future__ import annotations

import bisect
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
from typing import Callable, Iterable, Iterator, Mapping, Sequence

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
from ..kernel_names import is_mangled, split_overload
from ..source_text import without_comments
from ..specfile.kernels import TARGET_OPTIONS, source_line_column

BASE_OPTIONS = ("-std=c++17", "-lineinfo", "-Xptxas", "-v")
_STANDARD_OPTION = re.compile(r"^--?std(=|$)")
_log = logging.getLogger(__name__)


def base_options(extra_options: Iterable[str]) -> tuple[str, ...]:
    """`BASE_OPTIONS` less its C++ standard where the kernel's options name one: the kernel's own wins, and nvcc
    would warn on every compile of two."""
    if any(_STANDARD_OPTION.match(option) for option in extra_options):
        return tuple(option for option in BASE_OPTIONS if not _STANDARD_OPTION.match(option))
    return BASE_OPTIONS


# An include directive, its # also spelt as the digraph %: (include_next and import read a header as include does).
_INCLUDE = re.compile(r'^[ \t]*(?:#|%:)[ \t]*(?:include|include_next|import)\b[ \t]*'
                      r'(?:"([^"\n]+)"|<([^>\n]+)>|(\S.*)?)', re.MULTILINE)


def _directive_text(text: str) -> str:
    """`text` as the preprocessor's first phases leave it for its directives: trigraphs for # and \\ read as those
    characters, every backslash-newline spliced away, form feeds and vertical tabs read as spaces, so that no
    spelling of an include escapes the scan (a trigraph the compiler would not read makes the scan see more, never
    less)."""
    text = text.replace("??=", "#").replace("??/", "\\").replace("\f", " ").replace("\v", " ")
    return re.sub(r"\\[ \t]*\r?\n", "", text)


_NEWLINE = re.compile("\n")


def _block_comments(text: str):
    """(start, end) of each ``/* ... */`` of `text`, as a non-greedy regular expression would find them, in one
    pass: the expression retries every later ``/*`` against the rest of the text, which takes minutes on a
    source with thousands of unclosed ones (in a line comment or a string)."""
    position = 0
    while True:
        start = text.find("/*", position)
        if start < 0:
            return
        end = text.find("*/", start + 2)
        if end < 0:   # no later /* has a */ after it either
            return
        yield start, end + 2
        position = end + 2


def _includes(text: str, including: str):
    """(where, quoted, angled, other) of every include directive of `text`: read both as written and with each
    block comment read as the one space the preprocessor makes of it (``#/**/include``, or a comment spanning
    lines inside a directive), since a comment marker inside a string literal could hide a real directive from the
    second reading; a directive in a comment is then read too, which only ever refuses more."""
    spliced = _directive_text(text)
    pieces, marks, kept, removed = [], [], 0, 0   # marks: (position in the reading, newlines taken out before it)
    last = 0
    for start, end in _block_comments(spliced):
        pieces.append(spliced[last:start] + " ")
        kept += start - last + 1
        removed += spliced.count("\n", start, end)
        marks.append((kept, removed))
        last = end
    pieces.append(spliced[last:])
    seen = set()
    for reading, shifts in ((spliced, []), ("".join(pieces), marks)):
        newlines = [found.start() for found in _NEWLINE.finditer(reading)]   # a line by bisection, not a count
        for match in _INCLUDE.finditer(reading):
            before = bisect.bisect_right(shifts, (match.start(), float("inf"))) - 1
            line = bisect.bisect_left(newlines, match.start()) + 1 + (shifts[before][1] if before >= 0 else 0)
            if (line, match.groups()) in seen:
                continue
            seen.add((line, match.groups()))
            yield (f"{including}:{line}", *match.groups())


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
            for where, quoted, angled, other in _includes(text, including):
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
        for found in definition.findall(_directive_text(text)):
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


# ----------------------------------------------------------------------------------- diagnostics

_DIAGNOSTIC = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<kind>error|warning|catastrophic error)"
                         r"(?P<rest>.*)$")


def format_compile_error(log: str, source: str, display_path: str, status: str, options: Iterable[str] = (),
                         quotable: Iterable[Path] = (), instances: Iterable[str] = ()) -> str:
    """A compile failure as a reader needs it: each error with its file:line, the source line and a marker.

    NVRTC's log has lines ``name.cu(LINE): error: MESSAGE`` followed by the
    offending source line and a caret; we rebuild that view with the real path
    and the line number in front of the quoted source line.
    """
    lines = source.splitlines()
    quotable = set(quotable)
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
            out.append(f"  {display_path}: error: {message} ({_instance_advice(source, quotable, instances)})")
            shown += 1
            continue
        file_path, file_lines = _diagnosed_file(match.group("file").strip(), display_path, lines, quotable)
        out.append(f"  {file_path}:{number}: error: {message}")
        if 1 <= number <= len(file_lines):
            out.append(f"    {number:5d} | {file_lines[number - 1]}")
        shown += 1
        if shown == 10:
            out.append("  ... (more errors: -vv prints the compiler's whole log)")
            break
    if shown == 0:
        out.append("  " + "\n  ".join(log.strip().splitlines()[-15:]))
    folders = [Path(option.split("=", 1)[1]) for option in options if option.startswith("--include-path=")]
    includes = _own_includes(source, display_path, quotable) if any(marker in log for marker in _HOST_CODE) else ()
    out.extend(f"  hint: {hint}" for hint in compile_hints(log, folders, includes))
    out.append(f"  options: {' '.join(options)}")
    return "\n".join(out)


def _own_includes(source: str, display_path: str, headers: Iterable[Path]) -> list[tuple[str, str]]:
    """(file:line, header) of each ``#include <...>`` or ``"..."`` of the source and its local `headers`."""
    texts = [(display_path, source)]
    for header in headers:
        try:
            texts.append((str(header), Path(header).read_text(errors="replace")))
        except OSError:
            continue
    return [(where, quoted or angled) for name, text in texts
            for where, quoted, angled, _ in _includes(text, name) if quoted or angled]


# What may stand between __global__ and a kernel's name (its return type, attributes, a namespace's qualifier), in
# characters: a bound that keeps each search short, so that a file of many __global__ and no parenthesis after them
# (a comment, a string) is read in one pass rather than once from each.
DECLARATION_REACH = 512
_KERNEL_NAME = re.compile(rf"__global__\b[^;{{(]{{0,{DECLARATION_REACH}}}?\b([A-Za-z_]\w*)\s*\(")
_LAUNCH_QUALIFIER = re.compile(r"\b__(?:launch_bounds|cluster_dims|maxnreg)__\s*\(")
_PARENTHESIS = re.compile(r"[()]")


def _without_launch_qualifiers(text: str) -> str:
    """`text` with each ``__launch_bounds__(...)``, ``__cluster_dims__(...)`` and ``__maxnreg__(...)`` read as a
    space, its parentheses matched in pairs: ``__launch_bounds__((BM / WM) * (BN / WN) * 32)`` stands between
    ``__global__ void`` and the kernel's name as a whole. A qualifier whose parentheses do not close is kept, with
    the rest of `text`, as written (the compiler refuses it), so that the text is read once."""
    pieces: list[str] = []
    copied = 0
    for found in _LAUNCH_QUALIFIER.finditer(text):
        if found.start() < copied:   # inside the qualifier just taken out
            continue
        depth, end = 1, None
        for parenthesis in _PARENTHESIS.finditer(text, found.end()):
            depth += 1 if parenthesis.group() == "(" else -1
            if depth == 0:
                end = parenthesis.end()
                break
        if end is None:
            break
        pieces.extend((text[copied:found.start()], " "))
        copied = end
    pieces.append(text[copied:])
    return "".join(pieces)


def _kernels_in(texts: Iterable[str]) -> list[str]:
    """The names of the ``__global__`` functions `texts` define where their names are written out (not in a
    comment: "the extern "C" __global__ wrappers call matrixMulCUDA(...)" names no kernel)."""
    names = [name for text in texts
             for name in _KERNEL_NAME.findall(_without_launch_qualifiers(without_comments(text)))]
    return list(dict.fromkeys(names))[:8]


def _instance_advice(source: str, headers: Iterable[Path], instances: Iterable[str]) -> str:
    """What to check when NVRTC could not name an instance: a function written nowhere in `source` or its vetted
    headers (most likely a misspelt ``function:``, beside the kernels the file defines), a function declared only
    as a __device__ or host one (said so, beside the kernels), an overload whose parameter types no declaration
    has (beside the declarations), or the params against the template's. Only asked once NVRTC failed; a name
    that a macro pastes together (``gemm_##NAME``) is not written out either, so NVRTC's own message is kept
    beside this one."""
    texts = [source]
    for header in headers:
        try:
            texts.append(Path(header).read_text(errors="replace"))
        except OSError:
            continue
    return instance_advice(texts, instances)


def instance_advice(texts: Iterable[str], instances: Iterable[str]) -> str:
    """`_instance_advice` of a source and its headers as `texts` (the source first), for a compiler that could not
    name `instances`: nvcc's, whose error is in driver-gemm's instantiation of each, says it as NVRTC's does."""
    texts, instances = list(texts), list(instances)
    absent, overloads = [], []
    for instance in instances:
        function, parameter_types = split_overload(instance)
        name = _function_name(function)
        if name and not any(re.search(rf"\b{re.escape(name)}\b", text) for text in texts):
            absent.append(name)
        elif name and parameter_types is not None:
            overloads.append((name, parameter_types))
    if absent:
        return (f"no function named {', '.join(dict.fromkeys(absent))} appears in the source or its headers: check "
                f"the spec's function: against the kernels the file defines "
                f"({', '.join(_kernels_in(texts)) or 'none found'})")
    not_kernels = not_a_kernel(instances, texts)
    if not_kernels:
        return (f"{not_kernels}, and only a kernel is launched: check the spec's function: against the kernels "
                f"the file defines ({', '.join(_kernels_in(texts)) or 'none found'})")
    if overloads:
        name, parameter_types = overloads[0]
        declared = _declarations(name, texts)
        return (f"no declaration of {name} takes ({', '.join(parameter_types)}): an overload is named by its "
                "parameter types exactly as declared, const included" +
                (f"; the source declares {'; '.join(declared)}" if declared else ""))
    defaulted = _all_defaults_advice(texts, instances)
    if defaulted:
        return defaulted
    advice = ("check the spec's function and params against the template's parameters (their number, and "
              "enumerators or types with their namespace)")
    names = list(dict.fromkeys(_function_name(split_overload(instance)[0]) for instance in instances
                               if not is_mangled(instance)))
    if names and all(len(_declarations(name, texts)) == 1 for name in names):   # no overload to pick among
        headers = [f"{name} is declared template <{', '.join(parameter.declared for parameter in declared[0])}>"
                   for name in names for declared in [template_parameters(name, texts)] if len(declared) == 1]
        return advice + (f": {'; '.join(headers)}" if headers else "")
    return advice + "; one of several overloads is picked by its parameter types, function: name(const float*, int)"


def _all_defaults_advice(texts: list[str], instances: list[str]) -> str | None:
    """How to name a function template whose parameters all have defaults, where an instance names it bare
    (``gemm``, no params): NVRTC needs the template-id ``gemm<>`` for the instance of the defaults, as a launcher's
    ``gemm<<<grid, block>>>`` picks it by deduction. None where no instance is such."""
    for instance in instances:
        function = split_overload(instance)[0]
        if is_mangled(instance) or "<" in function:
            continue
        name = _function_name(function)
        declared = template_parameters(name, texts)
        if len(declared) != 1 or not declared[0] or not all(parameter.has_default for parameter in declared[0]):
            continue
        header = ", ".join(parameter.declared for parameter in declared[0])
        return (f"every template parameter of {name} has a default (template <{header}>), and a template's instance "
                f"is named by a template-id: write function: '{function}<>' (quoted in YAML) for the defaults, or "
                f"give params in the template's order for others")
    return None


def not_a_kernel(instances: Iterable[str], texts: Iterable[str]) -> str | None:
    """``NAME is a __device__ function, not a kernel (__global__)`` (or a ``__host__ __device__`` or host one) for
    the functions of `instances` that `texts` declare, where no declaration of theirs is ``__global__``: a device
    helper that the file's kernels call (cuda-samples' matrixMulCUDA<BLOCK_SIZE>, wrapped by ``extern "C"``
    matrixMulCUDA_block16), which NVRTC refuses as a name expression in words about templates and overloads. None
    where a declaration is ``__global__`` or none is written out (a macro may make a kernel: nothing is known)."""
    texts = list(texts)
    said = []
    for instance in instances:
        if is_mangled(instance):
            continue
        name = _function_name(split_overload(instance)[0])
        spaces = _execution_spaces(name, texts) if re.fullmatch(r"[A-Za-z_]\w*", name) else None
        if not spaces or "global" in spaces:
            continue
        if spaces == {"device"}:
            kind = "a __device__ function"
        elif "device" in spaces:
            kind = "a __host__ __device__ function"
        else:   # __host__, or no execution space at all: a host function, which NVRTC does not even compile
            kind = "a host function (written without __device__ or __global__)"
        said.append(f"{name} is {kind}, not a kernel (__global__)")
    return "; ".join(dict.fromkeys(said)) or None


def _function_name(function: str) -> str:
    """The unqualified name of `function` (a name or template-id): ``get`` of ``lib::S<float>::get<2>``; what
    stands before the first ``<`` where an argument's own angles do not pair (``f<(N > 2)>``)."""
    bare = function
    for _ in range(8):   # template arguments nested up to eight deep
        bare = re.sub(r"<[^<>]*>", "", bare)
    name = bare.rsplit("::", 1)[-1].strip()
    return name if re.fullmatch(r"[A-Za-z_]\w*", name) else function.split("<", 1)[0].rsplit("::", 1)[-1].strip()


# How far `_execution_spaces` reads: the occurrences of a name it looks at (a declaration precedes the calls in
# C++, so the first ones hold it), each with at most this many characters before it, so a large file is read once.
_OCCURRENCES_READ = 256
_HEAD_REACH = 8 * DECLARATION_REACH
_EXECUTION_SPACE = re.compile(r"\b__(global|device|host)__\b")
# What a function's declaration may have before its return type and name, read as spaces.
_SPECIFIERS = re.compile(r'\[\[[^\[\]]*\]\]|\b__attribute__\s*\(\([^()]*\)\)|\bextern\s*"C(?:\+\+)?"|'
                         r"\b(?:static|inline|constexpr|consteval|extern|virtual|friend|explicit|__forceinline__|"
                         r"__noinline__|__inline__|__global__|__device__|__host__)\b")
_TEMPLATE_ARGUMENTS = re.compile(r"<[^<>;{}()]*>")
# Words that begin a statement that calls the function (return scale(x);), not a declaration of it.
_STATEMENT_WORDS = frozenset({"return", "else", "do", "goto", "throw", "new", "delete", "co_return", "co_yield",
                              "co_await", "typedef", "using", "sizeof", "decltype", "case", "default", "operator"})


def _execution_spaces(name: str, texts: Iterable[str]) -> set[str]:
    """The execution spaces (global, device, host) of the declarations of `name` in `texts`: each ``name(`` whose
    statement, up to it, reads as a declaration's head (a template header, specifiers, a return type); a head with
    no __global__, __device__ or __host__ declares a host function."""
    spaces: set[str] = set()
    pattern = re.compile(rf"\b{re.escape(name)}\s*\(")
    read = 0
    for text in texts:
        text = _without_launch_qualifiers(without_comments(text))
        for match in pattern.finditer(text):
            read += 1
            if read > _OCCURRENCES_READ:
                return spaces
            before = text[max(0, match.start() - _HEAD_REACH):match.start()]
            head = _declaration_head(before[max(before.rfind(";"), before.rfind("}"), before.rfind("{")) + 1:])
            if head is not None:
                spaces.update(_EXECUTION_SPACE.findall(head) or ["host"])
    return spaces


def _declaration_head(statement: str) -> str | None:
    """`statement` (what stands before a name and its ``(``, its comments taken out) without its directives and
    template header where it reads as a function declaration's head, else None (a call: ``x = f(``, ``return
    f(``, ``lib::f(``)."""
    # Directives and a class's access labels (public:) stand between declarations.
    text = re.sub(r"^[ \t]*#[^\n]*|\b(?:public|protected|private)\s*:(?!:)", " ", statement,
                  flags=re.MULTILINE).strip()
    while text is not None and _TEMPLATE_HEADER.match(text):   # a member template of a class template has two
        text = _after_template_header(text)
    if text is None:
        return None
    bare = _SPECIFIERS.sub(" ", text)
    for _ in range(4):   # template arguments of the return type, nested up to four deep
        bare = _TEMPLATE_ARGUMENTS.sub(" ", bare)
    bare = re.sub(r"(?:[A-Za-z_]\w*\s*::\s*)+$", " ", bare)    # the name's own scope (void lib::f()
    words = re.findall(r"[A-Za-z_]\w*", bare)
    if not words or words[0] in _STATEMENT_WORDS or not re.fullmatch(r"[\w\s*&]*(?:::[\w\s*&]*)*", bare):
        return None
    return text


def _after_template_header(text: str) -> str | None:
    """`text` after the ``template <...>`` it begins with, or None where the header does not close."""
    start = text.index("<") + 1
    header = _template_header(text[start:])
    return text[start + header[1] + 1:].strip() if header is not None else None


def plain_declarations(name: str, texts: Iterable[str]) -> list[str]:
    """The ``__global__`` declarations of `name` in `texts` (as `_declarations` gives them) when there are some and
    none is a template: what a ``template <...>`` before the declaration, in the same statement, would make one.
    Empty where a declaration is a template, or none is written out (a macro may make it: nothing is known)."""
    texts = list(texts)
    if any(_TEMPLATE_HEADER.search(statement) for statement in _declaration_heads(name, texts)):
        return []
    return _declarations(name, texts)


def template_parameter_names(name: str, texts: Iterable[str]) -> list[list[str | None]]:
    """For each ``template <...> __global__ ... name(`` in `texts`, its parameters' names in order (None for an
    unnamed one: ``template <int>``). Empty where no declaration of `name` is a template written out."""
    found = []
    for statement in _declaration_heads(name, texts):
        header = _TEMPLATE_HEADER.search(statement)
        names = _template_header_names(statement[header.end():]) if header is not None else None
        if names is not None:
            found.append(names)
    return found


@dataclass(frozen=True)
class ParamsByPosition:
    """How params reach a template whose parameters they do not all name: template arguments go by position, so a
    param of another name is passed as the template's parameter in its place, whatever its name says."""

    passed: tuple[tuple[str, str], ...]    # (param, the template parameter it is passed as), for each not named so
    mixed: bool                            # whether other params carry the template's own names
    crossed: tuple[tuple[str, str], ...]   # of `passed`, those whose name says another GEMM dimension than its place's

    @property
    def mapping(self) -> str:
        """``TILE_N -> BM, TILE_M -> BN``."""
        return ", ".join(f"{param} -> {declared}" for param, declared in self.passed)

    @property
    def unlike(self) -> bool:
        """Whether a param passed by position has a name that is no spelling of its place's (X for BM, where
        ACC for Acc and LA for LayoutA are)."""
        return any(not _spells(param, declared) for param, declared in self.passed)


def params_by_position(names: Iterable[str], template: Iterable[str | None]) -> ParamsByPosition:
    """Which of params `names` a template declared with parameters `template` (as `template_parameter_names` gives
    them) takes by position rather than by their name, and which of those are crossed: named for one of the
    dimensions M, N, K (``TILE_N``, ``BLOCK_M``, ``kTileK``) and passed in the place of a parameter named for
    another (``BM``), as swapped tile sides given under names of the spec's own are."""
    names, template = list(names), list(template)
    passed = tuple((name, template[index]) for index, name in enumerate(names)
                   if name not in template and index < len(template) and template[index] is not None)
    crossed = tuple((name, declared) for name, declared in passed
                    if None not in (_dimension(name), _dimension(declared))
                    and _dimension(name) != _dimension(declared))
    return ParamsByPosition(passed, any(name in template for name in names), crossed)


def _dimension(name: str) -> str | None:
    """The GEMM dimension a parameter's name ends in (``BM``, ``TILE_N``, ``kBlockK``), None for other names."""
    return name[-1] if len(name) > 1 and name[-1] in "MNK" else None


def _spells(given: str, declared: str) -> bool:
    """Whether `given` is `declared` or a shortening of it (letters in order from its first), case aside:
    ``ACC`` of ``Acc``, ``LA`` of ``LayoutA``."""
    given, declared = given.replace("_", "").upper(), declared.replace("_", "").upper()
    short, long = sorted((given, declared), key=len)
    if not short or short[0] != long[0]:
        return False
    rest = iter(long)
    return all(letter in rest for letter in short)


_TEMPLATE_HEADER = re.compile(r"\btemplate\s*<")


def _declaration_heads(name: str, texts: Iterable[str]) -> Iterator[str]:
    """What stands before each ``__global__ ... name(`` of `texts` in the same statement (since the last ``;``,
    ``{`` or ``}``): where a ``template <...>`` header of that declaration is."""
    pattern = re.compile(rf"__global__\b[^;{{(]{{0,{DECLARATION_REACH}}}?\b{re.escape(name)}\s*\(")
    for text in texts:
        # Without comments: a __global__ in one before a __device__ function's declaration is not the function's.
        text = _without_launch_qualifiers(without_comments(text))
        for match in pattern.finditer(text):
            before = text[max(0, match.start() - 8 * DECLARATION_REACH):match.start()]
            yield before[max(before.rfind(";"), before.rfind("}"), before.rfind("{")) + 1:]


def _template_header(text: str) -> tuple[list[str], int] | None:
    """The parameters, as written, of the template header whose ``<`` `text` follows (``int BM, typename T =
    float>``), and where its closing ``>`` is in `text`; None where it does not close."""
    parameters, angles, brackets, current = [], 0, 0, ""
    for position, character in enumerate(text):
        # Inside parentheses a < or > is a comparison or a shift (int N = (1 << 4)), not a bracket.
        if character in "([":
            brackets += 1
        elif character in ")]":
            brackets -= 1
        elif brackets == 0 and character == "<":
            angles += 1
        elif brackets == 0 and character == ">" and angles > 0:
            angles -= 1
        elif brackets == 0 and character == ">":
            parameters.append(current)
            return parameters, position
        elif brackets == 0 and angles == 0 and character == ",":
            parameters.append(current)
            current = ""
            continue
        current += character
    return None


def _template_header_names(text: str) -> list[str | None] | None:
    """The parameter names of the template header whose ``<`` `text` follows (``int BM, typename T = float>``),
    or None where it does not close."""
    header = _template_header(text)
    return [_template_parameter(parameter).name for parameter in header[0]] if header is not None else None


@dataclass(frozen=True)
class TemplateParameter:
    """One parameter of a template header as written (``int BM``, ``typename T = float``, ``int... Ns``)."""

    name: str | None      # None for an unnamed one: template <int>
    kind: str             # "type" (typename, class), "template" (a template template parameter) or "value"
    declared: str         # as written, without its default
    has_default: bool
    pack: bool


def _template_parameter(text: str) -> TemplateParameter:
    declared, equals, _ = text.partition("=")
    declared = " ".join(declared.split())
    # The name is the last word, unless that word is the kind itself (template <int, typename>).
    words = re.findall(r"[A-Za-z_]\w*", re.sub(r"<[^<>]*>", " ", declared))
    named = words and len(words) > 1 and words[-1] not in ("typename", "class", "auto", "int", "unsigned",
                                                             "long", "short", "char", "bool", "size_t")
    if declared.startswith("template"):
        kind = "template"
    elif words and words[0] in ("typename", "class") and "::" not in declared:
        kind = "type"
    else:
        kind = "value"
    return TemplateParameter(words[-1] if named else None, kind, declared, bool(equals), "..." in declared)


def template_parameters(name: str, texts: Iterable[str]) -> list[tuple[TemplateParameter, ...]]:
    """For each ``template <...> __global__ ... name(`` in `texts`, its parameters (`template_parameter_names`
    with their kinds and defaults)."""
    found = []
    for statement in _declaration_heads(name, texts):
        header = _TEMPLATE_HEADER.search(statement)
        parsed = _template_header(statement[header.end():]) if header is not None else None
        if parsed is not None:
            found.append(tuple(_template_parameter(parameter) for parameter in parsed[0] if parameter.strip()))
    return found


# Type names a spec may give where a template takes a number: read as a type, never as a constant of the source's.
_BUILTIN_TYPES = frozenset({"float", "double", "half", "__half", "__nv_bfloat16", "nv_bfloat16", "__nv_fp8_e4m3",
                            "__nv_fp8_e5m2", "int", "unsigned", "char", "short", "long", "int8_t", "uint8_t",
                            "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t", "float2", "float4",
                            "half2", "__half2", "__nv_bfloat162"})


def template_arguments_problem(function: str, params: Mapping[str, object],
                               declared: Iterable[tuple[TemplateParameter, ...]]) -> str | None:
    """What is wrong with `params` (the template arguments a spec gives, in order) for `function`'s template,
    whose declarations in the source are `declared` (`template_parameters`): too few for the parameters without a
    default, more than it has, or a type where it takes a value (or a number where it takes a type); None where
    nothing is (the parameters are all read, or not: a pack takes any number, overloads are not told apart)."""
    headers = {tuple((parameter.name, parameter.kind, parameter.pack) for parameter in header): header
               for header in declared}
    if len(headers) != 1:
        return None
    # A default may be given in a declaration and not in the definition: a parameter has one where any has.
    template = [dataclasses.replace(parameter, has_default=any(header[index].has_default for header in declared))
                for index, parameter in enumerate(next(iter(headers.values())))]
    if any(parameter.pack or parameter.kind == "template" for parameter in template):
        return None
    given = list(params.items())
    required = next((index for index, parameter in enumerate(template) if parameter.has_default), len(template))
    names = [parameter.name for parameter in template]
    header = f"template <{', '.join(parameter.declared for parameter in template)}>"
    count = (f"{function} has {len(template)} template parameter{'s' if len(template) != 1 else ''}"
             + (f" ({len(template) - required} with a default)" if required < len(template) else "")
             + f", params give {len(given)}")
    if len(given) > len(template):
        extra = [name for name, _ in given[len(template):]]
        unknown = [name for name in extra if name not in names]
        said = (f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a parameter of {function}"
                if unknown else f"{', '.join(extra)} {'has' if len(extra) == 1 else 'have'} no place left")
        return f"{count}: {said} ({header})"
    if len(given) < required:
        if all(name in names for name, _ in given):   # the template's own names: the missing are those not given
            missing = [name or "?" for name in names[:required] if name not in params]
        else:                                        # params go by position: the last ones are the missing
            missing = [name or f"parameter {index + 1}" for index, name in enumerate(names[len(given):required],
                                                                                         len(given))]
        return f"{count}: {', '.join(missing)} missing ({header})"
    for (name, value), parameter in zip(given, template):
        place = parameter.name or name
        if parameter.kind == "value" and isinstance(value, str) and value.strip() in _BUILTIN_TYPES:
            return (f"{place} of {function}'s template takes a value ({parameter.declared}), params give it the "
                    f"type {value.strip()}")
        if parameter.kind == "type" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return (f"{place} of {function}'s template takes a type ({parameter.declared}), params give it the "
                    f"number {value}")
    return None


def _declarations(name: str, texts: Iterable[str]) -> list[str]:
    """Up to three ``__global__`` declarations of `name` in `texts`, each as ``name(its parameters)`` on one line."""
    found = []
    pattern = re.compile(rf"__global__\b[^;{{(]{{0,{DECLARATION_REACH}}}?\b{re.escape(name)}\s*\("
                         r"([^()]*(?:\([^()]*\)[^()]*)*)\)")
    for text in texts:
        for match in pattern.finditer(_without_launch_qualifiers(without_comments(text))):
            found.append(f"{name}({' '.join(match.group(1).split())})")
    return list(dict.fromkeys(found))[:3]


def _diagnosed_file(logged: str, display_path: str, lines: list[str],
                    quotable: set[Path] | frozenset[Path] = frozenset()) -> tuple[str, list[str]]:
    """The path and lines of the file a diagnostic is about: the program itself, or a header it includes
    (NVRTC names a header by the path it found it at). Only a header the scan vetted (`quotable`), a stand-in
    or a toolkit header is quoted, and only a regular file of bounded size."""
    if logged in (display_path, Path(display_path).name):
        return display_path, lines
    from ..specfile.limits import MAX_SOURCE_BYTES   # lazy, as in read_source
    header = Path(logged) if Path(logged).is_absolute() else Path(display_path).parent / logged
    try:
        resolved = header.resolve()
        trusted = (headers.STAND_INS, *headers.toolkit_include_dirs())
        if resolved not in quotable and not any(resolved.is_relative_to(folder) for folder in trusted):
            return logged, []
        return str(header), read_regular_file(resolved, MAX_SOURCE_BYTES).decode(errors="replace").splitlines()
    except (OSError, RuntimeError, NotRegularFile, FileTooLarge):
        return logged, []


_MISSING_HEADER = re.compile(r'(?:cannot|could not) open source file "([^"]+)"')
_MISSING_HEADER_AT = re.compile(r'^\s*(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?:catastrophic error|error): '
                                r'(?:cannot|could not) open source file "(?P<name>[^"]+)"', re.MULTILINE)
# The toolkit's headers that hold host code a kernel file may include without knowing: CUB's and Thrust's
# device-wide algorithms, which the umbrella headers (<cub/cub.cuh>, <thrust/...>) pull in.
_DEVICE_WIDE = re.compile(r"(?:^|/)(?:cub/device/|cub/dispatch/|thrust/)")
_UMBRELLA = re.compile(r"(?:cub/cub\.cuh|cub/device/|thrust/)")


def _missing_headers(log: str) -> list[tuple[str, str | None, int | None]]:
    """(header, the file that includes it, its line) of each header NVRTC or nvcc could not open, once each; the
    including file is None where the log does not say it."""
    found: dict[str, tuple[str, str | None, int | None]] = {}
    for match in _MISSING_HEADER_AT.finditer(log):
        found.setdefault(match.group("name"), (match.group("name"), match.group("file").strip(),
                                               int(match.group("line"))))
    for name in _MISSING_HEADER.findall(log):
        found.setdefault(name, (name, None, None))
    return list(found.values())


def _host_code_files(log: str) -> list[str]:
    """The files (``file:line``, first of each file) where the log says NVRTC met host code."""
    files: dict[str, str] = {}
    for entry in log.splitlines():
        match = _DIAGNOSTIC.match(entry.strip())
        if match and any(marker in match.group("rest") for marker in _HOST_CODE):
            files.setdefault(match.group("file").strip(), f"{match.group('file').strip()}:{match.group('line')}")
    return list(files.values())
_HOST_CODE = ("host functions are not allowed in JIT mode", "__host__ function is not allowed in JIT mode")
# PyTorch's C++ extension code (KernelBench's load_inline sources), as the source lines NVRTC quotes under its errors
# show it: host C++ whose every line fails under NVRTC, with errors that say nothing of host code.
_TORCH_CODE = re.compile(r"\b(?:torch|at|c10|pybind11)::|\bTORCH_CHECK\w*\b|\bPYBIND11_MODULE\b|\bAT_DISPATCH_\w+")


def _torch_code_lines(log: str) -> list[str]:
    """``file:line`` of each error (first of each file) whose quoted source line is PyTorch extension code."""
    found: dict[str, str] = {}
    lines = log.splitlines()
    for index, entry in enumerate(lines):
        match = _DIAGNOSTIC.match(entry.strip())
        quoted = lines[index + 1] if index + 1 < len(lines) else ""
        if match and match.group("kind") != "warning" and _TORCH_CODE.search(quoted):
            name = match.group("file").strip()
            found.setdefault(name, f"{name}:{match.group('line')}")
    return list(found.values())
# Device functions nvcc declares in every file (its pre-included cuda_runtime.h), which NVRTC declares only where
# the file includes their header.
_DEVICE_RUNTIME = re.compile(r'identifier "(cudaGridDependencySynchronize|cudaTriggerProgrammaticLaunchCompletion'
                             r'|cudaGetParameterBuffer\w*|cudaLaunchDevice\w*)" is undefined')
# GNU's spelling of inline assembly, which nvcc's host compiler front end takes and NVRTC does not (it takes asm, and
# __volatile__ after it): the file then fails at its first __asm__, with no word of why.
_GNU_ASM = 'identifier "__asm__" is undefined'


# ptxas refusing an instruction of the architecture-specific target (sm_90a) on the plain one.
_ARCH_SPECIFIC = re.compile(r"not supported on \.target '(sm_\d+)'")
_UNSUPPORTED_INSTRUCTION = re.compile(r"Instruction '([\w.]+)' not supported on \.target 'sm_\d+'")
_NVCC_INSTANCES = re.compile(r"instances\.cu\(\d+\)")
# ptxas refusing a block's static shared memory past the static limit, in hexadecimal bytes.
_STATIC_SHARED = re.compile(r"uses too much shared data \((0x[0-9a-fA-F]+) bytes, (0x[0-9a-fA-F]+) max\)")
# ptxas refusing an instruction of a newer architecture than the build's (an sm_80 mma on sm_75).
_NEWER_TARGET = re.compile(r"Feature '([^']+)' requires \.target (sm_\d+[af]?) or higher")


def compile_hints(log: str, folders: Iterable[Path] = (), includes: Iterable[tuple[str, str]] = ()) -> list[str]:
    """What to do about the failures NVRTC's `log` shows that come from the file's setting, not its kernels:
    headers it could not find (in the include `folders`, the kernel's own first), and host code (NVRTC compiles
    device code only), said where it is: the file's own, or a header's, which the file's `includes` ((file:line,
    header) of each include of the source and its local headers) name."""
    folders = tuple(folders)
    host = _host_code_files(log)
    library = bool(host) and all(_DEVICE_WIDE.search(file) for file in host)
    hints = []
    for name, including, line in _missing_headers(log):
        if library and including is not None and _DEVICE_WIDE.search(including):
            continue    # CUB's device-wide headers include host headers too: the host-code hint below says why
        hint = headers.missing_header_hint(name, folders)
        # A header's include (NVRTC names a header by its path) may be past the errors shown: said where it is.
        if including is not None and Path(including).is_absolute() and hint.startswith(f"{name} is not beside"):
            hint = f"{hint} ({including}:{line} includes {name})"
        hints.append(hint)
    torch = _torch_code_lines(log)
    if torch and not any(headers.is_torch_header(name) for name, _, _ in _missing_headers(log)):
        hints.append(f"NVRTC compiles device code only, and this file holds PyTorch extension code (torch::Tensor, "
                     f"at::, TORCH_CHECK, PYBIND11_MODULE: host C++), met at {', '.join(torch[:3])}: "
                     f"{headers.TORCH_GUARD}; or build the kernel with compiler: nvcc and torch's include folders in "
                     "its options: (docs/kernels.md, \"PyTorch extension sources\")")
    if any(marker in log for marker in _HOST_CODE) and re.search(r"\bcuda\.h\(\d+\)", log):
        hints.append("<cuda.h> is the driver API's host header, which NVRTC cannot compile, and this compile found "
                     "the toolkit's through a folder of the kernel's options: [-I ...]; without that folder, "
                     "driver-gemm's own <cuda.h> declares what device code takes from it (CUtensorMap_st and the "
                     "tensor-map enumerations), or build the file with compiler: nvcc")
    if re.search(r'(__nv_name_map|instances\.cu)\S*: error: name followed by "::" must be a class or namespace', log):
        hints.append("a template argument in params: names something by a scope that is not found where the "
                     "instance is named, outside the kernel's namespace: write enumerators and types with their "
                     "whole namespace (lib::Kind::Normal, not Kind::Normal)")
    functions = list(dict.fromkeys(_DEVICE_RUNTIME.findall(log)))
    if functions:
        hints.append(f"{', '.join(functions)} {'is' if len(functions) == 1 else 'are'} declared by "
                     "<cuda_device_runtime_api.h>, which nvcc includes in every file and NVRTC only where the file "
                     "does: add #include <cuda_device_runtime_api.h>, or, leaving the file as it is, options: "
                     "[--pre-include=cuda_device_runtime_api.h] (or write the PTX: asm volatile(\"griddepcontrol"
                     ".wait;\" ::: \"memory\") and \"griddepcontrol.launch_dependents;\")")
    if _GNU_ASM in log:
        hints.append("NVRTC knows inline assembly as asm, not as GNU's __asm__, which nvcc takes: write asm "
                     "volatile(...), or, leaving the file as it is, options: [-D__asm__=asm, -D__volatile__=volatile]")
    if library:
        umbrellas = [f"{where} includes <{header}>" for where, header in includes if _UMBRELLA.match(header)]
        hints.append("NVRTC compiles device code only, and the host code it met is the CUDA toolkit's: CUB's and "
                     "Thrust's device-wide algorithms (cub/device/..., thrust/...), which launch kernels from the "
                     "host" + (f"; {', '.join(umbrellas[:3])}, which pulls them in" if umbrellas else
                               "; an umbrella header (<cub/cub.cuh>, a <thrust/...> one) pulls them in") +
                     ": include only the block and warp headers the kernel uses (<cub/block/block_reduce.cuh>, "
                     "<cub/warp/warp_reduce.cuh>), or build it with compiler: nvcc")
    elif any(marker in log for marker in _HOST_CODE) and not re.search(r"\bcuda\.h\(\d+\)", log) and not torch:
        where = f"; NVRTC met it at {', '.join(host[:3])}" if host else ""
        hints.append(f"NVRTC compiles device code only, and this file has host code (main, a launcher, "
                     f"cudaMalloc{where}): "
                     "build it with compiler: nvcc, or put the host code inside #ifndef __CUDACC_RTC__ ... #endif "
                     "(NVRTC defines __CUDACC_RTC__); functions without __host__/__device__ in a header library "
                     "(CUTLASS's and CuTe's constexpr helpers) compile as device functions with options: "
                     "[-default-device]")
    targets = dict.fromkeys(_ARCH_SPECIFIC.findall(log))
    if targets:
        instructions = ", ".join(dict.fromkeys(f"'{name}'" for name in _UNSUPPORTED_INSTRUCTION.findall(log)))
        hints.append(f"{instructions} {'is' if ',' not in instructions else 'are'} only on the architecture-specific "
                     f"target: give the kernel arch: {next(iter(targets))}a (wgmma, setmaxnreg and the other "
                     f"sm_90a instructions do not exist on plain {next(iter(targets))})")
    static = _STATIC_SHARED.search(log)
    if static:
        used, most = int(static.group(1), 16), int(static.group(2), 16)
        hints.append(f"the kernel's static shared memory (__shared__ arrays of a fixed size) is {used:,} bytes, "
                     f"more than the {most:,} bytes ({most // 1024} KB) a block may have statically: a larger tile "
                     "needs dynamic shared memory, an extern __shared__ array whose size the spec gives in "
                     "shared_bytes:")
    newer: dict[str, list[str]] = {}
    for feature, target in _NEWER_TARGET.findall(log):
        newer.setdefault(target, []).append(feature)
    for target, features in newer.items():
        named = ", ".join(f"'{feature}'" for feature in dict.fromkeys(features))
        hints.append(f"{named} {'needs' if ',' not in named else 'need'} {target} or newer, and this build is for "
                     f"an older architecture: plan for {target} (or newer), or give the kernel arch: {target}")
    if "which instance of function template" in log and _NVCC_INSTANCES.search(log):
        hints.append("the spec names a function template without all its template arguments (driver-gemm "
                     "instantiates each instance the spec names by taking its address): give them in params: in "
                     "the template's order, or "
                     "write the template-id in function: (k<float, 64>); a template whose arguments are deduced "
                     "from its parameters is named with them too")
    if "device-side kernel launch could not be processed" in log:
        hints.append("a <<<...>>> launch compiled as device code: the file's host launcher became a device function "
                     "(under -default-device, unannotated functions do), and NVRTC builds no device-side launches "
                     "without the device runtime: build the file with compiler: nvcc, or put the launcher inside "
                     "#ifndef __CUDACC_RTC__ ... #endif (-default-device helps header libraries, not launchers)")
    return hints
