"""A typed C whose reference is beyond C's largest finite number in places (alpha A @ B overflows fp16): a correct
kernel writes infinities there, the case fails, and the message says the product does not fit C's type, with C's
largest finite number and what to change, rather than blame the poison C started as; the poison is named only for
NaN or infinite elements whose reference fits."""

from __future__ import annotations

import numpy as np

from driver_gemm.gemm import dtypes
from driver_gemm.session import steps, typed_steps
from driver_gemm.status import Status

from test_typed_pipeline import write_result
from test_verdict_beta_part import typed_pipeline_run


def correct_values(run) -> np.ndarray:
    """An fp32 sum times alpha in fp32, rounded to fp16 on writing: infinite wherever it is beyond fp16's range."""
    typed = run.typed
    accumulated = np.matmul(typed.inputs.a.astype(np.float32), typed.inputs.b.astype(np.float32))
    return (np.float32(typed.alpha) * accumulated).astype(np.float64)


def overflowing(run) -> np.ndarray:
    return np.abs(run.expected) > dtypes.ELEMENT_TYPES["fp16"].max_finite


def test_c_that_overflows_its_type_says_so_not_poison(tmp_path):
    run = typed_pipeline_run(tmp_path, "fp16", 10000.0, 0.0, shape=(64, 64, 1024))
    assert run.case.kernel.reads_c() and run.typed.inputs.c0 is None, "C starts as poison, beta being 0"
    beyond = int(np.count_nonzero(overflowing(run)))
    assert 0 < beyond < run.expected.size
    write_result(run, correct_values(run))
    verdict = typed_steps.check_output(run)
    assert verdict.status == Status.FAIL and verdict.nonfinite == beyond
    steps.diagnose(run)
    message = run.record.message
    assert f"{beyond:,} of the" in message and "beyond fp16's largest finite number, 65504" in message
    assert "lower alpha" in message and "wider C" in message
    assert "poison" not in message


def test_nan_where_the_reference_fits_is_still_blamed_on_the_poison(tmp_path):
    run = typed_pipeline_run(tmp_path, "fp16", 10000.0, 0.0, shape=(64, 64, 1024))
    values = correct_values(run)
    fits = ~overflowing(run)
    poisoned = np.zeros_like(fits)
    poisoned[..., :2, :] = True
    poisoned &= fits
    values[poisoned] = np.nan          # beta * C read where C is poison
    write_result(run, values)
    typed_steps.check_output(run)
    steps.diagnose(run)
    message = run.record.message
    assert "beyond fp16's largest finite number" in message
    assert f"{int(np.count_nonzero(poisoned)):,} of the" in message and "C started as NaN poison" in message
