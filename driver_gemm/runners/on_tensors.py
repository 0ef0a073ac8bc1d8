"""A kernel compiled, checked and timed on tensors a rig already holds: `check_kernel`.

The tensors say what a spec would: M, N and K, the element types, each operand's storage order and
leading dimension (`measure.rig_operands`). From them one typed kernel entry is planned and compiled
as any spec's (its signature checked against the compiled image, its launch checked against the
GPU), and runs the steps of a spec's case with the rig's memory in place of drawn inputs (the rig's
other tensors, ``tensors=``, given to the pointer arguments named after them): in the GPU's primary
context (torch's, CuPy's) on the rig's stream. No operand is copied to the host except
to work out the float64 reference when the rig gives none (as a spec's case works it out: the block
scales and bias check_kernel draws into the kernel's own buffers, and ``elementwise=``'s functions,
applied); C is read back to be checked. The result is the `CaseResult` a spec run records.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
import re
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..argtypes import STANDARD_ARGUMENTS
from ..cuda import nvtx as ranges
from ..cuda.check import check
from ..cuda.compile import Cubin, source_is_path
from ..cuda.device import DeviceBuffer, read_properties
from ..cuda.interop import ArrayView, array_view, stream_handle
from ..cuda.mangling import demangle
from ..cuda.occupancy import limits_from_device
from ..errors import (ArgumentError, SpecError, WrongArgumentType, WrongArgumentValue, flag_argument,
                      ordinal_argument)
from ..gemm import dtypes
from ..gemm.operands import KernelOutput, TypedInputs
from ..measure.reference import CPU_REFERENCE
from ..measure.rig_operands import (RigMatrix, RigOperands, RigTensor, matrix_values, pointee_problem, raw_values,
                                     rig_operands, rig_tensor)
from ..measure.stats import gflops
from ..measure.verify import compare_typed
from ..planning.build import Compiled, plan_cases
from ..results.records import CaseDevice, CaseResult, VerificationRecord
from ..session import steps as case_steps
from ..session.bind import build_launch
from ..session.execute import execute_case
from ..session.options import RunOptions
from ..session.state import Session
from ..session.typed_steps import (capped_note, kernel_functions, nonfinite_note, product_checks, typed_case,
                                   typed_tolerance, worked_reference)
from ..specfile.device_buffers import SCALE_POINTERS
from ..specfile.load import spec_from_dict
from ..specfile.model import Spec

RIG_REFERENCE = "rig"     # the reference_name of a check against the rig's own reference


@dataclass
class TensorMemory:
    """A rig's tensor as the launch binds it: its address (and span), the tensor kept alive alongside."""

    matrix: RigMatrix

    @property
    def address(self) -> int:
        return self.matrix.view.address

    @property
    def nbytes(self) -> int:
        return self.matrix.span_bytes


@dataclass
class RigState:
    """What the rig gave, and what its steps hand on: its memory, host copies for the reference, C's start."""

    operands: RigOperands
    objects: tuple[Any, Any, Any]
    reference: Any
    tensors: dict[str, RigTensor] = field(default_factory=dict)   # the rig's others, by the pointer they are given
    tensor_objects: dict[str, Any] = field(default_factory=dict)  # as the rig gave them: what `reference` is handed
    memory: dict[str, TensorMemory | RigTensor] = field(default_factory=dict)
    c_start: DeviceBuffer | None = None        # C's starting bytes on the GPU (a kernel that reads C)
    c0: np.ndarray | None = None


