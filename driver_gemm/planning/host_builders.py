"""A struct parameter made by the user's Python (``builder: params.py:build``): its bytes, from its fields' values.

Some kernels take one parameter whose layout only their own host code knows: a CUTLASS 3 kernel's
``Params`` of CuTe layouts (empty tags, static extents, tensor maps inside), a library's packed
descriptor. Rather than describe it field by field, a spec names a Python function that makes it. The
function is given a dictionary of the struct's field values by name, the fields of structs inside it
included (a pointer or a device buffer as its device address, a number as the case computes it, a fixed
array as a tuple, a tensor map as its 128 encoded bytes), and returns the parameter's bytes as anything
with the buffer protocol (``bytes``, a ``ctypes.Structure``, a NumPy array).

While planning, `check_builders` calls it once a case with stand-in addresses and tensor maps of zero
bytes, so that one that fails, returns no bytes or a number of them other than the compiled parameter's
is said at the spec's line before anything is launched; at the launch, `built_bytes` calls it with the
case's own. The file is loaded once a process, as a module of its own; its folder is on ``sys.path``
while it loads, so it may import the modules beside it.

A device buffer's contents are made the same way (``fill: {builder: order.py:hilbert}``): `built_numbers` calls
the function with the shape and the params by name while the case is planned, and the numbers it returns fill
the buffer as a fill file's would (a tile order along a Hilbert curve, a schedule its host code computes).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Callable, Mapping, NoReturn, TextIO

import numpy as np

from ..errors import ConfigError, DriverGemmError
from ..results.text import shortened
from ..specfile.model import Argument, HostBuilder, KernelSpec

# Stand-in device addresses while planning: distinct, nonzero and aligned as cudaMalloc's are, far from any real
# host pointer, so that a builder that checks or masks them sees what it would see on the GPU.
STAND_IN_ADDRESS = 0x7F00_0000_0000
STAND_IN_STRIDE = 1 << 32
TENSOR_MAP_BYTES = 128
# How long a builder's module may take to load, or its function to return: it computes a parameter or a table for
# one case, which takes seconds at most; past this it is taken for a loop that never ends, and its case refused.
BUILDER_TIMEOUT_S = 300.0


def _interrupt_goes_on(exc: BaseException) -> None:
    """Raise `exc` again where it is an interrupt (Ctrl-C stops the command as it would anywhere); anything else a
    builder raises, the user's code, is said as its failure (a BaseException of its own, SystemExit and
    GeneratorExit included), never a traceback."""
    if isinstance(exc, KeyboardInterrupt):
        raise exc


class BuilderFailed(DriverGemmError):
    """What went wrong with a builder, in words that name it (its file and function), and what would help."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


