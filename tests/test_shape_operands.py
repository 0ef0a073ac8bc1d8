"""The cases of one shape share its inputs and references: drawn once, A and B uploaded again for every case."""

from collections import OrderedDict

import numpy as np
import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.measure import inputs as inputs_module
from driver_gemm.session import steps
from driver_gemm.planning.build import launch_plans
from driver_gemm.planning.cases import Case, new_record
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from test_spec import KERNEL, MINIMAL, write



def v4_taking(name, scalars):
    """A spec entry for v4 that takes `scalars` (alpha, beta) after its sizes, with their values."""
    return f"""\
  - name: {name}
    source: {KERNEL}
    function: sgemm_coarsen_2d
    params: {{BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}}
    block: [BN / TN, BM / TM]
    grid: [ceil(N / BN), ceil(M / BM)]
    signature: [A, B, C, M, N, K, {', '.join(scalars)}]
    scalars: {{{', '.join(f'{k}: {v}' for k, v in scalars.items())}}}
"""


# Three kernels on two shapes: v4 as written, v4 with alpha, v4 reading C (alpha and beta).
SPEC = (MINIMAL.replace("  - [64, 32, 16]", "  - [64, 32, 16]\n  - [32, 32, 8]")
        + v4_taking("scaled", {"alpha": 2.0}) + v4_taking("accumulating", {"alpha": 1.0, "beta": 0.5}))


class Buffer:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def upload(self, array, stream):
        self.log.append((self.name, array))


def Session(device=None):
    """A real `Session` around a device that only page-locks, with buffers that log uploads and no cuBLAS (the
    CPU reference): what the inputs and reference steps use of it."""
    session = bare_session(device or LockingDevice())
    session.uploads = []
    session.buffers_for = lambda shape: {name: Buffer(session.uploads, name) for name in ("A", "B", "C", "C_ref")}
    return session


@pytest.fixture
def spec(tmp_path):
    return load_spec(write(tmp_path, SPEC))


def run_of(spec, session, kernel_name, shape):
    kernel = next((k for k in spec.kernels if k.name == kernel_name), None)
    plan = launch_plans(spec, arch_limits("sm_90"))[kernel.label, shape.label] if kernel else None
    case = Case(0, kernel, shape, plan=plan)
    return steps.CaseRun(case, session, spec, None, new_record(case, Status.PASS))


def test_a_shapes_cases_share_one_draw_and_one_reference_per_scalars(spec, monkeypatch):
    drawn, worked_out = [], []
    draw_operand, cpu_reference = inputs_module.draw_operand, steps.cpu_reference
    monkeypatch.setattr(inputs_module, "draw_operand", lambda *a: drawn.append(a[1]) or draw_operand(*a))
    monkeypatch.setattr(steps, "cpu_reference", lambda *a: worked_out.append(a[1:]) or cpu_reference(*a))
    session = Session()
    big, small = spec.shapes
    runs = []
    for name in (None, "v4", "scaled", "v4", "accumulating", "v4"):
        run = run_of(spec, session, name, big)
        steps.inputs(run)
        if name is not None:
            steps.reference(run)
        runs.append(run)
    baseline, plain, scaled, again, accumulating, after = runs
    # One draw of A and B for the shape, and of C's starting values when a kernel first needs them.
    assert drawn == ["A", "B", "C0"]
    assert len({run.record.seed for run in runs}) == 1
    assert all(np.array_equal(run.inputs.A, plain.inputs.A) for run in runs)
    assert accumulating.inputs.C0 is not None and all(r.inputs.C0 is None for r in runs if r is not accumulating)
    # A and B uploaded for every case: an earlier kernel's stray write into them cannot fail a later one.
    assert [name for name, _ in session.uploads] == ["A", "B"] * len(runs)
    # One reference per (alpha, beta, C0), kept for the shape's later cases.
    assert worked_out == [(1.0, 0.0), (2.0, 0.0), (1.0, 0.5)]
    assert again.expected is plain.expected and after.expected is plain.expected
    assert np.allclose(scaled.expected, 2 * plain.expected)
    assert np.allclose(accumulating.expected, plain.expected + 0.5 * accumulating.inputs.C0)
    # A new shape: its own seed and draw, the last shape's arrays let go first.
    other = run_of(spec, session, "v4", small)
    steps.inputs(other)
    steps.reference(other)
    assert other.record.seed != plain.record.seed and other.inputs.A.shape == (small.M, small.K)
    assert [shape for shape, _ in session.held] == [big, small] and drawn[3:] == ["A", "B"]


class LockingDevice:
    """What `Session` asks of a device to page-lock host arrays: which arrays, and when each was let go."""

    def __init__(self, refuse=False):
        self.locked, self.refuse = [], refuse

    def page_lock(self, array):
        from driver_gemm.errors import CudaError

        if self.refuse:
            raise CudaError("cuMemHostRegister", "CUDA_ERROR_OUT_OF_MEMORY")
        device = self

        class Lock:
            def __init__(self):
                self.open = True
                device.locked.append((array, self))

            def close(self):
                self.open = False
        return Lock()


def bare_session(device):
    from driver_gemm.session.state import Session

    session = object.__new__(Session)
    session.device, session.held, session.host_output = device, OrderedDict(), None
    session.buffers, session.buffer_shape, session.baselines, session.stream = {}, None, {}, None
    session.want_cublas, session._cublas_loading = False, None
    return session