def check_kernel(source: str | Path, function: str, a: Any, b: Any, c: Any, *, grid: Sequence, block: Sequence,
                 params: Mapping[str, Any] | None = None, alpha: float = 1.0, beta: float = 0.0,
                 reference: Any = None, stream: Any = None, time: bool = True, name: str | None = None,
                 measure: Mapping | None = None, verify: Mapping | None = None, device: int | None = None,
                 context: Any = None, tensors: Mapping[str, Any] | None = None, **fields: Any) -> CaseResult:
    """Compile `function` of `source` (a path, or the kernel's text) and check and time it on the rig's A, B, C.

    `a` (M x K), `b` (K x N) and `c` (M x N) are any GPU arrays with
    ``__cuda_array_interface__`` or DLPack (torch, CuPy, cuda.core, a
    `DeviceBuffer` view): sizes, element types, row/column-major order and
    leading dimensions come from them. `grid`, `block`, `params` and any
    other field of a spec's kernel entry (``signature=``, ``shared_bytes=``,
    ``options=``, ``types=`` to add e.g. ``accumulate``, ``elementwise=``)
    mean what they mean in a spec, with M, N, K, lda, ldb, ldc as names;
    `measure` and `verify` are a spec's sections. `tensors` maps names to
    the rig's other GPU arrays (a bias, a residual, a second weight): each
    name is a pointer argument of ``signature=`` (``"bias"`` or ``{"name":
    "bias", "type": "ptr"}``) given that array's address; each must be used
    there, contiguous, on C's GPU, of the element type the kernel's pointer
    reads, and apart from C. C = alpha A B + beta C is
    checked against `reference` (the expected C as a tensor or array, or a
    callable ``reference(a, b, c)`` called before the launch, given
    ``tensors=`` too when it has a parameter of that name) or, without
    one, a float64 product of host copies of A and B, with the block scales
    and bias check_kernel draws into the kernel's own buffers (``scales:``,
    ``bias:`` in ``signature=``) and ``elementwise=``'s functions applied as
    a spec's case applies them (a `reference` cannot know the drawn values,
    so it is refused beside them). It runs in the GPU's primary
    context (or `context`) on `stream` (any stream object; None: a stream of
    its own), after the rig's pending work on the context. With ``time=False``
    the case is only checked. Returns the `CaseResult`; C holds the checked
    product when it returns. docs/embedding.md has examples.
    """
    _check_kinds(source, function, grid, block, params, name, measure, verify)
    scalars = {"alpha": _scalar("alpha", alpha), "beta": _scalar("beta", beta)}
    time = flag_argument("check_kernel", "time", time)
    if device is not None:
        device = ordinal_argument("check_kernel", "device", device)
    try:
        handle = stream_handle(stream)
    except ArgumentError as exc:
        raise ArgumentError(exc.message, where="check_kernel", field="stream") from None
    views = tuple(_operand_view(name, obj, handle) for name, obj in zip("ABC", (a, b, c)))
    operands = rig_operands(*views)
    ordinal = device if device is not None else _ordinal(views, (a, b, c))
    M, N, K = operands.shape
    if reference is not None and not callable(reference):
        _check_reference(reference, (M, N))   # before the compile and the GPU: a wrong one ends the call here
    bound = _rig_tensors(tensors, handle, operands, ordinal)
    fields, tensor_positions = _tensor_arguments(fields, bound)
    entry = _kernel_entry(function, grid, block, params, name, operands, fields)
    with tempfile.TemporaryDirectory(prefix="driver-gemm-kernel-") as folder:
        entry["source"] = str(_source_path(source, Path(folder)))
        document = {"name": "check_kernel", "shapes": [[M, N, K]], "baseline": False, "kernels": [entry],
                    "scalars": scalars}
        if measure:
            document["measure"] = dict(measure)
        if verify:
            document["verify"] = dict(verify)
        try:
            spec = _given_tensors(spec_from_dict(document), tensor_positions)
        except SpecError as exc:
            raise _in_arguments(exc, entry["name"]) from None
        if len(spec.kernels) != 1:   # one CaseResult is returned: a sweep's other configurations would not run
            labels = ", ".join(kernel.label for kernel in spec.kernels[:4]) + (", ..." if len(spec.kernels) > 4
                                                                             else "")
            raise ArgumentError(f"check_kernel: the fields given make {len(spec.kernels)} kernel configurations "
                                f"({labels}): it checks one",
                                hint="give one value per param, and call check_kernel once per configuration")
        if reference is not None:   # before the GPU is opened and the kernel compiled: nothing would run
            _refuse_reference_beside_drawn(spec.kernels[0])
        props = read_properties(ordinal)
        cases, compiled = plan_cases(spec, limits_from_device(props), props.arch, props.sm_count)
    _check_tensor_pointees(spec, compiled, bound, tensor_positions)
    rig = RigState(operands, (a, b, c), reference, bound, dict(tensors or {}))
    session = Session(ordinal, False, RunOptions(time=time), context=context, stream=handle)
    try:
        record = execute_case(session, spec, cases[0], compiled, lambda case: _rig_steps(rig))
    finally:
        if rig.c_start is not None:
            rig.c_start.close()
        session.close()
    record.device = CaseDevice(props.name, props.uuid, props.ordinal)
    if record.timing is not None:
        record.gflops = gflops(record.flops, record.timing.median_ms)
    return record


