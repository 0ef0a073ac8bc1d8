"""A tensor map over one of the case's own buffers: scale factors a block-scaled FP8 kernel reads through TMA.

DeepGEMM's kernels take A's scale factors only as a tensor map, never as a pointer: the buffer is
``pass: none`` (the case allocates and fills it; no parameter takes it), and the map names it as its
``tensor``, with its dims and strides. Without a GPU: the spec's checks, the map planned over the buffer
(its element, and its reach against the buffer's bytes), the kernel's parameters matched without the buffer,
and the launch's arguments.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from driver_gemm.errors import SpecError
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.session.bind import launch_values
from driver_gemm.specfile import load_spec

KERNEL = """\
#include <cuda.h>
__global__ void k(const float* A, const float* B, float* C, int M, int N, int K,
                  const __grid_constant__ CUtensorMap map_sfa) {
    if (M < 0) C[0] = A[0] + B[0] + (float)map_sfa.opaque[0];
}
"""
SFA = "{name: sfa, type: buffer, element: float32, size: M * ceil(K / 128), fill: [1.0, 2.0], pass: none}"
MAP = "{name: map_sfa, type: tensormap, tensor: sfa, dims: [M, ceil(K / 128)], strides: [M * 4], box: [32, 1]}"


def write(tmp_path, signature: str) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "k.cu").write_text(KERNEL)
    path = tmp_path / "spec.yaml"
    path.write_text("shapes: [[256, 128, 512]]\nkernels:\n  - {name: k, source: k.cu, function: k, block: [128], "
                    f"grid: [1], signature: {signature}}}\n")
    return path


def test_a_map_over_a_buffer_that_is_no_parameter_is_planned_and_launched(tmp_path):
    spec = load_spec(write(tmp_path, f"[A, B, C, M, N, K, {MAP}, {SFA}]"))
    kernel = spec.kernels[0]
    assert [argument.name for argument in kernel.signature] == ["A", "B", "C", "M", "N", "K", "map_sfa"]
    assert [(path, argument.name) for path, argument in kernel.memory] == [("signature[7]", "sfa")]
    plan, = plan_spec(spec, "sm_90").plans
    assert plan.valid, plan.problems           # 7 parameters in the image, the buffer among none of them
    assert plan.buffers["sfa"].count == 256 * 4 and plan.buffers["sfa"].element == "float32"
    sfa_map = plan.tensor_maps["map_sfa"]
    assert (sfa_map.element_type, sfa_map.extents, sfa_map.strides_bytes, sfa_map.box) == (
        "fp32", (256, 4), (1024,), (32, 1))
    encoded = []
    types, values = launch_values(kernel, plan.argument_values, {"A": 0xA0, "B": 0xB0, "C": 0xC0, "sfa": 0x50},
                                  lambda argument, position: encoded.append(argument.name) or ("tensormap", b"m" * 128))
    assert encoded == ["map_sfa"] and types[-1] == "tensormap" and len(values) == 7


def test_a_map_reaching_past_its_buffer_is_refused_at_its_dims(tmp_path):
    plan, = plan_spec(load_spec(write(tmp_path, f"[A, B, C, M, N, K, {MAP.replace('M, ceil', '2 * M, ceil')}, "
                                                f"{SFA}]")), "sm_90").plans
    problem, = [p for p in plan.problems if "map_sfa" in str(p)]
    assert "past its 4096-byte buffer" in str(problem) and problem.field.endswith("signature[6].dims")


@pytest.mark.parametrize("signature, message, field", [
    (f"[A, B, C, M, N, K, {MAP.replace('tensor: sfa', 'tensor: sfb')}, {SFA}]",
     "tensor map's tensor 'sfb' is neither A, B, C nor a buffer", "signature"),
    (f"[A, B, C, M, N, K, {SFA}]", "has pass: none, but no tensor map reads it", "signature[6].pass"),
    (f"[A, B, C, M, N, K, {MAP.replace(', dims: [M, ceil(K / 128)], strides: [M * 4]', '')}, {SFA}]",
     "a map over a buffer of the signature gives its dims", "signature[6].tensor"),
    (f"[A, B, C, M, N, K, {MAP}, {SFA.replace('pass: none', 'pass: maybe')}]", "pass is parameter",
     "signature[7].pass"),
    (f"[{{name: g, type: struct, fields: [A, B, C, M, N, K, {SFA}]}}]", "pass: none is for a buffer of the "
     "signature itself", "signature[0].fields[6].pass"),
])
def test_malformed_maps_over_buffers_are_refused_at_their_field(tmp_path, signature, message, field):
    with pytest.raises(SpecError, match=message.replace("(", r"\(")) as info:
        load_spec(write(tmp_path, signature))
    assert info.value.field == f"kernels[k].{field}"


def test_the_gpu_tests_row_scale_kernel_plans_offline(tmp_path):
    # tests/test_gpu_outside_args.py runs it: its 1-D map over a pass: none buffer matches the compiled image.
    from test_gpu_outside_args import SCALES_THROUGH_A_MAP
    from gpu_specs import write_spec as write_gpu_spec
    path = write_gpu_spec(tmp_path, SCALES_THROUGH_A_MAP, ["[1001, 520, 776]", "[65, 130, 17]"])
    planned = plan_spec(load_spec(path), "sm_90a")
    assert not planned.compile_errors and len(planned.plans) == 2
    for plan in planned.plans:
        assert plan.valid, plan.problems
        assert plan.tensor_maps["row_scales"].extents == (plan.shape.M,) and plan.buffers["scales"].count == plan.shape.M
