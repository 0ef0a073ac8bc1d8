"""The files a spec makes a command read: what an output of that command may never be (`output_files.refuse_aliases`).

Besides the spec and its kernels' sources, a compile reads the local headers they include (pre-included ones
too), a case runs its builders' Python files, and a buffer's fill files are read per shape: each is an input a
results file, a winners spec or a picture written over it would destroy.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..cuda.compile import headers_read


def spec_inputs(spec) -> list[tuple[str, Path]]:
    """The files a spec makes a command read, as `refuse_aliases` takes them: the spec, its kernels' sources and
    the local headers they include (pre-included ones too), the Python files of its builders, and the fill files
    that exist under each buffer's name pattern."""
    inputs: dict[Path, str] = {spec.path: "the spec"} if spec.path is not None else {}

    def add(path, role: str) -> None:
        if path is not None and Path(path) not in inputs:
            inputs[Path(path)] = role

    scanned: set[tuple] = set()       # a sweep's kernels share their source: each file once
    for kernel in spec.kernels:
        for path in (kernel.source, kernel.binary):
            add(path, f"the source of kernel {kernel.name}")
        key = (kernel.source, tuple(kernel.options), kernel.project)
        if kernel.source is not None and key not in scanned:
            scanned.add(key)
            for header in headers_read(kernel.source, kernel.options, kernel.project):
                add(header, f"a header kernel {kernel.name} includes")
        for builder in kernel.builder_files:
            add(builder, f"a builder file of kernel {kernel.name}")
        for _, argument in kernel.device_buffers():
            buffer = argument.buffer
            if buffer is not None and buffer.file is not None and buffer.file_folder is not None:
                pattern = FILL_NAME_FIELD.sub("*", buffer.file)   # every shape's file of that name
                try:   # an absolute name (the user's leave) is no pattern Path.glob takes: its folder is
                    named = Path(pattern)
                    folder = named.parent if named.is_absolute() else Path(buffer.file_folder)
                    found = sorted(folder.glob(named.name if named.is_absolute() else pattern))
                except (OSError, ValueError, NotImplementedError):
                    found = []
                for path in found[:MAX_FILL_FILES_CHECKED]:
                    add(path, f"a fill file of kernel {kernel.name}")
    return [(role, path) for path, role in inputs.items()]


# A fill file's name holds {M}, {N}, {K} and params; the files of every shape match it with each read as *. A
# pattern that matches a whole folder's worth is read no further than this.
FILL_NAME_FIELD = re.compile(r"\{[^{}]*\}")
MAX_FILL_FILES_CHECKED = 10_000
