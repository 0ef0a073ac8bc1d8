"""The cases of one shape share its inputs and references: drawn once, A and B uploaded again for every case."""

import numpy as np
import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.pipeline import steps
from driver_gemm.pipeline.build import launch_plans
from driver_gemm.pipeline.cases import Case, new_record
from driver_gemm.spec import load_spec
from driver_gemm.status import Status

from test_spec import KERNEL, MINIMAL, write

# Three kernels on two shapes: v4 as written, v4 with alpha, v4 reading C (alpha and beta).
SPEC = MINIMAL.replace("  - [64, 32, 16]", "  - [64, 32, 16]\n  - [32, 32, 8]") + f"""\
  - name: scaled
    source: {KERNEL}
    function: sgemm_coarsen_2d
    params: {{BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}}
    block: [BN / TN, BM / TM]
    grid: [ceil(N / BN), ceil(M / BM)]
    signature: [A, B, C, M, N, K, alpha]
    scalars: {{alpha: 2.0}}
  - name: accumulating
    source: {KERNEL}
    function: sgemm_coarsen_2d
    params: {{BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}}
    block: [BN / TN, BM / TM]
    grid: [ceil(N / BN), ceil(M / BM)]
    signature: [A, B, C, M, N, K, alpha, beta]
    scalars: {{alpha: 1.0, beta: 0.5}}
"""


class Buffer:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def upload(self, array, stream):
        self.log.append((self.name, array))


class Session:
    """What the inputs and reference steps use of a session: buffers, no cuBLAS (the CPU reference), the memo."""

    def __init__(self):
        self.uploads, self.cublas, self.stream, self.shape_operands = [], None, None, None

    def buffers_for(self, shape):
        return {name: Buffer(self.uploads, name) for name in ("A", "B", "C", "C_ref")}


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
    make_inputs, cpu_reference = steps.make_inputs, steps.cpu_reference
    monkeypatch.setattr(steps, "make_inputs", lambda *a, **k: drawn.append((a, k)) or make_inputs(*a, **k))
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
    # One draw for the shape, and one more when a kernel first needs C's starting values (A and B the same).
    assert [k["with_c"] for _, k in drawn] == [False, True]
    assert len({run.record.seed for run in runs}) == 1
    assert all(np.array_equal(run.inputs.A, plain.inputs.A) for run in runs)
    assert accumulating.inputs.C0 is not None and all(r.inputs.C0 is None for r in runs if r is not accumulating)
    # A and B uploaded for every case: an earlier kernel's stray write into them cannot fail a later one.
    assert [name for name, _ in session.uploads] == ["A", "B"] * len(runs)
    # One reference per (alpha, beta, C0): the plain and scaled ones reused until C0 came in.
    assert worked_out == [(1.0, 0.0), (2.0, 0.0), (1.0, 0.5), (1.0, 0.0)]
    assert again.expected is plain.expected and np.allclose(scaled.expected, 2 * plain.expected)
    assert np.array_equal(after.expected, plain.expected) and after.expected is not plain.expected
    # A new shape: its own seed and draw, the last shape's arrays let go first.
    other = run_of(spec, session, "v4", small)
    steps.inputs(other)
    steps.reference(other)
    assert other.record.seed != plain.record.seed and other.inputs.A.shape == (small.M, small.K)
    assert session.shape_operands.shape == small and len(drawn) == 3
