"""A case's launch with everything bound: its arguments packed once, its launch attributes set.

Pointers come from the buffers the case runs on, scalars from its plan,
tensor maps are encoded from the buffers they describe; arguments are placed
at the compiled image's own parameter offsets (a kernel may over-align one,
as a tensor map is), and a launch with a cluster or PDL goes through
cuLaunchKernelEx.
"""

from __future__ import annotations

from ..argtypes import struct_type
from ..cuda.launch import PackedArguments, PreparedLaunch, pack_struct
from ..cuda.device import DeviceBuffer
from ..errors import ConfigError


def build_launch(run, buffers: dict[str, DeviceBuffer]) -> PreparedLaunch:
    """The launch of `run`'s kernel on `buffers` (``A``, ``B``, ``C`` by name), ready to call."""
    session, kernel_spec, case_plan = run.session, run.case.kernel, run.case.plan
    values: list = []
    types: list = []
    for argument in kernel_spec.signature:
        types.append(argument.ctype)
        if argument.fields:   # a struct by value: its fields packed as the C ABI lays them out
            field_types = [field.ctype for field in argument.fields]
            types[-1] = struct_type(field_types)[0]
            values.append(pack_struct(field_types, [buffers[f.name] if f.ctype == "ptr" else
                                                    case_plan.argument_values[f.name] for f in argument.fields],
                                      [f.name for f in argument.fields]))
        elif argument.ctype == "ptr":
            values.append(buffers[argument.name])
        elif argument.tensor_map is not None:
            buffer = buffers[argument.tensor_map.tensor]
            tensor_map = case_plan.tensor_maps[argument.name]
            misplaced = tensor_map.problems(buffer.address)
            if misplaced:
                raise ConfigError(f"{argument.name}: {misplaced[0][1]}", where=kernel_spec.where_field("signature"),
                                  field=f"{kernel_spec.field_path}.signature")
            values.append(tensor_map.encode(session.device.driver, buffer.address))
        else:
            values.append(case_plan.argument_values[argument.name])
    packed = PackedArguments(types, values, [a.name for a in kernel_spec.signature],
                             offsets=run.kernel.param_offsets(len(values)))
    return PreparedLaunch(run.kernel, case_plan.config, packed, session.stream, case_plan.attributes)
