"""Where NVRTC finds the headers a kernel includes besides its own: the CUDA toolkit's, and stand-ins.

NVRTC's wheel ships no headers at all: a kernel that includes ``<cuda_fp16.h>``,
``<mma.h>``, ``<cuda/pipeline>`` or ``<cuda_runtime.h>`` compiles only with the
toolkit's include folder on its search path, and one that includes ``<cstdio>``,
``<cassert>`` or ``<cstdint>`` (as most kernel files written for nvcc do) not
even then, because NVRTC has no C library. So every NVRTC compile searches, after
the kernel's own folder and the spec's ``-I`` options:

1. the CUDA toolkit's headers (``include`` and its ``cccl`` folder), found by
   ``cuda.pathfinder`` ($CUDA_HOME/$CUDA_PATH, the CUDA wheels, /usr/local/cuda)
   or, without it, $CUDA_HOME, $CUDA_PATH and /usr/local/cuda;
2. driver-gemm's own stand-ins (``nvrtc_headers/``): the C library headers,
   giving the fixed-width integer types and limits (the rest of them NVRTC has
   built in), and empty host-only headers (``<vector>``, ``<cublas_v2.h>``...)
   so that a kernel file that includes them for its host runner still compiles.

Both enter the cache key by what they are (the toolkit's version, the
stand-ins' digest), not by where they are.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

STAND_INS = Path(__file__).resolve().parent / "nvrtc_headers"
_CUDART_VERSION = re.compile(r"#define\s+CUDART_VERSION\s+(\d+)")

# Headers that come with the CUDA toolkit, by name or by folder: a kernel including one needs the toolkit.
TOOLKIT_HEADERS = ("cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "cuda_fp6.h", "cuda_fp4.h", "mma.h",
                   "cuda_pipeline.h", "cuda_awbarrier.h", "cuda_runtime.h", "cuda_runtime_api.h", "cuda.h",
                   "cooperative_groups.h", "vector_types.h", "sm_", "crt/")
TOOLKIT_FOLDERS = ("cuda/", "cub/", "thrust/", "nv/", "cooperative_groups/")


@functools.lru_cache(maxsize=1)
def toolkit_include_dirs() -> tuple[Path, ...]:
    """The CUDA toolkit's header folders (``include``, then ``include/cccl`` where it exists); () when none."""
    found: list[Path] = []
    try:
        from cuda import pathfinder
        for library in ("cudart", "cccl"):
            try:
                folder = pathfinder.find_nvidia_header_directory(library)
            except Exception:   # a version of cuda.pathfinder that does not know the library
                folder = None
            if folder:
                found.append(Path(folder))
    except ImportError:
        pass
    if not found:
        roots = [os.environ.get(name) for name in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
        for root in filter(None, roots):
            include = Path(root) / "include"
            if (include / "cuda_fp16.h").is_file():
                found = [include] + ([include / "cccl"] if (include / "cccl").is_dir() else [])
                break
    return tuple(dict.fromkeys(path.resolve() for path in found if path.is_dir()))


@functools.lru_cache(maxsize=1)
def toolkit_version() -> str:
    """The CUDA runtime version the toolkit's headers declare (``13000``), ``none`` without a toolkit."""
    for folder in toolkit_include_dirs():
        header = folder / "cuda_runtime_api.h"
        if header.is_file():
            match = _CUDART_VERSION.search(header.read_text(errors="replace"))
            if match:
                return match.group(1)
    return "none"


@functools.lru_cache(maxsize=1)
def stand_ins_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(STAND_INS.iterdir()):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def search_options() -> tuple[str, ...]:
    """The NVRTC options that put the toolkit's headers and the stand-ins on the search path, in that order."""
    return tuple(f"--include-path={folder}" for folder in (*toolkit_include_dirs(), STAND_INS))


def cache_tokens() -> tuple[str, ...]:
    """What the search path adds to a compile's cache key: the toolkit's version and the stand-ins' digest."""
    return (f"cuda-toolkit-headers={toolkit_version()}", f"driver-gemm-stand-ins={stand_ins_digest()}")


def is_toolkit_header(name: str) -> bool:
    return name.startswith(TOOLKIT_FOLDERS) or name.startswith(TOOLKIT_HEADERS)


def missing_header_hint(name: str) -> str:
    """What to do about a header NVRTC could not open, in one sentence."""
    if is_toolkit_header(name):
        if not toolkit_include_dirs():
            return (f"<{name}> comes with the CUDA toolkit, and no toolkit headers were found (looked through "
                    "cuda.pathfinder, $CUDA_HOME, $CUDA_PATH and /usr/local/cuda): install the toolkit (or the "
                    "nvidia-cuda-runtime and nvidia-cuda-cccl wheels), or set CUDA_HOME")
        return (f"<{name}> is not in the CUDA toolkit found at {toolkit_include_dirs()[0]}: a newer toolkit may "
                "have it, or give its folder in the kernel's options: [-I FOLDER]")
    return (f"{name} is not beside the kernel source, in the CUDA toolkit, or among driver-gemm's stand-ins for "
            "the C library: give the folder that holds it in the kernel's options: [-I FOLDER] (relative to the "
            "spec); if it is a host header (for the file's own runner), build the kernel with compiler: nvcc, or "
            "keep the include inside #ifndef __CUDACC_RTC__ ... #endif")
