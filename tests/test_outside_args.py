"""Kernel arguments as outside kernels take them, without a GPU: packing, plans and checks.

The forms: device buffers of the kernel's own (``type: buffer``: a scheduler's workspace, a host-filled
table), alpha and beta by device pointer, structs holding structs and fixed arrays (CUTLASS-style
``Params``), and ``epilogue: overwrite | accumulate`` for kernels without alpha and beta. Layouts are
compared with `ctypes.Structure`, which follows the platform's C ABI (the one nvcc and NVRTC use for
kernel parameters on 64-bit Linux); the compiled image's parameter sizes are compared by the signature
check. specs/outside-args.yaml runs them on a GPU (tests/test_gpu_outside_args.py).
"""

from __future__ import annotations

import ctypes
import dataclasses
import importlib.util
import json
import re
import shutil
import types
from pathlib import Path

import numpy as np
import pytest

from driver_gemm.argtypes import array_layout, scalar_layout, struct_layout
from driver_gemm.cli import EXIT_OK, EXIT_USAGE, main
from driver_gemm.cuda.cubin import ParamSlot
from driver_gemm.cuda.launch import pack_layout
from driver_gemm.cuda.mangling import ParamType
from driver_gemm.cuda.signature_check import check_signature
from driver_gemm.errors import ArgumentError, SpecError
from driver_gemm.measure import timing
from driver_gemm.planning.buffer_plans import BufferPlan
from driver_gemm.planning.case_plan import plan_launch
from driver_gemm.planning.cases import cases_of, gemm_scalars
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.session.bind import launch_values
from driver_gemm.session.case_buffers import device_buffers
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import MeasureSettings, Shape

from conftest import ROOT, SPECS

OUTSIDE = SPECS / "outside-args.yaml"


def write_spec(folder, kernel_fields: str, extra: str = "") -> Path:
    (folder / "pyproject.toml").write_text("")
    (folder / "k.cu").write_text("")
    path = folder / "spec.yaml"
    path.write_text(f"shapes: [[64, 48, 40]]\n{extra}kernels:\n  - {{name: k, source: k.cu, function: f, "
                    f"block: [1], grid: [1], {kernel_fields}}}\n")
    return path


def kernel_of(folder, kernel_fields: str, extra: str = ""):
    return load_spec(write_spec(folder, kernel_fields, extra)).kernels[0]


def plan_of(kernel, shape=Shape(64, 48, 40), scalars=None):
    return plan_launch(kernel, shape, arch_limits("sm_90"), scalars)


class Buffer:
    """Stands in for a device buffer: only its address is read when arguments are packed."""

    def __init__(self, address: int):
        self.address = address


# ------------------------------------------------------------------------------ C layout, against ctypes


