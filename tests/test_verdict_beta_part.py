"""The check of a kernel that reads C (beta not 0): where beta C0 outweighs alpha A @ B, C as a whole is within its
tolerance even when the kernel left the product out, so what the kernel added to beta C0 is also held against
alpha A @ B. A product too small for C's rounding to show cannot be told from none, and a correct kernel passes
whatever the share of the product."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from driver_gemm.gemm import dtypes
from driver_gemm.gemm.operands import KernelOutput, gemm_operands, make_typed_inputs, reference
from driver_gemm.measure.inputs import make_inputs
from driver_gemm.measure.reference import cpu_reference
from driver_gemm.measure.verify import POISON_WORD, compare, compare_typed
from driver_gemm.session import steps, typed_steps
from driver_gemm.specfile.model import Shape, VerifySettings
from driver_gemm.status import Status

from test_typed_pipeline import parse, spec_text, typed_run, write_result


def typed_pipeline_run(tmp_path, type_name: str | None, alpha: float, beta: float, shape=(128, 128, 64), *,
                       type_line: str | None = None):
    """A typed kernel's case up to its launch, its inputs drawn and C set to what it starts from: of `type_name`
    throughout, or of the spec's `type_line` (``types: {a: bf16, c: fp32}``)."""
    M, N, K = shape
    spec = parse(spec_text(type_line or f"types: {{a: {type_name}}}", f"scalars: {{alpha: {alpha}, beta: {beta}}}",
                           shapes=f"[[{M}, {N}, {K}]]"), tmp_path)
    run = typed_run(spec)
    typed_steps.inputs(run)
    typed_steps.reference_step(run)
    typed_steps._reset_output(run)
    return run


def correct_values(run) -> np.ndarray:
    """A correct kernel's C: an fp32 sum, then alpha x sum + beta x C0 in fp32 (rounded to C's type on writing)."""
    typed = run.typed
    accumulated = np.matmul(typed.inputs.a.astype(np.float32), typed.inputs.b.astype(np.float32))
    return (np.float32(typed.alpha) * accumulated + np.float32(typed.beta) * typed.inputs.c0.astype(np.float32)) \
        .astype(np.float64)


@pytest.mark.parametrize("type_name, alpha, beta", [
    ("bf16", 0.001, 0.5), ("bf16", 1e-4, 1.0), ("fp16", 0.002, -1.0), ("bf16", 1.5, 0.3), ("fp32", 1e-4, 0.7),
])
def test_a_correct_kernel_that_reads_c_passes_whatever_the_products_share(tmp_path, type_name, alpha, beta):
    run = typed_pipeline_run(tmp_path, type_name, alpha, beta)
    write_result(run, correct_values(run))
    verdict = typed_steps.check_output(run)
    assert verdict.status == Status.PASS, (verdict.as_dict(), verdict.note)


def test_a_product_smaller_than_cs_rounding_cannot_be_told_from_none():
    types = dtypes.parse_types({"a": "bf16"})
    operands = gemm_operands(64, 64, 32)
    inputs = make_typed_inputs(operands, types, 5, with_c=True)
    alpha, beta = 1e-7, 1.0
    expected = reference(inputs.a, inputs.b, alpha, beta, inputs.c0)
    codes = dtypes.encode(beta * inputs.c0, types.c)
    left_out = compare_typed(KernelOutput(dtypes.decode(codes, types.c), codes, 0), expected, types.c,
                             rel_tolerance=dtypes.error_bound(types, 32), start=inputs.c0, beta=beta,
                             epilogue_roundoff=types.accumulate.unit_roundoff)
    # The correct answer rounds to beta C0 in nearly every element: the two cannot be told apart, and neither fails.
    assert left_out.status == Status.PASS and left_out.note is None


def untyped_case(alpha: float, beta: float):
    shape = Shape(96, 80, 48)
    inputs = make_inputs(shape, 11, with_c=True)
    return shape, inputs, cpu_reference(inputs, alpha, beta)


def test_an_untyped_kernel_that_writes_beta_c0_alone_fails():
    alpha, beta = 3e-7, 0.5
    _, inputs, expected = untyped_case(alpha, beta)
    left_out = (beta * inputs.C0).astype(np.float32)
    assert compare(left_out, expected, rel_tolerance=1e-5, start=inputs.C0).status == Status.PASS, \
        "C as a whole is within the tolerance: only the product's own check finds it"
    verdict = compare(left_out, expected, rel_tolerance=1e-5, start=inputs.C0, beta=beta)
    assert verdict.status == Status.FAIL and "C - beta C0 is not alpha A @ B" in verdict.note
    correct = np.float32(alpha) * (inputs.A @ inputs.B) + np.float32(beta) * inputs.C0
    assert compare(correct, expected, rel_tolerance=1e-5, start=inputs.C0, beta=beta).status == Status.PASS


class HostBuffer:
    """C's device buffer as host memory: what the launch step uploads, fills and reads back."""

    def __init__(self, shape):
        self.values = np.zeros(shape, np.float32)

    def upload(self, array, stream):
        self.values[...] = array

    def fill_u32(self, word, stream):
        self.values.view(np.uint32)[...] = word

    def download_into(self, out, stream):
        out[...] = self.values
        return out


def test_the_untyped_launch_step_holds_c_against_the_product_with_the_kernels_beta(monkeypatch):
    alpha, beta = 3e-7, 0.5
    shape, inputs, expected = untyped_case(alpha, beta)
    buffer = HostBuffer((shape.M, shape.N))
    session = SimpleNamespace(buffers_for=lambda _: {"C": buffer}, stream=SimpleNamespace(synchronize=lambda: None),
                              output_array=lambda _: np.empty((shape.M, shape.N), np.float32))
    run = SimpleNamespace(session=session, inputs=inputs, expected=expected, reference_name="numpy-float64",
                          spec=SimpleNamespace(verify=VerifySettings()), record=SimpleNamespace(),
                          case=SimpleNamespace(shape=shape, kernel=SimpleNamespace(precision="fp32"),
                                               plan=SimpleNamespace(argument_values={"alpha": alpha, "beta": beta})))

    def bind(run):          # the launch: a kernel that writes beta x C (as it started) and leaves the product out
        run.launch = lambda: buffer.upload(np.float32(beta) * buffer.values, None)

    monkeypatch.setattr(steps, "bind", bind)
    steps.launch_verify(run)
    assert buffer.values.view(np.uint32).tolist() != [[POISON_WORD] * shape.N] * shape.M
    assert run.verdict.status == Status.FAIL and "C - beta C0 is not alpha A @ B" in run.verdict.note
