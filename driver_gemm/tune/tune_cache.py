"""Tuning results that last across runs: a case measured once is not measured again unless asked (``--fresh``).

The key is everything that decides a measurement (the kernel source and the headers it reaches, or a prebuilt
image's bytes; the compiler, with nvcc's version where nvcc builds it; parameters, instances, options, launch
expressions, the cluster, its scheduling, PDL and a cooperative launch, tensor maps, shape, precision, a typed
kernel's product as `driver_gemm.specfile.same_gemm.gemm_properties` lists it (types, storage orders, leading
dimensions, batch, structure, a Gram product and its triangle...), scalars, verify and measure settings, the fill
files and host builders the arguments come from, and the GPU's name, SM count, driver and NVRTC version), and no
path, name or time, so a checkout can move, and a kernel be renamed, and still hit.
Entries live under ``tune/`` beside the CUBIN cache and follow its format and rules
(`driver_gemm.cuda.cache`); ``DRIVER_GEMM_NO_CACHE=1`` turns it off too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Mapping

from ..cuda import cache as cubin_cache
from ..cuda.compile import include_folders, pre_included_files, scan_headers
from ..cuda.nvcc import nvcc_version
from ..results.records import CaseResult
from ..specfile.model import KernelSpec, Shape, Spec
from ..specfile.same_gemm import gemm_properties

_MAGIC = b"driver-gemm-tune-v1\n"
FORMAT_VERSION = 2


def source_digest(path: str | Path, options: tuple[str, ...] = (), project: Path | None = None) -> str:
    """SHA-256 over a kernel source and every local header it reaches (names and texts), looked up as its compile
    looks them up: beside the source, in the folders its `options` add (``-I``) and the files they pre-include."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    digest = hashlib.sha256(path.name.encode() + b"\0" + text.encode() + b"\0")
    # the spec vetted where its headers may be: the scan only reads them
    found = scan_headers(text, str(path), [path.resolve().parent, *include_folders(options)], allow_outside=True,
                         project=project, pre_includes=pre_included_files(options))
    for header, header_text in sorted(found.texts.items()):
        digest.update(header.encode() + b"\0" + header_text.encode() + b"\0")
    return digest.hexdigest()


def image_digest(path: str | Path) -> str:
    """SHA-256 over a prebuilt image (CUBIN, fatbin or PTX) as the loader reads it: its name and bytes."""
    path = Path(path)
    return hashlib.sha256(path.name.encode() + b"\0" + path.read_bytes()).hexdigest()


def code_identity(kernel: KernelSpec) -> dict:
    """What builds the kernel's code: a prebuilt image's digest, or the source's with its compiler (and nvcc's
    version, which the environment does not record: it names NVRTC's)."""
    if kernel.binary is not None:
        return {"image": image_digest(kernel.binary)}
    compiler: list = [kernel.compiler]
    if kernel.compiler == "nvcc":
        compiler.append(list(nvcc_version()))
    return {"source": source_digest(kernel.source, tuple(kernel.options), kernel.project), "compiler": compiler}


def environment_identity(environment: Mapping) -> dict:
    """The part of a run's environment (`RunResult.environment`) that decides a measurement."""
    device = environment.get("device") or {}
    return {"gpu": device.get("name"), "sm_count": device.get("sm_count"),
            "driver": environment.get("driver_version"), "nvrtc": environment.get("nvrtc_version")}


def tuning_key(spec: Spec, kernel: KernelSpec, shape: Shape, environment: Mapping, arch: str,
               buffers: Mapping | None = None) -> str:
    """The hex digest naming the tuning-cache entry of `kernel` on `shape` (see the module's docstring).

    `buffers` are the case's planned device buffers (`CasePlan.buffers`): one filled from a file adds the digest
    of the values it read, so that a table rewritten under the same name is a new key.
    """
    description = {
        "format": FORMAT_VERSION,
        **code_identity(kernel),
        "function": kernel.function,
        "params": dict(sorted(kernel.params.items())),
        "instances": list(kernel.instances),      # which params are template arguments, which launch values
        "options": list(kernel.options),
        "target": kernel.target(arch),
        "launch": {"block": [e.source for e in kernel.block], "grid": [e.source for e in kernel.grid],
                   "shared_bytes": kernel.shared_bytes.source,
                   "signature": [[path, a.name, a.ctype, a.value.source if a.value is not None else None,
                                  *_array_and_buffer(a)] for path, a in kernel.leaf_arguments()],
                   "attributes": _attributes_key(kernel.launch_attributes)},
        **({"memory": [[path, a.name, *_array_and_buffer(a)] for path, a in kernel.memory]}
           if kernel.memory else {}),
        "shape": [shape.M, shape.N, shape.K],
        "precision": kernel.precision,
        **({"epilogue": kernel.epilogue} if kernel.epilogue else {}),   # (absent: the keys of others stay)
        **({"groups": _groups_key(kernel.operands.groups)} if kernel.operands is not None
           and kernel.operands.groups is not None else {}),
        # A typed kernel's product (types, storage orders, structure, a Gram product and its triangle...) decides
        # what it is checked against and which vendor row it is timed beside: what a dispatch table's members share.
        **({"gemm": gemm_properties(kernel, shape, spec.scalars)} if kernel.operands is not None else {}),
        **({"constants": [[a.name, a.ctype, a.value.source if a.value is not None else None, *_array_and_buffer(a)]
                          for a in kernel.constants]} if kernel.constants else {}),
        **({"then": [[launch.function, [e.source for e in launch.block], [e.source for e in launch.grid],
                      launch.shared_bytes.source] for launch in kernel.then]} if kernel.then else {}),
        "scalars": dict(sorted(spec.scalars.items())),
        "verify": dataclasses.asdict(spec.verify),
        "measure": dataclasses.asdict(spec.measure),
        "where": environment_identity(environment),
        **({"fill_files": files} if (files := _fill_file_digests(buffers)) else {}),
        **({"builders": built} if (built := _builder_digests(kernel)) else {}),
    }
    return hashlib.sha256(json.dumps(description, sort_keys=True, default=str).encode()).hexdigest()


