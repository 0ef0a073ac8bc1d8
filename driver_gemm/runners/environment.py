"""Where and when a run happened: GPU, driver, NVRTC and package versions, host, and UTC timestamps; and what
it was made from (its `Provenance`: commit, digests of its files, versions, GPUs, clocks)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import numpy as np

from ..version import __version__
from ..cuda.compile import headers_read, nvrtc_version, nvrtc_warning
from ..errors import DriverGemmError
from ..results.provenance import Provenance
from ..results.settings import RunSettings
from ..specfile.model import Spec


def _package_version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def environment(props=None) -> dict:
    """Where a run happened: GPU (from `props`, a `DeviceProperties`), driver, NVRTC and package versions, host."""
    out = {
        "driver_gemm": __version__,
        "nvrtc_version": ".".join(map(str, nvrtc_version())),
        "cuda_bindings": _package_version("cuda-bindings"),
        "nvmath_python": _package_version("nvmath-python"),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
    }
    warning = nvrtc_warning()
    if warning:
        out["nvrtc_warning"] = warning
    if props is not None:
        out["device"] = props.as_dict()
        out["driver_version"] = props.driver_version
    return out


def now() -> str:
    """The current time in UTC, to the second, as ISO 8601: when a run started or finished."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


GIT_TIMEOUT_S = 10   # a repository on a slow file system should not hold up a run for longer


def _git(folder: Path, *arguments: str) -> str | None:
    """git's output in `folder`, or None when git is absent, `folder` is no checkout, or git fails."""
    try:
        done = subprocess.run(["git", "-C", str(folder), *arguments], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(folder: Path) -> tuple[str | None, bool | None]:
    """The commit checked out at `folder`'s repository and whether its work tree differs from it (tracked files
    changed, or files git does not ignore added); (None, None) outside a git checkout."""
    commit = _git(folder, "rev-parse", "HEAD")
    if commit is None:
        return None, None
    status = _git(folder, "status", "--porcelain")
    return commit.strip(), (bool(status.strip()) if status is not None else None)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _shown(path: Path, root: Path | None) -> str:
    """`path` relative to `root` where it is inside it, else absolute: how provenance names a file."""
    resolved = path.resolve()
    if root is not None and resolved.is_relative_to(root):
        return resolved.relative_to(root).as_posix()
    return str(resolved)


def file_digests(spec: Spec, root: Path | None = None) -> tuple[dict, dict, dict]:
    """The SHA-256 of every kernel source (or prebuilt image) of `spec` and of its parameters' builder files, of
    every local header its compile reads, and one digest per kernel name over them all; files by path relative to
    `root` where inside it. A file that cannot be read is left out (the compile reports it)."""
    sources: dict[str, str] = {}
    headers: dict[str, str] = {}
    per_name: dict[str, set[str]] = {}
    scans: dict[tuple, list[str]] = {}    # a sweep's kernels share one source: scanned once
    for kernel in spec.kernels:
        path = kernel.binary or kernel.source
        # the Python files that make a parameter's bytes or a buffer's numbers run with the kernel: counted among
        # its sources
        builders = kernel.builder_files
        key = (path, tuple(kernel.options), kernel.project, kernel.binary is not None, builders)
        if key not in scans:
            entries = []
            try:
                for source in (path, *builders):
                    shown = _shown(source, root)
                    sources[shown] = sources.get(shown) or file_sha256(source)
                    entries.append(f"{shown}:{sources[shown]}")
                for header in ([] if kernel.binary is not None else headers_read(path, kernel.options,
                                                                                  kernel.project)):
                    named = _shown(header, root)
                    headers[named] = headers.get(named) or file_sha256(header)
                    entries.append(f"{named}:{headers[named]}")
            except OSError:
                pass
            scans[key] = entries
        per_name.setdefault(kernel.name, set()).update(scans[key])
    kernels = {name: hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()
               for name, parts in per_name.items() if parts}
    return sources, headers, kernels


def _nvml_driver_release() -> str | None:
    """The driver's release (580.159.04) from NVML, when nvidia-ml-py and the driver are here."""
    try:
        # nvidia-ml-py: optional, asked once per run for the driver's release
        import pynvml
        pynvml.nvmlInit()
    except Exception:   # noqa: BLE001 - no module, no library, no driver: the release is then unknown
        return None
    try:
        release = pynvml.nvmlSystemGetDriverVersion()
        return release.decode() if isinstance(release, bytes) else str(release)
    except Exception:   # noqa: BLE001 - an NVML error of any kind: unknown
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:   # noqa: BLE001 - nothing more to release
            pass


def _ptxas_version(spec: Spec) -> str | None:
    """nvcc's release (its ptxas's), when a kernel of `spec` is built by nvcc."""
    if not any(kernel.compiler == "nvcc" for kernel in spec.kernels):
        return None
    # lazy: nvcc's module is needed only for a spec that names it
    from ..cuda.nvcc import find_nvcc, nvcc_version

    try:
        nvcc = find_nvcc()
        return ".".join(map(str, nvcc_version(nvcc))) if nvcc is not None else None
    except (OSError, subprocess.SubprocessError, DriverGemmError):
        return None


def _cublas_version() -> str | None:
    for package in ("nvidia-cublas", "nvidia-cublas-cu13", "nvidia-cublas-cu12"):
        version = _package_version(package)
        if version:
            return version
    return None


def provenance(spec: Spec, environment_: dict, settings: RunSettings | None = None) -> Provenance:
    """What a run of `spec` is made from: the commit and dirty flag of the spec's repository (none outside a git
    checkout), the digests of the spec and of every kernel source and header, the versions of the driver,
    NVRTC, ptxas (when nvcc builds a kernel), cuBLAS and the Python packages, each GPU of `environment_` (as
    `environment` and the runners on several GPUs fill it), and whether `settings` locked the clocks."""
    folder = (spec.path.resolve().parent if spec.path is not None
              else spec.kernels[0].source.resolve().parent if spec.kernels else None)
    commit, dirty = git_state(folder) if folder is not None else (None, None)
    root = None
    if commit is not None:
        top = _git(folder, "rev-parse", "--show-toplevel")
        root = Path(top.strip()).resolve() if top else None
    elif spec.kernels and spec.kernels[0].project is not None:
        root = spec.kernels[0].project.resolve()
    sources, headers, kernels = file_digests(spec, root)
    try:
        spec_digest = file_sha256(spec.path) if spec.path is not None else None
    except OSError:
        spec_digest = None
    versions = {"driver": _nvml_driver_release(), "cuda_driver_api": environment_.get("driver_version"),
                "nvrtc": environment_.get("nvrtc_version"), "ptxas": _ptxas_version(spec),
                "cublas": _cublas_version(), "cuda_bindings": environment_.get("cuda_bindings"),
                "nvmath_python": environment_.get("nvmath_python"), "driver_gemm": environment_.get("driver_gemm")}
    # a run on several GPUs holds each GPU's environment under "gpus", its device object under "device"
    devices = [gpu.get("device") for gpu in environment_.get("gpus") or [] if isinstance(gpu.get("device"), dict)]
    devices = devices or [environment_.get("device") or {}]
    gpus = [{"name": device.get("name"), "uuid": device.get("uuid")} for device in devices if device]
    locked = settings.locked_sm_clock_mhz if settings is not None else None
    return Provenance(commit=commit, dirty=dirty, spec_sha256=spec_digest, sources=sources, headers=headers,
                      kernels=kernels, versions={k: str(v) for k, v in versions.items() if v is not None},
                      gpus=gpus or None, clocks_locked=bool(locked))
