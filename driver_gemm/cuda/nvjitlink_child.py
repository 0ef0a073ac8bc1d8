"""The child process of a PTX check through nvJitLink (`ptx_check`): links the PTX for one target, answers.

Run as ``python -m driver_gemm.cuda.nvjitlink_child ARCH MEMORY_BYTES``: the address space is capped first (0: no
cap), the PTX text is read from stdin, and one JSON object is written to stdout: ``{"found": false, "reason": ...}``
where no nvJitLink library is found, else ``{"found": true, "version": [major, minor], "status": ..., "log": ...}``
with ``status`` ``"ok"``, ``"refused"`` (the error log says why) or ``"arch"`` (nvJitLink does not know ARCH).
"""

from __future__ import annotations

import json
import resource
import sys


def answer(arch: str, ptx: bytes) -> dict:
    """nvJitLink's verdict on `ptx` linked for `arch` (``-arch=ARCH``), as the JSON object the module describes."""
    # lazy: the bindings load libnvJitLink (through cuda.pathfinder) only in this child, under its memory cap
    from cuda.bindings import nvjitlink

    try:
        version = list(nvjitlink.version())
    except RuntimeError as exc:     # cuda.pathfinder's DynamicLibNotFoundError: no libnvJitLink in a wheel or system
        return {"found": False, "reason": str(exc).splitlines()[0]}
    try:
        handle = nvjitlink.create(1, [f"-arch={arch}"])
    except nvjitlink.nvJitLinkError as exc:
        return {"found": True, "version": version, "status": "arch", "log": str(exc)}
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, ptx, len(ptx), "kernel.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError:
            log = bytearray(nvjitlink.get_error_log_size(handle))
            nvjitlink.get_error_log(handle, log)
            return {"found": True, "version": version, "status": "refused",
                    "log": bytes(log).rstrip(b"\x00").decode(errors="replace")}
        return {"found": True, "version": version, "status": "ok", "log": ""}
    finally:
        nvjitlink.destroy(handle)


def main() -> int:
    arch = sys.argv[1]
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    ptx = sys.stdin.buffer.read()
    sys.stdout.write(json.dumps(answer(arch, ptx)))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