def _params_module():
    """kernels/outside/args_params_struct.py: the kernel's Params as ctypes lays it out (its builder's structures)."""
    path = ROOT / "kernels" / "outside" / "args_params_struct.py"
    spec = importlib.util.spec_from_file_location("args_params_struct", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_PARAMS = _params_module()
ProblemShape, MainloopParams, EpilogueParams, Params = (_PARAMS.ProblemShape, _PARAMS.MainloopParams,
                                                        _PARAMS.EpilogueParams, _PARAMS.Params)


CTYPES = {"int32": ctypes.c_int32, "uint32": ctypes.c_uint32, "int64": ctypes.c_int64, "uint64": ctypes.c_uint64,
          "float32": ctypes.c_float, "float64": ctypes.c_double, "ptr": ctypes.c_void_p}


@pytest.mark.parametrize("members", [
    ["int32", "float64"],
    ["float32", "int32", "int64", "int32"],
    ["int32", ("int64", 3), "int32"],
    ["int32", ["int32", "int32", "int32"], "ptr", ["float32", ("int32", 3)], "float32"],
    [["int32"], ["float64", "int32"], ("uint32", 5)],
    [("float32", 1), ["ptr", ["int32", ["int64"]]], "int32"],
])
def test_struct_layouts_of_structs_and_arrays_match_ctypes(members):
    def ours(member):
        if isinstance(member, str):
            return scalar_layout(member)
        if isinstance(member, tuple):
            return array_layout(scalar_layout(member[0]), member[1])
        return struct_layout([ours(m) for m in member])[0]

    def theirs(member, index=0):
        if isinstance(member, str):
            return CTYPES[member]
        if isinstance(member, tuple):
            return CTYPES[member[0]] * member[1]
        return type(f"S{index}", (ctypes.Structure,),
                    {"_fields_": [(f"f{i}", theirs(m, i)) for i, m in enumerate(member)]})

    layout, offsets = struct_layout([ours(m) for m in members])
    reference = theirs(members)
    assert layout.size == ctypes.sizeof(reference) and layout.alignment == ctypes.alignment(reference)
    assert offsets == tuple(getattr(reference, f"f{i}").offset for i in range(len(members)))


def test_the_outside_params_struct_has_the_layout_its_kernel_asserts_and_ctypes_gives():
    kernel = next(k for k in load_spec(OUTSIDE).kernels if k.name == "args-params")
    params, = kernel.signature
    layout = params.layout()
    assert layout.size == ctypes.sizeof(Params) == 112 and layout.alignment == ctypes.alignment(Params) == 8
    problem, mainloop, epilogue, raster = params.fields
    _, offsets = struct_layout([field.layout() for field in params.fields])
    assert offsets == (Params.problem.offset, Params.mainloop.offset, Params.epilogue.offset,
                       Params.raster_order.offset) == (0, 16, 64, 104)
    assert [field.layout().size for field in params.fields] == [12, 48, 40, 4]


def test_the_outside_params_struct_is_packed_byte_for_byte_as_ctypes_fills_it():
    spec = load_spec(OUTSIDE).select(kernels=["args-params"], shapes=["1001x520x776"])
    kernel = spec.kernels[0]
    plan = plan_of(kernel, spec.shapes[0], dict(spec.scalars))
    assert plan.valid, plan.problems
    addresses = {"A": 0xA000, "B": 0xB000, "C": 0xC000, "alpha": 0xA1F0, "beta": 0xBE70}
    kinds, values = launch_values(kernel, plan.argument_values, {k: Buffer(v) for k, v in addresses.items()},
                                  encode=None)
    expected = Params(ProblemShape(1001, 520, 776),
                      MainloopParams(0xA000, (ctypes.c_longlong * 2)(776, 1), 0xB000, (ctypes.c_longlong * 2)(520, 1)),
                      EpilogueParams(0xC000, (ctypes.c_longlong * 2)(520, 1), 0xA1F0, 0xBE70), 1)
    assert len(values) == 1 and kinds[0].size == 112 and kinds[0].alignment == 8
    assert values[0] == bytes(expected)
    # alpha and beta travel in buffers of their own, with the kernel's scalars
    assert plan.buffers["alpha"] == BufferPlan("alpha", "float32", 1, "values", (1.5,), read_only=True)
    assert plan.buffers["beta"].values == (-0.5,)
    assert plan.buffers["alpha"].initial_bytes().view(np.float32).tolist() == [1.5]


def test_pack_layout_puts_each_scalar_at_its_offset_and_zeroes_the_padding():
    layout, _ = struct_layout([scalar_layout("int32"), array_layout(scalar_layout("int64"), 2),
                               struct_layout([scalar_layout("float32"), scalar_layout("int32")])[0]])
    data = pack_layout(layout, [7, -1, 2**40, 1.5, 3], ["a", "s[0]", "s[1]", "x", "y"])

    class Inner(ctypes.Structure):
        _fields_ = [("x", ctypes.c_float), ("y", ctypes.c_int)]

    class Outer(ctypes.Structure):
        _fields_ = [("a", ctypes.c_int), ("s", ctypes.c_longlong * 2), ("inner", Inner)]

    assert data == bytes(Outer(7, (ctypes.c_longlong * 2)(-1, 2**40), Inner(1.5, 3)))
    with pytest.raises(ArgumentError, match=r"s\[1\]: 4294967296 does not fit int32"):
        pack_layout(struct_layout([array_layout(scalar_layout("int32"), 2)])[0], [1, 2**32], ["s[0]", "s[1]"])
    with pytest.raises(ArgumentError, match="2 values for the 3 scalars"):
        pack_layout(struct_layout([scalar_layout("int32")] * 3)[0], [1, 2], ["a", "b"])


# ------------------------------------------------------------------------------ the spec's forms


def test_a_workspace_and_a_host_filled_table_are_sized_per_shape_and_filled_as_written():
    spec = load_spec(OUTSIDE).select(kernels=["args-persistent"], shapes=["1001x520x776"])
    plan = plan_of(spec.kernels[0], spec.shapes[0])
    counter, order = plan.buffers["tile_counter"], plan.buffers["tile_order"]
    assert (counter.count, counter.fill, counter.repeated_word()) == (1, "zero", 0)
    assert order.count == 9 * 16 and order.repeated_word() is None
    assert order.initial_bytes().view(np.int32).tolist() == list(range(144))
    kinds, values = launch_values(spec.kernels[0], plan.argument_values,
                                  {"A": Buffer(1), "B": Buffer(2), "C": Buffer(3), "tile_counter": Buffer(4),
                                   "tile_order": Buffer(5)}, encode=None)
    assert kinds == ["ptr", "ptr", "ptr", "int32", "int32", "int32", "ptr", "ptr"]
    assert [getattr(v, "address", v) for v in values] == [1, 2, 3, 1001, 520, 776, 4, 5]


@pytest.mark.parametrize("fill, element, words, values", [
    ("7", "int32", 7, [7, 7, 7, 7, 7]),
    ("-1", "int32", 0xFFFFFFFF, [-1] * 5),
    ("1.5", "float32", 0x3FC00000, [1.5] * 5),
    ("[1, 2]", "int32", None, [1, 2, 1, 2, 1]),
    ("3", "int64", None, [3] * 5),
    ("iota", "uint64", None, [0, 1, 2, 3, 4]),
    ("zero", "float64", 0, [0.0] * 5),
])
def test_buffer_fills_give_their_contents_and_a_memset_word_where_one_word_repeats(tmp_path, fill, element, words,
                                                                                   values):
    kernel = kernel_of(tmp_path, "signature: [A, B, C, {name: ws, type: buffer, element: " + element +
                       ", size: N - 43, fill: " + fill + "}]")
    plan = plan_of(kernel)
    assert plan.valid, plan.problems
    buffer = plan.buffers["ws"]
    assert buffer.count == 5 and buffer.repeated_word() == words
    dtype = {"int32": np.int32, "float32": np.float32, "int64": np.int64, "uint64": np.uint64,
             "float64": np.float64}[element]
    assert buffer.initial_bytes().view(dtype).tolist() == values


@pytest.mark.parametrize("entry, message, field", [
    ("{name: ws, type: buffer, element: int32}", "needs size", "signature[3]"),
    ("{name: ws, type: buffer, element: int128, size: 4}", "element is one of int32", "signature[3].element"),
    ("{name: ws, type: buffer, element: ptr, size: 4}", "element is one of int32", "signature[3].element"),
    ("{name: M, type: buffer, element: int32, size: 4}", "other than A, B, C", "signature[3].name"),
    ("{name: ws, type: buffer, element: int32, size: 4, fill: ones}", "zero, iota, a number or a list",
     "signature[3].fill"),
    ("{name: ws, type: buffer, element: int32, size: 4, fill: [1, 2.5]}", "2.5 does not fit int32",
     "signature[3].fill"),
    ("{name: ws, type: buffer, element: uint32, size: 4, fill: -1}", "-1 does not fit uint32", "signature[3].fill"),
    ("{name: ws, type: buffer, element: int32, size: 4, fill: []}", "1 to 4096 values", "signature[3].fill"),
    ("{name: ws, type: buffer, element: int32, size: 4, values: 0}", "unknown field 'values'",
     "signature[3].values"),
    ("{name: ws, type: ptr}", "alpha or beta by pointer, an fp8 scale by pointer .*, a null pointer",
     "signature[3].name"),
    ("{name: alpha, type: ptr, element: int32}", "float32 or float64", "signature[3].element"),
    ("{name: s, type: int64, value: [K, 1]}", "an array is a struct's field", "signature[3].value"),
    ("{name: p, type: struct, fields: [{name: s, type: int64, value: []}]}", "1 to 1024 elements",
     "signature[3].fields[0].value"),
    ("{name: p, type: struct, fields: [{name: s, type: int32, value: [1, 4294967296]}]}",
     "4294967296 does not fit int32", "signature[3].fields[0].value[1]"),
    ("{name: p, type: struct, fields: [{name: q, type: struct, fields: [M]}, {name: r, type: struct, "
     "fields: [M]}]}", "names M more than once", "signature"),
])
def test_malformed_buffers_pointers_and_arrays_are_refused_at_their_field(tmp_path, entry, message, field):
    with pytest.raises(SpecError, match=message) as info:
        load_spec(write_spec(tmp_path, f"signature: [A, B, C, {entry}]"))
    assert info.value.field == f"kernels[k].{field}", info.value.field


def test_a_buffer_size_that_is_not_positive_or_too_large_makes_the_case_invalid_at_its_line(tmp_path):
    kernel = kernel_of(tmp_path, "signature: [A, B, C, {name: ws, type: buffer, element: int64, size: M - 64}]")
    problems = [str(p) for p in plan_of(kernel).problems]
    assert len(problems) == 1 and "buffer ws of 0 int64 elements ('M - 64') must hold 1 element" in problems[0]
    assert "kernels[k].signature[3].size" in problems[0]
    kernel = kernel_of(tmp_path, "signature: [A, B, C, {name: ws, type: buffer, element: int64, size: M * N * K * K * 1000}]")
    assert "to 1,073,741,824 bytes" in str(plan_of(kernel).problems[0])
    # A name no case has is the spec's mistake, refused when it is read, not a case's.
    with pytest.raises(SpecError, match="unknown name tiles") as info:
        load_spec(write_spec(tmp_path, "signature: [A, B, C, {name: ws, type: buffer, element: int32, size: tiles}]"))
    assert info.value.field == "kernels[k].signature[3].size", info.value.field


def test_graph_mode_refuses_a_kernel_whose_buffers_are_reset_before_every_sample(tmp_path):
    fields = "signature: [A, B, C, {name: ws, type: buffer, element: int32, size: 1}]"
    with pytest.raises(SpecError, match="graph replays launches back to back") as info:
        load_spec(write_spec(tmp_path, fields, "measure: {mode: graph}\n"))
    assert info.value.field == "kernels[k].signature[3]" and "mode: events" in info.value.hint
    # alpha by pointer is only read: graph mode takes it
    kernel = kernel_of(tmp_path, "signature: [A, B, C, {name: alpha, type: ptr}]", "measure: {mode: graph}\n")
    assert kernel.device_buffers()[0][1].buffer.read_only


def test_alpha_and_beta_by_pointer_carry_the_spec_scalars_into_the_plan_and_the_baseline(tmp_path):
    kernel = kernel_of(tmp_path, "signature: [A, B, C, M, N, K, {name: alpha, type: ptr}, "
                                 "{name: beta, type: ptr, element: float64}], scalars: {alpha: 2.0, beta: 0.25}")
    assert kernel.reads_c()
    plan = plan_of(kernel, scalars={"alpha": 2.0, "beta": 0.25})
    assert plan.argument_values["alpha"] == 2.0 and plan.argument_values["beta"] == 0.25
    assert plan.buffers["beta"].initial_bytes().view(np.float64).tolist() == [0.25]
    assert gemm_scalars(kernel, Shape(64, 48, 40), {"alpha": 2.0, "beta": 0.25}) == (2.0, 0.25)


# ------------------------------------------------------------------------------ epilogues without scalars


def test_an_accumulating_epilogue_reads_c_and_is_checked_and_compared_as_c_plus_the_product(tmp_path):
    kernel = kernel_of(tmp_path, "epilogue: accumulate")
    assert kernel.reads_c() and kernel.epilogue_scalars() == {"alpha": 1.0, "beta": 1.0}
    assert plan_of(kernel).argument_values["beta"] == 1.0
    assert gemm_scalars(kernel, Shape(64, 48, 40), {"alpha": 3.0, "beta": 0.0}) == (1.0, 1.0)
    overwrite = kernel_of(tmp_path, "epilogue: overwrite")
    assert not overwrite.reads_c() and plan_of(overwrite).argument_values["beta"] == 0.0
    spec = load_spec(OUTSIDE).select(shapes=["1001x520x776"])
    rows = {case.label: case.baseline_label for case in cases_of(spec) if case.kernel is not None}
    assert rows["args-accumulate"] == "cublaslt-bf16-fp32-NN-a1b1"
    assert rows["args-persistent"] == "cublaslt-bf16-fp32-NN" == rows[spec.kernels[0].label]


@pytest.mark.parametrize("fields, message", [
    ("epilogue: add", "epilogue is overwrite (C = A @ B) or accumulate"),
    ("epilogue: accumulate, signature: [A, B, C, M, N, K, beta]", "this signature takes beta"),
    ("epilogue: overwrite, signature: [{name: p, type: struct, fields: [A, B, C, alpha]}]", "takes p"),
])
def test_an_epilogue_is_refused_where_it_contradicts_the_signature(tmp_path, fields, message):
    with pytest.raises(SpecError, match=re.escape(message)) as info:
        load_spec(write_spec(tmp_path, fields))
    assert info.value.field == "kernels[k].epilogue"


def test_the_reference_of_an_accumulating_kernel_adds_the_product_to_c0():
    from driver_gemm.gemm.operands import reference

    a, b, c0 = np.ones((1, 2, 3)), np.full((1, 3, 2), 2.0), np.full((1, 2, 2), 10.0)
    assert reference(a, b, 1.0, 1.0, c0).tolist() == [[[16.0, 16.0], [16.0, 16.0]]]


# ------------------------------------------------------------------------------ against the compiled image


def slots(*sizes):
    offsets, at = [], 0
    for size in sizes:
        at = (at + min(size, 8) - 1) // min(size, 8) * min(size, 8)
        offsets.append(ParamSlot(len(offsets), at, size))
        at += size
    return offsets


def test_a_workspace_passes_the_signature_check_as_a_pointer_where_an_integer_does_not(tmp_path):
    kernel_types = [ParamType("pointer", 8, "const bfloat16_t*"), ParamType("pointer", 8, "const bfloat16_t*"),
                    ParamType("pointer", 8, "float*"), ParamType("int", 4, "int"), ParamType("int", 4, "int"),
                    ParamType("int", 4, "int"), ParamType("pointer", 8, "int*")]
    image = slots(8, 8, 8, 4, 4, 4, 8)
    good = kernel_of(tmp_path, "signature: [A, B, C, M, N, K, {name: ws, type: buffer, element: int32, size: 1}]")
    assert check_signature(image, kernel_types, good.signature) == []
    old = kernel_of(tmp_path, "signature: [A, B, C, M, N, K, {name: ws, type: uint64, value: 0}]")
    problems = check_signature(image, kernel_types, old.signature)
    assert problems == ["parameter 7 (ws, uint64): the kernel's parameter is int* (pointer), the signature says int"]


def test_a_struct_whose_layout_differs_from_the_kernels_parameter_is_named_with_offsets(tmp_path):
    kernel = kernel_of(tmp_path, "signature: [{name: p, type: struct, fields: [M, {name: s, type: int64, "
                                 "value: [K, 1]}, A, B, C]}]")
    assert check_signature(slots(48), None, kernel.signature) == []
    problems = check_signature(slots(40), None, kernel.signature)
    assert problems == ["parameter 1 (p, struct): the kernel's parameter is 40 bytes, the struct's fields "
                        "(M: int32 @0 (4), s: int64[2] @8 (16), A: ptr @24 (8), B: ptr @32 (8), C: ptr @40 (8)) "
                        "make 48"]


def test_the_outside_args_spec_compiles_and_plans_offline():
    from driver_gemm.planning.spec_plan import plan_spec

    planned = plan_spec(load_spec(OUTSIDE), "sm_90")
    assert not planned.compile_errors, planned.compile_errors
    assert planned.ok and planned.invalid_count == 0, [str(p) for plan in planned.plans for p in plan.problems]
    assert {plan.kernel.name for plan in planned.plans} == {"v12p", "args-persistent", "args-params",
                                                             "args-params-built", "args-accumulate",
                                                             "args-grid-sync", "args-w4a16", "args-w4a16-symmetric"}
    assert {plan.shape.label for plan in planned.plans} == {"1001x520x776", "4096x4096x4096"}
    grid_sync = [plan for plan in planned.plans if plan.kernel.name == "args-grid-sync"]
    # 1001 x 520 is 16 x 9 tiles, two halves of K each: 288 units, fewer than the 528 blocks that fit at once.
    assert [plan.config.total_blocks for plan in grid_sync] == [288, 528]
    assert all("cooperative (" in " ".join(plan.notes) for plan in grid_sync)


# ------------------------------------------------------------------------------ cooperative launches


def _grid_sync_plan(**changes):
    """specs/outside-args.yaml's grid-barrier kernel at 4096^3, planned offline with `changes` to its entry."""
    from driver_gemm.planning.spec_plan import plan_spec

    spec = load_spec(OUTSIDE).select(kernels=["args-grid-sync"], shapes=["4096x4096x4096"])
    kernel = dataclasses.replace(spec.kernels[0], **changes)
    planned = plan_spec(dataclasses.replace(spec, kernels=[kernel]), "sm_90")
    assert not planned.compile_errors, planned.compile_errors
    (plan,) = planned.plans
    return plan


def test_a_kernel_that_waits_for_its_whole_grid_is_refused_without_a_cooperative_launch():
    plan = _grid_sync_plan(launch_attributes=None)
    (problem,) = plan.problems
    assert "waits for its whole grid" in str(problem) and "grid.sync()" in str(problem)
    assert problem.field == "kernels[args-grid-sync].cooperative" and "cooperative: true" in problem.hint


def test_a_cooperative_grid_larger_than_the_gpu_holds_at_once_is_refused_with_both_counts():
    from driver_gemm.specfile import expr

    plan = _grid_sync_plan(grid=(expr.parse("2 * ceil(N / 64) * ceil(M / 64)"), expr.parse(1), expr.parse(1)))
    (problem,) = plan.problems
    # 64 registers x 256 threads: 4 blocks an SM on 132 SMs.
    assert "the grid has 8192, but 528 fit (4 an SM x 132 SMs)" in str(problem)
    assert problem.field == "kernels[args-grid-sync].cooperative" and "max_active_clusters" in problem.hint


def test_ptx_facts_find_the_grid_workspace_read_in_an_entry_or_in_the_functions_it_calls():
    from driver_gemm.cuda.ptx_facts import KernelPtxFacts, ptx_facts

    module = (".func (.param .b32 func_retval0) workspace()\n{\nmov.u32 %r1, %envreg2;\n}\n"
              ".func barrier()\n{\ncall.uni (retval0), workspace, ();\n}\n"
              ".visible .entry outer(\n.param .u64 outer_param_0\n)\n{\ncall.uni barrier, ();\nret;\n}\n"
              ".visible .entry inline(\n.param .u64 inline_param_0\n)\n{\nmov.u32 %r5, %envreg1;\nret;\n}\n"
              ".visible .entry plain(\n.param .u64 plain_param_0\n)\n{\nmov.u32 %r5, %envreg10;\nret;\n}\n")
    facts = ptx_facts(module)
    assert {name: fact.grid_sync for name, fact in facts.items()} == {"outer": True, "inline": True, "plain": False}
    assert KernelPtxFacts.from_dict(facts["outer"].as_dict()) == facts["outer"]
    assert not KernelPtxFacts.from_dict({"copies": []}).grid_sync


def test_ptx_facts_tell_a_kernel_that_uses_dynamic_shared_memory_from_one_that_declares_it_nearby():
    from driver_gemm.cuda.ptx_facts import ptx_facts

    module = (".func helper()\n{\nret;\n}\n"                       # the declaration below is no use of helper's
              ".extern .shared .align 16 .b8 smem[];\n"
              ".visible .entry uses(\n.param .u64 uses_param_0\n)\n{\nmov.u32 %r3, smem;\nret;\n}\n"
              ".visible .entry plain(\n.param .u64 plain_param_0\n)\n{\nld.shared.f32 %f1, [%r1];\nret;\n}\n")
    facts = ptx_facts(module)
    assert {name: fact.dynamic_shared for name, fact in facts.items()} == {"uses": True, "plain": False}


def test_a_kernel_using_dynamic_shared_memory_launched_with_none_is_refused_at_shared_bytes(tmp_path):
    from driver_gemm.planning.spec_plan import plan_spec

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "k.cu").write_text("__global__ void f(const float* a, const float* b, float* c) { extern __shared__ "
                                   "float s[]; s[threadIdx.x] = a[0] + b[0]; __syncthreads(); "
                                   "c[threadIdx.x] = s[threadIdx.x ^ 1]; }\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text("shapes: [[64, 48, 40]]\nkernels:\n  - {name: k, source: k.cu, function: f, block: [64], "
                    "grid: [1], signature: [A, B, C]}\n")
    (plan,) = plan_spec(load_spec(spec), "sm_90").plans
    (problem,) = plan.problems
    assert "uses dynamic shared memory (an extern __shared__ array), but shared_bytes gives it none" in str(problem)
    assert problem.field == "kernels[k].shared_bytes" and "<<<grid, block, bytes>>>" in problem.hint
    spec.write_text(spec.read_text().replace("signature: [A, B, C]", "signature: [A, B, C], shared_bytes: 256"))
    (plan,) = plan_spec(load_spec(spec), "sm_90").plans
    assert not [p for p in plan.problems if "dynamic shared memory" in str(p)]


# ------------------------------------------------------------------------------ resets outside the timed region


class FakeBuffer:
    def __init__(self, name, log):
        self.name, self.log, self.nbytes = name, log, 1 << 20

    def fill_u32(self, word, stream, nbytes=None):
        self.log.append(("memset", self.name, word, nbytes))

    def copy_from(self, source, nbytes, stream):
        self.log.append(("copy", self.name, source.name, nbytes))

    def upload(self, array, stream):
        self.log.append(("upload", self.name, array.tobytes()))


def test_case_buffers_reset_by_memset_or_copy_and_leave_read_only_ones_alone():
    log = []
    made = []

    def alloc(nbytes):
        made.append(FakeBuffer(f"#{len(made)}", log))
        return made[-1]

    def upload(array, stream):
        buffer = alloc(array.nbytes)
        buffer.upload(array, stream)
        return buffer

    session = types.SimpleNamespace(stream="stream", device=types.SimpleNamespace(alloc=alloc, upload=upload))
    plans = {"counter": BufferPlan("counter", "int32", 1, "zero"),
             "order": BufferPlan("order", "int32", 3, "iota"),
             "alpha": BufferPlan("alpha", "float32", 1, "values", (2.0,), read_only=True)}
    buffers, resets, owned = device_buffers(session, plans)
    assert {name: buffer.name for name, buffer in buffers.items()} == {"counter": "#0", "order": "#1", "alpha": "#3"}
    assert owned == made     # the pattern's copy too: the launch keeps all of them
    assert log == [("memset", "#0", 0, 4),
                   ("upload", "#2", np.arange(3, dtype=np.int32).tobytes()),
                   ("copy", "#1", "#2", 12),
                   ("memset", "#3", 0x40000000, 4)]
    log.clear()
    for reset in resets:
        reset()
    assert log == [("memset", "#0", 0, 4), ("copy", "#1", "#2", 12)]


class FakeEvent:
    def __init__(self, log):
        self.log = log

    def record(self, stream):
        self.log.append("event")

    def synchronize(self):
        pass

    def elapsed_ms_since(self, start):
        return 1.0

    def close(self):
        pass


class ResettingLaunch:
    def __init__(self, log):
        self.log = log
        self.resets = [lambda: log.append("reset")]

    def reset(self):
        for reset in self.resets:
            reset()

    def __call__(self):
        self.log.append("launch")


def test_every_sample_resets_before_its_start_event_and_every_warm_up_before_its_launch():
    log = []
    device = types.SimpleNamespace(event=lambda: FakeEvent(log))
    stream = types.SimpleNamespace(synchronize=lambda: None)
    settings = MeasureSettings(warmup=2, min_samples=3, max_samples=3, min_time_s=0.0, flush_l2=False)
    summary, samples = timing.measure(ResettingLaunch(log), device, stream, settings)
    assert len(samples) == 3
    assert log == ["reset", "launch"] * 2 + ["reset", "event", "launch", "event"] * 3


def test_graph_mode_timing_refuses_a_launch_with_resets():
    settings = MeasureSettings(mode="graph")
    with pytest.raises(ArgumentError, match="mode: events"):
        timing.measure(ResettingLaunch([]), None, None, settings)


# ------------------------------------------------------------------------------ run --json with several specs


def _fake_run(monkeypatch, ran):
    from driver_gemm.cli import run as run_command
    from driver_gemm.cuda import device
    from driver_gemm.runners import one_gpu as runner

    monkeypatch.setattr(device, "device_count", lambda: 1)
    monkeypatch.setattr(run_command, "_check_before_asking_for_a_gpu", lambda specs, out: None)

    def fake_run_spec(spec, options, placement, *, result, on_result, **kwargs):
        from driver_gemm.measure.stats import summarize
        from driver_gemm.results.records import CaseResult
        from driver_gemm.status import Status

        ran.append(spec.name)
        result.environment = {"device": {"name": "fake"}}
        case = CaseResult(kernel=spec.kernels[0].label, name=spec.kernels[0].name, shape=spec.shapes[0],
                          status=Status.PASS, timing=summarize([1.0, 1.0, 1.0]))
        result.cases.append(case)
        on_result(case)

    monkeypatch.setattr(runner, "run_spec", fake_run_spec)


def test_run_json_with_several_specs_writes_one_results_file_per_spec_that_show_reads(tmp_path, monkeypatch,
                                                                                      capsys):
    ran = []
    _fake_run(monkeypatch, ran)
    out = tmp_path / "all.json"
    assert main(["run", str(SPECS / "seed.yaml"), str(OUTSIDE), "--json", str(out), "-q",
                 "--in-process"]) == EXIT_OK
    assert ran == ["seed", "outside-args"]
    for stem in ("seed", "outside-args"):
        written = tmp_path / f"all-{stem}.json"
        assert json.loads(written.read_text())["spec"] == stem
        assert (tmp_path / f"all-{stem}.jsonl").is_file()
    assert not out.exists()
    capsys.readouterr()
    assert main(["show", str(tmp_path / "all-seed.json"), str(tmp_path / "all-outside-args.json")]) == EXIT_OK
    shown = capsys.readouterr().out
    assert "outside-args: 1001x520x776" in shown and "seed: 1024x512x1024" in shown


def test_run_json_refuses_several_specs_of_one_name_and_resume_with_several(tmp_path, monkeypatch, capsys):
    ran = []
    _fake_run(monkeypatch, ran)
    seed = SPECS / "seed.yaml"
    assert main(["run", str(seed), str(seed), "--json", str(tmp_path / "r.json"), "-q"]) == EXIT_USAGE
    assert "seed names more than one" in capsys.readouterr().err
    assert main(["run", str(seed), str(OUTSIDE), "--resume", str(tmp_path / "r.jsonl"), "-q"]) == EXIT_USAGE
    assert "--resume continues one run" in capsys.readouterr().err
    assert not ran and not list(tmp_path.iterdir())


def test_the_tuning_cache_tells_apart_kernels_that_differ_only_in_a_buffer_an_array_or_the_epilogue(tmp_path):
    from driver_gemm.tune.tune_cache import tuning_key

    def key(fields):
        spec = load_spec(write_spec(tmp_path, fields))
        return tuning_key(spec, spec.kernels[0], spec.shapes[0], {}, "sm_90")

    zero = key("signature: [A, B, C, {name: ws, type: buffer, element: int32, size: 4}]")
    assert zero == key("signature: [A, B, C, {name: ws, type: buffer, element: int32, size: 4, fill: zero}]")
    assert zero != key("signature: [A, B, C, {name: ws, type: buffer, element: int32, size: 4, fill: iota}]")
    assert zero != key("signature: [A, B, C, {name: ws, type: buffer, element: int32, size: 8}]")
    array = "signature: [{name: p, type: struct, fields: [A, B, C, {name: s, type: int32, value: [1, 2]}]}]"
    assert key(array) != key(array.replace("[1, 2]", "[2, 1]"))
    assert key("epilogue: accumulate") != key("epilogue: overwrite") != key("precision: fp32")


def test_a_buffer_whose_element_differs_from_what_the_kernels_pointer_points_to_is_refused(tmp_path):
    pointer = [ParamType("pointer", 8, "int*")]
    for element, ok in (("int32", True), ("uint32", True), ("int64", False), ("float32", False)):
        kernel = kernel_of(tmp_path, "signature: [{name: p, type: struct, fields: [A, B, C]}, "
                                     f"{{name: ws, type: buffer, element: {element}, size: 1}}]")
        problems = check_signature(slots(24, 8), [ParamType("struct", None, "P")] + pointer, kernel.signature)
        assert (problems == []) == ok, (element, problems)
    kernel = kernel_of(tmp_path, "signature: [A, B, C, {name: ws, type: buffer, element: float64, size: 1}]")
    problems = check_signature(slots(8, 8, 8, 8), [ParamType("pointer", 8, "float*")] * 3 +
                               [ParamType("pointer", 8, "const float* __restrict__")], kernel.signature)
    assert problems == ["parameter 4 (ws, ptr): the kernel's parameter is const float* __restrict__, 4-byte floats, "
                        "and the buffer's element is float64"]


# k(const dg::e4m3_t* A, const dg::e4m3_t* B, __nv_bfloat16* C, const float* sa, <p4>, <p5>): block scales, then
# two 16-bit float buffers (a bias and a per-column factor) whose pointees the cases below vary.
HALF_POINTERS = {"__half": "6__half", "__nv_bfloat16": "13__nv_bfloat16", "dg::half_t": "N2dg6half_tE",
                 "dg::bfloat16_t": "N2dg10bfloat16_tE", "__half2": "7__half2", "unsigned short": "t", "void": "v"}


def half_kernel_types(bias: str, factor: str) -> list[ParamType]:
    from driver_gemm.cuda.mangling import demangle
    symbol = f"_Z1kPKN2dg6e4m3_tES2_P13__nv_bfloat16PKfPK{HALF_POINTERS[bias]}PK{HALF_POINTERS[factor]}"
    return list(demangle(symbol).params)


@pytest.mark.parametrize("bias, factor, bias_element, factor_element, refused", [
    ("__half", "__nv_bfloat16", "fp16", "bf16", []),
    ("dg::half_t", "dg::bfloat16_t", "fp16", "bf16", []),
    ("__nv_bfloat16", "__half", "fp16", "int16", ["b", "s"]),          # fp16 read as bf16; int16 bits read as fp16
    ("__half", "__half", "bf16", "uint16", ["b", "s"]),
    ("dg::bfloat16_t", "dg::half_t", "fp16", "bf16", ["b", "s"]),
    ("__half", "__nv_bfloat16", "fp32", "float16", ["b", "s"]),
    # Vectors of halves and void* say nothing of the element: not judged, as before (unsigned short* is a builtin).
    ("__half2", "unsigned short", "bf16", "uint16", []),
    ("void", "__half2", "fp32", "int16", []),
])
def test_a_buffer_read_through_a_16_bit_float_pointer_is_of_that_float(tmp_path, bias, factor, bias_element,
                                                                       factor_element, refused):
    # fp16, bf16, int16 and uint16 are all 2 bytes: only the pointee's type tells them apart. The bias (drawn by the
    # case) and the filled buffer go through the same check as any buffer; so do block scales.
    kernel = kernel_of(tmp_path, "types: {a: e4m3, c: bf16}, epilogue: overwrite, signature: [A, B, C, "
                                 "{name: sa, type: buffer, element: fp32, size: ceil(M / 128) * ceil(K / 128), "
                                 "scales: {of: A, block: [128, 128]}}, "
                                 f"{{name: b, type: buffer, element: {bias_element}, size: N, bias: N}}, "
                                 f"{{name: s, type: buffer, element: {factor_element}, size: N, fill: 1}}]")
    kernel_types = half_kernel_types(bias, factor)
    problems = check_signature(slots(8, 8, 8, 8, 8, 8), kernel_types, kernel.signature,
                               {"A": "e4m3", "B": "e4m3", "C": "bf16"})
    assert [problem.split(" (")[1].split(",")[0] for problem in problems] == refused, problems
    for name, problem in zip(refused, problems):
        pointee = bias if name == "b" else factor
        element = {"b": kernel.signature[4], "s": kernel.signature[5]}[name].buffer.element
        holds = "float16" if pointee in ("__half", "dg::half_t") else "bfloat16"
        assert problem.endswith(f"the kernel's parameter is const {pointee}*, {holds} values, and the buffer's "
                                f"element is {element} (write element: {holds})"), problem


def test_block_scales_read_as_another_16_bit_float_are_refused(tmp_path):
    kernel = kernel_of(tmp_path, "types: {a: e4m3, c: bf16}, epilogue: overwrite, signature: [A, B, C, "
                                 "{name: sa, type: buffer, element: fp16, size: ceil(M / 128) * ceil(K / 128), "
                                 "scales: {of: A, block: [128, 128]}}]")
    kernel_types = half_kernel_types("__half", "__half")[:3] + [ParamType("pointer", 8, "const __nv_bfloat16*")]
    problem, = check_signature(slots(8, 8, 8, 8), kernel_types, kernel.signature,
                               {"A": "e4m3", "B": "e4m3", "C": "bf16"})
    assert problem == ("parameter 4 (sa, ptr): the kernel's parameter is const __nv_bfloat16*, bfloat16 values, and "
                       "the buffer's element is float16 (write element: bfloat16)")


def test_the_old_integer_form_of_a_workspace_is_refused_against_the_compiled_kernel(tmp_path):
    from driver_gemm.planning.spec_plan import plan_spec

    text = OUTSIDE.read_text().replace("../kernels/", str(SPECS.parent / "kernels") + "/").replace(
        "{name: tile_counter, type: buffer, element: int32, size: 1, fill: zero}",
        "{name: tile_counter, type: uint64, value: 0}")
    (tmp_path / "spec.yaml").write_text(text)
    spec = load_spec(tmp_path / "spec.yaml", allow_outside_sources=True).select(kernels=["args-persistent"],
                                                                               shapes=["1001x520x776"])
    problem, = plan_spec(spec, "sm_90").plans[0].problems
    assert ("parameter 7 (tile_counter, uint64): the kernel's parameter is int* (pointer), the signature says int"
            in str(problem))
    assert "{name: workspace, type: buffer, element: int32, size: EXPR}" in problem.hint


POINTER_ARRAYS = ("types: {a: fp32}, batch: {count: 3}, signature: [{name: Aarray, type: pointers, to: A}, "
                  "{name: Barray, type: pointers, to: B}, {name: Carray, type: pointers, to: C}, M, N, K, alpha, beta]")


def test_arrays_of_pointers_hold_each_matrix_of_the_batch_and_the_plan_says_how_far_apart(tmp_path):
    kernel = kernel_of(tmp_path, POINTER_ARRAYS)
    assert [(a.name, a.ctype, a.pointers_to) for a in kernel.signature[:3]] == [
        ("Aarray", "ptr", "A"), ("Barray", "ptr", "B"), ("Carray", "ptr", "C")]
    plan = plan_of(kernel)
    assert plan.valid, plan.problems
    # 64 x 40 floats a matrix of A, 40 x 48 of B, 64 x 48 of C
    assert [note for note in plan.notes if "pointers to" in note] == [
        f"{name}: an array of 3 pointers to {matrix}'s matrices, {size:,} bytes apart, made when the case is bound"
        for name, matrix, size in (("Aarray", "A", 64 * 40 * 4), ("Barray", "B", 40 * 48 * 4),
                                   ("Carray", "C", 64 * 48 * 4))]
    # Bound: each array holds its matrix's addresses, uploaded once and owned by the launch.
    from driver_gemm.session.bind import _pointer_arrays
    uploads, owned = [], []

    def upload(array, stream):
        uploads.append(array.tolist())
        return types.SimpleNamespace(address=0xF000 + len(uploads))

    session = types.SimpleNamespace(stream="stream", device=types.SimpleNamespace(upload=upload))
    buffers = {name: types.SimpleNamespace(address=address) for name, address in
               (("A", 0x10000), ("B", 0x40000), ("C", 0x80000))}
    arrays = _pointer_arrays(session, kernel, plan, buffers, owned)
    assert uploads == [[0x10000 + index * 64 * 40 * 4 for index in range(3)],
                       [0x40000 + index * 40 * 48 * 4 for index in range(3)],
                       [0x80000 + index * 64 * 48 * 4 for index in range(3)]]
    assert list(arrays) == ["Aarray", "Barray", "Carray"] and owned == list(arrays.values())


@pytest.mark.parametrize("entry, message, field", [
    ("{name: Aarray, type: pointers, to: D}", "holds the addresses of A's, B's or C's matrices, got 'D'",
     "signature[0].to"),
    ("{name: A, type: pointers, to: A}", "named by a C identifier other than A, B and C", "signature[0].name"),
    ("{name: Aarray, type: pointers, to: A, size: 3}", "unknown field 'size'", "signature[0].size"),
])
def test_malformed_arrays_of_pointers_are_refused_at_their_field(tmp_path, entry, message, field):
    with pytest.raises(SpecError, match=message) as info:
        load_spec(write_spec(tmp_path, f"signature: [{entry}, B, C, M, N, K]"))
    assert info.value.field == f"kernels[k].{field}", info.value.field


@pytest.mark.parametrize("symbol, problem", [
    ("_Z1kPKPKfS2_PKPfiiiff", None),                       # (const float* const*, ..., float* const*, ...)
    ("_Z1kPKfS0_PKPfiiiff", "parameter 1 (Aarray, ptr): the kernel's parameter is const float*, a pointer to the "
                            "data; type: pointers passes an array of pointers to A's matrices"),
    ("_Z1kPKPK6__halfPKPKfPKPfiiiff", "parameter 1 (Aarray, ptr): the kernel's parameter is const __half*, and "
                                       "types: makes A fp32"),
])
def test_an_array_of_pointers_is_checked_against_a_pointer_to_pointers_of_its_operands_type(tmp_path, symbol,
                                                                                            problem):
    from driver_gemm.cuda.mangling import demangle
    assert len(demangle(symbol).params) == 8
    signature = kernel_of(tmp_path, POINTER_ARRAYS).signature
    slots = [ParamSlot(i, 0, 8 if i < 3 else 4) for i in range(8)]
    problems = check_signature(slots, demangle(symbol).params, signature, {"A": "fp32", "B": "fp32", "C": "fp32"})
    assert problems == [] if problem is None else problem in problems[0], problems


def test_the_pointer_array_kernel_compiles_and_plans_offline(tmp_path):
    from driver_gemm.planning.build import offline_problems
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "spec.yaml"
    path.write_text(f"shapes: [[130, 72, 40]]\nkernels:\n  - {{name: k, source: {ROOT}/kernels/outside/"
                    f"args_pointer_arrays.cu, function: args_pointer_arrays, block: [16, 16], grid: [ceil(N / 16), "
                    f"ceil(M / 16), batch], tile: [16, 16], {POINTER_ARRAYS}}}\n")
    assert offline_problems(load_spec(path, allow_outside_sources=True)) == ([], {})


CONSTANTS = ("constants: [{name: 'epilogue::scale', type: float32, value: 'alpha * 2'}, "
             "{name: column_scale, type: float32, value: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, M]}]")


def test_constants_are_packed_per_case_as_their_types_and_checked_against_the_images_variables(tmp_path):
    import struct

    from driver_gemm.planning.build import offline_problems
    from driver_gemm.planning.image_checks import constant_symbol
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "spec.yaml"
    kernel = (f"{{name: k, source: {ROOT}/kernels/outside/args_constant_scale.cu, function: args_constant_scale, "
              f"block: [16, 16], grid: [ceil(N / 16), ceil(M / 16)], tile: [16, 16], @}}")
    path.write_text(f"shapes: [[64, 48, 40]]\nscalars: {{alpha: 1.5}}\nkernels:\n"
                    f"  - {kernel.replace('@', CONSTANTS)}\n")
    spec = load_spec(path, allow_outside_sources=True)
    plan = plan_of(spec.kernels[0], scalars=spec.scalars)
    assert plan.constants == {"epilogue::scale": struct.pack("<f", 3.0),
                              "column_scale": struct.pack("<16f", *[1.0] * 15, 64.0)}
    assert constant_symbol("epilogue::scale") == "_ZN8epilogue5scaleE" and constant_symbol("t") == "t"
    assert offline_problems(spec) == ([], {})
    # One of the two left out: noted, since the kernel then reads the image's zeros.
    path.write_text(path.read_text().replace(", {name: column_scale, type: float32, value: [1, 1, 1, 1, 1, 1, 1, "
                                             "1, 1, 1, 1, 1, 1, 1, 1, M]}", ""))
    from driver_gemm.planning.spec_plan import plan_spec
    (planned,) = plan_spec(load_spec(path, allow_outside_sources=True), "sm_90").plans
    assert planned.valid and "__constant__ column_scale (64 bytes) in the image: no constants: entry sets it" in \
        " ".join(planned.notes)


def test_a_scalar_that_only_a_constant_reads_is_read(tmp_path):
    # constants: take the spec's scalars, as a launcher's cudaMemcpyToSymbol(scale, &gamma) does: a scalar read
    # there alone is no misspelt alpha or beta, and is packed as its value.
    import struct

    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "spec.yaml"
    path.write_text(f"shapes: [[64, 48, 40]]\nscalars: {{gamma: 0.5}}\nkernels:\n  - {{name: k, source: {ROOT}/kernels/"
                    f"outside/args_constant_scale.cu, function: args_constant_scale, epilogue: overwrite, block: [16, "
                    f"16], grid: [ceil(N / 16), ceil(M / 16)], tile: [16, 16], constants: [{{name: 'epilogue::scale', "
                    f"type: float32, value: gamma}}, {{name: column_scale, type: float32, value: [1, 1, 1, 1, 1, 1, 1, "
                    f"1, 1, 1, 1, 1, 1, 1, 1, 'gamma * 4']}}]}}\n")
    spec = load_spec(path, allow_outside_sources=True)
    plan = plan_of(spec.kernels[0], scalars=spec.scalars)
    assert plan.constants == {"epilogue::scale": struct.pack("<f", 0.5),
                              "column_scale": struct.pack("<16f", *[1.0] * 15, 2.0)}
    # One that nothing reads is still refused.
    path.write_text(path.read_text().replace("value: gamma}", "value: 0.5}").replace("'gamma * 4'", "2"))
    with pytest.raises(SpecError, match="no kernel reads gamma"):
        load_spec(path, allow_outside_sources=True)


def test_the_images_constants_are_read_with_their_initial_bytes(tmp_path):
    from driver_gemm.cuda.compile import compile_source
    (tmp_path / "k.cu").write_text("__constant__ float table[4];\nnamespace lut { __constant__ int offsets[2] = "
                                   "{7, 9}; }\n__global__ void k(float* C) { C[0] = table[1] + lut::offsets[1]; }\n")
    built = compile_source(tmp_path / "k.cu", ["k"], arch="sm_90", use_cache=False)
    assert built.constant_variables() == {"table": bytes(16), "_ZN3lut7offsetsE": np.array([7, 9], np.int32).tobytes()}


@pytest.mark.parametrize("entry, message, field", [
    ("constants: []", "constants is a non-empty list of {name, type, value}", "constants"),
    ("constants: [{name: t, type: ptr, value: 0}]", "a constant's type is one of", "constants[0].type"),
    ("constants: [{name: 'a b', type: int32, value: 0}]", "a constant is named as its source names",
     "constants[0].name"),
    ("constants: [{name: t, type: int32}]", "a constant needs value", "constants[0]"),
    ("constants: [{name: t, type: int32, value: 1}, {name: t, type: int32, value: 2}]", "constant t is given twice",
     "constants[1].name"),
    ("constants: [{name: t, type: uint8, value: [1, 300]}]", "300 does not fit uint8", "constants[0].value[1]"),
    ("constants: [{name: t, type: int32, value: 1, size: 4}]", "unknown field 'size'", "constants[0].size"),
])
def test_malformed_constants_are_refused_at_their_field(tmp_path, entry, message, field):
    with pytest.raises(SpecError, match=re.escape(message)) as info:
        load_spec(write_spec(tmp_path, f"signature: [A, B, C], {entry}"))
    assert info.value.field == f"kernels[k].{field}", info.value.field


SPLIT_THEN_SUM = """\
shapes: [[130, 72, 40]]
scalars: {alpha: 1.5, beta: 0.5}
kernels:
  - name: split-sum
    source: kernels/outside/args_split_k_then_sum.cu
    function: split_k_partials
    params: {SPLITS: 4}
    block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16), SPLITS]
    tile: [16, 16]
    signature: [A, B, {name: partials, type: buffer, element: float32, size: SPLITS * M * N}, M, N, K]
    then:
      - function: sum_partials<SPLITS>
        block: [256]
        grid: ['ceil(M * N / 256)']
        signature: [partials, C, M, N, alpha, beta]
"""


def _split_then_sum(tmp_path, text: str = SPLIT_THEN_SUM) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "kernels" / "outside").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "kernels" / "outside" / "args_split_k_then_sum.cu", tmp_path / "kernels" / "outside")
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_a_kernel_and_the_launch_that_follows_it_are_planned_compiled_and_checked_as_one_case(tmp_path):
    from driver_gemm.planning.build import offline_problems
    spec = load_spec(_split_then_sum(tmp_path))
    (kernel,) = spec.kernels
    assert kernel.instances == ("split_k_partials<4>", "sum_partials<4>")
    # The following launch's scalars are the case's: beta reaches C, so C is read and checked as alpha AB + beta C.
    assert kernel.reads_c() and [path for path, _ in kernel.leaf_arguments()][-2:] == [
        "then[0].signature[4]", "then[0].signature[5]"]
    plan = plan_of(kernel, Shape(130, 72, 40), spec.scalars)
    assert plan.valid, plan.problems
    assert [config.grid for config in plan.following] == [(37, 1, 1)]
    assert "then[0]: sum_partials<4> launched after it in each case, grid 37x1x1, block 256x1x1" in plan.notes
    assert offline_problems(spec) == ([], {})
    # The following launch's signature is checked against its own function in the image, said at then[0].
    wrong = SPLIT_THEN_SUM.replace("[partials, C, M, N, alpha, beta]", "[C, partials, M, N, alpha, beta]")
    (invalid,), failed = offline_problems(load_spec(_split_then_sum(tmp_path, wrong)))
    assert not failed and invalid.problems[0].field == "kernels[split-sum].then[0].signature"
    assert "C, the output, is passed only to parameters that point to const" in str(invalid.problems[0])


