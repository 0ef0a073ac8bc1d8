"""What a run was made from (`Provenance`): the commit, the digests of its files, the versions, GPUs and clocks.

A results file holds it under ``provenance`` so that a number can be traced
back to the exact sources and tools that produced it, and so that `compare`
can say when two runs differ in more than their kernels
(`provenance_differences`). It is filled when a run begins
(`runners.environment.provenance`); older files have none, and what can be
told from their ``environment`` stands in for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .settings import from_known_fields, set_fields_json
from .text import printable, shortened

# The versions a difference in which can move a kernel's time, in the order `provenance_differences` names them.
TOOL_VERSIONS = ("driver", "cuda_driver_api", "nvrtc", "ptxas", "cublas", "cuda_bindings", "nvmath_python",
                 "driver_gemm")
# The most of a version, a GPU's name and UUID or a kernel's name, from a file, that a line of
# `provenance_differences` shows: a file may hold any text there.
_MOST_SHOWN = 100


@dataclass(frozen=True)
class Provenance:
    """Where a run's numbers came from. None means "not known here" and is left out of the file.

    commit, dirty: the git commit of the repository the spec lives in, and
    whether its work tree differed from it (absent outside a git checkout).
    spec_sha256: the spec file's digest. sources, headers: the SHA-256 of every
    kernel source (or prebuilt image) and of every local header its compile
    reads, by path (relative to the repository or project where inside it).
    kernels: per kernel name, one digest over its source and headers, so that
    two runs of "the same kernel" built from different files can be told
    apart. versions: the driver's release, the CUDA version it supports,
    NVRTC, ptxas (when nvcc builds a kernel), cuBLAS, cuda-bindings,
    nvmath-python and driver-gemm. gpus: each GPU's name and UUID.
    clocks_locked: whether the run locked the SM clock (``run --lock-clocks``).
    """

    commit: str | None = None
    dirty: bool | None = None
    spec_sha256: str | None = None
    sources: dict[str, str] | None = None
    headers: dict[str, str] | None = None
    kernels: dict[str, str] | None = None
    versions: dict[str, str] | None = None
    gpus: list[dict[str, str]] | None = None
    clocks_locked: bool | None = None
    other: dict[str, Any] = field(default_factory=dict)   # keys this version does not know, kept as read

    def to_json(self) -> dict[str, Any]:
        """The ``provenance`` object of a results file: the fields that are set, then `other`."""
        return set_fields_json(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "Provenance | None":
        """The record `to_json` wrote (None for None); an unknown key goes to `other`."""
        if data is None:
            return None
        return from_known_fields(cls, data)


def _from_environment(environment: dict) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The versions and GPUs an older file's environment tells (it has no provenance)."""
    versions = {}
    if environment.get("driver_version") is not None:
        versions["cuda_driver_api"] = str(environment["driver_version"])
    for key, name in (("nvrtc_version", "nvrtc"), ("cuda_bindings", "cuda_bindings"),
                      ("nvmath_python", "nvmath_python"), ("driver_gemm", "driver_gemm")):
        if environment.get(key) is not None:
            versions[name] = str(environment[key])
    devices = [gpu.get("device") if isinstance(gpu.get("device"), dict) else gpu
               for gpu in environment.get("gpus") or []] or [environment.get("device") or {}]
    gpus = [{"name": d.get("name"), "uuid": d.get("uuid")} for d in devices if isinstance(d, dict) and d]
    return versions, gpus


def versions_and_gpus(provenance: Provenance | None, environment: dict) -> tuple[dict[str, str], list[dict]]:
    """A run's tool versions and GPUs: its provenance's, completed from its environment."""
    versions, gpus = _from_environment(environment or {})
    if provenance is not None:
        versions.update({k: v for k, v in (provenance.versions or {}).items() if v is not None})
        gpus = provenance.gpus or gpus
    return versions, gpus


def _gpu_text(gpus: list[dict]) -> str:
    return ", ".join(shortened(f"{gpu.get('name') or '?'} {gpu.get('uuid') or ''}".strip(), _MOST_SHOWN)
                     for gpu in gpus) or "unknown"


def provenance_differences(old: tuple[Provenance | None, dict],
                           new: tuple[Provenance | None, dict]) -> tuple[list[str], list[str]]:
    """What differs between two runs, in words, one line each: warnings (GPUs, driver and library versions,
    locked clocks) and notes (kernels of one name built from files with other digests).

    Each of `old` and `new` is a run's (provenance, environment). A version
    known in one run only is not a difference (an older file did not record it).
    The names and versions come from the files: each line is escaped (`printable`).
    """
    old_versions, old_gpus = versions_and_gpus(*old)
    new_versions, new_gpus = versions_and_gpus(*new)
    lines, notes = [], []
    if old_gpus and new_gpus:
        old_ids = sorted(gpu.get("uuid") or gpu.get("name") or "" for gpu in old_gpus)
        new_ids = sorted(gpu.get("uuid") or gpu.get("name") or "" for gpu in new_gpus)
        if old_ids != new_ids:
            lines.append(f"GPU: {_gpu_text(old_gpus)} -> {_gpu_text(new_gpus)}")
    for name in (*TOOL_VERSIONS, *sorted(set(old_versions) - set(TOOL_VERSIONS))):
        before, after = old_versions.get(name), new_versions.get(name)
        if before is not None and after is not None and before != after:
            lines.append(f"{shortened(name.replace('_', '-'), _MOST_SHOWN)}: {shortened(str(before), _MOST_SHOWN)} -> "
                         f"{shortened(str(after), _MOST_SHOWN)}")
    old_provenance, new_provenance = old[0], new[0]
    if old_provenance is not None and new_provenance is not None:
        if old_provenance.clocks_locked is not None and new_provenance.clocks_locked is not None \
                and old_provenance.clocks_locked != new_provenance.clocks_locked:
            lines.append(f"clocks locked: {_yes(old_provenance.clocks_locked)} -> {_yes(new_provenance.clocks_locked)}")
        old_kernels, new_kernels = old_provenance.kernels or {}, new_provenance.kernels or {}
        changed = sorted(name for name in set(old_kernels) & set(new_kernels) if old_kernels[name] != new_kernels[name])
        if changed:
            notes.append("sources differ (by digest) for kernel(s) of the same name: "
                         + ", ".join(shortened(name, _MOST_SHOWN) for name in changed))
    return [printable(line) for line in lines], [printable(note) for note in notes]


def _yes(value: bool) -> str:
    return "yes" if value else "no"
