"""The disk cache of compiled CUBINs, kept apart from compiling.

The key covers everything that changes the binary (source and local headers, file name, name
expressions, options, architecture, NVRTC version) and no absolute path, so a cache can move. An
entry is one file (magic line, SHA-256 of the rest, a JSON header, the image), written to a
temporary file and renamed into place; one whose checksum fails is ignored and rewritten. What the
header means is `compile`'s business. ``DRIVER_GEMM_CACHE_DIR`` moves it (default
``$XDG_CACHE_HOME/driver-gemm`` or ``~/.cache/driver-gemm``); ``DRIVER_GEMM_NO_CACHE=1`` turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Mapping

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


def load(key: str) -> tuple[dict, bytes] | None:
    """The cached header and image for `key`, or None when absent, disabled or corrupt."""
    if not enabled():
        return None
    body = read_entry(path_for(key), _MAGIC)
    return None if body is None else _decode(body)


def store(key: str, header: dict, image: bytes) -> None:
    """Write an entry atomically; a cache that cannot be written is skipped, never fatal."""
    if enabled():
        write_entry(path_for(key), _MAGIC, _encode(header, image))


def write_entry(target: Path, magic: bytes, body: bytes) -> None:
    """`body` after `magic` and its SHA-256, written to a temporary file and renamed onto `target`.

    The format of every file under the cache directory. A reader never
    sees half an entry, and one that cannot be written is skipped: a cache
    is never fatal.
    """
    temporary = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=target.suffix)
        with os.fdopen(handle, "wb") as out:
            out.write(magic + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
        os.replace(temporary, target)
    except OSError:
        if temporary is not None:
            try:
                os.unlink(temporary)
            except OSError:
                pass


def read_entry(path: Path, magic: bytes) -> bytes | None:
    """The body of an entry `write_entry` made, or None when it is absent, unreadable, of another kind or corrupt."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    if not blob.startswith(magic):
        return None
    digest, _, body = blob[len(magic):].partition(b"\n")
    return body if hashlib.sha256(body).hexdigest().encode() == digest else None


def _encode(header: dict, image: bytes) -> bytes:
    encoded = json.dumps(header).encode()
    return len(encoded).to_bytes(8, "little") + encoded + image


def _decode(body: bytes) -> tuple[dict, bytes] | None:
    if len(body) < 8:
        return None
    size = int.from_bytes(body[:8], "little")
    try:
        header = json.loads(body[8:8 + size])
    except ValueError:
        return None
    return (header, body[8 + size:]) if isinstance(header, dict) else None
