"""Every file driver-gemm writes, written one way: never onto an input, staged beside its target, renamed into place.

The rules, for results, case logs, winners and dispatch specs, plots, error
maps and cache entries alike:

- **An output is never an input.** `refuse_aliases` compares each file a
  command will write with each file it reads (and with its other outputs): the
  same file is the same device and inode where both exist (hard links and
  symlinks included), the same resolved path otherwise. A command refuses
  such a command line before any work, naming both roles and the path.
- **Atomic replace.** `write_file` and `replacing` stage the new contents in a
  temporary file of a unique name (``.NAME.XXXXXXXX.tmp``, made with
  ``O_EXCL``, so a planted file or link of that name is never written through)
  in the target's own folder, flush and fsync it, and rename it onto the
  target (`os.replace`). A reader, or a second writer, sees the old file or a
  whole new one, never a torn one. On any failure (disk full, the file-size
  limit, permissions, an interrupt) the old file is untouched, the temporary
  file is removed, and `OutputError` names the file and the reason.
- **Symlinks are followed.** A link at the output path, or a folder on the
  way to it, is followed to the file it finally names; that file is replaced
  (the link stays and names the new file). A link that names nothing (a
  dangling link), a loop of links, a path under something that is not a
  folder, an existing folder, device or FIFO, and an existing file marked
  read-only (no write permission, for anyone or for this user) are refused
  with a message saying which. Missing folders are created, never through a
  dangling link. A file with several hard links is replaced under the name
  given; its other names keep the old contents.
- The new file has the permissions of the file it replaces, or the umask's
  for a new file.

`check_output` runs the same checks before a command starts any work (on a
file system with no storage, such as /proc, it creates and removes a file to
find whether one can be made there), and raises `UsageError` (exit 2); the
same problem met at write time, and every failure of the write itself, is
`OutputError` (exit 1). `output_path` refuses a path given on a command line
that names a folder (``out/``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
import threading
from pathlib import Path
from typing import IO, Iterable, Iterator

from .errors import DriverGemmError, UsageError

_REASONS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is used up",
    errno.EFBIG: "the file would exceed the file-size limit (ulimit -f)",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "the file system is read-only",
    errno.ELOOP: "a loop of symbolic links is on the way",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EIO: "an input/output error of the device",
}


class OutputError(DriverGemmError):
    """A file the command writes could not be written; the file that was there before is unchanged (exit 1)."""


class _Refused(Exception):
    """Why a path cannot be written; `check_output` and the writers say it in their own error types."""


def reason_of(error: OSError) -> str:
    """An `OSError` in a few plain words (the errno's, where it is one a write meets)."""
    return _REASONS.get(error.errno, error.strerror or str(error))


def _dangling(path: str) -> str:
    try:
        points_to = os.readlink(path)
    except OSError:
        points_to = "?"
    return f"{path} is a symbolic link to {points_to}, which does not exist"


def _existing_folder(folder: str) -> str:
    """The nearest existing folder at or above `folder`; `_Refused` when a link or a file is in the way."""
    current = folder
    while True:
        try:
            mode = os.stat(current).st_mode
        except FileNotFoundError:
            if os.path.islink(current):
                raise _Refused(f"{_dangling(current)}: nothing can be written under it") from None
            parent = os.path.dirname(current)
            if parent == current:
                raise _Refused(f"{current} does not exist") from None
            current = parent
            continue
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise _Refused(f"{current} is a loop of symbolic links: nothing can be written under it") from None
            if error.errno == errno.ENOTDIR:
                parent = os.path.dirname(current)
                if parent == current:
                    raise _Refused(f"{current}: {reason_of(error)}") from None
                current = parent
                continue
            raise _Refused(f"{current}: {reason_of(error)}") from None
        if not stat.S_ISDIR(mode):
            raise _Refused(f"{current} is not a folder, so nothing can be written under it")
        return current


def _absolute(name: str) -> str:
    """`name` made absolute: as it is when it already is (the current folder is not needed, nor asked for, so a
    removed current folder does not stop an absolute path), else joined to the current folder; `_Refused` naming the
    problem where the current folder no longer exists (removed while the command runs in it)."""
    if os.path.isabs(name):
        return name
    try:
        return os.path.join(os.getcwd(), name)
    except FileNotFoundError:
        raise _Refused("is a relative path, and the current folder no longer exists (it was removed), so it names "
                       "no place: give an absolute path, or run the command in an existing folder") from None


def _resolve(path: Path) -> tuple[Path, os.stat_result | None]:
    """The file a write to `path` replaces (every link followed) and its status (None when new); or `_Refused`."""
    target, status, _ = _resolve_in(path)
    return target, status


def _resolve_in(path: Path) -> tuple[Path, os.stat_result | None, str]:
    """As `_resolve`, with the folder the write creates its file in (or the nearest one of it that exists)."""
    name = os.fspath(path)
    try:
        status = os.stat(name)
    except FileNotFoundError:
        status = None
        if os.path.islink(name):
            raise _Refused(f"is a symbolic link to {os.readlink(name)}, which does not exist: remove the link "
                           "or give another file") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _Refused("is a loop of symbolic links (or under one)") from None
        if error.errno != errno.ENOTDIR:
            raise _Refused(reason_of(error)) from None
        status = None
    if status is not None:
        if stat.S_ISDIR(status.st_mode):
            raise _Refused("is a folder: give the name of a file to write")
        if not stat.S_ISREG(status.st_mode):
            raise _Refused("is not a regular file (a device, a FIFO or a socket): give the name of a file to write")
        if not status.st_mode & 0o222 or not os.access(name, os.W_OK):
            if _on_read_only_file_system(name):
                raise _Refused("is on a read-only file system (mounted read-only, where no permission lets a file "
                               "be written): write elsewhere; it was left as it is")
            raise _Refused("is read-only: make it writable (chmod u+w) or write elsewhere; it was left as it is")
    absolute = _absolute(name)
    target = Path(os.path.realpath(absolute))
    # The folders as named, not as resolved: a dangling link on the way is refused, never made to point somewhere.
    folder = _existing_folder(os.fspath(target.parent) if status is not None else os.path.dirname(absolute))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise _Refused(f"cannot write in {folder} ({_why_not_writable(folder)})")
    return target, status, folder


def _on_read_only_file_system(path: str) -> bool:
    """Whether `path` is on a file system mounted read-only: `os.access` answers no there as for a folder without
    write permission (EROFS), and a change of permissions cannot help."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):      # no statvfs on this system, or no answer: said as permissions
        return False


def _why_not_writable(folder: str) -> str:
    return _REASONS[errno.EROFS] if _on_read_only_file_system(folder) else _REASONS[errno.EACCES]


def _probe(folder: str) -> None:
    """`_Refused` where `folder` is on a file system with no storage (/proc, /sys) and takes no new file.

    Permissions do not tell: such a folder is one its owner may write in, and only creating a file there (and
    removing it) finds that it takes none. Every write of this module creates its temporary file in the target's
    folder, so a folder that takes this one takes the write's. A file system with storage is left to the
    permissions already checked: trying there would change the folder's time for nothing.
    """
    try:
        if os.statvfs(folder).f_blocks:
            return
    except (OSError, AttributeError):      # no statvfs on this system, or no answer: the write will say
        return
    try:
        handle, name = tempfile.mkstemp(dir=folder, prefix=".driver-gemm-check.", suffix=".tmp")
    except OSError as error:
        reason = ("its file system takes no new files (a pseudo-file system, as /proc and /sys are)"
                  if error.errno == errno.ENOENT else reason_of(error))
        raise _Refused(f"cannot be written there: no file can be created in {folder}: {reason}") from None
    os.close(handle)
    with contextlib.suppress(OSError):
        os.unlink(name)


def output_path(text: str | os.PathLike, role: str, example: str) -> Path:
    """An output file's path as the command line gives it, refused (`UsageError`) where it can name no file: empty,
    or ending in a separator, which names a folder (a `Path` would drop the separator and write a file there).
    `example` is a file name the message suggests (``results.json``)."""
    text = os.fspath(text)
    if not text.strip():
        raise UsageError(f"give the path of a file, not {text!r}", field=role)
    separators = tuple(filter(None, (os.sep, os.altsep)))
    if text.endswith(separators):
        named = text.rstrip("".join(separators))
        instead = named if Path(named).suffix else f"{named or '.'}/{example}"    # x.png/ meant x.png; out/ a folder
        raise UsageError(f"{text} ends in a separator, so it names a folder: give the file's path (e.g. {instead})",
                         field=role)
    return Path(text)


def check_output(path: str | Path | None, role: str) -> None:
    """Refuse, before any work, a file that could not be written where it is named (`UsageError`, exit 2).

    `role` is the option that names it (``--json``); the checks are the
    module's (a folder, a device, a read-only file, a dangling link, a loop,
    a folder that cannot be written).
    """
    if path is None:
        return
    try:
        _, _, folder = _resolve_in(Path(path))
        _probe(folder)
    except _Refused as refused:
        raise UsageError(str(refused), where=str(path), field=role) from None


def check_output_folder(path: str | Path | None, role: str) -> None:
    """As `check_output`, for a folder the command fills with files (created when missing)."""
    if path is None:
        return
    name = os.fspath(path)
    try:
        if os.path.lexists(name) and not os.path.isdir(name):
            if os.path.islink(name):
                try:
                    os.stat(name)
                except OSError as error:
                    raise _Refused(_dangling(name) if error.errno == errno.ENOENT
                                   else "is a loop of symbolic links (or under one)") from None
            raise _Refused("is a file, not a folder")
        folder = _existing_folder(_absolute(name))
        if not os.access(folder, os.W_OK | os.X_OK):
            raise _Refused(f"cannot write in {folder} ({_why_not_writable(folder)})")
        _probe(folder)
    except _Refused as refused:
        raise UsageError(str(refused), where=str(path), field=role) from None


def same_file(first: str | Path, second: str | Path) -> bool:
    """True when both name one file: one device and inode where both exist, one resolved path otherwise."""
    try:
        a, b = os.stat(first), os.stat(second)
        return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
    except OSError:
        return os.path.realpath(first) == os.path.realpath(second)


def refuse_aliases(outputs: Iterable[tuple[str, str | Path | None]],
                   inputs: Iterable[tuple[str, str | Path | None]] = ()) -> None:
    """Refuse (`UsageError`, exit 2) an output that is one of the inputs, or the same file as another output.

    Each of `outputs` and `inputs` is ``(role, path)``, the role being how
    the command line names it (``--out``, ``the spec``); a None path is
    skipped. The message names both roles and the path.
    """
    outputs = [(role, Path(path)) for role, path in outputs if path is not None]
    inputs = [(role, Path(path)) for role, path in inputs if path is not None]
    for index, (role, path) in enumerate(outputs):
        for other_role, other in inputs:
            if same_file(path, other):
                raise UsageError(f"is {other_role} as well as {role}: writing it would destroy what the command "
                                 f"reads; give {role} another file", where=str(path), field=role)
        for other_role, other in outputs[:index]:
            if same_file(path, other):
                raise UsageError(f"is named by both {other_role} and {role}: one would overwrite the other; give "
                                 "each its own file", where=str(path), field=role)


_umask_lock = threading.Lock()


def _current_umask() -> int:
    """The process's umask as it is now, read each time a file is written, never kept: the program that embeds this
    one may change it at any time (tightening it before writing results), and a file must get the umask of the
    moment it is made.

    It is read where Linux shows it (``Umask:`` in /proc/self/status), which changes nothing. `os.umask` can only
    read the umask by setting another one and putting it back, and the umask is the whole process's: a file any
    other thread creates between the two calls would get the stand-in's mode. That call is only the fallback where
    /proc does not show it (another system, /proc not mounted), under a lock so that at least this module's own
    writers never read each other's stand-in.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _new_file_mode() -> int:
    return 0o666 & ~_current_umask()


