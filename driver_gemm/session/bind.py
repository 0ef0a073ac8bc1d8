"""A case's launch with everything bound: its arguments packed once, its launch attributes set.

Pointers come from the buffers the case runs on (and from the case's own device buffers,
`case_buffers`), scalars and fixed arrays from its plan, tensor maps are encoded from the buffers
they describe (a map the kernel takes by pointer is copied to a small device buffer the launch owns,
before any timed launch, and its address passed; one with ``count``, a map per matrix of its operand, is copied
there as an array of them), a map of ``constants:`` is encoded the same way and written into its ``__constant__``
variable, structs (of structs, arrays and tensor maps) are packed as the
C compiler lays them out, or by their host builder from their fields' values;
arguments are placed at the compiled image's own parameter offsets (a kernel may over-align one,
as a tensor map is), and a launch with a cluster or PDL goes through cuLaunchKernelEx.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..argtypes import CType
from ..cuda.interop import device_pointer
from ..cuda.launch import LaunchSequence, PackedArguments, PreparedLaunch, pack_layout
from ..cuda.tensormap import passed_by_pointer
from ..errors import ConfigError, ImageError
from ..planning.buffer_plans import QuantizedFillFailed
from ..planning.case_plan import pointer_array_offsets, tensor_map_offsets
from ..planning.host_builders import BuilderFailed, builder_values, built_bytes
from ..planning.image_checks import constant_symbol
from .case_buffers import device_buffers


def build_launch(run, buffers: dict[str, Any]) -> PreparedLaunch | LaunchSequence:
    """The launch of `run`'s kernel on `buffers` (``A``, ``B``, ``C`` by name: `DeviceBuffer`s or a rig's own
    memory, anything with an ``address``), ready to call; the case's own device buffers are given their
    contents now (enqueued on the stream), and again by each ``reset()`` unless read-only. A kernel with
    ``then:`` launches is a `LaunchSequence` of its own launch and theirs."""
    session, kernel_spec, case_plan = run.session, run.case.kernel, run.case.plan
    own, resets, owned = _own_buffers(run)
    slots = run.kernel.image_params()

    def encode(argument, position: int) -> tuple[str, object]:
        encoded = _encoded_maps(session, kernel_spec, case_plan, argument, {**buffers, **own}, "signature")
        # a map inside a struct is held by value: only a parameter of its own may be a pointer
        own_parameter = position < len(kernel_spec.signature) and kernel_spec.signature[position] is argument
        size = slots[position].size if slots is not None and position < len(slots) and own_parameter else None
        if passed_by_pointer(argument.tensor_map.passing, size):
            # The kernel reads the map (or its array of maps) from global memory: one copy, owned by the launch.
            owned.append(session.device.upload(np.frombuffer(encoded, dtype=np.uint8), session.stream))
            return "ptr", owned[-1]
        return argument.ctype, encoded

    constant_maps = {constant.name: _encoded_maps(session, kernel_spec, case_plan, constant, {**buffers, **own},
                                                  f"constants[{index}]")
                     for index, constant in enumerate(kernel_spec.constants) if constant.tensor_map is not None}
    _write_constants(session, run.kernel.module, {**case_plan.constants, **constant_maps})
    arrays = _pointer_arrays(session, kernel_spec, case_plan, buffers, owned)
    packed = _packed(run.kernel, slots, kernel_spec, case_plan.argument_values, {**buffers, **own, **arrays}, encode)
    # The kernel reads the owned buffers at every launch: they live as long as the launch.
    launch = PreparedLaunch(run.kernel, case_plan.config, packed, session.stream, case_plan.attributes,
                            owned=tuple(owned))
    launch.resets = resets     # the contents of the checked launch are already enqueued
    if not kernel_spec.then:
        return launch
    return LaunchSequence(launch, [_following_launch(run, launch_spec, config, {**buffers, **own, **arrays})
                                   for launch_spec, config in zip(kernel_spec.then, case_plan.following)])


def _own_buffers(run) -> tuple[dict[str, Any], list, list]:
    """`case_buffers.device_buffers` of the case's plan, a quantized B's parts laid out from the values its inputs
    were drawn from; a pack builder that fails, or a run that drew no such values, is said at the buffer's field."""
    kernel_spec = run.case.kernel
    typed = getattr(run, "typed", None)
    held = typed.held if typed is not None else None
    try:
        return device_buffers(run.session, run.case.plan.buffers, held.quantized if held is not None else None)
    except QuantizedFillFailed as exc:
        path = next(path for path, argument in kernel_spec.device_buffers() if argument.name == exc.buffer)
        raise ConfigError(str(exc), where=kernel_spec.where_field(f"{path}.quantized"),
                          field=f"{kernel_spec.field_path}.{path}.quantized", hint=exc.hint) from None


