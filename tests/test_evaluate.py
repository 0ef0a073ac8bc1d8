"""The GPU evaluation callback of a tuning search, on a fake session: what is made once, what is measured."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from pathlib import Path

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.measure.stats import summarize
from driver_gemm.tune import evaluate as evaluation
from driver_gemm.measure.inputs import case_seed
from driver_gemm.session import steps as case_steps
from driver_gemm.session.state import Session
from driver_gemm.planning.build import launch_plans
from driver_gemm.planning.cases import Case
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status
from driver_gemm.tune.strategies import Budget, Configuration, Exhaustive, SuccessiveHalving, search_all

from test_spec import MINIMAL, write

SWEEP = MINIMAL.replace("BK: 16, TM: 4", "BK: [4, 8, 16, 32], TM: 4").replace(
    "  - [64, 32, 16]", "  - [64, 32, 16]\n  - [128, 64, 32]") + "baseline: false\n"
BROKEN_BK = 32            # the configuration whose output is wrong
MS = {4: 4.0, 8: 2.0, 16: 1.0, 32: 0.5}


class _Buffer:
    def upload(self, array, stream):
        pass


class _Device:
    poisoned = False

    def mark_poisoned(self, exc):
        pass


class FakeSession:
    def __init__(self):
        self.device, self.stream, self.flusher, self.gate, self.cublas = _Device(), None, "flusher", "gate", None
        self.uploads = 0
        self.held = OrderedDict()

    # the inputs a shape's cases share, kept as a real session keeps them
    operands_for = Session.operands_for
    typed_inputs_for = Session.typed_inputs_for
    _let_go = Session._let_go
    _kept = Session._kept

    def lock_operand(self, operands, array):
        pass

    @property
    def poisoned(self):
        return self.device.poisoned

    def buffers_for(self, shape):
        return {name: _Buffer() for name in ("A", "B", "C", "C_ref")}


@pytest.fixture
def tune(tmp_path, monkeypatch):
    spec = load_spec(write(tmp_path, SWEEP))
    plans = launch_plans(spec, arch_limits("sm_90"))
    cases = {(k.label, s.label): Case(0, k, s, plan=plans[k.label, s.label]) for s in spec.shapes
             for k in spec.kernels}
    calls = {"cpu_reference": 0, "timer": []}

    def fake_launch_verify(run):     # the launch and the comparison, without a GPU
        run.launch = lambda: None
        run.record.status = Status.FAIL if run.case.kernel.params["BK"] == BROKEN_BK else Status.PASS
        assert run.expected is not None and run.inputs is not None

    def fake_cpu_reference(inputs, alpha, beta):
        calls["cpu_reference"] += 1
        return inputs.A.astype(float) @ inputs.B.astype(float)

    def fake_timer(launch, device, stream, settings, flusher, gate):
        calls["timer"].append((settings, flusher))
        bk = fake_timer.current
        return summarize([MS[bk]] * 3), []

    monkeypatch.setattr(case_steps, "load", lambda run: None)
    monkeypatch.setattr(case_steps, "bind", lambda run: setattr(run, "launch", lambda: None))
    monkeypatch.setattr(case_steps, "launch_verify", fake_launch_verify)
    monkeypatch.setattr(case_steps, "cpu_reference", fake_cpu_reference)
    recorded, screens = [], []
    evaluator = evaluation.Evaluator(FakeSession(), spec, cases, {k.label: object() for k in spec.kernels},
                                     record=recorded.append, note=screens.append, timer=fake_timer)

    def evaluate(configuration, shape, fidelity):
        fake_timer.current = configuration.params["BK"]
        return evaluator(configuration, shape, fidelity)

    space = [Configuration(k.label, dict(k.params)) for k in spec.kernels]
    return spec, evaluator, evaluate, space, calls, recorded, screens


def test_screens_skip_verification_and_a_finalist_that_fails_it_is_replaced(tune):
    spec, evaluator, evaluate, space, calls, recorded, screens = tune
    strategy = SuccessiveHalving(eta=2, min_fidelity=0.25, finalists=1)
    results = search_all([(space, shape) for shape in spec.shapes], strategy, evaluate)
    assert evaluator.counts["inputs"] == len(spec.shapes) and calls["cpu_reference"] == len(spec.shapes)
    # every configuration is screened (loaded once per shape, however many rungs screened it), none verified there
    assert evaluator.counts["screen_load"] == len(space) * len(spec.shapes)
    assert screens and all(s["fidelity"] < 1 and not s["verified"] for s in screens)
    # the wrong configuration (BK=32) is the fastest screen, so it reaches the last rung; its verification
    # fails there and the next of the ranking (BK=16) is verified and measured in its place
    for result in results:
        full = [(t.configuration.params["BK"], t.median_ms) for t in result.trials if t.fidelity >= 1.0]
        assert full == [(BROKEN_BK, None), (16, MS[16])]
        assert result.best is not None and result.best.params["BK"] == 16 and result.best_ms == MS[16]
    # only what reached a full measurement was verified: two per shape, not all four
    assert evaluator.counts["verify"] == 2 * len(spec.shapes) < len(space) * len(spec.shapes)
    # full measurements are cases, and the wrong configuration is a FAIL case
    passed = [c for c in recorded if c.status == Status.PASS]
    assert passed and all(c.timing is not None for c in passed)
    assert len(passed) == evaluator.counts["full"]
    assert {c.kernel for c in recorded if c.status == Status.FAIL} == {
        k.label for k in spec.kernels if k.params["BK"] == BROKEN_BK}
    # a screen is warm (no flusher), one warm-up launch and shorter; a full measurement uses the spec's
    # settings and the flusher
    for settings, flusher in calls["timer"]:
        if flusher is None:
            assert not settings.flush_l2 and settings.min_time_s < spec.measure.min_time_s
            assert settings.warmup == 1
        else:
            assert settings == spec.measure
    # where the time went, by kind of work
    for shape in spec.shapes:
        assert {"inputs", "reference", "screen_load", "screen", "verify", "full"} <= set(evaluator.seconds[shape.label])


def test_inputs_uploaded_once_per_shape_for_screens_and_again_before_each_checked_launch(tune, monkeypatch):
    spec, evaluator, evaluate, space, calls, recorded, screens = tune
    uploads = []
    monkeypatch.setattr(_Buffer, "upload", lambda self, array, stream: uploads.append(array.shape))
    for configuration in space:
        evaluate(configuration, spec.shapes[0], 0.25)
    assert len(uploads) == 2                       # A and B, once for every screen of the shape
    evaluate(space[0], spec.shapes[0], 1.0)
    assert len(uploads) == 4                       # verification uploads them again before its launch
    evaluate(space[1], spec.shapes[1], 0.25)
    assert len(uploads) == 6                       # a new shape, new inputs


def test_a_screen_that_fails_to_launch_drops_the_configuration(tune):
    spec, evaluator, evaluate, space, calls, recorded, screens = tune

    def failing_launch(run):
        def launch():
            raise evaluation.DriverGemmError("launch failed")
        run.launch = launch

    case_steps.bind = failing_launch           # undone by monkeypatch at teardown
    evaluator.timer = lambda launch, *args: launch()
    assert evaluate(space[0], spec.shapes[0], 0.25) is None
    assert evaluate(space[0], spec.shapes[0], 1.0) is None and evaluator.counts["verify"] == 0
    assert recorded[-1].status == Status.ERROR and "launch failed" in recorded[-1].message


def test_exhaustive_measures_every_valid_configuration_fully_and_records_each(tune):
    spec, evaluator, evaluate, space, calls, recorded, screens = tune
    results = search_all([(space, spec.shapes[0])], Exhaustive(), evaluate)
    assert not screens and evaluator.counts["full"] == len(space) - 1
    assert len(recorded) == len(space) and results[0].best_ms == MS[16]
    assert all(c.seed == recorded[0].seed for c in recorded)          # one set of inputs for the shape
    # the inputs a run of the shape draws and keeps: its seed, held by the session for the run's cases too
    assert recorded[0].seed == case_seed(spec.verify.seed, spec.shapes[0].label)
    assert list(evaluator.session.held) == [(spec.shapes[0], recorded[0].seed)]


def test_the_tuning_cache_answers_a_full_measurement_it_holds(tune):
    spec, evaluator, evaluate, space, calls, recorded, screens = tune
    store = {}

    class Cache:
        def lookup(self, key):
            return store.get(key)

        def store(self, key, case):
            store[key] = dataclasses.replace(case)

    evaluator.cache, evaluator.cache_key = Cache(), lambda case: case.key
    search_all([(space, spec.shapes[0])], Exhaustive(), evaluate)
    measured = evaluator.counts["full"]
    evaluator.verified.clear()
    evaluator.shape = None
    recorded.clear()
    again = search_all([(space, spec.shapes[0])], Exhaustive(), evaluate, Budget())
    assert evaluator.counts["full"] == measured and evaluator.counts["cache_hits"] == measured
    assert again[0].best_ms == MS[16]
    assert all("tuning cache" in c.message for c in recorded if c.ok)


def test_a_fault_that_poisons_the_process_stops_the_search(tune):
    spec, evaluator, evaluate, space, calls, recorded, screens = tune

    def faulting(run):
        run.session.device.poisoned = True
        raise evaluation.DriverGemmError("illegal address")

    case_steps.launch_verify = faulting     # undone by monkeypatch at teardown
    with pytest.raises(evaluation.TuneAborted, match="run tune again"):
        evaluate(space[0], spec.shapes[0], 1.0)


def test_screen_settings_scale_the_sampling_time_and_drop_the_flush(tune):
    spec = tune[0]
    screen = evaluation.screen_settings(spec.measure, 1 / 27)
    assert not screen.flush_l2 and screen.min_time_s == pytest.approx(spec.measure.min_time_s / 27)
    assert screen.min_samples >= evaluation.MIN_SCREEN_SAMPLES and screen.mode == "events"


# --------------------------------------------------------------------------------------- typed kernels

TYPED_SWEEP = """
name: typed-sweep
shapes:
  - [67, 40, 48]
  - [32, 24, 16]
