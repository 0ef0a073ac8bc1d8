"""Reading a file the tool did not write (a source, a header, a cache entry) without trusting what it is.

A FIFO opened for reading waits for a writer, a device such as /dev/zero never ends, and a huge
file fills memory: each is refused before a byte is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import DriverGemmError


class NotRegularFile(DriverGemmError):
    """A path that is a FIFO, a device, a socket or a folder; the message says which."""


class FileTooLarge(DriverGemmError):
    """A file over the limit; args[0] is its size (or the bytes read before the limit was passed)."""


def read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes; `NotRegularFile` or `FileTooLarge` otherwise.

    Opened with O_NONBLOCK (a FIFO opens at once instead of waiting for a
    writer) and checked with fstat before reading, so what is checked is
    what is read; at most `limit` + 1 bytes are read even if it grows.
    """
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise NotRegularFile(_file_kind(status.st_mode))
        if status.st_size > limit:
            raise FileTooLarge(status.st_size)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(descriptor, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise FileTooLarge(size)
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return kind
    return "not a regular file"
