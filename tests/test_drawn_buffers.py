"""Buffers whose values the case draws and the reference uses: block scales (block-scaled FP8, as DeepGEMM lays
its factors out) and a bias added to C. Parsed and refused at their field, planned per shape (a grid of factors,
or a value per column or row, with NaN around them), and applied by the reference, so that a kernel that reads a
value from the wrong place, or none, fails its check. No GPU."""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.errors import SpecError
from driver_gemm.gemm import dtypes
from driver_gemm.gemm.operands import make_typed_inputs, reference
from driver_gemm.planning.buffer_plans import SCALE_EXPONENTS
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.buffer_plans import BIAS_STEPS
from driver_gemm.session.typed_steps import _scaled
from driver_gemm.specfile import Shape, parse_spec

from conftest import ROOT

SM90 = arch_limits("sm_90")
SCALES_A = "{name: scales_a, type: buffer, element: float32, size: ceil(K / 128) * M, " \
           "scales: {of: A, block: [1, 128], order: col}}"
SCALES_B = "{name: scales_b, type: buffer, element: float32, size: ceil(N / 128) * ceil(K / 128), " \
           "scales: {of: B, block: [128, 128], order: col}}"


def spec_text(*buffers: str, typed: str = "types: {a: e4m3, b: e4m3, c: fp32, accumulate: fp32}\n  layout: NT",
              extra: str = "") -> str:
    arguments = "".join(f"    - {item}\n" for item in ("A", "B", "C", "M", "N", "K", *buffers))
    return (f"shapes: [[1001, 520, 776], [65, 130, 300]]\nkernels:\n- name: fp8-block-scaled\n"
            f"  source: {ROOT / 'kernels/outside/fp8_block_scaled.cu'}\n  function: fp8_block_scaled\n  arch: sm_90\n"
            f"  {typed}\n  epilogue: overwrite\n{extra}  block: [16, 16]\n  grid: [ceil(N / 16), ceil(M / 16)]\n"
            f"  signature:\n{arguments}")


def planned(text: str, shape: Shape):
    spec = parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True)
    return plan_case(spec.kernels[0], shape, SM90)


# ------------------------------------------------------------------------------------------------ the spec


@pytest.mark.parametrize("buffer, needle", [
    ("{name: s, type: buffer, element: float32, size: M, fill: 1.0, scales: {of: A, block: [1, 128]}}",
     "takes no fill"),
    ("{name: s, type: buffer, element: int32, size: M, scales: {of: A, block: [1, 128]}}", "stored as float32"),
    ("{name: s, type: buffer, element: float32, size: M, scales: {of: C, block: [1, 128]}}", "of is A or B"),
    ("{name: s, type: buffer, element: float32, size: M, scales: {of: A, block: [128]}}", "block is [rows, cols]"),
    ("{name: s, type: buffer, element: float32, size: M, scales: {of: A}}", "need block"),
    ("{name: s, type: buffer, element: float32, size: M, scales: {of: A, block: [1, 128], order: diagonal}}",
     "order is row"),
    ("{name: s, type: buffer, element: float32, size: M, scales: {of: A, block: [1, 128], step: 2}}", "step"),
    ("{name: s, type: buffer, element: float32, size: M, scales: 128}", "scales is a mapping"),
    ("{name: s, type: buffer, element: float32, size: M, scales: {of: A, block: [1, 0.5]}}", "whole"),
    ("{name: bias, type: buffer, element: float32, size: N, bias: K}", "bias is N (a value per column of C"),
    ("{name: bias, type: buffer, element: float32, size: N, bias: N, fill: 0.5}", "it takes no fill"),
    ("{name: bias, type: buffer, element: int32, size: N, bias: N}", "a bias is stored as float32"),
    ("{name: bias, type: buffer, element: float32, size: N, bias: N, scales: {of: A, block: [1, 128]}}",
     "block scales or a bias, not both"),
])
def test_a_malformed_scales_or_bias_entry_is_refused_at_its_field(buffer, needle):
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_text(buffer), ROOT / "spec.yaml", allow_outside_sources=True)
    assert needle in str(caught.value), str(caught.value)