baseline: false
kernels:
  - name: smem_bf16_TN
    source: {source}
    function: gemm_smem_typed
    types: {{a: bf16, b: bf16, c: fp32, accumulate: fp32}}
    layout: TN
    params: {{TA: dg::bfloat16_t, TB: dg::bfloat16_t, TC: float, ACC: float, LA: dg::Col, LB: dg::Row,
             TILE: [8, 16, 32]}}
    signature: [A, B, C, M, N, K, lda, ldb, ldc, strideA, strideB, strideC, alpha, beta]
    block: [TILE, TILE]
    grid: [ceil(N / TILE), ceil(M / TILE), batch]
"""


class TypedFakeSession(FakeSession):
    """A fake session with the typed buffers that `typed_steps.upload_inputs` fills."""

    def __init__(self):
        super().__init__()
        self.typed_buffers, self.typed_uploads = {}, []

    def buffers_of_sizes(self, sizes):
        session = self

        class Recorded(_Buffer):
            def __init__(self, name):
                self.name = name

            def upload(self, array, stream):
                session.typed_uploads.append((self.name, bytes(array)))

        for name in sizes:
            self.typed_buffers.setdefault(name, Recorded(name))
        return self.typed_buffers


def test_typed_configurations_are_checked_against_their_own_types_and_share_them_per_shape(tmp_path, monkeypatch):
    """A sweep of a bf16 kernel: bf16 inputs drawn once per shape, uploaded as bf16 bytes, the typed reference."""
    from driver_gemm.gemm import operands
    from driver_gemm.session import typed_steps

    root = Path(__file__).resolve().parent.parent
    spec_path = tmp_path / "typed.yaml"
    spec_path.write_text(TYPED_SWEEP.format(source=root / "kernels" / "types" / "smem_typed.cu"))
    spec = load_spec(spec_path, allow_outside_sources=True)
    plans = launch_plans(spec, arch_limits("sm_90"))
    cases = {(k.label, s.label): Case(0, k, s, plan=plans[k.label, s.label]) for s in spec.shapes
             for k in spec.kernels}
    checked = []

    def fake_typed_launch_verify(run):     # what the GPU would do: the product of what was uploaded, then compared
        run.launch = lambda: None
        a_bytes = dict(run.session.typed_uploads)["A"]
        assert a_bytes == operands.input_bytes(run.typed.operands.a, run.typed.inputs.a, run.typed.types.a)
        assert run.expected is not None and run.typed.types.a.name == "bf16"
        checked.append((run.case.shape.label, run.record.seed, id(run.typed.inputs), id(run.expected)))
        run.record.status = Status.PASS

    monkeypatch.setattr(case_steps, "load", lambda run: None)
    monkeypatch.setattr(typed_steps, "launch_verify", fake_typed_launch_verify)
    monkeypatch.setattr(evaluation, "build_launch", lambda run, buffers: (lambda: None))
    session = TypedFakeSession()
    recorded = []
    evaluator = evaluation.Evaluator(session, spec, cases, {k.label: object() for k in spec.kernels},
                                     record=recorded.append, timer=lambda *args: (summarize([1.0] * 3), []))
    space = [Configuration(k.label, dict(k.params)) for k in spec.kernels]
    for shape in spec.shapes:
        for configuration in space:
            assert evaluator(configuration, shape, 0.25) == 1.0            # screened on the shared inputs
        uploads_after_screens = len(session.typed_uploads)
        for configuration in space:
            assert evaluator(configuration, shape, 1.0) == 1.0             # verified, then fully measured
        # A and B once for every screen of the shape, then again before each checked launch
        assert uploads_after_screens == 2 * (spec.shapes.index(shape) + 1) + 2 * len(space) * spec.shapes.index(shape)
    assert [c.status for c in recorded] == [Status.PASS] * len(space) * len(spec.shapes)
    # one draw and one reference per shape, shared by every configuration; a seed per shape
    assert evaluator.counts["inputs"] == evaluator.counts["reference"] == len(spec.shapes)
    for shape in spec.shapes:
        mine = [c for c in checked if c[0] == shape.label]
        assert len(mine) == len(space) and len({c[1:] for c in mine}) == 1
    assert len({c[1] for c in checked}) == len(spec.shapes)