def test_a_following_launch_that_cannot_be_launched_makes_the_case_invalid_at_its_field(tmp_path):
    text = SPLIT_THEN_SUM.replace("grid: ['ceil(M * N / 256)']", "grid: ['ceil(M * N / 256)', 70000]")
    spec = load_spec(_split_then_sum(tmp_path, text))
    plan = plan_of(spec.kernels[0], Shape(130, 72, 40), spec.scalars)
    assert [problem.field for problem in plan.problems] == ["kernels[split-sum].then[0].grid[1]"]
    assert plan.following == (None,)


@pytest.mark.parametrize("change, message, field", [
    ((SPLIT_THEN_SUM[SPLIT_THEN_SUM.index("    then:"):], "    then: []\n"),
     "then is a non-empty list of the launches after the kernel's own", "then"),
    (("        grid: ['ceil(M * N / 256)']\n", ""), "a launch of then: needs grid", "then[0]"),
    (("[partials, C, M, N, alpha, beta]", "[workspace, C, M, N, alpha, beta]"), "unknown argument 'workspace'",
     "then[0].signature[0]"),
    (("[partials, C, M, N, alpha, beta]", "[{name: w, type: buffer, element: int32, size: 4}, C, M, N, alpha, beta]"),
     "a launch of then: takes standard names, typed scalars, pointers and the kernel's own buffers by name",
     "then[0].signature[0].type"),
    (("[partials, C, M, N, alpha, beta]", "[partials, C, M, N, alpha, beta, beta]"), "names beta more than once",
     "then[0].signature[6]"),
    # A launch's value named as the case's own would change the kernel's too: one value a name, in every launch.
    (("[partials, C, M, N, alpha, beta]", "[partials, C, {name: M, type: int32, value: 1}, N, alpha, beta]"),
     "M is the case's own M: written out with a type, its value is M", "then[0].signature[2].value"),
    (("        signature: [partials, C, M, N, alpha, beta]\n",
      "        signature: [partials, C, M, N, alpha, beta, {name: s, type: int32, value: 4}]\n"
      "      - function: sum_partials<SPLITS>\n        block: [256]\n        grid: [1]\n"
      "        signature: [partials, C, M, N, alpha, beta, {name: s, type: int32, value: 1}]\n"),
     "s is an argument of the kernel or of an earlier launch already", "then[1].signature[6].name"),
    (("block: [256]", "blok: [256]"), "unknown field 'blok'", "then[0].blok"),
    (("[A, B, {name: partials", "[A, {name: partials"), "signature must take B exactly once", "signature"),
])
def test_malformed_following_launches_are_refused_at_their_field(tmp_path, change, message, field):
    with pytest.raises(SpecError, match=re.escape(message)) as info:
        load_spec(_split_then_sum(tmp_path, SPLIT_THEN_SUM.replace(*change)))
    assert info.value.field == f"kernels[split-sum].{field}", info.value.field


