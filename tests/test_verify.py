import numpy as np
import pytest

from driver_gemm.specfile.model import Shape
from driver_gemm.measure.inputs import case_seed, make_inputs
from driver_gemm.measure.reference import cpu_reference as reference
from driver_gemm.measure.verify import POISON_WORD, compare
from driver_gemm.status import Status


def poisoned(shape):
    return np.full(shape, POISON_WORD, dtype=np.uint32).view(np.float32)


def test_poison_is_a_nan_no_arithmetic_makes():
    value = np.array([POISON_WORD], dtype=np.uint32).view(np.float32)[0]
    assert np.isnan(value)
    with np.errstate(invalid="ignore"):
        computed = np.float32(np.inf) - np.float32(np.inf)
    assert np.array([computed], dtype=np.float32).view(np.uint32)[0] != POISON_WORD


def test_inputs_are_reproducible_and_in_range():
    first = make_inputs(Shape(7, 5, 3), 123)
    again = make_inputs(Shape(7, 5, 3), 123)
    other = make_inputs(Shape(7, 5, 3), 124)
    assert first.A.shape == (7, 3) and first.B.shape == (3, 5) and first.A.dtype == np.float32
    assert np.array_equal(first.A, again.A) and not np.array_equal(first.A, other.A)
    assert first.A.min() >= -0.5 and first.A.max() < 0.5 and first.C0 is None
    assert make_inputs(Shape(2, 2, 2), 1, with_c=True).C0.shape == (2, 2)


def test_case_seed_is_stable_and_distinct():
    assert case_seed(2026, "v4", "1x1x1") == case_seed(2026, "v4", "1x1x1")
    assert case_seed(2026, "v4", "1x1x1") != case_seed(2026, "v3", "1x1x1")
    assert 0 <= case_seed(1, "x") < 2**63


def test_exact_float32_product_passes():
    inputs = make_inputs(Shape(64, 48, 32), 5)
    expected = reference(inputs)
    verdict = compare((inputs.A @ inputs.B).astype(np.float32), expected, rel_tolerance=1e-5)
    assert verdict.status == Status.PASS and verdict.unwritten == 0 and verdict.wrong == 0
    assert 0 < verdict.rel_fro_error < 1e-6


def test_unwritten_rows_fail_and_are_counted():
    inputs = make_inputs(Shape(100, 40, 16), 5)
    expected = reference(inputs)
    output = poisoned(expected.shape)
    output[:90] = expected[:90]
    verdict = compare(output, expected, rel_tolerance=1e-5)
    assert verdict.status == Status.FAIL and verdict.unwritten == 10 * 40
    assert verdict.masks["unwritten"][90:].all() and not verdict.masks["unwritten"][:90].any()
    assert verdict.nonfinite == 0 and verdict.wrong == 0 and verdict.right == 90 * 40
    assert verdict.rel_fro_error < 1e-6  # measured on the written elements only


def test_computed_nan_is_nonfinite_not_unwritten():
    expected = np.ones((4, 4))
    output = np.ones((4, 4), dtype=np.float32)
    output[1, 2] = np.nan
    verdict = compare(output, expected, rel_tolerance=1e-5)
    assert verdict.status == Status.FAIL and verdict.nonfinite == 1 and verdict.unwritten == 0


def test_wrong_values_fail():
    expected = np.arange(16, dtype=np.float64).reshape(4, 4) + 1
    output = expected.astype(np.float32)
    output[3, 3] += 1.0
    verdict = compare(output, expected, rel_tolerance=1e-5)
    assert verdict.status == Status.FAIL and verdict.wrong == 1 and verdict.max_abs_error == pytest.approx(1.0)


def test_absolute_tolerance_is_enforced():
    expected = np.ones((2, 2))
    output = np.full((2, 2), 1 + 1e-6, dtype=np.float32)
    assert compare(output, expected, rel_tolerance=1e-5).status == Status.PASS
    assert compare(output, expected, rel_tolerance=1e-5, abs_tolerance=1e-9).status == Status.FAIL


def test_kernels_that_read_c_count_untouched_elements():
    inputs = make_inputs(Shape(8, 8, 8), 3, with_c=True)
    expected = reference(inputs, alpha=1.0, beta=0.5)
    output = expected.astype(np.float32)
    output[0] = inputs.C0[0]          # row 0 left as it was
    verdict = compare(output, expected, rel_tolerance=1e-5, start=inputs.C0)
    assert verdict.unwritten == 8 and verdict.status == Status.FAIL
    assert np.allclose(expected, 0.5 * inputs.C0 + inputs.A.astype(np.float64) @ inputs.B)


