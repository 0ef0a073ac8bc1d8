"""A typed kernel that takes beta, run with beta 0: as BLAS does not read C where beta is 0, C starts as NaN poison
(no C0 is drawn), so a kernel that computes beta * C anyway writes NaN and fails, and the message says why."""

from __future__ import annotations

import numpy as np

from driver_gemm.gemm import dtypes
from driver_gemm.session import steps, typed_steps
from driver_gemm.status import Status

from test_typed_pipeline import parse, spec_text, typed_run, write_result


def started_run(tmp_path, *extra: str):
    run = typed_run(parse(spec_text("types: {a: bf16}", *extra, shapes="[[64, 48, 40]]"), tmp_path))
    typed_steps.inputs(run)
    typed_steps.reference_step(run)
    typed_steps._reset_output(run)
    return run


def what_c_holds(run) -> np.ndarray:
    layout, element = run.typed.operands.c, run.typed.types.c
    raw = run.session.typed_buffers["C"].data[:layout.elements * element.storage_bytes].tobytes()
    return dtypes.from_bytes(raw, element, (layout.elements,))[layout.offsets()]


def test_c_reading_kernel_at_beta_0_fails_with_the_cause_said(tmp_path):
    run = started_run(tmp_path, "scalars: {alpha: 1.0, beta: 0.0}")
    assert run.case.kernel.reads_c() and run.typed.beta == 0.0 and run.typed.inputs.c0 is None
    start = what_c_holds(run)
    assert np.isnan(start).all(), "C starts as NaN poison where beta is 0"
    typed = run.typed
    accumulated = np.matmul(typed.inputs.a.astype(np.float32), typed.inputs.b.astype(np.float32))
    write_result(run, typed.alpha * accumulated + typed.beta * start)      # beta * C read even where beta is 0
    verdict = typed_steps.check_output(run)
    assert verdict.status == Status.FAIL and verdict.nonfinite == verdict.elements
    steps.diagnose(run)
    message = run.record.message
    assert message.startswith("every element the kernel wrote is NaN or infinite, and beta is 0")
    assert "C started as NaN poison" in message and "read C only where beta is not 0" in message


def test_a_kernel_that_leaves_c_unread_at_beta_0_passes(tmp_path):
    run = started_run(tmp_path, "scalars: {alpha: 1.0, beta: 0.0}")
    write_result(run, run.expected)
    assert typed_steps.check_output(run).status == Status.PASS


def test_nan_written_where_beta_is_not_0_is_not_blamed_on_the_poison(tmp_path):
    run = started_run(tmp_path, "scalars: {alpha: 1.0, beta: 0.5}")
    values = run.expected.copy()
    values[..., :3, :] = np.nan
    write_result(run, values)
    verdict = typed_steps.check_output(run)
    assert verdict.status == Status.FAIL and verdict.nonfinite > 0 and verdict.note is None
    steps.diagnose(run)
    assert "poison" not in run.record.message