def test_a_following_launch_reads_sizeof_and_its_buffers_are_checked_as_the_kernels_own(tmp_path):
    from driver_gemm.planning.build import offline_problems
    text = SPLIT_THEN_SUM.replace("        block: [256]\n", "        block: [256]\n        shared_bytes: "
                                  "'sizeof(float[256])'\n")
    spec = load_spec(_split_then_sum(tmp_path, text))
    plans, failed = offline_problems(spec, compile=True)
    assert (plans, failed) == ([], {})
    from driver_gemm.planning.spec_plan import plan_spec
    (plan,) = plan_spec(spec, "sm_90").plans
    assert plan.following[0].shared_bytes == 1024
    # The kernel's buffer of int32, read by the launch after it through a const float*: named there.
    wrong = SPLIT_THEN_SUM.replace("element: float32", "element: int32")
    (invalid,), _ = offline_problems(load_spec(_split_then_sum(tmp_path, wrong)))
    messages = [str(problem) for problem in invalid.problems]
    assert any("then[0].signature" in message and "the buffer's element is int32" in message
               for message in messages), messages


def test_constants_of_a_ptx_image_are_noted_as_checked_when_the_case_is_bound(tmp_path):
    from driver_gemm.planning.image_checks import _check_constants
    kernel = kernel_of(tmp_path, "signature: [A, B, C], constants: [{name: t, type: int32, value: 1}]")
    plan, notes = plan_of(kernel), []
    built = types.SimpleNamespace(constant_variables=lambda: None)      # PTX: the driver knows them at load
    _check_constants(plan, built, lambda *args: pytest.fail(str(args)), notes)
    assert notes == ["constants: a PTX image's __constant__ variables are known once the driver compiles it at "
                     "load; each constant's name and size are checked then, when the case is bound"]


def test_a_launch_sequence_enqueues_the_kernel_then_the_following_launches_and_resets_as_the_kernel():
    from driver_gemm.cuda.launch import LaunchSequence
    log = []

    class Launch:
        def __init__(self, name):
            self.name, self.kernel, self.config, self.attributes, self.stream = name, name, "config", None, "stream"
            self.resets = []

        def launch(self):
            log.append(self.name)

        def reset(self):
            log.append(f"reset {self.name}")

    sequence = LaunchSequence(Launch("partials"), [Launch("sum")])
    sequence.resets = [lambda: None]
    sequence()
    sequence.reset()
    assert log == ["partials", "sum", "reset partials"] and sequence.resets == sequence.first.resets
    assert sequence.kernel == "partials"