@pytest.mark.parametrize("element", ["fp16", "bf16", None])
def test_an_answer_that_lands_on_cs_own_start_counts_as_written(element):
    # C = A @ B + 0.5 C in half precision: wherever A @ B is about half of C's start, the right answer rounds to
    # the very code C started with. Those elements are right, not unwritten; an element left at a start that
    # could not be the answer still is.
    from driver_gemm.gemm import dtypes
    from driver_gemm.gemm.operands import KernelOutput
    from driver_gemm.measure.verify import compare_typed

    rng = np.random.default_rng(7)
    start = rng.uniform(-1, 1, (64, 64))
    expected = start * (1 + rng.uniform(-1e-4, 1e-4, start.shape))   # each answer within a rounding of its start
    expected[5, 7] = start[5, 7] + 0.25                              # this one far from it
    expected[9, 9] = start[9, 9] * 1.004     # several half-precision units off: within a half-precision check
    expected[20, 20] = start[20, 20] + 0.5   # written: C is not left as it started everywhere
    if element is None:   # fp32 output: C's start is a float32, the answer one unit in the last place away
        start = start.astype(np.float32).astype(np.float64)
        expected = np.nextafter(start.astype(np.float32), np.float32(2)).astype(np.float64)
        expected[5, 7] = start[5, 7] + 0.25
        expected[20, 20] = start[20, 20] + 0.5
        output = start.astype(np.float32)
        output[20, 20] = expected[20, 20]
        verdict = compare(output, expected, rel_tolerance=1e-5, start=start)
    else:
        codes = dtypes.encode(start, element)
        codes[20, 20] = dtypes.encode([expected[20, 20]], element)[0]
        output = KernelOutput(dtypes.decode(codes, element).reshape(1, 64, 64), codes.reshape(1, 64, 64), 0)
        verdict = compare_typed(output, expected.reshape(1, 64, 64), element, rel_tolerance=1e-2,
                                start=start.reshape(1, 64, 64))
    assert verdict.unwritten == 1 and np.argwhere(verdict.masks["unwritten"].reshape(64, 64)).tolist() == [[5, 7]]


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="does not match"):
        compare(np.zeros((2, 3), np.float32), np.zeros((3, 2)), rel_tolerance=1e-5)


def round_to_tf32(x: np.ndarray) -> np.ndarray:
    """What cvt.rna.tf32.f32 does: keep 10 mantissa bits, rounding half away from zero."""
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


@pytest.mark.parametrize("K", [8, 777, 4096])
def test_the_tf32_tolerance_fits_what_tf32_rounding_does(K):
    from driver_gemm.measure.reference import tolerance
    from driver_gemm.specfile.model import VerifySettings

    inputs = make_inputs(Shape(96, 80, K), seed=K)
    tf32_product = (round_to_tf32(inputs.A).astype(np.float64) @ round_to_tf32(inputs.B).astype(np.float64))
    output = tf32_product.astype(np.float32)
    settings = VerifySettings()
    as_tf32 = compare(output, reference(inputs), rel_tolerance=settings.tf32_rel_tolerance)
    as_fp32 = compare(output, reference(inputs), rel_tolerance=tolerance(settings, "fp32", K))
    assert as_tf32.status == Status.PASS and as_tf32.wrong == 0
    assert 1e-4 < as_tf32.rel_fro_error < tolerance(settings, "tf32", K) / 3   # ~4e-4: a factor of 5 below
    assert as_fp32.status == Status.FAIL                                            # far outside FP32 rounding


def whole_array_verdict(output, expected, unwritten, rel_tolerance, abs_tolerance):
    """The verdict's figures worked out over whole arrays in float64, as the definition reads (the test's oracle)."""
    output = output.astype(np.float64)
    nonfinite = ~np.isfinite(output) & ~unwritten
    usable = ~(unwritten | nonfinite)
    with np.errstate(invalid="ignore"):
        difference = np.where(usable, output - expected, 0.0)
    rms = np.sqrt(np.mean(expected ** 2))
    tolerance = 10 * rel_tolerance * (rms + np.abs(expected))
    if abs_tolerance is not None:
        tolerance = np.maximum(tolerance, abs_tolerance)
    return (np.sqrt(np.sum(difference ** 2)) / np.sqrt(np.sum(expected ** 2)), np.abs(difference).max(),
            nonfinite, usable & (np.abs(difference) > tolerance))


