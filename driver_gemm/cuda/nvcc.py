"""Step 2 with nvcc instead of NVRTC, for a kernel whose spec says ``compiler: nvcc``.

nvcc has no name expressions, so a small wrapper translation unit includes the kernel source and
takes the address of each template instance, which makes the front end instantiate it. It is
compiled with ``-cubin -arch=<target> -O3 -Xptxas -v`` and the kernel's options; each instance's
mangled name is then found in the CUBIN (`mangling.find_symbol`). nvcc keeps the PTX it made on the
way, so the checks that read PTX (TMA ranks, clusters, setmaxnreg) hold for its kernels as for
NVRTC's. Results share the disk cache, under a key that names nvcc and its version.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterable

from . import bounded, cache
from .compile import (Cubin, base_options, changed_while_compiling, ignored_setmaxnreg, include_folders, load_cached,
                      long_width_advice, long_width_twin, normalise_arch, option_tuple, pre_included_files, read_source,
                      refuse_nul, scan_headers, store_cached)
from .compile_diagnostics import compile_hints, instance_advice, not_a_kernel
from .cubin import pointer_targets, read_cubin
from .headers import is_torch_header, torch_header_hint
from .mangling import find_symbol
from .ptx_facts import KernelPtxFacts, attach_ignored_setmaxnreg, ptx_facts
from .resources import parse_ptxas_report
from ..errors import CompileError, ImageError, ToolMissingError
from ..kernel_names import is_mangled, split_overload

_log = logging.getLogger(__name__)
_VERSION = re.compile(r"release (\d+)\.(\d+)")
# Headers of host libraries that a kernel file includes for its own benchmark runner.
HOST_LIBRARY_HEADERS = ("cublas_v2.h", "cublas.h", "cublasLt.h", "cublas_api.h", "curand.h", "cusparse.h",
                        "cudnn.h", "cufft.h", "nvml.h")
_MISSING_HEADER = re.compile(r"fatal error: ([^:\s]+): No such file or directory")


def find_nvcc() -> Path | None:
    """nvcc from ``$CUDA_HOME``/``$CUDA_PATH``, then PATH, then ``/usr/local/cuda``; None when absent."""
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(variable)
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return Path(root) / "bin" / "nvcc"
    found = shutil.which("nvcc")
    if found:
        return Path(found)
    fallback = Path("/usr/local/cuda/bin/nvcc")
    return fallback if fallback.is_file() else None


def require_nvcc() -> Path:
    """nvcc's path, or `ToolMissingError` saying where it was looked for."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise ToolMissingError("compiler: nvcc needs nvcc, which is not installed here (looked in $CUDA_HOME/bin, "
                               "$CUDA_PATH/bin, PATH and /usr/local/cuda/bin); install the CUDA toolkit or drop "
                               "'compiler: nvcc' to build with NVRTC")
    return nvcc


@functools.lru_cache(maxsize=4)
def nvcc_version(nvcc: Path | None = None) -> tuple[int, int]:
    """(major, minor) of nvcc, from ``nvcc --version``."""
    nvcc = nvcc or require_nvcc()
    output = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60).stdout
    match = _VERSION.search(output)
    if not match:
        raise ToolMissingError(f"{nvcc} --version does not say its release: {output.strip()[-200:]!r}")
    return int(match.group(1)), int(match.group(2))


INSTANCE_VARIABLE = "driver_gemm_instance_{}"


def wrapper_source(source_path: Path, instances: Iterable[str], probes: str = "") -> str:
    """The translation unit nvcc compiles: the kernel source, and a device pointer to each instance.

    Taking an instance's address makes nvcc instantiate a template; keeping
    it in an initialised ``__device__`` pointer leaves a relocation that
    names the instance's mangled symbol (`cubin.pointer_targets`), so the
    symbol is known exactly rather than guessed from demangled names. An
    overload is picked by a ``static_cast``, which is already an address.
    """
    lines = [f'#include "{source_path.name}"']
    for index, instance in enumerate(instances):
        if is_mangled(instance):     # no C++ expression: the file itself instantiates it (its own launcher)
            continue
        address = f"(void*){instance}" if split_overload(instance)[1] is not None else f"(void*)&{instance}"
        lines.append(f"__device__ void* {INSTANCE_VARIABLE.format(index)} = {address};")
    return "\n".join(lines) + "\n" + probes