@contextlib.contextmanager
def replacing(path: str | Path, *, binary: bool = False) -> Iterator[IO]:
    """A file to write the new contents of `path` into; on a clean exit it replaces `path` atomically.

    The module's rules apply: the temporary file lies in the target's folder
    under a unique name, is flushed and fsynced, then renamed onto the
    target. On any exception (an `OSError` of the write becomes
    `OutputError`, naming `path` and the reason; anything else is raised as
    it is) the temporary file is removed and the old file is untouched.
    """
    shown = str(path)
    try:
        target, status = _resolve(Path(path))
    except _Refused as refused:
        raise OutputError(f"{shown}: not written: {refused}") from None
    kept = "the file there before is unchanged" if status is not None else "nothing was written there"
    temporary = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:120]}.", suffix=".tmp")
        with os.fdopen(handle, "wb" if binary else "w",  # type: ignore[call-overload]  # typeshed types each mode alone
                       **({} if binary else {"encoding": "utf-8"})) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, stat.S_IMODE(status.st_mode) if status is not None else _new_file_mode())
        os.replace(temporary, target)
        temporary = None
    except OSError as error:
        raise OutputError(f"{shown}: not written ({reason_of(error)}); {kept}") from None
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
    _sync_folder(target.parent)


def write_file(path: str | Path, data: str | bytes) -> Path:
    """Replace `path` with `data` (text as UTF-8) by the module's rules; `path` back. `OutputError` on failure."""
    with replacing(path, binary=isinstance(data, bytes)) as out:
        out.write(data)
    return Path(path)


