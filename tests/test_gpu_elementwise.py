"""Fused element-wise epilogues on a GPU: a Linear layer C = act(A @ B + bias) (tests/kernels/fused_elementwise.cu,
bf16 in, fp32 or bf16 out) PASSes when its spec says ``elementwise: [relu]`` or ``[gelu]``, and FAILs when the spec
leaves the activation out, or names another one, where the activation changed C."""

from __future__ import annotations

import pytest

from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.state import RunOptions
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from gpu_specs import quick, write_spec

pytestmark = pytest.mark.gpu

# M past a 16-row block, N and K no multiple of anything the kernel tiles by
SHAPES = ["[1001, 520, 776]", "[65, 130, 17]"]
ACTIVATIONS = {"relu": 1, "gelu": 2}


def fused_kernel(activation: str, out: str, elementwise: str) -> str:
    """The spec entry of the fused kernel applying `activation`, storing `out` (fp32 or bf16), described with the
    `elementwise` line (empty: none)."""
    out_type = "float" if out == "fp32" else "dg::bfloat16_t"
    return f"""\
    - name: fused
      source: "@TESTS@/fused_elementwise.cu"
      function: linear_act
      params: {{ACT: {ACTIVATIONS[activation]}, OUT: "{out_type}"}}
      types: {{a: bf16, b: bf16, c: {out}, accumulate: fp32}}
      {elementwise}
      epilogue: overwrite
      block: [16, 16]
      grid: [ceil(N / 16), ceil(M / 16)]
      tile: [16, 16]
      signature: [A, B, {{name: bias, type: buffer, element: fp32, size: N, bias: N}}, C, M, N, K]
    """


def fused_cases(tmp_path, entry: str) -> list:
    run = run_spec(quick(load_spec(write_spec(tmp_path, entry, SHAPES))), options=RunOptions())
    assert all(case.status in (Status.PASS, Status.REF) for case in run.cases if case.name != "fused"), \
        [(case.name, case.status, case.message) for case in run.cases]
    return [case for case in run.cases if case.name == "fused"]


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("out", ["fp32", "bf16"])
def test_a_fused_activation_passes_as_described_and_its_vendor_row_multiplies_the_product(tmp_path, activation, out):
    cases = fused_cases(tmp_path, fused_kernel(activation, out, f"elementwise: [{activation}]"))
    assert len(cases) == len(SHAPES)
    for case in cases:
        assert case.status == Status.PASS, (case.shape.label, case.status, case.message)
        assert case.verification.wrong == 0 and case.pct_cublas is not None


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_the_same_kernel_described_without_its_activation_fails(tmp_path, activation):
    for case in fused_cases(tmp_path, fused_kernel(activation, "fp32", "")):
        assert case.status == Status.FAIL, (case.shape.label, case.message)
        assert case.verification.wrong > 0


def test_gelu_described_as_its_tanh_approximation_fails_in_fp32(tmp_path):
    # The two forms differ by up to about 5e-4 of a unit-sized input: far beyond an fp32 output's tolerance.
    for case in fused_cases(tmp_path, fused_kernel("gelu", "fp32", "elementwise: [gelu_tanh]")):
        assert case.status == Status.FAIL, (case.shape.label, case.message)
