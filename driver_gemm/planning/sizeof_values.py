"""The values of ``sizeof(...)`` in a kernel's expressions (`KernelSpec.sizeofs`), from its own compiler.

Each configuration's types are sized with its params put in their place (``sizeof(SMem<BM, BN>)`` is
``SMem<128, 256>`` for BM = 128, BN = 256), once per program: every type of the kernels sharing a source,
options, target and compiler goes into one compile (`known_type_sizes` gathers them before a plan), which
the disk cache keeps across runs.
"""

from __future__ import annotations

import re
import threading
from typing import Iterable

from ..cuda.type_sizes import qualified_type_hint, source_build_error, type_sizes
from ..errors import CompileError, DriverGemmError, SourceDidNotBuild
from ..specfile.model import KernelSpec

# (source, options, target, compiler, outside headers, project) -> {type: size, or the CompileError that sizing
# the program's types raised}
_SIZES: dict[tuple, dict[str, int | CompileError]] = {}
_LOCK = threading.Lock()


def sized_types(kernel: KernelSpec) -> dict[str, str]:
    """The kernel's sizeof names with the C++ type each sizes in this configuration: {name: type}."""
    return {name: kernel.with_params(text) for name, text in kernel.sizeofs.items()}


def _program(kernel: KernelSpec, arch: str) -> tuple:
    return (kernel.source, kernel.options, kernel.target(arch), kernel.compiler, kernel.allow_outside_headers,
            kernel.project)


def known_type_sizes(kernels: Iterable[KernelSpec], arch: str) -> None:
    """Size every type the `kernels` read, one compile per program, before their cases are planned."""
    wanted: dict[tuple, tuple[KernelSpec, dict[str, None]]] = {}
    for kernel in kernels:
        if kernel.sizeofs and kernel.source is not None:
            _, types = wanted.setdefault(_program(kernel, arch), (kernel, {}))
            types.update(dict.fromkeys(sized_types(kernel).values()))
    for program, (first, types) in wanted.items():
        with _LOCK:     # sized afresh for each plan: the source may have changed since (the disk cache knows)
            _SIZES.pop(program, None)
        _size(program, first, list(types), arch)


def sizeof_values(kernel: KernelSpec, arch: str) -> dict[str, int]:
    """{sizeof name: bytes} for `kernel`'s configuration, compiled now where `known_type_sizes` did not; a
    `CompileError` where its compiler could not size a type, `SourceDidNotBuild` where the source itself does not
    compile."""
    program = _program(kernel, arch)
    types = sized_types(kernel)
    with _LOCK:
        known = dict(_SIZES.get(program, {}))
    missing = [text for text in dict.fromkeys(types.values()) if text not in known]
    if missing:
        known = _size(program, kernel, missing, arch)
    values = {}
    for name, text in types.items():
        size = known[text]
        if isinstance(size, CompileError):
            raise size
        values[name] = size
    return values


def unsized_types(kernel: KernelSpec, arch: str) -> dict[str, str]:
    """The kernel's sizeof names whose type its compiler could not size (after `sizeof_values` raised), with the
    type each sizes: {name: type}; where the error was not one type's, every name."""
    types = sized_types(kernel)
    with _LOCK:
        known = dict(_SIZES.get(_program(kernel, arch), {}))
    failed = {name: text for name, text in types.items() if isinstance(known.get(text), CompileError)}
    return failed or types


def _size(program: tuple, kernel: KernelSpec, types: list[str], arch: str, *,
          source_checked: bool = False) -> dict[str, int | CompileError]:
    found: dict[str, int | CompileError]
    try:
        sizes = type_sizes(kernel.source, types, kernel.target(arch), kernel.options, compiler=kernel.compiler,
                           allow_outside_headers=kernel.allow_outside_headers, project=kernel.project)
        found = {text: sizes.get(text, CompileError(f"{kernel.source}: sizeof({text}) was not found in the "
                                                    "compiled image")) for text in types}
    except DriverGemmError as exc:   # a compile error, or no nvcc installed, or a source that cannot be read
        own = None
        if isinstance(exc, CompileError) and not source_checked:
            own = source_build_error(kernel.source, kernel.target(arch), kernel.options, compiler=kernel.compiler,
                                     allow_outside_headers=kernel.allow_outside_headers, project=kernel.project)
        if own is not None:   # the source's mistake, not a type's: its compile reports it, as for any kernel
            found = dict.fromkeys(types, SourceDidNotBuild(str(own), log=own.log, options=own.options))
        elif len(types) == 1:
            found = {types[0]: _with_namespace_hint(exc, kernel, types[0]) if isinstance(exc, CompileError)
                     else CompileError(str(exc))}
        else:   # one configuration's type may not compile (a static_assert on its params): size each alone
            found = {}
            for text in types:
                found.update(_size(program, kernel, [text], arch, source_checked=True))
    with _LOCK:
        known = _SIZES.setdefault(program, {})
        known.update(found)
        return dict(known)


# The first error line of a compile's message, as a plan reads its reason (`case_plan.plan_launch`).
_FIRST_ERROR = re.compile(r"^.*:\s*(?:catastrophic |fatal )?error\s*:.*$", re.MULTILINE)


def _with_namespace_hint(error: CompileError, kernel: KernelSpec, text: str) -> CompileError:
    """`error` (the compiler's, sizing type `text`) with ``did you mean M8::SMem`` on its first error line where
    the source defines the type only inside a namespace (`qualified_type_hint`); `error` as it is otherwise."""
    hint = qualified_type_hint(kernel.source, text, kernel.options)
    first = _FIRST_ERROR.search(str(error))
    if hint is None or first is None:
        return error
    message = str(error)
    return CompileError(f"{message[:first.end()]}: {hint}{message[first.end():]}", log=error.log,
                        options=error.options)