# Names a rig's tensor cannot take: check_kernel's own operands, sizes and scalars, and the scale pointers a spec's
# scales: fill.
_TAKEN_NAMES = frozenset({*STANDARD_ARGUMENTS, *SCALE_POINTERS})
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TENSOR_ARGUMENT_HINT = ("name it in signature= where the kernel takes its pointer: 'NAME' or "
                         "{'name': 'NAME', 'type': 'ptr'}")


def _tensor_error(message: str, hint: str | None = None) -> ArgumentError:
    return ArgumentError(message, where="check_kernel", field="tensors", hint=hint)


def _rig_tensors(tensors: Any, stream: int | None, operands: RigOperands, ordinal: int) -> dict[str, RigTensor]:
    """The rig's other tensors by name, each read and checked before anything is compiled: a name a kernel
    parameter can have that is not one check_kernel gives itself, and memory as `rig_operands.rig_tensor` takes it
    (on a GPU, contiguous, apart from C), on the operands' GPU."""
    if tensors is None:
        return {}
    if not isinstance(tensors, Mapping):
        raise WrongArgumentType(f"check_kernel: tensors is a mapping of names to GPU arrays (such as "
                                f"{{'bias': bias}}) or None, got {tensors!r:.40} ({type(tensors).__name__})")
    bound = {}
    for name, obj in tensors.items():
        if not isinstance(name, str) or not _C_IDENTIFIER.fullmatch(name):
            raise _tensor_error(f"the name {name!r:.40} is no C identifier: each name is that of the kernel's "
                                "pointer parameter the tensor is given", hint=_TENSOR_ARGUMENT_HINT)
        if name in _TAKEN_NAMES:
            raise _tensor_error(f"{name} is a name check_kernel gives itself (A, B and C are a=, b= and c=; "
                                f"{', '.join(sorted(_TAKEN_NAMES - {'A', 'B', 'C'}))} are sizes, scalars and scale "
                                "pointers)", hint="give the tensor another name, the one its pointer has in the "
                                                  "kernel (bias, residual, gamma)")
        try:
            view = array_view(obj, stream=stream)
        except ArgumentError as exc:
            raise _tensor_error(f"{name}: {exc.message}", hint=exc.hint) from None
        try:
            tensor = rig_tensor(name, view, operands.c)
        except ArgumentError as exc:
            raise _tensor_error(exc.message, hint=exc.hint) from None
        on = _gpu_of(view, obj)
        if on is not None and on != ordinal:
            raise _tensor_error(f"{name} is on GPU {on}, and the kernel runs on GPU {ordinal}, C's: a kernel reads "
                                "memory of its own GPU", hint=f"move {name} to GPU {ordinal} (torch .to(c.device))")
        bound[name] = tensor
    return bound


def _tensor_arguments(fields: dict, bound: Mapping[str, RigTensor]) -> tuple[dict, dict[int, str]]:
    """`fields` with each of ``signature=``'s pointer arguments named after a rig's tensor (``"bias"`` or ``{"name":
    "bias", "type": "ptr"}``) written as a null pointer of that name, which the spec reader takes (`_given_tensors`
    then binds it), and the positions of those arguments with their names. Each tensor must be named there."""
    if not bound:
        return fields, {}
    signature = fields.get("signature")
    positions: dict[int, str] = {}
    if isinstance(signature, (list, tuple)):
        written = list(signature)
        for position, item in enumerate(signature):
            name = _tensor_named(item, position, bound)
            if name is not None:
                written[position] = {"name": name, "type": "ptr", "value": None}
                positions[position] = name
        fields = {**fields, "signature": written}
    unused = [name for name in bound if name not in positions.values()]
    if unused:
        where = "is not given" if signature is None else "takes no pointer argument of that name"
        raise _tensor_error(f"{', '.join(unused)} {'is' if len(unused) == 1 else 'are'} given, and signature= "
                            f"{where}: a tensor no kernel parameter takes would not be passed",
                            hint=_TENSOR_ARGUMENT_HINT.replace("NAME", unused[0]) + " (a parameter of the "
                                 "kernel's own signature, not a struct's field or a then: launch), or leave it out "
                                 "of tensors=")
    return fields, positions