def _following_launch(run, launch_spec, config, buffers: dict[str, Any]) -> PreparedLaunch:
    """One of the kernel's ``then:`` launches, bound: its function from the kernel's own module, its arguments
    from the case's values and buffers (the kernel's own device buffers by name)."""
    kernel_spec, session = run.case.kernel, run.session
    module = run.kernel.module
    kernel = module.kernel(kernel_spec.following_instance(launch_spec), module.cubin)
    kernel.allow_dynamic_shared(config.shared_bytes)
    packed = _packed(kernel, kernel.image_params(), launch_spec, run.case.plan.argument_values, buffers,
                     lambda argument, position: (argument.ctype, None))     # a launch of then: takes no map
    return PreparedLaunch(kernel, config, packed, session.stream)


def _packed(kernel, slots, described, argument_values: dict, buffers: dict[str, Any],
            encode: Callable) -> PackedArguments:
    """The arguments of `described`'s signature (a kernel's, or a launch of its then:) packed for the loaded
    `kernel`, whose image has parameter `slots` (None: unknown): each at the image's own offset, a struct laid out
    to the image's size of it."""
    sizes = [slot.size for slot in slots] if slots is not None else None
    types, values = launch_values(described, argument_values, buffers, encode, sizes)
    return PackedArguments(types, values, [a.name for a in described.signature],
                           offsets=kernel.param_offsets(len(values)))


def _encoded_maps(session, kernel_spec, case_plan, argument, buffers: dict[str, Any], field_name: str) -> bytes:
    """The bytes of `argument`'s tensor map encoded on the buffer it describes (A, B or C, or one of the case's
    own buffers, scale factors a map reads): one map, or with ``count`` one per matrix of the operand, each at its
    matrix, one after another; an address the encoder would refuse is said at `field_name`."""
    tensor = argument.tensor_map.tensor
    address = device_pointer(buffers[tensor], tensor)
    tensor_map = case_plan.tensor_maps[argument.name]
    encoded = []
    for offset in tensor_map_offsets(kernel_spec, case_plan.operands, argument):
        misplaced = tensor_map.problems(address + offset)
        if misplaced:
            raise ConfigError(f"{argument.name}: {misplaced[0][1]}", where=kernel_spec.where_field(field_name),
                              field=f"{kernel_spec.field_path}.{field_name}")
        encoded.append(tensor_map.encode(session.device.driver, address + offset))
    return b"".join(encoded)


def _write_constants(session, module, constants: dict[str, bytes]) -> None:
    """The module's ``__constant__`` variables as this case has them, before its first launch: the spec's
    ``constants:`` (`constants`, their bytes by name: values and encoded tensor maps) as the host code's
    cudaMemcpyToSymbol would write them, and every other one back to the image's initial bytes, since a module is
    shared by the cases of its program and an earlier case may have written it."""
    try:
        initial = module.cubin.constant_variables() or {}
    except ImageError:   # an image the plan could not read either: the spec's constants alone
        initial = {}
    given = {constant_symbol(name): data for name, data in constants.items()}
    for symbol, data in {**initial, **given}.items():
        module.write_constant(symbol, data, session.stream)


