"""Step 2 with nvcc instead of NVRTC, for a kernel whose spec says ``compiler: nvcc``.

nvcc has no name expressions, so a small wrapper translation unit includes the kernel source and
takes the address of each template instance, which makes the front end instantiate it. It is
compiled with ``-cubin -arch=<target> -O3 -Xptxas -v`` and the kernel's options; each instance's
mangled name is then found in the CUBIN (`mangling.find_symbol`). Results share the disk cache,
under a key that names nvcc and its version.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterable

from . import bounded, cache
from .compile import (BASE_OPTIONS, Cubin, include_folders, load_cached, normalise_arch, option_tuple, read_source,
                      refuse_nul, scan_headers, store_cached)
from .cubin import pointer_targets, read_cubin
from .mangling import find_symbol
from .resources import parse_ptxas_report
from ..errors import CompileError, ImageError, ToolMissingError
from ..kernel_names import split_overload

NVCC_OPTIONS = ("-O3", *BASE_OPTIONS)
_VERSION = re.compile(r"release (\d+)\.(\d+)")
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


def wrapper_source(source_path: Path, instances: Iterable[str]) -> str:
    """The translation unit nvcc compiles: the kernel source, and a device pointer to each instance.

    Taking an instance's address makes nvcc instantiate a template; keeping
    it in an initialised ``__device__`` pointer leaves a relocation that
    names the instance's mangled symbol (`cubin.pointer_targets`), so the
    symbol is known exactly rather than guessed from demangled names. An
    overload is picked by a ``static_cast``, which is already an address.
    """
    lines = [f'#include "{source_path.name}"']
    for index, instance in enumerate(instances):
        address = f"(void*){instance}" if split_overload(instance)[1] is not None else f"(void*)&{instance}"
        lines.append(f"__device__ void* {INSTANCE_VARIABLE.format(index)} = {address};")
    return "\n".join(lines) + "\n"


def compile_with_nvcc(path: str | Path, instances: Iterable[str], arch: str = "sm_90",
                      extra_options: Iterable[str] = (), *, use_cache: bool = True,
                      allow_outside_headers: bool = False, project: Path | None = None) -> Cubin:
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
    options = (f"-arch={arch}", *NVCC_OPTIONS, *extra_options)
    found = scan_headers(source, str(path), [path.resolve().parent, *include_folders(extra_options)],
                         allow_outside=allow_outside_headers, project=project)
    key = cache.key_for(source=source, name=path.name, headers=found.texts,
                        instances=instances, options=("nvcc", *options), arch=arch, nvrtc_version=version)
    use_cache = use_cache and found.cacheable
    if use_cache:
        restored = load_cached(key, instances)
        if restored is not None:
            return restored
    cubin = _compile(nvcc, path, instances, arch, options, version)
    if use_cache:
        store_cached(key, cubin)
    return cubin


def _compile(nvcc: Path, path: Path, instances, arch, options, version) -> Cubin:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="driver-gemm-nvcc-") as folder:
        wrapper = Path(folder) / "instances.cu"
        output = Path(folder) / "kernel.cubin"
        wrapper.write_text(wrapper_source(path, instances))
        command = [str(nvcc), "-cubin", *options, f"-I{path.resolve().parent}", "-o", str(output), str(wrapper)]
        # nvcc in a session of its own, its intermediate files in our folder: a timeout, Ctrl-C or SIGTERM kills
        # it with its gcc and cc1plus, and the folder goes with the block.
        scratch = Path(folder) / "tmp"
        scratch.mkdir()
        env = {**os.environ, "TMPDIR": str(scratch), "TMP": str(scratch), "TEMP": str(scratch)}
        seconds = bounded.compile_bounds().seconds
        try:
            done = bounded.run_bounded(command, None, seconds, env=env, cwd=folder)
        except bounded.ChildStopped:
            raise CompileError(f"{path}: nvcc was stopped after {seconds:g} s, the time a compile may take (set "
                               f"{bounded.TIMEOUT_VARIABLE} to allow more)", options=tuple(options)) from None
        log = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        if done.returncode != 0:
            shown = "\n  ".join(log.strip().splitlines()[-20:])
            hints = "".join(f"  hint: {name} was not found: give the folder that holds it in the kernel's "
                            "options: [-I FOLDER] (relative to the spec)\n"
                            for name in dict.fromkeys(_MISSING_HEADER.findall(log)))
            raise CompileError(f"{path}: nvcc failed (exit status {done.returncode})\n  {shown}\n{hints}"
                               f"  options: {' '.join(options)}", log=log, options=tuple(options))
        image = output.read_bytes()
    parsed = read_cubin(image, f"nvcc build of {path}")
    targets = pointer_targets(image, f"nvcc build of {path}")
    lowered = {}
    for index, instance in enumerate(instances):
        symbol = targets.get(INSTANCE_VARIABLE.format(index))
        if symbol in parsed.kernels:
            lowered[instance] = symbol
            continue
        try:   # no relocation to read: matched by name, as for a prebuilt image
            lowered[instance] = find_symbol(instance, parsed.kernels, f"nvcc build of {path}")
        except ImageError as exc:   # the instance is not in what nvcc built
            raise CompileError(str(exc), log=log, options=tuple(options)) from None
    return Cubin(image, arch, lowered, parse_ptxas_report(log), log, tuple(options), version,
                 time.perf_counter() - started, origin="nvcc")