def _tensor_named(item: Any, position: int, bound: Mapping[str, RigTensor]) -> str | None:
    """The rig's tensor `item` (``signature[position]``) names, if any; an `ArgumentError` for an entry that names
    one and says something else of it (a value, another type)."""
    if isinstance(item, str):
        return item if item in bound else None
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or item["name"] not in bound:
        return None
    name = item["name"]
    others = sorted(str(key) for key in item if key not in ("name", "type"))
    if item.get("type") != "ptr" or others:
        said = f"type {item.get('type')!r}" if item.get("type") != "ptr" else ", ".join(others)
        raise ArgumentError(f"signature[{position}] names {name}, which tensors= gives, with {said}: tensors= "
                            f"gives {name} to a pointer parameter, as the tensor's address", where="check_kernel",
                            field=f"signature[{position}]",
                            hint=f"write it {name!r} or {{'name': {name!r}, 'type': 'ptr'}}, or leave {name} out of "
                                 "tensors=")
    return name


def _given_tensors(spec: Spec, positions: Mapping[int, str]) -> Spec:
    """`spec` with the null pointers `_tensor_arguments` wrote bound to the rig's tensors of their names: pointer
    arguments the launch takes by name from the case's memory, as it takes A, B and C."""
    if not positions:
        return spec

    def bound(kernel):
        signature = tuple(dataclasses.replace(argument, null=False) if position in positions else argument
                          for position, argument in enumerate(kernel.signature))
        return dataclasses.replace(kernel, signature=signature)

    # every configuration the fields make: more than one is refused next, by the caller
    return dataclasses.replace(spec, kernels=tuple(bound(kernel) for kernel in spec.kernels))


def _check_tensor_pointees(spec: Spec, compiled: Compiled, bound: Mapping[str, RigTensor],
                           positions: Mapping[int, str]) -> None:
    """Each rig tensor's element type against what the kernel's parameter points to, as the compiled image's
    (mangled) symbol gives it, before anything launches (`rig_operands.pointee_problem`). An ``extern "C"`` kernel's
    symbol carries no types, and a kernel that did not compile has no image: neither is judged here."""
    if not positions:
        return
    (kernel,) = spec.kernels
    built = compiled.get(kernel.label)
    if not isinstance(built, Cubin):   # a CompileError: the case reports it
        return
    demangled = demangle(built.symbol(kernel.instance))
    if demangled is None or len(demangled.params) != len(kernel.signature):
        return
    for position, name in positions.items():
        problem = pointee_problem(bound[name], demangled.params[position],
                                  f"parameter {position + 1} of {demangled.name}")
        if problem:
            raise _tensor_error(problem, hint="the tensor is passed as it is: no conversion is made for you")


def _refuse_reference_beside_drawn(kernel) -> None:
    """An `ArgumentError` for a rig's `reference` beside what check_kernel applies to its own product: block scales
    or a bias it draws into the kernel's buffers (values the rig never sees), or ``elementwise=`` (a `reference`
    is the expected C already). Read from the kernel's spec alone, before anything is compiled."""
    if kernel.operands is not None and kernel.operands.elementwise:
        raise ArgumentError("check_kernel: reference= is the expected C, and elementwise= says which functions "
                            "check_kernel applies to its own float64 product: give one of them",
                            where="check_kernel", field="reference",
                            hint="leave reference= out to check against the product with the functions applied, "
                                 "or apply them in your reference and leave elementwise= out")
    drawn = [argument.name for _, argument in kernel.device_buffers()
             if argument.buffer is not None and argument.buffer.fill in ("scales", "bias")]
    if drawn:
        raise ArgumentError(f"check_kernel: reference= cannot know the values check_kernel draws into the "
                            f"kernel's buffer{'s' if len(drawn) > 1 else ''} {', '.join(drawn)} (block scales or a "
                            "bias)", where="check_kernel", field="reference",
                            hint="leave reference= out: check_kernel's float64 product applies the drawn values")