def test_large_operands_and_the_output_copy_are_page_locked_while_their_shape_is_held(monkeypatch):
    from driver_gemm.measure.inputs import ShapeOperands, make_inputs
    from driver_gemm.session import state as session_module
    from driver_gemm.specfile.model import Shape

    monkeypatch.setattr(session_module, "PAGE_LOCK_MIN_BYTES", 4 * 64 * 64)
    device = LockingDevice()
    session = bare_session(device)
    big, small = Shape(64, 64, 64), Shape(64, 64, 8)
    operands = session.operands_for(big, 1, lambda: ShapeOperands(big, make_inputs(big, 1)))
    for array in (operands.inputs.A, operands.inputs.B, operands.inputs.A, None):
        session.lock_operand(operands, array)
    assert [array is operands.inputs.A for array, _ in device.locked] == [True, False]    # each once
    output = session.output_array(big)
    assert session.output_array(big) is output and output.shape == (64, 64) and device.locked[-1][0] is output
    # Another shape: the first kept with its locks; small arrays stay pageable; C's copy is the same size.
    other = session.operands_for(small, 2, lambda: ShapeOperands(small, make_inputs(small, 2)))
    session.lock_operand(other, other.inputs.A)                       # 64 x 8: below the size that gains
    assert all(lock.open for _, lock in device.locked) and len(device.locked) == 3
    assert session.output_array(small) is output
    assert session.operands_for(big, 1, lambda: pytest.fail("drawn again")) is operands
    session.buffers_for = lambda shape: None
    assert session.output_array(Shape(8, 8, 8)).shape == (8, 8) and not device.locked[2][1].open


def test_shapes_are_kept_within_the_byte_budget_the_oldest_let_go_and_unlocked_first(monkeypatch):
    from driver_gemm.measure.inputs import ShapeOperands, make_inputs
    from driver_gemm.session import state as session_module
    from driver_gemm.specfile.model import Shape

    shapes = [Shape(32, 32, 32), Shape(32, 32, 16), Shape(32, 32, 8)]          # 8, 4 and 2 KiB of A and B
    monkeypatch.setattr(session_module, "PAGE_LOCK_MIN_BYTES", 1)
    monkeypatch.setattr(session_module, "HELD_OPERANDS_BYTES", 8192 + 4096 + 2048 - 1)
    device = LockingDevice()
    session = bare_session(device)
    held = {}
    for seed, shape in enumerate(shapes):
        held[shape] = session.operands_for(shape, seed, lambda shape=shape, seed=seed: ShapeOperands(
            shape, make_inputs(shape, seed)))
        session.lock_operand(held[shape], held[shape].inputs.A)
    # The third did not fit beside both others: the oldest went, its lock closed; the others kept theirs.
    assert [shape for shape, _ in session.held] == shapes[1:]
    assert [lock.open for _, lock in device.locked] == [False, True, True]
    # Coming back to a kept shape makes it the most recent; a new seed is another draw.
    assert session.operands_for(shapes[1], 1, lambda: pytest.fail("drawn again")) is held[shapes[1]]
    assert [shape for shape, _ in session.held] == [shapes[2], shapes[1]]
    session.operands_for(shapes[1], 7, lambda: ShapeOperands(shapes[1], make_inputs(shapes[1], 7)))
    assert list(session.held) == [(shapes[2], 2), (shapes[1], 1), (shapes[1], 7)]       # 10 KiB: all fit


def test_typed_inputs_share_the_byte_budget_with_fp32_operands_the_oldest_let_go_first(monkeypatch):
    from driver_gemm.gemm.operands import TypedInputs
    from driver_gemm.measure.inputs import ShapeOperands, make_inputs
    from driver_gemm.session import state as session_module
    from driver_gemm.specfile.model import Shape

    def typed(elements: int, seed: int) -> session_module.HeldTypedInputs:     # 8 bytes an element, uploads none
        values = np.zeros(elements)
        return session_module.HeldTypedInputs(shape, TypedInputs(seed, values, values.copy()), {})

    monkeypatch.setattr(session_module, "HELD_OPERANDS_BYTES", 3 * 8192)
    session = bare_session(LockingDevice())
    shape = Shape(32, 32, 32)                                                     # 8 KiB of FP32 A and B
    session.operands_for(shape, 1, lambda: ShapeOperands(shape, make_inputs(shape, 1)))
    first = session.typed_inputs_for((shape, 1, "bf16"), lambda: typed(512, 1), 8192)        # 8 KiB
    assert session.typed_inputs_for((shape, 1, "bf16"), lambda: pytest.fail("drawn again"), 8192) is first
    # 16 KiB more leave room for one of the two held: the FP32 operands, the oldest, go.
    session.typed_inputs_for((shape, 1, "fp16"), lambda: typed(1024, 1), 16384)
    assert list(session.held) == [("typed", shape, 1, "bf16"), ("typed", shape, 1, "fp16")]
    assert sum(held.nbytes for held in session.held.values()) == 3 * 8192 == session.held_bytes(shape)


def test_a_refused_page_lock_leaves_the_copies_pageable(monkeypatch):
    from driver_gemm.measure.inputs import ShapeOperands, make_inputs
    from driver_gemm.session import state as session_module
    from driver_gemm.specfile.model import Shape

    monkeypatch.setattr(session_module, "PAGE_LOCK_MIN_BYTES", 1)
    session = bare_session(LockingDevice(refuse=True))
    shape = Shape(16, 16, 16)
    operands = session.operands_for(shape, 1, lambda: ShapeOperands(shape, make_inputs(shape, 1)))
    session.lock_operand(operands, operands.inputs.A)
    assert session.held[shape, 1].locks == {} and session.output_array(shape).shape == (16, 16)
    assert session.host_output[1] is None
