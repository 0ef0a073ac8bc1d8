"""The disk cache of compiled CUBINs, kept apart from compiling.

The key covers everything that changes the binary (source and every local header it can include,
by path relative to its project and digest, file name, name expressions, options, architecture,
NVRTC version) and no absolute path, so a cache can move. An entry is one file (magic line, SHA-256
of the rest, a JSON header, the image), written to a temporary file and renamed into place; one
whose checksum fails, that is not a regular file of bounded size, or whose header does not name
its key is ignored and rewritten (what is not a file is removed first). What the header means, and
whether its values are of the types it writes, is `compile`'s business. ``DRIVER_GEMM_CACHE_DIR``
moves it (default ``$XDG_CACHE_HOME/driver-gemm`` where that is an absolute path, or ``~/.cache/driver-gemm``; a
``~user`` whose home cannot be found is a `UsageError` naming the variable; a value of only whitespace is as unset;
a relative one is under the current folder, said in a warning); an empty ``$HOME`` is as unset;
``DRIVER_GEMM_NO_CACHE=1`` turns it off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Mapping

from ..errors import UsageError
from ..output_files import OutputError, reason_of, write_file
from .regular_files import FileTooLarge, NotRegularFile, read_regular_file

_MAGIC = b"driver-gemm-cubin-v1\n"
FORMAT_VERSION = 11  # the PTX facts kept beside a CUBIN hold each kernel's vector and wide scalar accesses and the
#                      multiples it tests, its cluster uses and bound, its tensor-core instructions' input types, the
#                      conversions and global writes it makes, the setmaxnreg lines ptxas logged as ignored, and the
#                      types of its module's scalar constants
MAX_ENTRY_BYTES = 320 << 20   # an entry is read only as a regular file of at most this size (a CUBIN is < 256 MiB)
_log = logging.getLogger(__name__)


def enabled() -> bool:
    setting = os.environ.get("DRIVER_GEMM_NO_CACHE", "").strip().lower()
    if setting in ("1", "true", "yes", "on"):
        return False
    if setting not in ("", "0", "false", "no", "off"):   # a typo must not leave the cache on unsaid
        raise UsageError(f"is 1, true, yes or on to turn the disk caches off (0, false, no, off or unset to keep "
                         f"them), got {os.environ['DRIVER_GEMM_NO_CACHE'].strip()!r}", field="DRIVER_GEMM_NO_CACHE")
    return _usable(directory())


def directory() -> Path:
    configured = os.environ.get("DRIVER_GEMM_CACHE_DIR")
    if configured and configured.strip():    # only whitespace is as unset, as for DRIVER_GEMM_NO_CACHE
        try:
            folder = Path(configured).expanduser()
        except RuntimeError:   # ~user of a user this machine does not know, or ~ where no home can be found
            raise UsageError(f"{configured!r} starts with ~, and the home folder it names cannot be found here (no "
                             "such user, or no $HOME)", field="DRIVER_GEMM_CACHE_DIR",
                             hint="give the folder's full path") from None
        return folder if folder.is_absolute() else _relative_cache(folder)
    # The XDG Base Directory spec makes a relative XDG_CACHE_HOME invalid, to be ignored: it would put a cache in
    # each folder the command runs in (as a relative $HOME would, `_home_cache`).
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else _home_cache()
    return base / "driver-gemm" if base else _temporary_cache()


_said_relative: set[str] = set()


def _relative_cache(folder: Path) -> Path:
    """A relative ``DRIVER_GEMM_CACHE_DIR``, under the folder the command runs in (made absolute, so that a
    command's child processes share it), said once a process: a command run elsewhere gets another cache. Where the
    current folder is gone, `folder` itself, which the first write says cannot be written."""
    try:
        absolute = Path(os.path.abspath(folder))
    except OSError:
        return folder
    if str(folder) not in _said_relative:
        _said_relative.add(str(folder))
        _log.warning("DRIVER_GEMM_CACHE_DIR is the relative path %s: the disk caches are in %s, under the folder "
                     "this command runs in (a command run in another folder has caches of its own); give an "
                     "absolute path for one cache wherever commands run", folder, absolute)
    return absolute


def _home_cache() -> Path | None:
    """``~/.cache``, or None without a home directory (no $HOME and no passwd entry, or a relative one). An empty
    $HOME is as unset (the passwd entry's home), never the root folder that Python's expansion of ``~`` makes of
    it."""
    try:
        if not os.environ.get("HOME", "unset").strip():
            import pwd   # here, not at the top: POSIX only, and needed only for an empty $HOME
            home = Path(pwd.getpwuid(os.getuid()).pw_dir)
        else:
            home = Path.home()
    except (RuntimeError, KeyError, OSError, ImportError):
        return None
    return home / ".cache" if home.is_absolute() else None


def _temporary_cache() -> Path:
    """Without a home directory: a folder of this user's own under the temporary folder."""
    return Path(tempfile.gettempdir()) / f"driver-gemm-cache-{os.getuid()}"


_refused_folders: dict[str, bool] = {}


def _usable(folder: Path) -> bool:
    """The temporary folder's cache only when this user owns it and nobody else can write it (else a note, once).

    Another user could make that folder first and fill it with images this
    process would load; a cache under a home or a configured folder is the
    user's own choice and is not checked.
    """
    if folder != _temporary_cache():
        return True
    key = str(folder)
    if key not in _refused_folders:
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
            status = os.lstat(folder)
            _refused_folders[key] = not (stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid()
                                         and not status.st_mode & 0o022)
        except OSError:
            _refused_folders[key] = True
        if _refused_folders[key]:
            _log.warning("no disk cache: there is no home directory, and %s is not a folder of this user's alone "
                         "(set DRIVER_GEMM_CACHE_DIR to keep one)", folder)
    return not _refused_folders[key]


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


_unwritable_folders: set[str] = set()
_stuck_entries: set[str] = set()


def write_entry(target: Path, magic: bytes, body: bytes) -> None:
    """`body` after `magic` and its SHA-256, written to a temporary file and renamed onto `target`.

    The format of every file under the cache directory. A reader never
    sees half an entry, and one that cannot be written is skipped: a cache
    is never fatal. The first failure under a folder is a warning naming the
    entry and why (the whole cache when its own folder cannot be written,
    else the entry's folder, the others still written); later ones are debug
    lines. Something other than a regular file at `target` is removed first
    (`_clear_for_entry`), and an entry's folder that is no usable folder is
    made again (`_repair_folder`).
    """
    try:
        if not _repair_folder(target.parent) or not _clear_for_entry(target):
            return
        write_file(target, magic + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    # An OSError or a UnicodeError (a name this file-system encoding cannot hold) met outside the write itself is
    # as much a cache that cannot be written: never fatal either.
    except (OutputError, OSError, UnicodeError) as error:
        said = str(error) if isinstance(error, OutputError) else \
            f"{target}: not written ({reason_of(error) if isinstance(error, OSError) else error})"
        _log.debug("cache entry not written: %s", said)
        root = directory()
        if _takes_files(root) and root in target.parents and target.parent != root:
            folder = str(target.parent)
            if folder not in _unwritable_folders:   # said once: the folder's other entries fail alike
                _unwritable_folders.add(folder)
                _log.warning("a disk cache entry cannot be written: %s; entries in the cache's other folders "
                             "are still written (make %s writable, or remove it)", said, folder)
            return
        if str(root) not in _unwritable_folders:   # said once: a cache folder that cannot take one entry takes none
            _unwritable_folders.add(str(root))
            _log.warning("the disk cache in %s cannot be written (%s): going on without it (set "
                         "DRIVER_GEMM_CACHE_DIR to a folder that can be written, or DRIVER_GEMM_NO_CACHE=1)",
                         root, said)


def _takes_files(folder: Path) -> bool:
    """Whether `folder` is a folder this process can create files in (where the whole cache is not refused)."""
    try:
        return os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK)
    except (OSError, ValueError):
        return False


def _repair_folder(folder: Path) -> bool:
    """Whether `folder`, the folder of an entry under the cache's own (``ab/`` of ``ab12....cubin``), can take the
    entry: absent, a folder this process can write in, or made one here.

    Anything else there (a file, a dangling link or a loop of links, a folder with no permission to write or
    search) would refuse its entries on every run, their kernels compiled again each time: it is removed (a
    folder with its entries, which are the cache's own; a link itself, never what it names) and made again. One
    that cannot be is a warning naming it, once. A folder outside the cache's folder is never touched.
    """
    if directory() not in folder.parents:
        return True
    try:
        mode = os.lstat(folder).st_mode
    except OSError:          # absent, or the cache's folder cannot be read: the write says which
        return True
    try:
        if stat.S_ISDIR(os.stat(folder).st_mode) and os.access(folder, os.W_OK | os.X_OK):
            return True
    except OSError:          # a dangling link, a loop of links: repaired below
        pass
    try:
        try:
            if stat.S_ISDIR(mode):
                os.chmod(folder, 0o700)     # its entries can be listed and removed only with these permissions
                shutil.rmtree(folder)
            else:
                os.unlink(folder)
        except FileNotFoundError:           # another process writing the cache repaired it first
            pass
        folder.mkdir(exist_ok=True)
        return True
    except OSError as error:
        kind = "a folder that cannot be written" if stat.S_ISDIR(mode) else "not a usable folder"
        _warn_stuck(folder, "the disk cache folder %s is %s and cannot be made again (%s): remove it, or the entries "
                    "it would hold are made again on every run; entries in the cache's other folders are still "
                    "written", kind, error)
        return False


def _clear_for_entry(target: Path) -> bool:
    """Whether `target` can take a new entry: absent or a regular file, or made absent here.

    A folder, a FIFO, a device or a symbolic link at an entry's name is none
    of the cache's entries: left there, it would refuse every write and its
    kernel would be compiled again on every run. It is removed (a link
    itself, never the file it names); one that cannot be removed (a folder
    holding files) is a warning naming it, once.
    """
    try:
        mode = os.lstat(target).st_mode
    except OSError:          # absent, or its folder cannot be read: the write says which
        return True
    if stat.S_ISREG(mode):
        return True
    try:
        if stat.S_ISDIR(mode):
            os.rmdir(target)
        else:
            os.unlink(target)
        return True
    except OSError as error:
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        _warn_stuck(target, "the disk cache entry %s is %s and cannot be removed (%s): remove it, or what it would "
                    "hold is made again on every run", kind, error)
        return False


def _warn_stuck(path: Path, message: str, kind: str, error: OSError) -> None:
    """`message` (of `path`, its `kind` and the reason of `error`) logged once a process for each `path` the cache
    cannot repair: every write under it meets it again."""
    if str(path) not in _stuck_entries:
        _stuck_entries.add(str(path))
        _log.warning(message, path, kind, reason_of(error))


def read_entry(path: Path, magic: bytes) -> bytes | None:
    """The body of an entry `write_entry` made, or None when it is absent, unreadable, of another kind or corrupt."""
    try:
        blob = read_regular_file(path, MAX_ENTRY_BYTES)
    except (OSError, NotRegularFile, FileTooLarge):   # a FIFO, a link to /dev/zero, a huge file: not an entry
        return None
    except UnicodeError:     # a name the file-system encoding cannot hold: no entry can be there
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