def _array_and_buffer(argument) -> list:
    """What else decides a leaf's value: a fixed array's elements, a device buffer's size and fill (nothing for
    a plain scalar, so that the keys of kernels without them stay as they were)."""
    extra = []
    if argument.array:
        extra.append([element.source for element in argument.array])
    if argument.buffer is not None:
        buffer = argument.buffer
        extra.append([buffer.element, buffer.size.source, buffer.fill, [value.source for value in buffer.values]]
                     + ([buffer.file] if buffer.file else [])
                     + ([_scales_key(buffer.scales)] if buffer.scales is not None else [])
                     + ([["bias", buffer.bias]] if buffer.bias is not None else [])
                     + ([_quantized_key(buffer.quantized)] if buffer.quantized is not None else [])
                     + ([["groups", buffer.groups]] if buffer.groups is not None else []))
    if argument.null or argument.alias:
        extra.append(["alias", argument.alias] if argument.alias else ["null"])
    if argument.pointers_to:
        extra.append(["pointers", argument.pointers_to])
    if argument.tensor_map is not None:
        extra.append(_tensor_map_key(argument.tensor_map))
    return extra


def _attributes_key(attributes) -> dict | None:
    """The launch's attributes beyond grid and block: a cluster (its extents as written, non-portable or not), its
    scheduling, PDL and a cooperative launch (None: a plain launch)."""
    if attributes is None:
        return None
    cluster = [extent.source for extent in attributes.cluster] if attributes.cluster is not None else None
    return {"cluster": cluster, "non_portable": attributes.non_portable, "scheduling": attributes.scheduling,
            "pdl": attributes.pdl, "cooperative": attributes.cooperative}


def _tensor_map_key(tensor_map) -> list:
    """A ``tensormap`` argument's description, as the spec wrote it: what the TMA engine is told to copy."""
    def sources(expressions) -> list | None:
        return [expression.source for expression in expressions] if expressions is not None else None

    return ["tensor_map", tensor_map.tensor, sources(tensor_map.box), tensor_map.swizzle, tensor_map.l2_promotion,
            tensor_map.oob_fill, tensor_map.element, sources(tensor_map.dims), sources(tensor_map.strides),
            sources(tensor_map.element_strides), tensor_map.interleave, tensor_map.passing, tensor_map.count]


def _scales_key(scales) -> list:
    """Where a buffer of block scales puts its factors, as the spec wrote it."""
    return ["scales", scales.operand, [extent.source for extent in scales.block], scales.order,
            scales.ld.source if scales.ld is not None else None] + ([scales.storage] if scales.storage else [])


def _groups_key(groups) -> list:
    """A grouped GEMM's groups, as the spec wrote them."""
    rows = groups.rows if isinstance(groups.rows, str) else [e.source for e in groups.rows]
    return [groups.layout, groups.count.source if groups.count is not None else None, rows, groups.align.source]


def _quantized_key(weights) -> list:
    """A part of a quantized B, as the spec wrote it."""
    return ["quantized", weights.part, weights.bits, weights.group.source if weights.group is not None else None,
            weights.along, list(weights.order) if weights.order is not None else None,
            weights.builder.text if weights.builder is not None else None] \
        + ([["major", weights.major]] if weights.major != "row" else []) \
        + ([["codebook", list(weights.codebook)]] if weights.codebook is not None else [])   # others' keys: unchanged


def _builder_digests(kernel: KernelSpec) -> dict[str, list[str]]:
    """The function and the SHA-256 of the file of each parameter's host builder, by parameter name: the bytes the
    kernel is given are theirs, so a builder edited (or another one named) is a new key."""
    return {argument.name: [argument.builder.function,
                            hashlib.sha256(Path(argument.builder.path).read_bytes()).hexdigest()]
            for argument in kernel.signature if argument.builder is not None}


def _fill_file_digests(buffers: Mapping | None) -> dict[str, str]:
    """The SHA-256 of the values each buffer filled from a file or by a builder holds, by buffer name."""
    return {name: hashlib.sha256(plan.data).hexdigest()
            for name, plan in sorted((buffers or {}).items()) if plan.fill in ("file", "built")}


class TuningCache:
    """Known `CaseResult`s by key, on disk; `fresh=True` ignores what is known but still records anew."""

    def __init__(self, directory: str | Path | None = None, *, fresh: bool = False):
        self.directory = Path(directory) if directory is not None else cubin_cache.directory() / "tune"
        self.fresh = fresh
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return cubin_cache.enabled()

    def path_for(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def lookup(self, key: str) -> CaseResult | None:
        """The recorded case for `key`, or None when unknown, corrupt, disabled or `fresh`."""
        found = None if self.fresh or not self.enabled else self._read(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def store(self, key: str, case: CaseResult) -> None:
        """Record a finished case; only a verified, timed one is worth keeping. Never fatal."""
        if not self.enabled or not case.ok or case.timing is None:
            return
        body = json.dumps(case.as_dict(), sort_keys=True).encode()
        cubin_cache.write_entry(self.path_for(key), _MAGIC, body)

    def _read(self, key: str) -> CaseResult | None:
        body = cubin_cache.read_entry(self.path_for(key), _MAGIC)
        if body is None:
            return None
        try:
            return CaseResult.from_dict(json.loads(body))
        except (ValueError, KeyError, TypeError):
            return None
