"""The strategy benchmark's own arithmetic, on the recorded H200 runs of it: the table, the criterion, the budgets."""

import copy
import importlib.util
import json
from pathlib import Path

import pytest

from driver_gemm.tune.evaluate import MIN_SCREEN_SAMPLES, screen_samples_cap, screen_settings
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import MeasureSettings

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "data" / "tune-strategies-30-h200.json"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("tune_strategies", ROOT / "scripts" / "tune_strategies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def runs():
    return json.loads(RECORDED.read_text())["runs"]


def test_rows_compare_each_strategy_with_the_exhaustive_search_of_its_shape(bench, runs):
    rows = bench.comparison_rows(runs)
    assert len(rows) == 6
    for row in rows:
        exhaustive = next(r for r in rows if r["strategy"] == "exhaustive" and r["shape"] == row["shape"])
        assert row["pct_of_exhaustive_best"] == pytest.approx(100 * exhaustive["best_ms"] / row["best_ms"])
        assert row["pct_of_exhaustive_wall"] == pytest.approx(100 * row["seconds"] / exhaustive["seconds"])
    assert all(r["pct_of_exhaustive_wall"] == 100 for r in rows if r["strategy"] == "exhaustive")


def test_the_criterion_on_the_recorded_sample_is_not_met_and_would_be_at_a_fifth_of_the_time(bench, runs):
    rows = bench.comparison_rows(runs)
    assert not bench.criterion_met(rows)          # 86% and 93% of the exhaustive wall time
    faster = copy.deepcopy(runs)
    for search in faster[1]["searches"]:
        assert faster[1]["strategy"] == "halving"
        search["seconds"] /= 5
    assert bench.criterion_met(bench.comparison_rows(faster))
    slower_best = copy.deepcopy(faster)
    slower_best[1]["searches"][0]["best_ms"] *= 1.02        # 2% slower than the exhaustive best
    assert not bench.criterion_met(bench.comparison_rows(slower_best))
    assert not bench.criterion_met(bench.comparison_rows(runs[:1]))    # no halving run, nothing met


def test_the_table_has_a_section_per_shape_with_a_line_per_strategy(bench, runs):
    table = bench.comparison_table(bench.comparison_rows(runs), "sweep-v8")
    sections = table.split("sweep-v8 at ")[1:]
    assert [s.splitlines()[0] for s in sections] == ["4096x4096x4096", "8192x8192x8192"]
    for section in sections:
        lines = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
        assert [line.split(" | ")[0] for line in lines[1:]] == ["| exhaustive", "| halving", "| random"]
    halving_8192 = next(line for line in sections[1].splitlines() if line.startswith("| halving"))
    cells = [c.strip() for c in halving_8192.strip("|").split("|")]
    assert cells[1] == "23.4192" and cells[3] == "20.0" and cells[4] == "93.4"


def test_random_sampling_gets_the_seconds_halving_searched_for(bench, runs):
    halving = runs[1]
    assert bench.random_budget_s(halving) == pytest.approx(sum(s["seconds"] for s in halving["searches"]))
    assert bench.random_budget_s({"searches": []}) == 1.0


def test_the_model_expects_the_whole_sweep_to_fit_and_halving_to_meet_the_criterion_with_margin(bench):
    spec = load_spec(ROOT / "specs" / "sweep-v8.yaml").select(shapes=["4096x4096x4096", "8192x8192x8192"])
    model = bench.predict(spec)
    assert set(model["shapes"]) == {"4096x4096x4096", "8192x8192x8192"}
    for shape in model["shapes"].values():
        assert shape["configurations"] == 54 and shape["halving_pct"] <= 20
    assert model["searches_s"] < 300      # leaves a minute of six for compiling, start-up and planning


def test_a_screen_is_a_few_warm_launches():
    full = MeasureSettings(min_time_s=0.2, timeout_s=1.0)
    lowest = screen_settings(full, 1 / 27)
    assert lowest.max_samples == MIN_SCREEN_SAMPLES == lowest.min_samples and lowest.warmup == 1
    assert not lowest.flush_l2
    assert screen_samples_cap(1 / 9) == 9 and screen_samples_cap(1 / 3) == 27
    assert all(screen_settings(full, f).max_samples <= screen_settings(full, 3 * f).max_samples
               for f in (1 / 27, 1 / 9))


def test_the_run_writes_its_json_after_each_strategy_and_skips_random_sampling_it_cannot_pay_for(
        bench, runs, tmp_path, monkeypatch, capsys):
    recorded = {run["strategy"]: run for run in runs}
    calls = []

    def fake_run(spec, strategy, budget, device):
        calls.append((strategy.name, budget.seconds))
        return {**recorded[strategy.name], "prepare_s": 1.0, "work": {}}

    compile_report = {"first": {"seconds": 2.0, "kernels": 54, "from_cache": 0, "errors": 0, "cases": 108},
                      "warm": {"seconds": 0.5, "kernels": 54, "from_cache": 54, "errors": 0, "cases": 108},
                      "warm_for_every_strategy": True}
    monkeypatch.setattr(bench, "compile_ahead", lambda spec, device: compile_report)
    monkeypatch.setattr(bench, "run_strategy", fake_run)
    out = tmp_path / "strategies.json"
    argv = [str(ROOT / "specs" / "sweep-v8.yaml"), "--shapes", "4096x4096x4096", "8192x8192x8192", "--json", str(out)]
    assert bench.main(argv) == 0
    halving_seconds = sum(s["seconds"] for s in recorded["halving"]["searches"])
    assert calls == [("exhaustive", None), ("halving", None), ("random", pytest.approx(halving_seconds))]
    report = json.loads(out.read_text())
    assert [r["strategy"] for r in report["runs"]] == ["exhaustive", "halving", "random"]
    assert report["criterion_met"] is False and report["compile"]["warm_for_every_strategy"]
    printed = capsys.readouterr().out
    assert "every strategy below starts from a warm compile cache" in printed and "NOT met" in printed

    calls.clear()
    assert bench.main(argv + ["--max-seconds", "10"]) == 0     # halving searched ~26 s: random would not fit
    assert [name for name, _ in calls] == ["exhaustive", "halving"]
    report = json.loads(out.read_text())
    assert "random_skipped" in report and len(report["runs"]) == 2