def _check_kinds(source, function, grid, block, params, name, measure, verify) -> None:
    """`WrongArgumentType` naming the first argument of a kind `check_kernel` does not take: a string for `grid`
    would otherwise be read character by character ("16" as two extents, 1 and 6)."""
    def refuse(argument: str, takes: str, value: Any) -> WrongArgumentType:
        return WrongArgumentType(f"check_kernel: {argument} is {takes}, got {value!r:.40} ({type(value).__name__})")

    if not isinstance(source, (str, Path)):
        raise refuse("source", "the path of a kernel source or its text (a str or a pathlib.Path)", source)
    if not isinstance(function, str):
        raise refuse("function", "the kernel's name (a str such as 'sgemm<16>')", function)
    if name is not None and not isinstance(name, str):
        raise refuse("name", "the case's kernel name (a str) or None", name)
    for argument, extents in (("grid", grid), ("block", block)):
        if not isinstance(extents, (list, tuple)):
            raise refuse(argument, "a list of 1 to 3 extents (numbers, or expressions such as 'ceil(N / 16)')",
                         extents)
    for argument, fields, example in (("params", params, "{'TILE': 16}"), ("measure", measure, "{'rounds': 3}"),
                                      ("verify", verify, "{'tolerance': 1e-4}")):
        if fields is not None and not isinstance(fields, Mapping):
            raise refuse(argument, f"a mapping of a spec's {argument} fields (such as {example}) or None", fields)