def _sync_folder(folder: Path) -> None:
    """The rename made durable too (best effort: some file systems cannot fsync a folder)."""
    with contextlib.suppress(OSError):
        handle = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)


class AppendOnlyFile:
    """A file that grows by whole records (a case log): each one written in one call, flushed and fsynced.

    Opened at the first record (following a symlink as the module says; a
    torn last line of an earlier writer cut first), so that a command that
    writes nothing leaves no file. A record that cannot be written (disk
    full, the file-size limit) is cut off again, so the file still ends with
    its last whole record, and `OutputError` says how many are kept.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._handle: int | None = None
        self.records = 0

    def _open(self) -> int:
        try:
            target, _ = _resolve(self.path)
        except _Refused as refused:
            raise OutputError(f"{self.path}: not written: {refused}") from None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _drop_torn_tail(target)
            return os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as error:
            raise OutputError(f"{self.path}: not written ({reason_of(error)})") from None

    def append(self, record: str) -> None:
        """Write `record` (one line, newline included) at the end of the file, whole or not at all."""
        if self._handle is None:
            self._handle = self._open()
        data = record.encode("utf-8")
        size = os.fstat(self._handle).st_size
        try:
            written = 0
            while written < len(data):
                written += os.write(self._handle, data[written:])
            os.fsync(self._handle)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.ftruncate(self._handle, size)
            raise OutputError(f"{self.path}: a record was not appended ({reason_of(error)}); the file keeps the "
                              f"{self.records} written before it in this command, and what it held") from None
        self.records += 1

    def close(self) -> None:
        if self._handle is not None:
            os.close(self._handle)
            self._handle = None


def _drop_torn_tail(path: Path) -> None:
    """Make a file end with a whole line, so that appended lines start clean: a last line without its newline
    that is a whole JSON record (its writer stopped between the two) gets the newline, as the readers count it a
    finished line; a torn one (its writer was killed mid-line: not JSON) is cut, as the readers skip it."""
    try:
        with open(path, "rb+") as handle:
            size = handle.seek(0, os.SEEK_END)
            if not size:
                return
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return
            handle.seek(0)
            data = handle.read()
            start = data.rfind(b"\n") + 1
            if _whole_json(data[start:]):
                handle.seek(0, os.SEEK_END)
                handle.write(b"\n")
            else:
                handle.truncate(start)
    except FileNotFoundError:
        pass


def _whole_json(line: bytes) -> bool:
    """Whether `line` is one whole JSON value in UTF-8 (a record whose newline alone is missing)."""
    try:
        json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):    # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return False
    return bool(line.strip())
