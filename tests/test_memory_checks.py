"""A case's host and device memory is checked before anything of it is allocated: at plan time, and again in the
process that runs it; a refusal gives the figures."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from driver_gemm.cli import EXIT_FAILED, main
from driver_gemm.measure import inputs as inputs_module
from driver_gemm.measure import memory
from driver_gemm.planning import build
from driver_gemm.planning.cases import cases_of
from driver_gemm.session import steps as case_steps
from driver_gemm.session.execute import execute_case
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from test_spec import MINIMAL, write

GiB = 2**30


def test_needs_count_operands_reference_and_copies():
    needs = memory.fp32_needs(1024, 2048, 512, reads_c=False)
    assert needs.host["A"] == 4 * 1024 * 512 and needs.host["B"] == 4 * 512 * 2048 and "C" not in needs.host
    assert needs.host["the reference"] >= 8 * 1024 * 2048
    assert needs.device == {"A": 4 * 1024 * 512, "B": 4 * 512 * 2048, "C": 4 * 1024 * 2048,
                            "the reference": 4 * 1024 * 2048}
    assert memory.fp32_needs(1024, 2048, 512, reads_c=True).host["C"] == 4 * 1024 * 2048


def test_a_refusal_gives_the_figures():
    needs = memory.MemoryNeeds({"A": 200 * GiB, "B": 200 * GiB, "the reference": 112 * GiB}, {"A": GiB})
    assert memory.memory_refusal(needs, 125 * GiB, 100 * GiB) == (
        "needs 512 GiB of host memory for A, B and the reference; this machine has 125 GiB available")
    assert memory.memory_refusal(needs, 600 * GiB, 100 * GiB) is None
    refusal = memory.memory_refusal(memory.MemoryNeeds({}, {"A": 90 * GiB, "C": 60 * GiB}), None, 80 * GiB,
                                    device_name="GPU 0")
    assert refusal.startswith("needs 150 GiB of GPU memory for A and C") and "GPU 0 has 80 GiB" in refusal
    assert memory.memory_refusal(needs, None, None) is None     # nothing known: nothing refused


def test_host_available_reads_meminfo():
    available = memory.host_available()
    assert available is None or available > 0


def test_the_largest_part_of_an_architecture():
    assert memory.largest_part_bytes("sm_90a") == memory.largest_part_bytes("sm_90") == 141 * 10**9
    assert memory.largest_part_bytes("sm_999") is None


@pytest.fixture
def no_allocation(monkeypatch):
    """Every allocator of a case's operands fails the test if called."""
    def refuse(*args, **kwargs):
        pytest.fail("allocated for a case whose memory was refused")
    monkeypatch.setattr(inputs_module, "draw_operand", refuse)
    monkeypatch.setattr(case_steps, "make_inputs", refuse)
    monkeypatch.setattr(case_steps.typed_steps, "make_typed_inputs", refuse)
    monkeypatch.setattr(np, "empty", refuse)
    monkeypatch.setattr(build, "compile_source", refuse)