def compile_with_nvcc(path: str | Path, instances: Iterable[str], arch: str = "sm_90",
                      extra_options: Iterable[str] = (), *, use_cache: bool = True,
                      allow_outside_headers: bool = False, project: Path | None = None, probes: str = "") -> Cubin:
    """Compile the kernel source at `path` with nvcc for `arch`, instantiating every name in `instances`.

    The result is a `Cubin` like NVRTC's (``origin`` is ``"nvcc"``), cached
    under a key made of the source and its headers, the instances, the
    options, the architecture and nvcc's version. `ToolMissingError` when
    nvcc is absent; `CompileError` with nvcc's diagnostics when it fails.
    """
    path = Path(path)
    arch = normalise_arch(arch)
    instances = tuple(dict.fromkeys(instances))
    nvcc = require_nvcc()
    version = nvcc_version(nvcc)
    source = read_source(path)
    extra_options = option_tuple(extra_options)
    refuse_nul(source, str(path))
    options = (f"-arch={arch}", "-O3", *base_options(extra_options), *extra_options)
    found = scan_headers(source, str(path), [path.resolve().parent, *include_folders(extra_options)],
                         allow_outside=allow_outside_headers, project=project,
                         pre_includes=pre_included_files(extra_options))
    # "ptx-facts": an entry stored before nvcc's PTX was kept would come back without its facts.
    key = cache.key_for(source=source + probes, name=path.name, headers=found.texts, instances=instances,
                        options=("nvcc", "ptx-facts", *options), arch=arch, nvrtc_version=version)
    use_cache = use_cache and found.cacheable
    if use_cache:
        restored = load_cached(key, instances)
        if restored is not None:
            _log.debug("%s: %d kernel(s) for %s from the disk cache (nvcc)", path, len(instances), arch)
            return restored
    cubin = _compile(nvcc, path, instances, arch, options, version, probes, [source, *found.texts.values()])
    if instances:
        _log.info("%s: %d kernel(s) compiled with nvcc for %s in %.2f s", path, len(instances), arch,
                  cubin.compile_seconds)
    else:   # no kernel: the types a spec's sizeof reads, or the source alone
        _log.info("%s: %s with nvcc for %s in %.2f s", path, "the sizes of types compiled" if probes else
                  "the source compiled alone", arch, cubin.compile_seconds)
    # nvcc reads the source and its headers from disk: a file saved meanwhile is in the build, not in the key
    if use_cache and not changed_while_compiling(
            str(path), found,
            lambda: scan_headers(source, str(path), [path.resolve().parent, *include_folders(extra_options)],
                                 allow_outside=allow_outside_headers, project=project,
                                 pre_includes=pre_included_files(extra_options)),
            source, lambda: read_source(path)):
        store_cached(key, cubin)
    return cubin