@pytest.mark.parametrize("piece", [1, 7, 1000, 1 << 22])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("abs_tolerance", [None, 1e-3])
def test_a_large_output_checked_piece_by_piece_gets_the_whole_arrays_verdict(monkeypatch, piece, threads,
                                                                             abs_tolerance):
    import driver_gemm.measure.verify as verify

    monkeypatch.setattr(verify, "PIECE_ELEMENTS", piece)
    monkeypatch.setattr(verify, "CHECK_THREADS", threads)
    rng = np.random.default_rng(piece * 10 + threads)
    expected = rng.standard_normal((61, 47))
    output = (expected + rng.standard_normal(expected.shape) * 1e-7).astype(np.float32)
    spots = rng.choice(output.size, 40, replace=False)
    output.reshape(-1)[spots[:10]] = poisoned(10)              # never written
    output.reshape(-1)[spots[10:15]] = np.inf                  # written, not finite
    output.reshape(-1)[spots[15:20]] = np.nan
    output.reshape(-1)[spots[20:40]] += 0.5                    # written wrong
    verdict = compare(output, expected, rel_tolerance=1e-5, abs_tolerance=abs_tolerance)
    rel_fro, max_abs, nonfinite, wrong = whole_array_verdict(output, expected, verdict.masks["unwritten"], 1e-5,
                                                             abs_tolerance)
    assert (verdict.unwritten, verdict.nonfinite, verdict.wrong) == (10, 10, int(wrong.sum())) and wrong.sum() >= 20
    assert verdict.rel_fro_error == pytest.approx(rel_fro, rel=1e-12)
    assert verdict.max_abs_error == pytest.approx(max_abs, rel=1e-12) and verdict.status == Status.FAIL
    assert np.array_equal(verdict.masks["nonfinite"], nonfinite) and np.array_equal(verdict.masks["wrong"], wrong)
    assert verdict.masks["unwritten"].reshape(-1)[spots[:10]].all() and verdict.masks["wrong"].shape == (61, 47)
    good = compare((expected + 1e-9).astype(np.float32), expected, rel_tolerance=1e-5, abs_tolerance=abs_tolerance)
    assert good.status == Status.PASS and good.wrong == 0 and good.rel_fro_error < 1e-6


@pytest.mark.parametrize("piece", [5, 64, 1 << 18])
@pytest.mark.parametrize("abs_tolerance", [None, 1e-6])
def test_the_screen_never_clears_an_element_the_exact_test_marks_wrong(monkeypatch, piece, abs_tolerance):
    """Elements one rounding step either side of the wrong-element threshold, beside references 10^6 times the
    smallest: the screened check marks exactly what the exact test marks on every element (the screen off)."""
    import driver_gemm.measure.verify as verify

    monkeypatch.setattr(verify, "PIECE_ELEMENTS", piece)
    rng = np.random.default_rng(piece)
    # Sixteenths and a few +-2^20: every sum of their squares is exact, so the check's RMS is this one, bit for bit.
    expected = rng.integers(-32, 33, 4000) / 16.0
    expected[rng.choice(expected.size, 8, replace=False)] = 2.0 ** 20
    rms = np.sqrt(np.dot(expected, expected)) / np.sqrt(expected.size)
    tolerance = (np.abs(expected) + rms) * (10 * 1e-5)
    if abs_tolerance is not None:
        tolerance = np.maximum(tolerance, abs_tolerance)
    output = expected + rng.standard_normal(expected.size) * 1e-12
    edge = rng.choice(expected.size, 600, replace=False)
    for count, i in enumerate(edge):      # the last value whose error is within the threshold, or the first past it
        sign = 1.0 if count % 2 else -1.0
        value = expected[i] + sign * tolerance[i]
        while abs(value - expected[i]) > tolerance[i]:
            value = np.nextafter(value, expected[i])
        while abs(np.nextafter(value, sign * np.inf) - expected[i]) <= tolerance[i]:
            value = np.nextafter(value, sign * np.inf)
        if count % 3 == 0:
            value = np.nextafter(value, sign * np.inf)
        output[i] = value

    def check():
        return verify._verdict(output, expected, lambda part, out: out.fill(False), 1e-5, abs_tolerance,
                               "numpy-float64")

    screened = check()
    monkeypatch.setattr(verify, "SCREEN_MARGIN", np.inf)     # every piece gets the exact test
    exact = check()
    assert exact.wrong == 200           # every third edge element, one step past the threshold
    assert np.array_equal(screened.masks["wrong"], exact.masks["wrong"]) and screened.wrong == exact.wrong
    assert (screened.rel_fro_error, screened.max_abs_error) == (exact.rel_fro_error, exact.max_abs_error)