def _scalar(name: str, value: Any) -> float:
    """alpha or beta as a finite float, else the error naming it (rather than the spec's ``scalars`` field)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise WrongArgumentType(f"check_kernel: {name} is a number, got {value!r:.40} ({type(value).__name__})")
    if not math.isfinite(value):
        raise WrongArgumentValue(f"check_kernel: {name} is a finite number, got {value}")
    return float(value)


def _in_arguments(error: SpecError, kernel_name: str) -> SpecError:
    """A mistake in the spec `check_kernel` builds, placed in its arguments: ``grid``, not the field
    ``kernels[NAME].grid`` of a spec the caller never wrote."""
    field = error.field or ""
    for prefix in (f"kernels[{kernel_name}]", "kernels[0]"):
        if field == prefix or field.startswith(prefix + "."):
            field = field[len(prefix) + 1:]
            break
    return type(error)(error.message, where="check_kernel", field=field or None, hint=_rig_hint(error.hint))


# The kernel entry's fields check_kernel refuses (`_kernel_entry`), and why: its arguments and the tensors give
# them, or they need what check_kernel does not run.
_NOT_TAKEN = {
    "source": "the source is the first argument",
    "shapes": "the tensors give it (sizes, storage order and leading dimensions)",
    "layout": "the tensors give it (sizes, storage order and leading dimensions)",
    "layouts": "the tensors give it (sizes, storage order and leading dimensions)",
    "ld": "the tensors give it (sizes, storage order and leading dimensions)",
    "groups": "a grouped GEMM runs from a spec, whose groups: lays out its A, B and C",
    # A batch would launch over `batch` matrices from each tensor's address, past the one matrix each holds.
    "batch": "the tensors are one matrix each ({shapes}); a batched GEMM runs from a spec, whose batch: lays out "
             "its A, B and C",
    # A kernel's own scalars would silently win over the alpha= and beta= arguments.
    "scalars": "alpha and beta are check_kernel's own arguments (alpha=, beta=)",
    "min_pct": "a speed gate compares a case with its vendor row, which check_kernel does not run; compare "
               "record.gflops with a figure of your own, or gate a spec's run (min_pct:, run --min-pct)",
    "structure": "check_kernel checks the rig's own A and B, which it does not draw: make the tensors structured "
                 "yourself",
    "gram": "check_kernel checks the rig's own A and B, which it does not draw: pass one tensor and its transposed "
            "view as A and B",
}


def _rig_hint(hint: str | None) -> str | None:
    """A spec's hint for a check_kernel call: the fields a kernel entry allows, less those check_kernel refuses
    (listed as allowed, each would be refused when given)."""
    if hint is None or not hint.startswith("allowed: "):
        return hint
    fields = [name for name in hint[len("allowed: "):].split(", ") if name not in _NOT_TAKEN]
    return "allowed: " + ", ".join(fields)


def _operand_view(name: str, obj: Any, stream: int | None) -> ArrayView:
    try:
        return array_view(obj, stream=stream)
    except ArgumentError as exc:
        raise ArgumentError(f"{name}: {exc}") from None


def _kernel_entry(function: str, grid, block, params, name, operands: RigOperands, fields: dict) -> dict:
    """The spec's kernel entry for the rig's operands (the caller's `fields` added; its ``types`` merged in)."""
    read = operands.spec_fields()
    fields = dict(fields)
    shapes = ", ".join(f"{matrix.name} {matrix.rows} x {matrix.cols}"
                       for matrix in (operands.a, operands.b, operands.c))
    for key, why in _NOT_TAKEN.items():
        if key in fields:
            raise ArgumentError(f"check_kernel: {key}= is not taken: " + why.format(shapes=shapes))
    for argument, values in (("params", params), ("values", fields.get("values"))):
        _refuse_sweep(argument, values)
    entry = {"name": name or function.split("<")[0].split("(")[0].strip(), "function": function,
             "grid": list(grid), "block": list(block)}
    if params:
        entry["params"] = dict(params)
    entry["types"] = {**read["types"], **dict(fields.pop("types", None) or {})}
    entry["layouts"], entry["ld"] = read["layouts"], read["ld"]
    entry.update(fields)
    return entry


def _refuse_sweep(argument: str, values: Any) -> None:
    """An `ArgumentError` for a list among `params` (or ``values=``): in a spec a list sweeps, but check_kernel
    checks one configuration and returns one result."""
    if isinstance(values, (list, tuple)):
        raise ArgumentError(f"check_kernel: {argument}= is a list of configurations; check_kernel checks one",
                            hint=f"give {argument} as one mapping of single values, and call check_kernel once per "
                                 "configuration")
    if not isinstance(values, Mapping):
        return
    for key, value in values.items():
        if isinstance(value, (list, tuple)):
            raise ArgumentError(f"check_kernel: {argument}: {key} is {list(value)!r:.60}, a sweep; check_kernel "
                                f"checks one configuration", hint=f"give {key} one value, and call check_kernel "
                                                                  "once per value")


def _source_path(source: str | Path, folder: Path) -> Path:
    """`source` as a file: a path as it is, or a kernel's text written into `folder`."""
    if isinstance(source, str) and not source_is_path("check_kernel", source):   # load_kernel's rule too
        path = folder / "kernel.cu"
        path.write_text(source)
        return path
    path = Path(source)
    if not path.is_file():
        raise ArgumentError(f"check_kernel: no kernel source file {str(path)!r} (give a path or the kernel's text)")
    return path.resolve()


def _ordinal(views: tuple[ArrayView, ...], objects: tuple) -> int:
    """The GPU the operands are on (`_gpu_of` the first that says), 0 where none says."""
    for view, obj in zip(views, objects):
        ordinal = _gpu_of(view, obj)
        if ordinal is not None:
            return ordinal
    return 0


def _gpu_of(view: ArrayView, obj: Any) -> int | None:
    """The GPU an array is on: DLPack's device id, a torch tensor's ``device.index``, CuPy's ``device.id``; None
    where it does not say."""
    if view.device_id is not None:
        return int(view.device_id)
    device = getattr(obj, "device", None)
    for attribute in ("index", "id"):
        value = getattr(device, attribute, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


# -------------------------------------------------------------------------------------------- the steps

def _rig_steps(rig: RigState) -> tuple[tuple[str, case_steps.Step], ...]:
    """A spec case's steps, with the rig's memory, reference and restored C in place of drawn inputs."""
    return (("plan", case_steps.plan), ("load", case_steps.load), ("inputs", partial(rig_inputs, rig=rig)),
            ("reference", partial(rig_reference, rig=rig)), ("launch_verify", partial(rig_launch_verify, rig=rig)),
            ("diagnose", case_steps.diagnose), ("time", case_steps.time), ("restore", partial(rig_restore, rig=rig)))


def _download(session: Session, address: int, nbytes: int) -> np.ndarray:
    """`nbytes` from device `address`, after the session stream's work."""
    out = np.empty(max(nbytes, 1), dtype=np.uint8)
    driver = session.device.driver
    check(driver.cuMemcpyDtoHAsync(out.ctypes.data, driver.CUdeviceptr(address), nbytes, session.stream.handle),
          "cuMemcpyDtoHAsync")
    session.stream.synchronize()
    return out[:nbytes]


def _host_matrix(session: Session, matrix: RigMatrix) -> np.ndarray:
    """The float64 values of one of the rig's operands (the only host copies made: for the reference)."""
    flat = raw_values(_download(session, matrix.view.address, matrix.span_bytes), matrix.view.dtype)
    return matrix_values(flat, matrix.rows, matrix.cols, matrix.strides)


def _is_host_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) or (hasattr(value, "__array_interface__") and
                                             not hasattr(value, "__cuda_array_interface__"))


def _check_reference(value: Any, shape: tuple[int, int]) -> np.ndarray | ArrayView:
    """The rig's expected C checked: a host array of real numbers (not masked), or a GPU array (the array
    interface or DLPack), M x N either way; an `ArgumentError` at ``check_kernel: reference`` otherwise."""
    expected = f"the expected C, M x N = {shape[0]} x {shape[1]}"

    def refuse(problem: str) -> ArgumentError:
        return ArgumentError(problem, where="check_kernel", field="reference",
                             hint="a GPU tensor or a NumPy array of real numbers, or a callable "
                                  "reference(a, b, c) that returns one")

    if _is_host_array(value):
        if isinstance(value, np.ma.MaskedArray):   # its masked-out elements hold whatever was there
            raise refuse("a masked array: every element of C is checked, so none may be masked out")
        array = np.asarray(value)
        if array.dtype.kind not in "iuf":
            raise refuse(f"holds {array.dtype} ({type(value).__name__}): it must be real numbers (integers or "
                         "floats)")
        if array.shape != shape:
            raise refuse(f"has shape {array.shape}: it must be {expected}")
        return array
    try:
        view = array_view(value)
    except ArgumentError as exc:
        raise refuse(f"{exc.message}, nor a NumPy array") from None
    if view.shape != shape:
        raise refuse(f"has shape {view.shape}: it must be {expected}")
    return view


def _as_expected(session: Session, value: Any, shape: tuple[int, int]) -> np.ndarray:
    """The rig's reference as float64 M x N: a host array as it is, a GPU tensor read back."""
    checked = _check_reference(value, shape)
    if isinstance(checked, np.ndarray):
        return checked.astype(np.float64)
    view = checked
    flat = raw_values(_download(session, view.address, view.span_elements() * view.itemsize), view.dtype)
    return matrix_values(flat, view.shape[0], view.shape[1], (view.strides[0], view.strides[1]))


def rig_inputs(run, rig: RigState) -> None:
    """The rig's A, B and C bound as they are; C's start kept (on the GPU, and on the host for the reference)
    for a kernel that reads C; host copies of A and B only for the float64 reference."""
    session = run.session
    typed = run.typed = typed_case(run)
    session.device.synchronize()        # the rig's pending work on its tensors (any stream of the context) is done
    operands = rig.operands
    rig.memory = {matrix.name: TensorMemory(matrix) for matrix in (operands.a, operands.b, operands.c)}
    rig.memory.update(rig.tensors)      # the rig's other tensors, by the pointer arguments named after them
    if typed.beta != 0.0:
        C = operands.c
        rig.c_start = session.device.alloc(max(C.span_bytes, 1))
        driver = session.device.driver
        check(driver.cuMemcpyDtoDAsync(rig.c_start.handle, driver.CUdeviceptr(C.view.address), C.span_bytes,
                                       session.stream.handle), "cuMemcpyDtoDAsync")
        rig.c0 = _host_matrix(session, C)
    if rig.reference is None:
        a, b = _host_matrix(session, operands.a), _host_matrix(session, operands.b)
    else:
        a = b = np.zeros((0, 0))          # not needed: the rig's reference is the expected C
    typed.inputs = TypedInputs(0, a[None], b[None], None if rig.c0 is None else rig.c0[None])
    run.record.seed = None


def rig_reference(run, rig: RigState) -> None:
    """The expected C: the rig's (a tensor or array, or its callable's answer), else alpha A B + beta C0 in float64
    with the kernel's drawn block scales and bias and its element-wise functions applied, as a spec's case works
    it out (`typed_steps.worked_reference`)."""
    typed, shape = run.typed, (rig.operands.c.rows, rig.operands.c.cols)
    if rig.reference is None:
        expected, typed.functions_bound = worked_reference(typed, run.case.plan.buffers.values(),
                                                           kernel_functions(run))
        run.expected = expected[0]
        run.reference_name = CPU_REFERENCE
        return
    if not callable(rig.reference):
        given = rig.reference
    elif rig.tensor_objects and _takes_tensors(rig.reference):
        given = rig.reference(*rig.objects, tensors=dict(rig.tensor_objects))
    else:
        given = rig.reference(*rig.objects)
    run.session.device.synchronize()    # the reference's own work, on whatever stream of the context it ran
    run.expected = _as_expected(run.session, given, shape)
    run.reference_name = RIG_REFERENCE


def _takes_tensors(reference: Any) -> bool:
    """Whether the rig's callable `reference` has a parameter named ``tensors`` (a callable of three arguments,
    ``reference(a, b, c)``, is called as it always was)."""
    try:
        parameters = inspect.signature(reference).parameters
    except (TypeError, ValueError):     # a builtin without a readable signature
        return False
    parameter = parameters.get("tensors")
    return parameter is not None and parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                        inspect.Parameter.KEYWORD_ONLY)


