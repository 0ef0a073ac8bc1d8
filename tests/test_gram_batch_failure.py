"""A batched SYRK kernel's failure says both how the triangles are checked and how the batch is stacked in the error
map, on host arrays with the launch stood in for."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from driver_gemm.gemm import dtypes
from driver_gemm.gemm.operands import output_bytes
from driver_gemm.session import typed_steps
from driver_gemm.session.typed_steps import held_inputs, reference_step
from driver_gemm.status import Status

from test_gram import fake_run, parsed, spec_text


class HostBuffer:
    def __init__(self, raw: bytes = b""):
        self.raw = raw

    def upload(self, data, stream) -> None:
        pass

    def download(self, shape, dtype, stream) -> np.ndarray:
        return np.frombuffer(self.raw, dtype=np.uint8)


def test_a_batched_triangle_failure_keeps_the_triangles_explanation(monkeypatch):
    spec = parsed(spec_text("  gram: {of: A, triangle: lower}\n  types: {a: bf16, c: fp32}\n  batch: 3\n",
                            shapes="[[40, 40, 24]]"))
    run = fake_run(spec.kernels[0], spec.shapes[0], spec)
    held_inputs(run)
    reference_step(run)
    typed = run.typed
    drawn = typed.inputs.a
    whole = drawn @ np.swapaxes(drawn, -1, -2)     # the mirror stored too: the upper triangle written, so wrong
    layout, element = typed.operands.c, typed.types.c
    codes = np.frombuffer(output_bytes(layout, element), dtype=element.storage_dtype).copy()
    codes[layout.offsets()] = dtypes.encode(whole, element)
    run.session.typed_buffers.update(C=HostBuffer(codes.tobytes()), A=HostBuffer())
    run.session.stream = SimpleNamespace(synchronize=lambda: None)
    monkeypatch.setattr(typed_steps, "build_launch", lambda run, buffers: (lambda: None))
    typed_steps.launch_verify(run)
    assert run.verdict.status == Status.FAIL
    rows = run.record.verification.rows
    assert "upper triangle against what C held before the launch" in rows, rows
    assert "3 matrices stacked in the error map" in rows, rows