def _compile(nvcc: Path, path: Path, instances, arch, options, version, probes: str = "",
             texts: Iterable[str] = ()) -> Cubin:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="driver-gemm-nvcc-") as folder:
        wrapper = Path(folder) / "instances.cu"
        output = Path(folder) / "kernel.cubin"
        wrapper.write_text(wrapper_source(path, instances, probes))
        kept = Path(folder) / "kept"     # the intermediate files, the PTX among them
        kept.mkdir()
        command = [str(nvcc), "-cubin", *options, f"-I{path.resolve().parent}", "--keep", f"--keep-dir={kept}",
                   "-o", str(output), str(wrapper)]
        # nvcc in a session of its own, its intermediate files in our folder: a timeout, Ctrl-C or SIGTERM kills
        # it with its gcc and cc1plus, and the folder goes with the block.
        scratch = Path(folder) / "tmp"
        scratch.mkdir()
        env = {**os.environ, "TMPDIR": str(scratch), "TMP": str(scratch), "TEMP": str(scratch)}
        seconds = bounded.compile_bounds().seconds
        try:
            done = bounded.run_bounded(command, None, seconds, env=env, cwd=folder)
        except bounded.ChildStopped as stopped:
            if stopped.reason != "time":    # the call it compiles for was interrupted
                raise CompileError(f"{path}: nvcc was stopped", options=tuple(options)) from None
            raise CompileError(f"{path}: nvcc was stopped after {seconds:g} s, the time a compile may take (set "
                               f"{bounded.TIMEOUT_VARIABLE} to allow more)", options=tuple(options)) from None
        raw = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        # The wrapper is gone once nvcc is: its lines are said as what they instantiate, never by its path.
        log = named_wrapper_lines(raw, wrapper, instances, probes, path)
        if done.returncode != 0:
            _log.debug("%s: nvcc's whole log:\n%s", path, log)
            shown = "\n  ".join(first_errors(log)).replace("errors in the full log)",
                                                           "errors in nvcc's whole log, which -vv prints)")
            advice = [instance_advice(texts, instances)] if errs_at_an_instantiation(log, instances) else []
            hints = "".join(f"  hint: {hint}\n" for hint in [*advice, *nvcc_hints(raw)])
            raise CompileError(f"{path}: nvcc failed (exit status {done.returncode})\n  {shown}\n{hints}"
                               f"  options: {' '.join(options)}", log=log, options=tuple(options))
        if not output.is_file():   # nvcc succeeded without building the image (an option of the kernel's stopped it)
            said = " ".join(log.strip().splitlines()[-5:])
            raise CompileError(f"{path}: nvcc ended without building a CUBIN\n  {said}\n  options: "
                               f"{' '.join(options)}", log=log, options=tuple(options))
        image = output.read_bytes()
        ptx_texts = [ptx.read_text(errors="replace") for ptx in sorted(kept.glob("*.ptx"))]
    parsed = read_cubin(image, f"nvcc build of {path}")
    targets = pointer_targets(image, f"nvcc build of {path}")
    lowered = {}
    for index, instance in enumerate(instances):
        symbol = targets.get(INSTANCE_VARIABLE.format(index))
        if symbol in parsed.kernels:
            lowered[instance] = symbol
            continue
        if is_mangled(instance):
            if instance not in parsed.kernels:
                built = f"only {', '.join(sorted(parsed.kernels))}" if parsed.kernels else "no kernel"
                twin = long_width_twin(instance, parsed.kernels)
                why = " (a mangled name is found as the file's own code instantiates it)" if twin is None else \
                    f": {long_width_advice(instance, twin, 'nvcc')}"
                raise CompileError(f"{path}: nvcc's build has no kernel {instance}: the file instantiates {built}{why}",
                                   log=log, options=tuple(options))
            lowered[instance] = instance
            continue
        try:   # no relocation to read: matched by name, as for a prebuilt image
            lowered[instance] = find_symbol(instance, parsed.kernels, f"nvcc build of {path}")
        except ImageError as exc:   # the instance is not in what nvcc built
            # nvcc takes a __device__ function's address as readily as a kernel's, then builds no kernel of it:
            # the source says why, where it declares the function without __global__.
            why = not_a_kernel([instance], texts)
            raise CompileError(f"{exc}" + (f": {why}, and only a kernel is launched" if why else ""),
                               log=log, options=tuple(options)) from None
    return Cubin(image, arch, lowered, parse_ptxas_report(log), log, tuple(options), version,
                 time.perf_counter() - started, origin="nvcc",
                 ptx_facts=_kept_facts(ptx_texts, lowered.values(), log, options))


# How `named_wrapper_lines` names a line of the wrapper in an error: an instance the spec names, or a sizeof probe.
_WRAPPER_LINE = "driver-gemm's instantiation of {}"
_PROBE_LINE = "driver-gemm's sizeof probe"


def named_wrapper_lines(log: str, wrapper: Path, instances: Iterable[str], probes: str = "",
                        source: Path | None = None) -> str:
    """nvcc's `log` with each diagnostic of the wrapper (`wrapper_source`, a temporary file no reader can open)
    named by what its line does (``driver-gemm's instantiation of k<64, 2>``), and the wrapper's own quoted line
    and caret left out (they show only the variable that takes the instance's address)."""
    named = [instance for instance in instances if not is_mangled(instance)]
    first_probe = 2 + len(named)
    location = re.compile(rf"^(\s*){re.escape(str(wrapper))}\((\d+)\)(: .*)$")
    out: list[str] = []
    skipping = False
    for line in log.splitlines():
        match = location.match(line)
        if match:
            number = int(match.group(2))
            what = (_WRAPPER_LINE.format(named[number - 2]) if 2 <= number < first_probe else
                    _PROBE_LINE if number >= first_probe and probes else "driver-gemm's include of the source")
            out.append(f"{match.group(1)}{what}{match.group(3)}")
            skipping = True
            continue
        if skipping and line.strip() and (INSTANCE_VARIABLE.format("") in line or "driver_gemm_" in line
                                          or not line.strip().strip("^")):
            continue
        skipping = skipping and bool(line.strip())
        whose = f"{source.name}'s" if source is not None else "the"
        out.append(line.replace(str(wrapper), f"driver-gemm's instantiation of {whose} kernels"))
    return "\n".join(out) + ("\n" if log.endswith("\n") else "")


