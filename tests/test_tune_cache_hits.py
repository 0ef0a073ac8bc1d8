"""The tuning cache inside a search, on a fake session: switched off it is never asked (no key is worked out), a key
that cannot be worked out leaves the measurement uncached without stopping the search, and a hit is named as the case
being measured, not as the case that was stored."""

from __future__ import annotations

import logging

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.measure.stats import summarize
from driver_gemm.planning.build import launch_plans
from driver_gemm.planning.cases import Case
from driver_gemm.results.records import DispatchChoice
from driver_gemm.session import steps as case_steps
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status
from driver_gemm.tune import evaluate as evaluation
from driver_gemm.tune.strategies import Configuration, Exhaustive, search_all
from driver_gemm.tune.tune_cache import TuningCache

from test_evaluate import MS, SWEEP, FakeSession
from test_spec import write


@pytest.fixture
def fake_steps(monkeypatch):
    """The case steps that need a GPU, done without one: every configuration passes, each BK has its own time."""
    def launch_verify(run):
        run.launch = lambda: None
        run.record.status = Status.PASS

    monkeypatch.setattr(case_steps, "load", lambda run: None)
    monkeypatch.setattr(case_steps, "launch_verify", launch_verify)
    monkeypatch.setattr(case_steps, "cpu_reference", lambda inputs, alpha, beta:
                        inputs.A.astype(float) @ inputs.B.astype(float))


def search(spec, cache, cache_key, dispatch=None):
    """Every configuration of `spec` on its first shape, fully measured; the records it made."""
    shape = spec.shapes[0]
    plans = launch_plans(spec, arch_limits("sm_90"))
    cases = {(k.label, shape.label): Case(0, k, shape, plan=plans[k.label, shape.label], dispatch=dispatch)
             for k in spec.kernels}

    def timer(launch, device, stream, settings, flusher, gate):
        return summarize([MS[timer.current]] * 3), []

    recorded = []
    evaluator = evaluation.Evaluator(FakeSession(), spec, cases, {k.label: object() for k in spec.kernels},
                                     record=recorded.append, cache=cache, cache_key=cache_key, timer=timer)

    def evaluate(configuration, at, fidelity):
        timer.current = configuration.params["BK"]
        return evaluator(configuration, at, fidelity)

    space = [Configuration(k.label, dict(k.params)) for k in spec.kernels]
    results = search_all([(space, shape)], Exhaustive(), evaluate)
    return recorded, results, evaluator


def test_a_cache_switched_off_works_out_no_key(tmp_path, monkeypatch, fake_steps):
    monkeypatch.setenv("DRIVER_GEMM_NO_CACHE", "1")
    spec = load_spec(write(tmp_path, SWEEP))
    asked = []

    def key(case):
        asked.append(case.key)
        raise UnicodeDecodeError("utf-8", b"\xbe", 0, 1, "invalid start byte")   # as a text read of a CUBIN

    recorded, results, _ = search(spec, TuningCache(tmp_path / "tune"), key)
    assert not asked
    assert results[0].best is not None and len(recorded) == len(spec.kernels)


def test_a_key_that_cannot_be_worked_out_leaves_the_case_measured_and_uncached(tmp_path, monkeypatch, fake_steps,
                                                                                caplog):
    monkeypatch.delenv("DRIVER_GEMM_NO_CACHE", raising=False)
    spec = load_spec(write(tmp_path, SWEEP))

    def key(case):
        raise OSError(f"{case.kernel.source}: gone")

    cache = TuningCache(tmp_path / "tune")
    with caplog.at_level(logging.WARNING, logger="driver_gemm.tune.evaluate"):
        recorded, results, _ = search(spec, cache, key)
    assert results[0].best is not None and all(case.ok and case.timing for case in recorded)
    assert not list((tmp_path / "tune").rglob("*.json"))
    warned = [record.getMessage() for record in caplog.records]
    assert any(spec.kernels[0].label in text and "tuning cache" in text and "gone" in text for text in warned)


def test_a_hit_is_named_as_the_case_measured(tmp_path, monkeypatch, fake_steps):
    monkeypatch.delenv("DRIVER_GEMM_NO_CACHE", raising=False)
    cache_folder = tmp_path / "tune"

    def key(case):       # what decides the measurement, and no name (as `tuning_key`)
        return f"{sorted(case.kernel.params.items())}{case.shape.label}".encode().hex()[:64].ljust(64, "0")

    first = load_spec(write(tmp_path, SWEEP))
    stored, _, _ = search(first, TuningCache(cache_folder), key)
    renamed = load_spec(write(tmp_path, SWEEP.replace("name: v4", "name: v4coarse"), "renamed.yaml"))
    picked = DispatchChoice(0, renamed.shapes[0].label, "exact", table="family")
    again, results, evaluator = search(renamed, TuningCache(cache_folder), key, dispatch=picked)
    assert evaluator.counts["cache_hits"] == len(renamed.kernels) and evaluator.counts["full"] == 0
    labels = {kernel.label for kernel in renamed.kernels}
    assert {case.kernel for case in again} == labels and not labels & {case.kernel for case in stored}
    assert {case.name for case in again} == {"family"}
    assert all(case.dispatch == picked for case in again)
    assert {case.instance for case in again} == {kernel.instance for kernel in renamed.kernels}
    assert results[0].best.label in labels
