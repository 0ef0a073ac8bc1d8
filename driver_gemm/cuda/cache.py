"""The disk cache of compiled CUBINs, kept apart from compiling.

The key covers everything that changes the binary: the source and the local
headers it includes, the file name (it is in the line table), the name
expressions, the options, the architecture and the NVRTC version; no absolute
path, so a cache directory can move between checkouts and machines. An entry
is one file: a magic line, the SHA-256 of the rest, a JSON header, the image.
It is written to a temporary file and renamed into place, so readers never see
half an entry; an entry whose checksum fails is ignored and rewritten.

``DRIVER_GEMM_CACHE_DIR`` moves the cache (default: ``$XDG_CACHE_HOME/driver-gemm``
or ``~/.cache/driver-gemm``); ``DRIVER_GEMM_NO_CACHE=1`` turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    from .compile import Cubin

_MAGIC = b"driver-gemm-cubin-v1\n"
FORMAT_VERSION = 1


def enabled() -> bool:
    return os.environ.get("DRIVER_GEMM_NO_CACHE", "").strip().lower() not in ("1", "true", "yes", "on")


def directory() -> Path:
    configured = os.environ.get("DRIVER_GEMM_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "driver-gemm"


def key_for(*, source: str, name: str, headers: Mapping[str, str], instances, options, arch: str,
            nvrtc_version) -> str:
    """The hex digest naming the cache entry of one compilation."""
    description = json.dumps({
        "format": FORMAT_VERSION,
        "source": source,
        "name": name,
        "headers": dict(sorted(headers.items())),
        "instances": sorted(instances),
        "options": list(options),
        "arch": arch,
        "nvrtc": list(nvrtc_version),
    }, sort_keys=True)
    return hashlib.sha256(description.encode()).hexdigest()


def path_for(key: str) -> Path:
    return directory() / key[:2] / f"{key}.cubin"


def load(key: str) -> "Cubin | None":
    """The cached compilation for `key`, or None when absent, disabled or corrupt."""
    if not enabled():
        return None
    try:
        blob = path_for(key).read_bytes()
    except OSError:
        return None
    return _decode(blob)


def store(key: str, cubin: "Cubin") -> None:
    """Write an entry atomically; a cache that cannot be written is skipped, never fatal."""
    if not enabled():
        return
    target = path_for(key)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".cubin")
        with os.fdopen(handle, "wb") as out:
            out.write(_encode(cubin))
        os.replace(temporary, target)
    except OSError:
        try:
            os.unlink(temporary)  # type: ignore[possibly-undefined]
        except (OSError, NameError):
            pass


def _encode(cubin: "Cubin") -> bytes:
    header = json.dumps({
        "arch": cubin.arch,
        "lowered_names": dict(cubin.lowered_names),
        "resources": {name: r.as_dict() for name, r in cubin.resources.items()},
        "log": cubin.log,
        "options": list(cubin.options),
        "nvrtc_version": list(cubin.nvrtc_version),
        "compile_seconds": cubin.compile_seconds,
    }).encode()
    body = len(header).to_bytes(8, "little") + header + cubin.image
    return _MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def _decode(blob: bytes) -> "Cubin | None":
    from .compile import Cubin, KernelResources

    if not blob.startswith(_MAGIC):
        return None
    rest = blob[len(_MAGIC):]
    digest, _, body = rest.partition(b"\n")
    if hashlib.sha256(body).hexdigest().encode() != digest or len(body) < 8:
        return None
    size = int.from_bytes(body[:8], "little")
    try:
        header = json.loads(body[8:8 + size])
    except ValueError:
        return None
    return Cubin(
        image=body[8 + size:],
        arch=header["arch"],
        lowered_names=header["lowered_names"],
        resources={name: KernelResources(**r) for name, r in header["resources"].items()},
        log=header["log"],
        options=tuple(header["options"]),
        nvrtc_version=tuple(header["nvrtc_version"]),
        compile_seconds=header["compile_seconds"],
        from_cache=True,
    )