@pytest.mark.parametrize("threads", [1, 3])
def test_inputs_do_not_depend_on_threads_blocks_or_whether_c_is_drawn(monkeypatch, threads):
    """Blocks of rows from generators of their own, on any number of threads: the same values every time, each
    operand its own, A and B the same with or without C's starting values."""
    import driver_gemm.measure.inputs as inputs_module

    one_block = make_inputs(Shape(50, 30, 20), 9, with_c=True)
    monkeypatch.setattr(inputs_module, "DRAW_BLOCK_ELEMENTS", 64)          # 2 to 3 rows a block: many blocks
    monkeypatch.setattr(inputs_module, "DRAW_THREADS", threads)
    blocks = make_inputs(Shape(50, 30, 20), 9, with_c=True)
    again = make_inputs(Shape(50, 30, 20), 9)
    assert np.array_equal(blocks.A, again.A) and np.array_equal(blocks.B, again.B) and again.C0 is None
    assert blocks.C0.shape == (50, 30) and blocks.C0.dtype == np.float32
    assert not np.array_equal(blocks.A[:20, :20], blocks.B[:20, :20])                 # operands differ
    assert not np.array_equal(blocks.A[:2], blocks.A[2:4])                            # so do blocks
    assert np.array_equal(one_block.A[0], blocks.A[0]) and not np.array_equal(one_block.A[5], blocks.A[5])
    assert -0.5 <= blocks.C0.min() and blocks.C0.max() < 0.5 and abs(float(blocks.A.mean())) < 0.05


def test_the_untyped_fp32_tolerance_grows_with_k_where_fp32_accumulation_needs_it():
    from driver_gemm.gemm import dtypes
    from driver_gemm.measure.reference import UNTYPED_TOLERANCE, tolerance
    from driver_gemm.specfile.model import VerifySettings

    settings = VerifySettings()
    assert tolerance(settings, "fp32", 256) == UNTYPED_TOLERANCE
    # A correct kernel adding K = 2^20 products in order in fp32 is off by about 1.8e-5: more than 1e-5.
    long = tolerance(settings, "fp32", 2 ** 20)
    assert long == dtypes.error_bound(dtypes.parse_types({"a": "fp32"}), 2 ** 20) and long > 1e-4
    # A tolerance the spec gives is kept, even one equal to the default's constant.
    assert tolerance(VerifySettings(rel_tolerance=1e-5), "fp32", 2 ** 20) == 1e-5
    assert tolerance(VerifySettings(tf32_rel_tolerance=0.01), "tf32", 2 ** 20) == 0.01


def test_a_typed_kernels_tolerance_given_equal_to_the_old_default_is_kept():
    from driver_gemm.gemm import dtypes
    from driver_gemm.session.typed_steps import typed_tolerance
    from driver_gemm.specfile.model import VerifySettings

    bf16 = dtypes.parse_types({"a": "bf16"})
    assert typed_tolerance(VerifySettings(rel_tolerance=1e-5), bf16, 777) == 1e-5
    assert typed_tolerance(VerifySettings(), bf16, 777) == dtypes.error_bound(bf16, 777)


def _typed_output(problem, types, inputs, values, keep=None):
    """C read back after a kernel wrote `values` (batch x M x N), leaving its start where `keep` is True."""
    from driver_gemm.gemm import dtypes, operands

    codes = np.frombuffer(operands.output_bytes(problem.c, types.c, inputs.c0), types.c.storage_dtype).copy()
    offsets = problem.c.offsets()
    written = dtypes.encode(values, types.c)
    codes[offsets] = written if keep is None else np.where(keep, codes[offsets], written)
    return operands.read_output(problem.c, codes.tobytes(), types.c)


