"""The size of C++ types a kernel's source defines, as its own compiler lays them out (``sizeof(SMem<128, 256>)``).

Hand-written Hopper kernels size their dynamic shared memory as ``sizeof`` a struct of their stages and
barriers, with padding and alignment no spec author should work out by hand. Each type becomes one
initialised ``__device__`` variable appended to the translation unit (after the source, so every type it
defines is visible), compiled by the kernel's compiler with its options, and read back from the image's
initialised data (`cubin.initialised_words`). The compile is cached on disk as any other.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from ..errors import CompileError
from .compile import compile_text, include_folders, local_headers, read_source
from ..source_text import without_comments
from .cubin import initialised_words
from .nvcc import compile_with_nvcc

PROBE_VARIABLE = "driver_gemm_sizeof_{}"


def probe_declarations(types: Iterable[str]) -> str:
    """The appended declarations: one ``__device__ const unsigned long long`` holding each type's size, its value
    `sizeof` of the type as a template's type argument, so that an expression (``sizeof(THREADS)`` of a macro for
    256, which C++ sizes as an int, 4) fails to compile where a type is expected instead of giving a size."""
    return "".join(f"__device__ const unsigned long long {PROBE_VARIABLE.format(index)} = "
                   f"sizeof(driver_gemm_type_of<{text}>::type);\n" for index, text in enumerate(types))


# The template every probe sizes its type through (`probe_declarations`): only a type is a type argument.
PROBE_TEMPLATE = "template <typename T> struct driver_gemm_type_of { typedef T type; };\n"


def type_sizes(path: str | Path, types: Iterable[str], arch: str, options: Iterable[str] = (), *,
               compiler: str = "nvrtc", allow_outside_headers: bool = False,
               project: Path | None = None) -> dict[str, int]:
    """The size in bytes of each of `types` (C++ type names, template-ids included) as the source at `path`
    defines them, compiled for `arch` by `compiler` (``nvrtc`` or ``nvcc``) with `options`.

    A `CompileError` names the type the compiler could not size (its line is the declaration of the
    probe, after the source's last line), or the source's own error where the source does not build
    (`source_build_error` tells the two apart).
    """
    path = Path(path)
    types = list(dict.fromkeys(types))
    built = _build(path, PROBE_TEMPLATE + probe_declarations(types), arch, options, compiler, allow_outside_headers,
                   project)
    names = [PROBE_VARIABLE.format(index) for index in range(len(types))]
    found = initialised_words(built.image, names, str(path))
    return {text: found[name] for text, name in zip(types, names) if name in found}


def source_build_error(path: str | Path, arch: str, options: Iterable[str] = (), *, compiler: str = "nvrtc",
                       allow_outside_headers: bool = False, project: Path | None = None) -> CompileError | None:
    """The error of the source at `path` compiled alone, with no probe and no template instance; None where it
    builds. A type that cannot be sized in a source that builds is the type's mistake (a name, or a static_assert
    its params fail); in a source that does not build, the source's."""
    try:
        _build(Path(path), "", arch, options, compiler, allow_outside_headers, project)
    except CompileError as exc:
        return exc
    return None


def _build(path: Path, probes: str, arch: str, options: Iterable[str], compiler: str, allow_outside_headers: bool,
           project: Path | None):
    """The source at `path` with `probes` appended, compiled by `compiler`."""
    if compiler == "nvcc":
        return compile_with_nvcc(path, (), arch, options, allow_outside_headers=allow_outside_headers,
                                 project=project, probes=probes)
    source = read_source(path)
    return compile_text(source + ("" if source.endswith("\n") else "\n") + probes, path.name, (), arch, options,
                        include_dir=path.resolve().parent, display_path=str(path),
                        allow_outside_headers=allow_outside_headers, project=project)


# What `_scopes_defining` reads: a namespace opening, a brace, or a definition of a type (or an alias) by its name.
_SCOPE_TOKEN = (r"\bnamespace\s+([A-Za-z_][\w:]*)\s*\{{|(\{{)|(\}})"
                r"|\b(?:struct|class|union)\s+(?:alignas\s*\([^()]*\)\s*)?({name})\b(?!\s*;)|\busing\s+({name})\s*=")


def _scopes_defining(name: str, texts: Iterable[str]) -> list[str]:
    """The namespaces (``M8``, ``a::b``; ``""`` for the global one) in which `texts` define a struct, class, union or
    alias called `name`, in the order found."""
    token = re.compile(_SCOPE_TOKEN.format(name=re.escape(name)))
    scopes: dict[str, None] = {}
    for text in texts:
        depth, open_namespaces = 0, []   # (name, the depth inside it)
        for match in token.finditer(without_comments(text)):
            namespace, opening, closing, defined, alias = match.groups()
            if namespace is not None:
                depth += 1
                open_namespaces.append((namespace, depth))
            elif opening is not None:
                depth += 1
            elif closing is not None:
                if open_namespaces and open_namespaces[-1][1] == depth:
                    open_namespaces.pop()
                depth = max(0, depth - 1)
            elif defined is not None or alias is not None:
                scopes.setdefault("::".join(namespace for namespace, _ in open_namespaces))
    return list(scopes)


def qualified_type_hint(path: str | Path, type_text: str, options: Iterable[str] = ()) -> str | None:
    """``did you mean M8::SMem`` where `type_text` names, without a namespace, a type that the source at
    `path` and its headers define only inside one (as `function:` is written with its namespace); None otherwise."""
    head = re.match(r"\s*([A-Za-z_]\w*)\s*(?=<|$)", type_text)
    if head is None:
        return None
    try:
        text = read_source(Path(path))
        texts = [text, *local_headers(text, [Path(path).resolve().parent, *include_folders(options)]).values()]
    except (OSError, CompileError):
        return None
    scopes = _scopes_defining(head.group(1), texts)
    if not scopes or "" in scopes:
        return None
    spelt = [f"{scope}::{head.group(1)}" for scope in scopes[:3]]
    return (f"did you mean {' or '.join(spelt)}? (the source defines {head.group(1)} in namespace "
            f"{', '.join(scopes[:3])}, not outside it)")