def _poison(run, matrix: RigMatrix) -> None:
    """Every element of C (not its padding, which is the rig's) set to its type's poison pattern."""
    element = dtypes.element_type(matrix.element)
    driver, session = run.session.device.driver, run.session
    code = dtypes.poison_code(element)
    width, height = (matrix.cols, matrix.rows) if matrix.order == "row" else (matrix.rows, matrix.cols)
    pitch = matrix.ld * element.storage_bytes
    target = driver.CUdeviceptr(matrix.view.address)
    if element.storage_bytes == 4:
        check(driver.cuMemsetD2D32Async(target, pitch, code & 0xFFFFFFFF, width, height, session.stream.handle),
              "cuMemsetD2D32Async")
    else:
        check(driver.cuMemsetD2D16Async(target, pitch, code & 0xFFFF, width, height, session.stream.handle),
              "cuMemsetD2D16Async")


def _read_output(run, matrix: RigMatrix) -> KernelOutput:
    element = dtypes.element_type(matrix.element)
    raw = _download(run.session, matrix.view.address, matrix.span_bytes)
    codes = np.frombuffer(raw.tobytes(), dtype=element.storage_dtype.newbyteorder("<")).astype(element.storage_dtype)
    matrix_codes = matrix_values(codes, matrix.rows, matrix.cols, matrix.strides)[None]
    return KernelOutput(dtypes.decode(matrix_codes, element), matrix_codes, 0)