def test_block_scales_need_a_typed_kernel_of_one_matrix_and_one_buffer_per_operand():
    with pytest.raises(SpecError, match="a buffer of block scales needs a kernel with typed operands"):
        parse_spec(spec_text(SCALES_A, typed="precision: fp32"), ROOT / "spec.yaml", allow_outside_sources=True)
    with pytest.raises(SpecError, match="one matrix per operand"):
        parse_spec(spec_text(SCALES_A, extra="  batch: 2\n"), ROOT / "spec.yaml", allow_outside_sources=True)
    text = spec_text(SCALES_A, SCALES_A.replace("scales_a", "more_a"))
    with pytest.raises(SpecError, match="already takes its block scales from scales_a") as caught:
        parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True)
    assert caught.value.where.endswith(f":{text.rstrip().count(chr(10)) + 1}"), caught.value.where   # the second


# ------------------------------------------------------------------------------------------------ the plan


def test_the_factors_sit_where_the_layout_says_with_nan_around_them():
    plan = planned(spec_text(SCALES_A.replace("ceil(K / 128) * M", "ceil(K / 128) * (M + 8)")
                             .replace("order: col}", "order: col, ld: M + 8}"), SCALES_B), Shape(1001, 520, 776))
    assert plan.valid, plan.problems
    scales_a, scales_b = plan.buffers["scales_a"], plan.buffers["scales_b"]
    grid = scales_a.grid
    assert (grid.rows, grid.cols, grid.ld) == (1001, 7, 1009)      # a factor per row and 128 of K's 776
    assert "block scales scales_a: a factor per 1 x 128 block of A: 1001 x 7, col order, ld 1009" in plan.notes
    contents = np.frombuffer(scales_a.initial_bytes().tobytes(), dtype="<f4").astype(np.float64)
    factors = grid.factors()
    for row, block in ((0, 0), (1000, 6), (517, 3)):
        assert contents[block * 1009 + row] == factors[row, block]     # column after column, ld M + 8
    placed = np.zeros(contents.size, bool)
    placed[grid.offsets()] = True
    assert np.isnan(contents[~placed]).all() and not np.isnan(contents[placed]).any()
    exponents = np.log2(factors)
    assert exponents.min() == SCALE_EXPONENTS[0] and exponents.max() == SCALE_EXPONENTS[1]
    assert (exponents == np.round(exponents)).all()
    assert (scales_b.grid.rows, scales_b.grid.cols) == (7, 5)            # K / 128 by N / 128 blocks of B
    # Drawn from the shape: the same factors on every plan of it, others for A and B.
    again = planned(spec_text(SCALES_A, SCALES_B), Shape(1001, 520, 776))
    assert again.buffers["scales_b"].grid == scales_b.grid
    assert again.buffers["scales_a"].grid.exponents != scales_b.grid.exponents


@pytest.mark.parametrize("size, ld, needle", [
    ("M", None, "reaches 7,007"),
    ("ceil(K / 128) * M", "M - 1", "ld 1000 is shorter than a column"),
])
def test_a_buffer_or_ld_too_small_for_its_grid_makes_the_case_invalid_naming_both(size, ld, needle):
    entry = SCALES_A.replace("ceil(K / 128) * M", size)
    if ld is not None:
        entry = entry.replace("order: col}", f"order: col, ld: {ld}}}")
    plan = planned(spec_text(entry), Shape(1001, 520, 776))
    messages = [str(problem) for problem in plan.problems]
    assert any("buffer scales_a" in message and needle in message for message in messages), messages


def test_bfloat16_factors_are_exact():
    plan = planned(spec_text(SCALES_A.replace("float32", "bf16")), Shape(65, 130, 300))
    buffer = plan.buffers["scales_a"]
    words = np.frombuffer(buffer.initial_bytes().tobytes(), dtype="<u2").astype(np.uint32) << 16
    values = words.view(np.float32)
    assert np.array_equal(values[buffer.grid.offsets()], buffer.grid.factors())


# ------------------------------------------------------------------------------------------ the reference