@functools.lru_cache(maxsize=32)
def load_builder(path: Path, function: str) -> Callable[[dict], Any]:
    """`function` of the Python file `path`, loaded once a process as a module named after the file's path."""
    shown = f"{path.name}:{function}"
    name = f"driver_gemm_builder_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise BuilderFailed(f"builder {shown}: {path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    # Registered as an imported module is: dataclasses, pickle and typing look their module up by name.
    sys.modules[name] = module
    folder = str(path.parent)
    sys.path.insert(0, folder)
    try:
        _bounded(lambda: spec.loader.exec_module(module), f"builder file {path} has not loaded", (path, None))
    except BuilderFailed:
        sys.modules.pop(name, None)
        raise
    except BaseException as exc:   # the user's module: whatever it raises is said, never a traceback
        sys.modules.pop(name, None)
        _interrupt_goes_on(exc)
        raise BuilderFailed(f"builder file {path} did not load: {_raised(exc, path)}") from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    found = getattr(module, function, None)
    if not callable(found):
        defined = sorted(key for key, value in vars(module).items() if callable(value) and not key.startswith("_")
                         and getattr(value, "__module__", None) == name)
        raise BuilderFailed(f"builder {shown}: {path.name} defines no function {function}"
                            + (f" (it defines {', '.join(defined[:8])})" if defined else ""))
    return found


class _BuilderStdout:
    """What `sys.stdout` is while a builder's code runs: its writes go to stderr, everyone else's where they went.

    A builder that prints (a debugging line, at import or when called) would otherwise write into the command's
    own output: the rows of ``plan --csv``, a JSON document on stdout. `contextlib.redirect_stdout` cannot be used:
    it swaps `sys.stdout` for the whole process, and the builder runs on a thread of its own while the main thread
    may write its output, so the swap would take the main thread's lines too, or end while a builder that has
    not returned (`BUILDER_TIMEOUT_S`) still prints. This proxy tells the two apart by thread: a write from a
    thread running a builder goes to stderr, any other to the stream it replaced. It is put in place while any
    builder thread runs and taken away when the last ends (left in place while a builder that never returned still
    runs: it forwards the rest unchanged). Output written by C code to file descriptor 1 is not Python's to route.
    """

    def __init__(self, replaced: TextIO | None):
        self.replaced = replaced

    def _target(self) -> TextIO | None:
        return sys.stderr if threading.get_ident() in _builder_threads else self.replaced

    def write(self, text: str) -> int:
        target = self._target()
        return len(text) if target is None else target.write(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        target = self._target()
        if target is not None:
            target.flush()

    def close(self) -> None:
        # a builder's sys.stdout.close() would close the command's own output (or, routed, its stderr): ignored
        if threading.get_ident() not in _builder_threads and self.replaced is not None:
            self.replaced.close()

    def __getattr__(self, name: str) -> Any:      # buffer, fileno, encoding...: the stream the thread writes to
        return getattr(self._target(), name)


_builder_threads: set[int] = set()
_routing_lock = threading.Lock()


def _builder_thread_starts() -> None:
    """The calling thread runs a builder from now: `_BuilderStdout` in place, and this thread's writes to stderr."""
    with _routing_lock:
        if not isinstance(sys.stdout, _BuilderStdout):
            sys.stdout = _BuilderStdout(sys.stdout)
        _builder_threads.add(threading.get_ident())


def _builder_thread_ends() -> None:
    """The calling thread's builder has ended: with the last, `sys.stdout` is the stream the proxy replaced (unless
    someone has put another in its place since, which is then left as it is)."""
    with _routing_lock:
        _builder_threads.discard(threading.get_ident())
        if not _builder_threads and isinstance(sys.stdout, _BuilderStdout):
            sys.stdout = sys.stdout.replaced


# The builders (file, and function or None for loading the file) whose call did not return: each later call of one
# is refused at once, so that a sweep of many cases waits for the bound once, not once a case.
_HUNG: set[tuple[Path, str | None]] = set()


def _bounded(call: Callable[[], Any], waiting: str, key: tuple[Path, str | None]) -> Any:
    """What `call` (the user's code) returns, or the exception it raises, called on a thread of its own so that
    one that never returns is refused after `BUILDER_TIMEOUT_S` (`waiting` leads the message) rather than hanging
    the plan. That thread cannot be stopped: it is a daemon, which the process does not wait for at its exit. A
    call that holds Python's lock in C code for good (sum(itertools.count())) is not bounded: no thread runs."""
    refusal = (f"{waiting} after {BUILDER_TIMEOUT_S:g} s (BUILDER_TIMEOUT_S): a loop that never ends? It is not "
               "called again in this process")
    if key in _HUNG:
        raise BuilderFailed(refusal, hint="a builder computes one case's bytes or numbers, in seconds at most")
    outcome: dict[str, Any] = {}

    def run() -> None:
        _builder_thread_starts()
        try:
            outcome["value"] = call()
        except BaseException as exc:   # handed back to the caller's thread, which says what it was
            outcome["error"] = exc
        finally:
            _builder_thread_ends()

    worker = threading.Thread(target=run, name="driver-gemm builder", daemon=True)
    worker.start()
    worker.join(BUILDER_TIMEOUT_S)
    if worker.is_alive():
        _HUNG.add(key)
        raise BuilderFailed(refusal, hint="a builder computes one case's bytes or numbers, in seconds at most")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _raised(exc: BaseException, path: Path) -> str:
    """``ValueError: bad tile (params.py:14)``: the exception and the builder file's last line it passed."""
    lines = [frame for frame in traceback.extract_tb(exc.__traceback__) if Path(frame.filename) == path]
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        return f"SyntaxError: {exc.msg} ({path.name}:{exc.lineno})"
    where = f" ({path.name}:{lines[-1].lineno})" if lines else ""
    return f"{_exception_text(exc)}{where}"


def _exception_text(exc: BaseException) -> str:
    """``ValueError: bad tile``: an exception of the user's code, its text shortened (`shortened`: an exception may
    carry megabytes), or its name alone where its text itself raises (a class of the builder's own)."""
    try:
        text = str(exc)
    except BaseException as failure:   # noqa: BLE001 - the user's __str__: whatever it raises, its name says enough
        _interrupt_goes_on(failure)
        text = ""
    return f"{type(exc).__name__}{': ' + shortened(text) if text else ''}"


def _called(builder: HostBuilder, values: Mapping[str, Any], given_as: str) -> Any:
    """What `builder`'s function returns for a copy of `values`; `BuilderFailed` with the exception and the builder
    file's line where it raises, its hint naming what it was given (`given_as`: what those names are)."""
    function = load_builder(builder.path, builder.function)
    try:
        return _bounded(lambda: function(dict(values)), f"builder {builder.text} has not returned",
                        (builder.path, builder.function))
    except BuilderFailed:
        raise
    except BaseException as exc:
        _interrupt_goes_on(exc)
        raise BuilderFailed(f"builder {builder.text} raised {_raised(exc, builder.path)}",
                            hint=f"it is given {', '.join(values) or 'nothing'} ({given_as})") from None


def built_numbers(builder: HostBuilder, values: Mapping[str, int]) -> np.ndarray:
    """The numbers `builder` returns for a buffer's ``fill: {builder: ...}`` given `values` (M, N, K and the params
    by name), as a flat NumPy array; `BuilderFailed` where it raises or returns something that holds no numbers."""
    result = _called(builder, values, "the names a launch expression reads, by name")
    try:
        array = np.asarray(result)
    except BaseException as exc:   # a sequence of mixed lengths, an object NumPy cannot read
        _interrupt_goes_on(exc)
        raise BuilderFailed(f"builder {builder.text} returned {type(result).__name__}, which NumPy cannot read as "
                            f"numbers: {_exception_text(exc)}") from None
    if array.dtype.kind == "O" and array.size and all(isinstance(value, int) for value in array.reshape(-1)[:64]):
        raise BuilderFailed(f"builder {builder.text} returned whole numbers beyond 64 bits (no buffer element "
                            "holds them)")
    if array.dtype.kind not in "biuf":
        raise BuilderFailed(f"builder {builder.text} returned {type(result).__name__} of {array.dtype} values, "
                            "not numbers", hint="return a list or a NumPy array of the buffer's numbers")
    return array.reshape(-1)


def built_bytes(builder: HostBuilder, values: Mapping[str, Any], size: int | None) -> bytes:
    """The bytes `builder` makes of `values`, checked to be `size` bytes (the compiled parameter's; None:
    unknown); `BuilderFailed` says why not."""
    result = _called(builder, values, "the struct's fields, by name")
    dtype = result.dtype if isinstance(result, np.ndarray) else None
    if dtype is not None and (dtype.hasobject or dtype.kind in "OSUMm"):
        _refuse_non_numbers(builder, result, dtype)
    try:
        view = memoryview(result)
    except TypeError:
        raise BuilderFailed(f"builder {builder.text} returned {type(result).__name__}, not bytes (anything with the "
                            "buffer protocol: bytes, a ctypes.Structure, a NumPy array)") from None
    except BaseException as exc:   # a __buffer__ of the builder's own that raises
        _interrupt_goes_on(exc)
        raise BuilderFailed(f"builder {builder.text} returned {type(result).__name__}, whose bytes cannot be read: "
                            f"{_exception_text(exc)}") from None
    if view.format == "O":     # an object array of another library than NumPy
        _refuse_non_numbers(builder, result, "Python object")
    if not view.c_contiguous:   # a slice with a step: its bytes are not the ones in memory, in order
        raise BuilderFailed(f"builder {builder.text} returned {type(result).__name__}, not contiguous in memory (a "
                            "slice with a step, or a transposed array)",
                            hint="return numpy.ascontiguousarray(...) of it, or its .tobytes()")
    data = view.tobytes()
    if size is not None and len(data) != size:
        raise BuilderFailed(f"builder {builder.text} returned {len(data):,} bytes; the kernel's parameter is "
                            f"{size:,}", hint=f"return the {size:,} bytes of the kernel's parameter, as its host "
                                              "code would pass them (sizeof of its type)")
    if not data:
        raise BuilderFailed(f"builder {builder.text} returned no bytes")
    return data


def _refuse_non_numbers(builder: HostBuilder, result: Any, kind: object) -> NoReturn:
    """`BuilderFailed` for an array of `kind` values that are not numbers: an object array's buffer holds the
    addresses of Python objects in this process, which no kernel can read; text and dates are no parameter's bytes
    either."""
    raise BuilderFailed(f"builder {builder.text} returned {type(result).__name__} of {kind} values, not the "
                        "parameter's bytes", hint="return bytes, a ctypes.Structure, or a NumPy array of numbers "
                                                  "(numpy.uint8 for raw bytes)")


def builder_values(argument: Argument, scalar: Callable[[Argument, int | None], Any],
                   tensor_map: Callable[[Argument], bytes]) -> dict[str, Any]:
    """The values `argument`'s builder is given, by name: each scalar leaf of its fields (of structs too) as
    `scalar(leaf, None)` gives it (a pointer's address, a number), a fixed array as a tuple of
    `scalar(leaf, index)`, a tensor map as `tensor_map(leaf)`'s bytes."""
    values: dict[str, Any] = {}
    for leaf, index in argument.scalar_leaves():
        if leaf.tensor_map is not None:
            values[leaf.name] = tensor_map(leaf)
        elif leaf.array:
            values[leaf.name] = tuple(scalar(leaf, position) for position in range(len(leaf.array)))
        else:
            values[leaf.name] = scalar(leaf, None)
    return values


def stand_in_values(argument: Argument, argument_values: Mapping[str, Any]) -> dict[str, Any]:
    """The values a builder is given while planning: the case's numbers, a distinct stand-in address for every
    pointer and buffer (0 for one passed as nullptr), zero bytes for every tensor map."""
    addresses: dict[str, int] = {}

    def scalar(leaf: Argument, index: int | None) -> Any:
        if leaf.ctype == "ptr":
            if leaf.null:
                return 0
            key = leaf.alias or leaf.name
            return addresses.setdefault(key, STAND_IN_ADDRESS + len(addresses) * STAND_IN_STRIDE)
        value = argument_values.get(leaf.name)
        return value if index is None or value is None else value[index]

    return builder_values(argument, scalar, lambda leaf: bytes(TENSOR_MAP_BYTES))


def check_builders(kernel: KernelSpec, argument_values: Mapping[str, Any],
                   sizes: Mapping[int, int]) -> tuple[list[ConfigError], list[str]]:
    """The problems and notes of the kernel's built parameters: each builder called with `stand_in_values` and
    its bytes checked against the compiled parameter's size (`sizes`, by position; a position not there is
    unchecked)."""
    problems: list[ConfigError] = []
    notes: list[str] = []
    for position, argument in enumerate(kernel.signature):
        if argument.builder is None:
            continue
        field_name = f"signature[{position}].builder"
        size = sizes.get(position)
        try:
            data = built_bytes(argument.builder, stand_in_values(argument, argument_values), size)
        except BuilderFailed as exc:
            problems.append(ConfigError(str(exc), where=kernel.where_field(field_name),
                                        field=f"{kernel.field_path}.{field_name}", hint=exc.hint))
            continue
        notes.append(f"{argument.name}: {len(data):,} bytes from builder {argument.builder.text}"
                     + ("" if size is not None else " (the compiled parameter's size is unknown: not checked)"))
    return problems, notes