def rig_launch_verify(run, rig: RigState) -> None:
    """C poisoned (or left at its start for a kernel that reads it), one launch on the rig's memory, C checked."""
    session, typed, C = run.session, run.typed, rig.operands.c
    if typed.beta == 0.0:
        _poison(run, C)
    run.launch = build_launch(run, rig.memory)
    with ranges.annotate("checked launch", color="green"):
        run.launch()
        session.stream.synchronize()
    typed.output = _read_output(run, C)
    rows, cols = C.rows, C.cols
    K = run.case.shape.K
    run.verdict = compare_typed(typed.output, run.expected[None], C.element,
                                rel_tolerance=typed_tolerance(run.spec.verify, typed.types, K, typed.functions_bound),
                                abs_tolerance=run.spec.verify.abs_tolerance,
                                reference_name=run.reference_name + capped_note(run.spec.verify, typed.types, K,
                                                                                typed.functions_bound),
                                start=typed.inputs.c0, **product_checks(typed, K))
    if run.verdict.nonfinite and run.verdict.note is None:
        run.verdict.note = nonfinite_note(run, run.verdict, run.expected[None], dtypes.element_type(C.element))
    run.output = typed.output.values.reshape(rows, cols)
    run.verdict.masks = {key: mask.reshape(rows, cols) for key, mask in run.verdict.masks.items()}
    run.record.verification = VerificationRecord.from_json(run.verdict.as_dict())
    run.record.status = run.verdict.status


def rig_restore(run, rig: RigState) -> None:
    """After timing a kernel that reads C: C's start put back and one more launch, so C holds the checked result."""
    if rig.c_start is None or run.record.timing is None:
        return
    session, C = run.session, rig.operands.c
    driver = session.device.driver
    check(driver.cuMemcpyDtoDAsync(driver.CUdeviceptr(C.view.address), rig.c_start.handle, C.span_bytes,
                                   session.stream.handle), "cuMemcpyDtoDAsync")
    run.launch()
    session.stream.synchronize()