def errs_at_an_instantiation(log: str, instances: Iterable[str]) -> bool:
    """Whether an error of `log` (named by `named_wrapper_lines`) is on the wrapper's line that instantiates one of
    `instances`: the spec's function or params do not name an instance. The wrapper's name is in every error of the
    kernel's file too (nvcc's "In file included from" and its closing count), which says nothing of the instance."""
    labels = tuple(f"{_WRAPPER_LINE.format(instance)}: " for instance in instances if not is_mangled(instance))
    for line in log.splitlines():
        stripped = line.strip()
        if stripped.startswith(labels) and _ERROR_LINE.search(stripped):
            return True
    return False


_ERROR_LINE = re.compile(r"(\(\d+\)|:\d+(:\d+)?|^\s*driver-gemm's .*?): (catastrophic error|fatal error|error)\b")


def first_errors(log: str, most: int = 10) -> list[str]:
    """The first `most` errors of an nvcc log, each with the lines nvcc quotes under it (the source line and its
    caret), as the first error is most often the cause of the rest; the log's last lines when none is marked."""
    lines = log.strip().splitlines()
    starts = [index for index, line in enumerate(lines) if _ERROR_LINE.search(line)]
    if not starts:
        return lines[-20:]
    blocks: list[list[str]] = []
    repeats: list[int] = []
    for number, start in enumerate(starts):
        end = starts[number + 1] if number + 1 < len(starts) else len(lines)
        block = [line for line in lines[start:min(end, start + 4)] if line.strip()]
        if blocks and block[0] == blocks[-1][0]:   # the same error again at the same place (one per token skipped)
            repeats[-1] += 1
            continue
        blocks.append(block)
        repeats.append(1)
    shown: list[str] = []
    for block, count in zip(blocks[:most], repeats):
        shown.extend([block[0] + (f"   (x{count})" if count > 1 else ""), *block[1:]])
    if len(blocks) > most:
        shown.append(f"... ({len(blocks) - most} more errors in the full log)")
    return shown


def wheel_header_folder(name: str) -> Path | None:
    """The include folder of an installed NVIDIA wheel that holds header `name` (the cuBLAS wheel's holds
    <cublas_v2.h>, where a toolkit may lack it), None where none does."""
    for entry in sys.path:
        nvidia = Path(entry or ".") / "nvidia"
        if not nvidia.is_dir():
            continue
        for folder in sorted(nvidia.glob("*/include")):
            if (folder / name).is_file():
                return folder.resolve()
    return None


def nvcc_hints(log: str) -> list[str]:
    """What to do about an nvcc failure that comes from the file's setting rather than its kernels."""
    hints = []
    for name in dict.fromkeys(_MISSING_HEADER.findall(log)):
        if is_torch_header(name):
            hints.append(torch_header_hint(name, "nvcc"))
            continue
        host_library = name in HOST_LIBRARY_HEADERS
        installed = wheel_header_folder(name) if host_library else None
        where = (f"an installed wheel has it: options: [-I {installed}], with --allow-outside-sources (the folder "
                 "is outside the spec's project), or" if installed else
                 "where this toolkit lacks that library's headers, install them, or")
        hints.append(f"{name} was not found: give the folder that holds it in the kernel's options: [-I FOLDER] "
                     "(relative to the spec)" + (
                         f"; {name} is a host library's header, which a kernel file includes for its own runner: "
                         f"{where} keep the kernels in a file of their own and name that file in source:"
                         if host_library else ""))
    return hints + [hint for hint in compile_hints(log) if "NVRTC" not in hint]


def _kept_facts(ptx_texts: list[str], symbols: Iterable[str], log: str,
                options: Iterable[str]) -> dict[str, KernelPtxFacts] | None:
    """Each built kernel's PTX facts from the PTX nvcc kept (one file per virtual architecture; a kernel's
    entries agree across them), with the lines of ptxas's `log` saying it ignored a kernel's setmaxnreg, as for an
    NVRTC build; None when nvcc kept none, so that a disassembler may still be asked."""
    if not ptx_texts:
        return None
    facts: dict[str, KernelPtxFacts] = {}
    for text in ptx_texts:
        facts = {**ptx_facts(text), **facts}
    facts = attach_ignored_setmaxnreg(facts, ignored_setmaxnreg(log), tuple(options))
    return {symbol: facts.get(symbol, KernelPtxFacts()) for symbol in symbols}
