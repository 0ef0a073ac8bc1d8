"""A tune's progress: the time left and the best so far from a fake clock, the bar only on a terminal, and a
line per case elsewhere, as before."""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.console import Console

from driver_gemm.cli import EXIT_OK, main
from driver_gemm.report.tables import case_line
from driver_gemm.results.read import read_results
from driver_gemm.status import Status
from driver_gemm.tune.progress import TuneProgress, clock_text

from conftest import ROOT

RECORDED = ROOT / "tests" / "data" / "results" / "tune-v8-order-h200.json.gz"
SPEC = ROOT / "specs" / "sweep-v8-order.yaml"


def _cases():
    return read_results(RECORDED).run.cases


def test_the_time_left_is_the_mean_measured_time_times_the_records_left():
    cases = [case for case in _cases() if not case.is_baseline]
    progress = TuneProgress(planned=10, started=100.0)
    assert progress.eta_s(100.0) is None and progress.best_text() == "-"
    refused = dataclasses.replace(cases[0], status=Status.INVALID, timing=None)
    progress.record(refused)                   # refused before the GPU: no time, no rate
    assert progress.eta_s(101.0) is None and progress.done == 1 and progress.failed == 1
    progress.record(cases[0])
    progress.record(cases[1])
    assert progress.eta_s(104.0) == pytest.approx(4.0 / 2 * 7)
    with_budget = dataclasses.replace(progress, budget_s=6.0)
    assert with_budget.eta_s(104.0) == pytest.approx(2.0)     # the budget's seconds left are fewer
    done = dataclasses.replace(progress, done=10)
    assert done.eta_s(200.0) == 0.0


def test_the_best_so_far_is_the_fastest_passing_configuration_of_the_kernel_and_shape_searched():
    cases = [case for case in _cases() if not case.is_baseline]
    shape = cases[0].shape
    same = [case for case in cases if case.shape == shape]
    progress = TuneProgress(planned=len(cases), started=0.0)
    for case in same:
        progress.record(case)
    fastest = min(same, key=lambda case: case.median_ms)
    assert progress.best[(fastest.name, shape.label)] is fastest
    assert progress.best_text() == f"{fastest.kernel} {fastest.median_ms:.4g} ms"
    broken = dataclasses.replace(fastest, status=Status.FAIL, timing=dataclasses.replace(
        fastest.timing, median_ms=fastest.median_ms / 2))
    progress.record(broken)                       # a wrong configuration is never the best
    assert progress.best[(fastest.name, shape.label)] is fastest and progress.failed == 1


def test_clock_text():
    assert [clock_text(value) for value in (None, 0, 62.4, 3723)] == ["-:--", "0:00", "1:02", "1:02:03"]


@pytest.fixture
def fake_search(monkeypatch):
    """`tune` with the recorded search played back instead of a GPU's."""
    import driver_gemm.cli.tune as tune_command
    import driver_gemm.tune.search as search

    recorded = read_results(RECORDED).run

    def tune_spec(spec, strategy, budget, *, device, fresh, result, on_result):
        result.environment = recorded.environment
        for case in recorded.cases:
            result.cases.append(case)
            on_result(case)
        return result, []

    monkeypatch.setattr(search, "tune_spec", tune_spec)
    monkeypatch.setattr(tune_command, "_check_before_asking_for_a_gpu", lambda spec: None)
    return recorded


def test_off_a_terminal_tune_prints_a_line_per_case_as_before(tmp_path, capsys, fake_search):
    code = main(["tune", str(SPEC), "--json", str(tmp_path / "t.json"), "--out", str(tmp_path / "w.yaml")])
    assert code == EXIT_OK
    lines = capsys.readouterr().err.splitlines()
    assert lines[:len(fake_search.cases)] == [case_line(case) for case in fake_search.cases]


def test_on_a_terminal_the_bar_shows_the_count_and_the_best(fake_search):
    from driver_gemm.cli.tune import LiveTune
    from driver_gemm.specfile import load_spec
    from driver_gemm.tune.strategies import Budget

    screen = io.StringIO()
    ticks = iter(range(1000))
    bar = LiveTune(Console(file=screen, force_terminal=True, width=200), load_spec(SPEC), Budget(),
                   clock=lambda: float(next(ticks)))
    for case in fake_search.cases:
        bar.update(case)
    assert bar.state.done == len(fake_search.cases)
    text = screen.getvalue()
    bar.close()
    best = bar.state.best_text()
    assert best != "-" and best.split(" ")[0][:20] in text
    assert f"{len(fake_search.cases)}/{bar.state.planned}" in text