def test_a_tile_of_zeros_fails_though_the_frobenius_error_of_a_narrow_type_allows_it():
    from driver_gemm.gemm import dtypes, operands
    from driver_gemm.measure.verify import compare_typed

    types, problem = dtypes.parse_types({"a": "bf16"}), operands.gemm_operands(1024, 1024, 64)
    inputs = operands.make_typed_inputs(problem, types, 3)
    expected = operands.reference(inputs.a, inputs.b)
    broken = expected.copy()
    broken[0, 256:272, 128:144] = 0.0             # one block's K loop never ran: 1/4096 of C
    tolerance = dtypes.error_bound(types, 64)
    verdict = compare_typed(_typed_output(problem, types, inputs, broken), expected, "bf16", rel_tolerance=tolerance)
    assert verdict.rel_fro_error < tolerance        # the whole is within tolerance...
    assert verdict.wrong > 200 and verdict.status == Status.FAIL     # ...the tile's elements are not
    right = compare_typed(_typed_output(problem, types, inputs, expected), expected, "bf16", rel_tolerance=tolerance)
    assert right.status == Status.PASS and right.wrong == 0


def test_one_far_off_element_fails_an_untyped_check_too():
    expected = np.zeros((16, 16))
    output = np.zeros((16, 16), np.float32)
    output[3, 4] = 5e-6
    verdict = compare(output, expected, rel_tolerance=1e-5)
    assert verdict.wrong == 1 and verdict.status == Status.FAIL
    assert compare(np.zeros((16, 16), np.float32), expected, rel_tolerance=1e-5).status == Status.PASS


@pytest.mark.parametrize("c_type,alpha", [("bf16", 1e-3), ("fp16", 1e-4), ("fp32", 1e-6)])
def test_c_left_as_it_started_fails_where_beta_c0_outweighs_the_product(c_type, alpha):
    from driver_gemm.gemm import dtypes, operands
    from driver_gemm.measure.verify import compare_typed

    types = dtypes.parse_types({"a": "bf16", "c": c_type})
    problem = operands.gemm_operands(64, 64, 777)
    inputs = operands.make_typed_inputs(problem, types, 5, with_c=True)
    expected = operands.reference(inputs.a, inputs.b, alpha, 1.0, inputs.c0)
    tolerance = dtypes.error_bound(types, 777)
    untouched = _typed_output(problem, types, inputs, expected, keep=np.ones(expected.shape, bool))
    verdict = compare_typed(untouched, expected, c_type, rel_tolerance=tolerance, start=inputs.c0)
    assert verdict.rel_fro_error < tolerance and verdict.unwritten > 0 and verdict.status == Status.FAIL
    written = compare_typed(_typed_output(problem, types, inputs, expected), expected, c_type,
                            rel_tolerance=tolerance, start=inputs.c0)
    assert written.status == Status.PASS and written.unwritten == 0
    # With alpha 0 the answer is C0 itself: C left alone is right.
    same = operands.reference(inputs.a, inputs.b, 0.0, 1.0, inputs.c0)
    kept = _typed_output(problem, types, inputs, same, keep=np.ones(same.shape, bool))
    assert compare_typed(kept, same, c_type, rel_tolerance=tolerance, start=inputs.c0).status == Status.PASS


def test_an_untyped_c_left_as_it_started_fails_where_beta_c0_outweighs_the_product():
    inputs = make_inputs(Shape(32, 32, 64), 9, with_c=True)
    expected = reference(inputs, alpha=1e-6, beta=1.0)
    verdict = compare(inputs.C0.copy(), expected, rel_tolerance=1e-5, start=inputs.C0)
    assert verdict.unwritten > 0 and verdict.status == Status.FAIL
    assert compare(expected.astype(np.float32), expected, rel_tolerance=1e-5, start=inputs.C0).status == Status.PASS


def test_a_float32_reference_is_a_float32_product():
    from driver_gemm.gemm import operands

    rng = np.random.default_rng(1)
    a, b = rng.uniform(-0.5, 0.5, (1, 64, 2048)), rng.uniform(-0.5, 0.5, (1, 2048, 32))
    single = operands.reference(a.astype(np.float32), b.astype(np.float32))
    assert single.dtype == np.float64
    assert np.array_equal(single, (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float64))
    assert not np.array_equal(single, operands.reference(a, b))
    assert np.allclose(single, operands.reference(a, b), rtol=0, atol=1e-4)


def test_an_answer_too_small_for_the_output_type_lands_on_a_start_of_zero_as_written():
    # Every element of C holds its start; one start is 0 and its answer (1e-50) rounds to 0 in float32.
    start = np.full((4, 4), 0.5)
    start[1, 2] = 0.0
    expected = start.copy()
    expected[1, 2] = 1e-50
    verdict = compare(start.astype(np.float32), expected, rel_tolerance=1e-5, start=start)
    assert verdict.unwritten == 0 and verdict.status == Status.PASS
