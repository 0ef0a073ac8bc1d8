"""The child process of a bounded NVRTC compile (`bounded`): reads the compile's arguments, compiles, answers.

Run as ``python -m driver_gemm.cuda.compile_child MEMORY_BYTES``: the address space is capped first, then the
pickled keyword arguments of `compile.compile_program` are read from stdin and the pickled outcome written to
stdout: ``("ok", Cubin)``, ``("error", message, log, options)`` or ``("memory",)``. A cap too small for NVRTC's
library to be mapped at all is ``("memory",)`` too: the library loads at the first NVRTC call, under the cap.
"""

from __future__ import annotations

import errno
import pickle
import resource
import sys

from ..errors import CompileError

# What the dynamic loader says when a shared library's segments do not fit the address space left (glibc), and
# what an mmap refused for want of memory says.
_NO_ROOM_TO_LOAD = ("failed to map segment from shared object", "cannot allocate memory")


def out_of_memory(error: BaseException) -> bool:
    """Whether `error`, or an error it was raised from, says that memory ran out: a `MemoryError`, an ENOMEM, or
    a library that could not be mapped (cuda-bindings wraps the loader's OSError in a RuntimeError)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, MemoryError) or (isinstance(error, OSError) and error.errno == errno.ENOMEM):
            return True
        if any(text in str(error).lower() for text in _NO_ROOM_TO_LOAD):
            return True
        error = error.__cause__ or error.__context__
    return False


def main() -> int:
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    request = pickle.load(sys.stdin.buffer)
    try:
        # lazy: imported after the memory cap, so that NVRTC's library is loaded under it
        from .compile import compile_program

        try:
            outcome: tuple = ("ok", compile_program(**request))
        except CompileError as exc:
            outcome = ("error", str(exc), exc.log, tuple(exc.options))
    except Exception as exc:   # anything else is the parent's to report from this process's stderr
        if not out_of_memory(exc):
            raise
        outcome = ("memory",)
    pickle.dump(outcome, sys.stdout.buffer)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