def kernel_reads(a, b, scales_a: np.ndarray, scales_b: np.ndarray, M: int, N: int, K: int, *, b_order="col"):
    """What kernels/outside/fp8_block_scaled.cu computes, reading the factors from the buffers' memory as DeepGEMM
    lays them out (B's in `b_order`: col is DeepGEMM's, row a kernel that misreads them)."""
    blocks = -(-K // 128)
    out = np.zeros((M, N))
    for block in range(blocks):
        part = a[:, block * 128:(block + 1) * 128] @ b[block * 128:(block + 1) * 128, :]
        factor_a = scales_a[block * M: block * M + M][:, None]
        columns = np.arange(N) // 128
        at = columns * blocks + block if b_order == "col" else block * (-(-N // 128)) + columns
        out += part * factor_a * scales_b[at][None, :]
    return out


def test_the_reference_applies_each_blocks_factor_and_fails_a_kernel_that_misreads_them():
    kernel = parse_spec(spec_text(SCALES_A, SCALES_B), ROOT / "spec.yaml", allow_outside_sources=True).kernels[0]
    plan, types = plan_case(kernel, Shape(1001, 520, 776), SM90), kernel.operands.types
    inputs = make_typed_inputs(plan.operands, types, seed=5)
    grids = {buffer.grid.operand: buffer.grid for buffer in plan.buffers.values()}
    expected = reference(_scaled(inputs.a, grids["a"]), _scaled(inputs.b, grids["b"]))[0]
    memory = {name: np.frombuffer(buffer.initial_bytes().tobytes(), dtype="<f4").astype(np.float64)
              for name, buffer in plan.buffers.items()}
    a, b = inputs.a[0], inputs.b[0]
    right = kernel_reads(a, b, memory["scales_a"], memory["scales_b"], 1001, 520, 776)
    assert np.allclose(right, expected, rtol=1e-12, atol=1e-9)
    wrong = kernel_reads(a, b, memory["scales_a"], memory["scales_b"], 1001, 520, 776, b_order="row")
    unscaled = reference(inputs.a, inputs.b)[0]
    for product in (wrong, unscaled):
        error = np.linalg.norm(np.nan_to_num(product, nan=1e30) - expected) / np.linalg.norm(expected)
        assert error > dtypes.error_bound(types, 776) * 10


def planned_gpu_test(tmp_path, entry: str, shapes: list[str]):
    """The plans of a GPU test's kernel entry, compiled and checked against the image here, every one valid."""
    from gpu_specs import write_spec
    from driver_gemm import plan_spec
    from driver_gemm.specfile import load_spec
    planned = plan_spec(load_spec(write_spec(tmp_path, entry, shapes)), "sm_90")
    assert not planned.compile_errors and len(planned.plans) == len(shapes)
    assert all(plan.valid for plan in planned.plans), [plan.problems for plan in planned.plans]
    return planned.plans


@pytest.mark.parametrize("order_b", ["col", "row"])
def test_the_gpu_tests_block_scaled_kernel_plans_offline(tmp_path, order_b):
    # tests/test_gpu_outside_args.py runs it: compiled, its signature matches the image, and both buffers hold their
    # grids (B's as it is laid out, and as the failing case misdescribes it).
    from test_gpu_outside_args import BLOCK_SCALED_FP8
    for plan in planned_gpu_test(tmp_path, BLOCK_SCALED_FP8.replace("ORDER_B", order_b),
                                 ["[1001, 520, 776]", "[65, 300, 272]"]):
        grid_b = plan.buffers["scales_b"].grid
        assert (grid_b.rows, grid_b.cols, grid_b.order) == (-(-plan.shape.K // 128), -(-plan.shape.N // 128), order_b)


# -------------------------------------------------------------------------------------------------- a bias

BIAS = "{name: bias, type: buffer, element: float32, size: N, bias: N}"


def test_a_bias_needs_a_typed_kernel_and_is_one():
    with pytest.raises(SpecError, match="a bias needs a kernel with typed operands"):
        parse_spec(spec_text(BIAS, typed="precision: fp32"), ROOT / "spec.yaml", allow_outside_sources=True)
    with pytest.raises(SpecError, match="C already takes a bias from bias"):
        parse_spec(spec_text(BIAS, BIAS.replace("name: bias", "name: more")), ROOT / "spec.yaml",
                   allow_outside_sources=True)


@pytest.mark.parametrize("along, length", [("N", 520), ("M", 1001)])
def test_a_bias_is_drawn_per_shape_and_added_along_its_axis(along, length):
    kernel = parse_spec(spec_text(BIAS.replace("size: N", "size: N + M").replace("bias: N", f"bias: {along}")),
                        ROOT / "spec.yaml", allow_outside_sources=True).kernels[0]
    plan = plan_case(kernel, Shape(1001, 520, 776), SM90)
    assert plan.valid, plan.problems
    buffer = plan.buffers["bias"]
    contents = np.frombuffer(buffer.initial_bytes().tobytes(), dtype="<f4").astype(np.float64)
    values = buffer.bias.values()
    assert len(values) == length and np.array_equal(contents[:length], values)
    assert np.isnan(contents[length:]).all()
    steps = np.ldexp(values, -buffer.bias.exponent) * BIAS_STEPS    # whole steps of 2 ** exponent, C's scale
    assert (steps == np.round(steps)).all() and np.abs(steps).max() <= BIAS_STEPS
    assert len(np.unique(values)) > 20
    assert f"bias bias: a value per {'column' if along == 'N' else 'row'} of C, {length} of them" in plan.notes
    product = np.zeros((1, 1001, 520))
    added = buffer.bias.added(product.copy())[0]
    assert np.array_equal(added[7], values) if along == "N" else np.array_equal(added[:, 7], values)


def test_a_bias_buffer_shorter_than_its_axis_makes_the_case_invalid():
    plan = planned(spec_text(BIAS.replace("size: N", "size: N - 1")), Shape(1001, 520, 776))
    assert any("holds 519 elements, but a bias along N needs 520" in str(problem) for problem in plan.problems)


@pytest.mark.parametrize("along", ["N", "M"])
def test_the_gpu_tests_bias_kernel_plans_offline(tmp_path, along):
    from test_gpu_outside_args import BIAS_EPILOGUE
    for plan in planned_gpu_test(tmp_path, BIAS_EPILOGUE.replace("ALONG", along), ["[1001, 520, 776]", "[65, 130, 17]"]):
        assert len(plan.buffers["bias"].bias.steps) == (plan.shape.N if along == "N" else plan.shape.M)


def test_the_reference_step_applies_the_kernels_scales_and_bias_and_the_vendor_row_keeps_its_own():
    # The reference step of a run, on the inputs the session holds: the kernel's expected C has A and B scaled by
    # their blocks' factors and the bias added; the vendor row of the same inputs gets the plain product.
    from types import SimpleNamespace
    from driver_gemm.session.state import HeldTypedInputs
    from driver_gemm.session.typed_steps import TypedCase, reference_step
    from driver_gemm.specfile.model import VerifySettings
    kernel = parse_spec(spec_text(SCALES_A, SCALES_B, BIAS), ROOT / "spec.yaml", allow_outside_sources=True).kernels[0]
    shape = Shape(65, 130, 300)
    plan = plan_case(kernel, shape, SM90)
    inputs = make_typed_inputs(plan.operands, kernel.operands.types, seed=3)
    held = HeldTypedInputs(shape, inputs, {})

    def expected_of(lt):
        run = SimpleNamespace(typed=TypedCase(kernel.operands.types, plan.operands, 1.0, 0.0, inputs, held),
                              spec=SimpleNamespace(verify=VerifySettings()),
                              case=SimpleNamespace(shape=shape, lt=lt, plan=plan))
        reference_step(run)
        return run.expected[0]

    grids = {buffer.grid.operand: buffer.grid for buffer in plan.buffers.values() if buffer.grid is not None}
    a = inputs.a[0] * np.repeat(grids["a"].factors(), 128, axis=1)[:, :300]
    b = inputs.b[0] * np.repeat(np.repeat(grids["b"].factors(), 128, axis=0), 128, axis=1)[:300, :130]
    assert np.allclose(expected_of(None), a @ b + plan.buffers["bias"].bias.values()[None, :], rtol=1e-13)
    assert np.allclose(expected_of(SimpleNamespace()), inputs.a[0] @ inputs.b[0], rtol=1e-13)
    assert len(held.references) == 2