def test_plan_refuses_a_shape_beyond_the_machine_with_figures(tmp_path, monkeypatch, capsys, no_allocation):
    monkeypatch.setattr(memory, "host_available", lambda: 125 * GiB)
    monkeypatch.setattr(build, "host_total", lambda: 125 * GiB)
    spec = write(tmp_path, MINIMAL.replace("[64, 32, 16]", "[262144, 262144, 262144]"))
    before = sorted(tmp_path.rglob("*"))
    assert main(["plan", "--arch", "sm_90", "--csv", str(spec)]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert "shape 262144x262144x262144 needs 2816 GiB of host memory for A, B, the reference and the output's " \
           "copies; this machine has 125 GiB in all" in out
    assert "needs 1024 GiB of GPU memory for A, B, C and the reference" in out and "the largest sm_90 GPU" in out
    assert sorted(tmp_path.rglob("*")) == before


class _Device:
    ordinal = 0
    poisoned = False

    @contextlib.contextmanager
    def current(self):
        yield

    def mark_poisoned(self, error):
        pass

    def alloc(self, nbytes):
        pytest.fail("allocated device memory for a case whose memory was refused")


class _Session:
    """What the memory step reads of a session; anything else a step would touch fails."""

    def __init__(self):
        from driver_gemm.session.state import Session

        self.ordinal = 0
        self.device = _Device()
        self.held, self.buffers, self.typed_buffers = {}, {}, {}
        self.held_bytes = Session.held_bytes.__get__(self)

    def __getattr__(self, name):
        pytest.fail(f"a step past the memory check used session.{name}")


@pytest.mark.parametrize("shape, expected", [
    ("[131072, 131072, 16]", "needs 320 GiB of host memory for A, B, the reference and"),
    ("[64, 2147483648, 16]", "cuBLAS takes M, N and K as int: N = 2147483648 exceeds 2147483647"),
])
def test_the_worker_refuses_every_case_before_allocating(tmp_path, monkeypatch, no_allocation, shape, expected):
    """The vendor row too: a shape whose N does not fit the kernel's int32 allocates nothing for cuBLAS either."""
    monkeypatch.setattr(memory, "host_available", lambda: 100 * GiB)
    monkeypatch.setattr(memory, "device_available", lambda device: 80 * GiB)
    spec = load_spec(write(tmp_path, MINIMAL.replace("[64, 32, 16]", shape).replace("shapes:", "baseline: true\nshapes:")))
    cases, compiled = build.plan_cases(spec, build.arch_limits("sm_90"), "sm_90")
    assert [case.is_baseline for case in cases] == [True, False]
    for case in cases:
        record = execute_case(_Session(), spec, case, compiled)
        assert record.status == Status.INVALID, record.message
        assert "inputs" not in record.phases
    baseline = execute_case(_Session(), spec, cases[0], compiled)
    assert expected in baseline.message


def test_the_worker_refuses_what_the_gpu_has_not_free(tmp_path, monkeypatch, no_allocation):
    monkeypatch.setattr(memory, "host_available", lambda: 1000 * GiB)
    monkeypatch.setattr(memory, "device_available", lambda device: 8 * GiB)
    spec = load_spec(write(tmp_path, MINIMAL.replace("[64, 32, 16]", "[32768, 32768, 16]")
                           .replace("shapes:", "baseline: true\nshapes:")))
    case = cases_of(spec)[0]
    record = execute_case(_Session(), spec, case, {})
    assert record.status == Status.INVALID
    assert record.message == ("needs 8.0 GiB of GPU memory for A, B, C and the reference (and about 1.0 GiB for "
                              "the session); GPU 0 has 8.0 GiB")


@pytest.mark.parametrize("held_kind", ["fp32", "typed"])
def test_what_the_session_holds_of_a_shape_counts_as_free_for_its_next_case(tmp_path, monkeypatch, held_kind):
    """A shape's inputs drawn by an earlier case and held by the session, FP32 or typed, are reused: the next case
    of that shape counts them as free host memory; another shape's held inputs do not count."""
    from driver_gemm.gemm.operands import TypedInputs
    from driver_gemm.measure.inputs import ShapeOperands, make_inputs
    from driver_gemm.session.state import HeldOperands, HeldTypedInputs
    from driver_gemm.specfile.model import Shape

    spec = load_spec(write(tmp_path, MINIMAL))
    case = cases_of(spec)[0]
    shape, other = case.shape, Shape(8, 8, 8)
    needs = memory.fp32_needs(shape.M, shape.N, shape.K, reads_c=False).host_bytes

    def held(of: Shape):
        if held_kind == "fp32":
            return HeldOperands(ShapeOperands(of, make_inputs(of, 1)))
        values = np.zeros(2 * needs // 8)
        return HeldTypedInputs(of, TypedInputs(1, values, values), {})

    session = _Session()
    session.held = {("held", other): held(other), ("held", shape): held(shape)}
    assert session.held_bytes(shape) == session.held[("held", shape)].nbytes > 0
    monkeypatch.setattr(memory, "device_available", lambda device: 80 * GiB)
    for free, refused in ((needs - session.held_bytes(shape), False), (needs - session.held_bytes(shape) - 1, True)):
        monkeypatch.setattr(memory, "host_available", lambda free=free: free)
        run = case_steps.start(case, session, spec, None)
        case_steps.memory(run)
        assert run.stopped is refused and (run.record.status == Status.INVALID) is refused
