"""A constant's type against the kind of the __constant__ variable it is written into: the PTX declares a scalar
variable with its type (.f32, .u32), so an int32 written into a float (2 read as 2.8e-45) is refused at the
constant's type; an array or a struct is declared as bytes (.b8), whose size alone is checked. No GPU: NVRTC."""

from __future__ import annotations

from driver_gemm.cuda.ptx_facts import KernelPtxFacts, ptx_facts
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.specfile import load_spec

from conftest import ROOT

MODULE = """\
.const .align 4 .f32 _ZN8epilogue5scaleE;
.const .align 4 .b8 column_scale[64];
.const .align 4 .u32 count = 3;
.const .align 8 .f64 weight;
.const .align 4 .b8 pair[8] = {1, 0, 0, 0, 2};
.visible .entry k(
.param .u64 k_param_0
)
{
ld.const.f32 %f1, [_ZN8epilogue5scaleE];
ret;
}
"""


def test_ptx_facts_keep_the_type_of_each_scalar_constant_of_the_module():
    facts = ptx_facts(MODULE)["k"]
    assert facts.constant_types == (("_ZN8epilogue5scaleE", "f32"), ("count", "u32"), ("weight", "f64"))
    # kept beside the CUBIN and read back as they were; facts kept before they were read are unknown
    assert KernelPtxFacts.from_dict(facts.as_dict()).constant_types == facts.constant_types
    assert KernelPtxFacts.from_dict({"copies": []}).constant_types is None


def _plan(tmp_path, scale_type: str):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "shapes: [[64, 48, 40]]\nscalars: {gamma: 0.5}\nkernels:\n- name: k\n"
        f"  source: {ROOT / 'kernels/outside/args_constant_scale.cu'}\n  function: args_constant_scale\n"
        "  block: [16, 16]\n  grid: [ceil(N / 16), ceil(M / 16)]\n  tile: [16, 16]\n  constants:\n"
        f"    - {{name: 'epilogue::scale', type: {scale_type}, value: 2}}\n"
        "    - {name: column_scale, type: float32, value: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, gamma, M]}\n")
    plan, = plan_spec(load_spec(spec, allow_outside_sources=True), "sm_90").plans
    return plan


def test_an_integer_constant_into_a_float_variable_is_refused_at_its_type(tmp_path):
    for integer in ("int32", "uint32"):
        problem, = _plan(tmp_path, integer).problems
        assert problem.field == "kernels[k].constants[0].type"
        assert (f"constant epilogue::scale: type {integer} writes integer bits, but the kernel's __constant__ "
                "epilogue::scale is a float (its PTX declares it .f32)") in problem.message
        assert problem.hint == "give the variable's own type: float32"
    assert _plan(tmp_path, "float32").valid
