"""Where NVRTC finds the headers a kernel includes besides its own: the CUDA toolkit's, and stand-ins.

NVRTC's wheel ships no headers and NVRTC has no C library, so after the kernel's own folder and the
spec's ``-I`` options every compile searches driver-gemm's stand-ins (``nvrtc_headers/``: C library
headers and empty host-only ones such as ``<vector>``), then the toolkit's ``include`` and ``cccl``
folders (found by ``cuda.pathfinder`` and in $CUDA_HOME, $CUDA_PATH, /usr/local/cuda). Both enter
the cache key by what they are (version, digest), not by where they are.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import importlib.util
import os
import re
import sysconfig
from pathlib import Path
from typing import Iterable

from .regular_files import FileTooLarge, NotRegularFile, read_regular_file

STAND_INS = Path(__file__).resolve().parent / "nvrtc_headers"
TOOLKIT_ROOTS = ("/usr/local/cuda",)     # where a toolkit is looked for besides $CUDA_HOME and $CUDA_PATH
MAX_TOOLKIT_HEADER_BYTES = 16 << 20   # a toolkit header or stand-in read here (cuda_runtime_api.h is ~0.5 MiB)
_CUDART_VERSION = re.compile(r"#define\s+CUDART_VERSION\s+(\d+)")

# Headers that come with the CUDA toolkit, by name or by folder: a kernel including one needs the toolkit.
TOOLKIT_HEADERS = ("cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "cuda_fp6.h", "cuda_fp4.h", "mma.h",
                   "cuda_pipeline.h", "cuda_awbarrier.h", "cuda_runtime.h", "cuda_runtime_api.h", "cuda.h",
                   "cooperative_groups.h", "vector_types.h", "sm_", "crt/")
TOOLKIT_FOLDERS = ("cuda/", "cub/", "thrust/", "nv/", "cooperative_groups/")
# Headers of PyTorch's C++ extensions and what they bring (ATen, c10, pybind11, Python's own): host C++, which a
# torch.utils.cpp_extension source (KernelBench's load_inline solutions) includes beside its kernels.
TORCH_HEADERS = ("torch/", "ATen/", "c10/", "caffe2/", "pybind11/", "Python.h")
# What to do with such a source, said where its header is missing (NVRTC, nvcc) or its host code met (NVRTC).
TORCH_GUARD = ("put the torch include and the host code (the torch::Tensor wrapper, PYBIND11_MODULE) inside "
               "#ifndef __CUDACC_RTC__ ... #endif: NVRTC defines __CUDACC_RTC__ and torch's build does not, so the "
               "file still builds as an extension")


def _complete(folder: Path) -> bool:
    """Whether a toolkit include folder has the compiler's own headers (``crt/``), which ``<mma.h>``,
    ``<cuda_runtime.h>`` and others include: the runtime's wheel ships its headers without them."""
    return (folder / "crt" / "host_defines.h").is_file()


@functools.lru_cache(maxsize=1)
def toolkit_include_dirs() -> tuple[Path, ...]:
    """The CUDA toolkit's header folders, a complete one (with ``crt/``) first, then ``cccl``; () when none.

    Candidates: what ``cuda.pathfinder`` finds for the runtime and CCCL (a
    wheel's folder, or a toolkit's), the folder holding the CCCL folder it
    found, and $CUDA_HOME, $CUDA_PATH and /usr/local/cuda. A runtime wheel's
    folder lacks ``crt/``; where a complete folder exists too, it is searched
    first, so that ``<mma.h>`` finds its ``crt/mma.h``.
    """
    found: list[Path] = []
    try:
        # cuda.pathfinder: only when NVRTC's headers are looked for
        from cuda import pathfinder
        for library in ("cudart", "cccl"):
            try:
                folder = pathfinder.find_nvidia_header_directory(library)
            except Exception:   # a version of cuda.pathfinder that does not know the library
                folder = None
            if folder:
                found.append(Path(folder))
                if library == "cccl" and Path(folder).name == "cccl":
                    found.append(Path(folder).parent)
    except ImportError:
        pass
    roots = [os.environ.get(name) for name in ("CUDA_HOME", "CUDA_PATH")] + list(TOOLKIT_ROOTS)
    for root in filter(None, roots):
        include = Path(root) / "include"
        if (include / "cuda_fp16.h").is_file():
            found += [include] + ([include / "cccl"] if (include / "cccl").is_dir() else [])
    folders = [path.resolve() for path in found if path.is_dir()]
    headers = [path for path in folders if path.name != "cccl" and (path / "cuda_fp16.h").is_file()]
    complete = [path for path in headers if _complete(path)]
    cccl = [path for path in folders if path.name == "cccl"]
    # One folder of toolkit headers (mixing two toolkits' could pair headers of different versions), then CCCL.
    chosen = (complete or headers)[:1] + cccl[:1]
    return tuple(dict.fromkeys(chosen))


