"""The child process of a bounded NVRTC compile (`bounded`): reads the compile's arguments, compiles, answers.

Run as ``python -m driver_gemm.cuda.compile_child MEMORY_BYTES``: the address space is capped first, then the
pickled keyword arguments of `compile.compile_program` are read from stdin and the pickled outcome written to
stdout: ``("ok", Cubin)``, ``("error", message, log, options)`` or ``("memory",)``.
"""

from __future__ import annotations

import pickle
import resource
import sys

from ..errors import CompileError


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
    except MemoryError:
        outcome = ("memory",)
    pickle.dump(outcome, sys.stdout.buffer)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