def _pointer_arrays(session, kernel_spec, case_plan, buffers: dict[str, Any], owned: list) -> dict[str, Any]:
    """Each array of pointers the signature passes (``type: pointers``), by its name: the address of each matrix
    of its operand's batch on the case's buffers (a rig's own memory included), uploaded once and owned by the
    launch. The kernel only reads them, so no sample resets them."""
    arrays = {}
    for _, argument in kernel_spec.leaf_arguments():
        if argument.pointers_to is None:
            continue
        base = device_pointer(buffers[argument.pointers_to], argument.pointers_to)
        offsets = pointer_array_offsets(kernel_spec, case_plan.operands, argument.pointers_to)
        addresses = np.array([base + offset for offset in offsets], dtype=np.uint64)
        owned.append(session.device.upload(addresses, session.stream))
        arrays[argument.name] = owned[-1]
    return arrays


def launch_values(kernel_spec, argument_values: dict, buffers: dict, encode: Callable,
                  sizes: list[int] | None = None) -> tuple[list, list]:
    """The C type and value of each of the kernel's parameters, in order: a buffer (anything with an
    ``address``) for a pointer, by name from `buffers` (A, B, C and the case's own); a number from
    `argument_values`; a struct's bytes as the C compiler lays them out (a tensor map in it where the
    parameter's size in the image, `sizes`, places it) or as its builder makes them; for a tensor map, the type
    and value `encode(argument, position)` gives (its 128 bytes, or a device copy passed as a pointer)."""
    def scalar(argument, index):
        if argument.ctype == "ptr":
            return 0 if argument.null else buffers[argument.alias or argument.name]
        value = argument_values[argument.name]
        return value if index is None else value[index]

    def address_or_value(argument, index):   # what a builder is given: a pointer as its address, a whole number
        value = scalar(argument, index)
        return device_pointer(value, argument.name) if argument.ctype == "ptr" else value

    types, values = [], []
    for position, argument in enumerate(kernel_spec.signature):
        size = sizes[position] if sizes is not None and position < len(sizes) else None
        if argument.builder is not None:   # a struct whose bytes the user's Python makes from its fields' values
            data = _built(kernel_spec, position, argument,
                          builder_values(argument, address_or_value, lambda leaf: encode(leaf, position)[1]), size)
            types.append(CType(f"struct[{len(data)} bytes]", f"{len(data)}s", align=BUILT_ALIGNMENT))
            values.append(data)
            continue
        if argument.fields:   # a struct by value: its fields packed as the C compiler lays them out
            layout = argument.layout_for(size)
            leaves = argument.scalar_leaves()
            types.append(layout.opaque_type())
            # A map inside the struct: its 128 encoded bytes in their place (by value: the spec refuses a pointer).
            values.append(pack_layout(layout, [encode(leaf, position)[1] if leaf.tensor_map is not None
                                               else scalar(leaf, index) for leaf, index in leaves],
                                      [leaf.name if index is None else f"{leaf.name}[{index}]"
                                       for leaf, index in leaves]))
        elif argument.tensor_map is not None:
            ctype, value = encode(argument, position)
            types.append(ctype)
            values.append(value)
        else:
            types.append(argument.ctype)
            values.append(scalar(argument, None))
    return types, values


# Where the image's offsets are unknown, a built parameter is placed as a struct of pointers would be.
BUILT_ALIGNMENT = 8


def _built(kernel_spec, position: int, argument, values: dict, size: int | None) -> bytes:
    """The bytes `argument`'s builder makes of the case's `values`, or the spec's line and what went wrong."""
    try:
        return built_bytes(argument.builder, values, size)
    except BuilderFailed as exc:
        field_name = f"signature[{position}].builder"
        raise ConfigError(str(exc), where=kernel_spec.where_field(field_name),
                          field=f"{kernel_spec.field_path}.{field_name}", hint=exc.hint) from None