@functools.lru_cache(maxsize=1)
def toolkit_version() -> str:
    """The CUDA runtime version the toolkit's headers declare (``13000``), ``none`` without a toolkit."""
    for folder in toolkit_include_dirs():
        header = folder / "cuda_runtime_api.h"
        if header.is_file():
            try:
                text = read_regular_file(header, MAX_TOOLKIT_HEADER_BYTES).decode(errors="replace")
            except (OSError, NotRegularFile, FileTooLarge):
                continue
            match = _CUDART_VERSION.search(text)
            if match:
                return match.group(1)
    return "none"


@functools.lru_cache(maxsize=1)
def stand_ins_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(STAND_INS.rglob("*")):   # sys/time.h and the like included
        if path.is_file():
            name = path.relative_to(STAND_INS).as_posix()
            digest.update(name.encode() + b"\0" + read_regular_file(path, MAX_TOOLKIT_HEADER_BYTES) + b"\0")
    return digest.hexdigest()[:16]


def search_options() -> tuple[str, ...]:
    """The NVRTC options that put the stand-ins and the toolkit's headers on the search path, in that order.

    The stand-ins come first: the only names they share with a toolkit are
    host libraries' headers (``<cublas_v2.h>``, ``<curand.h>``, which a CUDA
    wheel's include folder may hold), which NVRTC cannot compile and which a
    kernel file includes only for its host runner.
    """
    return tuple(f"--include-path={folder}" for folder in (STAND_INS, *toolkit_include_dirs()))


def cache_tokens() -> tuple[str, ...]:
    """What the search path adds to a compile's cache key: the toolkit's version and the stand-ins' digest."""
    return (f"cuda-toolkit-headers={toolkit_version()}", f"driver-gemm-stand-ins={stand_ins_digest()}")


def is_toolkit_header(name: str) -> bool:
    return name.startswith(TOOLKIT_FOLDERS) or name.startswith(TOOLKIT_HEADERS)


def _broken_link(path: Path) -> str | None:
    """What is wrong with `path` where it is a symbolic link NVRTC cannot open the header through (a loop of links,
    or a link to nothing), in words; None where it is no such link (a file there, or nothing there at all): the
    header is then missing, and said so, rather than "not beside the kernel source" for a name that is there."""
    try:
        if not path.is_symlink():
            return None
        os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "a loop of symbolic links (each names the next, none a file)"
        if error.errno in (errno.ENOENT, errno.ENOTDIR):
            return f"a symbolic link to {_link_target(path)}, which does not exist (a dangling link)"
        return None
    except ValueError:   # a name no file system takes
        return None
    return None


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "a file"


def is_torch_header(name: str) -> bool:
    return name.startswith(TORCH_HEADERS)


def torch_header_hint(name: str, compiler: str) -> str:
    """What to do about PyTorch's header `name` that a kernel file includes, built with `compiler` (``nvrtc`` or
    ``nvcc``). Torch need not be installed: where it is, its include folders are named."""
    folders = torch_include_folders()
    listed = ", ".join(f"-I {folder}" for folder in folders) if folders else \
        "-I TORCH/include, -I TORCH/include/torch/csrc/api/include, -I PYTHON_INCLUDE"
    nvcc = (f"options: [{listed}] (the folders torch.utils.cpp_extension.include_paths() gives, and Python's), "
            "with --allow-outside-sources (they are outside the spec's project), and -DTORCH_EXTENSION_NAME=NAME "
            "where the file defines PYBIND11_MODULE")
    if compiler == "nvcc":
        return f"<{name}> is PyTorch's extension header (host C++): give torch's include folders in the kernel's " \
               f"{nvcc}; or {TORCH_GUARD}"
    return (f"<{name}> is PyTorch's extension header, host C++ (torch::Tensor, pybind11, Python.h) that NVRTC cannot "
            f"compile, found or not: {TORCH_GUARD}; or build the kernel with compiler: nvcc and torch's include "
            f"folders in its {nvcc}")


def torch_include_folders() -> tuple[Path, ...]:
    """The include folders a torch extension is built with (torch's, its C++ API's, Python's), where torch is
    installed; () where it is not. Torch is found without being imported."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return ()
    if spec is None or not spec.origin:
        return ()
    include = Path(spec.origin).parent / "include"
    folders = [include, include / "torch" / "csrc" / "api" / "include", Path(sysconfig.get_paths()["include"])]
    return tuple(folder for folder in folders if folder.is_dir()) if include.is_dir() else ()


def missing_header_hint(name: str, folders: Iterable[Path] = ()) -> str:
    """What to do about a header NVRTC could not open, in one sentence; `folders` are the compile's include
    folders, where a folder of that name is told apart from a missing file."""
    for folder in folders:
        try:
            found = (folder / name).is_dir()
        except (OSError, ValueError):   # a name no file system takes
            found = False
        if found:
            return (f"{name} is a folder in {folder}, not a file: an #include names a header file (the folder "
                    "that holds it goes in options: [-I FOLDER])")
        broken = _broken_link(folder / name)
        if broken:
            return f"{folder / name} is {broken}: point the link at the header, or put the header in its place"
    if is_torch_header(name):
        return torch_header_hint(name, "nvrtc")
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
