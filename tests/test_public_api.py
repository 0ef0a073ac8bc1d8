"""The public API does what the commands do: each command renders what one documented call returns."""

from pathlib import Path

import pytest

import driver_gemm as dg
from driver_gemm.cli.common import Output
from driver_gemm.cli.exit_codes import EXIT_FAILED, EXIT_OK
from driver_gemm.cli.main import main
from driver_gemm.report.formats import comparison_csv, plan_csv
from driver_gemm.report.tables import print_plan

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(path.stem for path in (ROOT / "specs").glob("*.yaml"))
RESULTS = ROOT / "tests" / "data" / "results"


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A folder with no spec in it: names reach the shipped specs, not files of the checkout."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name", SHIPPED)
def test_the_api_plan_is_what_plan_shows_for_every_shipped_spec(name, elsewhere, capsys):
    code = main(["plan", name, "--arch", "sm_90", "--csv"])
    csv_out = capsys.readouterr().out
    planned = dg.plan_spec(name, arch="sm_90")
    assert isinstance(planned, dg.SpecPlan) and planned.plans
    assert code == (EXIT_OK if planned.ok else EXIT_FAILED)
    assert csv_out == plan_csv(planned.plans)      # every row: launch, resources, occupancy, waves, checks

    code = main(["plan", name, "--arch", "sm_90"])
    table_out = capsys.readouterr().out
    title = f"{planned.spec.name}: launch plan for sm_90 ({planned.sm_count} SMs, {planned.target.limits.typical_part})"
    print_plan(planned.plans, title, Output.for_terminal().console, planned.summary())
    rendered = capsys.readouterr().out
    assert table_out.endswith(rendered) and rendered.strip()
    assert all(line.startswith("warning: NVRTC") for line in table_out[:-len(rendered)].splitlines())


def test_plan_rows_are_typed(elsewhere):
    planned = dg.plan_spec("seed", arch="sm_90", sm_count=100)
    plan = planned.plans[0]
    assert isinstance(plan, dg.CasePlan) and isinstance(plan.resources, dg.KernelResources)
    assert plan.occupancy.blocks_per_sm >= 1 and plan.waves > 0 and plan.problems == []
    assert planned.target == dg.plan_target("sm_90") and planned.sm_count == 100
    assert planned.summary() == "10 ok, 0 INVALID"


def test_a_spec_by_file_by_name_or_loaded_plans_the_same(elsewhere):
    by_name = dg.plan_spec("fast", arch="sm_90")
    by_file = dg.plan_spec(ROOT / "specs" / "fast.yaml", arch="sm_90")
    by_spec = dg.plan_spec(dg.load_spec("fast"), arch="sm_90")
    assert plan_csv(by_name.plans) == plan_csv(by_file.plans) == plan_csv(by_spec.plans)


def test_shipped_specs_are_reachable_by_name_from_any_folder(elsewhere, capsys):
    shipped = dg.shipped_specs()
    assert [spec.name for spec in shipped] == SHIPPED
    assert all(isinstance(spec, dg.ShippedSpec) and spec.path.is_file() and spec.description for spec in shipped)
    assert dg.load_spec("fast").path == dg.load_spec("fast.yaml").path == next(s.path for s in shipped
                                                                            if s.name == "fast")
    assert main(["specs"]) == EXIT_OK
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == SHIPPED
    assert all(line.endswith(spec.description) for line, spec in zip(listed, shipped))


def test_a_local_file_wins_over_a_shipped_name(elsewhere):
    (elsewhere / "fast.yaml").write_text((ROOT / "specs" / "seed.yaml").read_text().replace(
        "../kernels/", str(ROOT / "kernels") + "/").replace("name: seed", "name: local"))
    local = dg.load_spec("fast.yaml", allow_outside_sources=True)
    assert local.path == Path("fast.yaml") and local.name == "local"
    assert dg.load_spec("fast").name == "fast"      # no file is called `fast` here: the shipped spec



def test_an_unknown_name_lists_the_shipped_specs(elsewhere):
    with pytest.raises(dg.SpecError, match="nor a shipped spec of that name; the shipped specs are anchors, fast"):
        dg.load_spec("fats")
    with pytest.raises(dg.SpecError, match="nor a shipped spec"):
        dg.plan_spec("fats", arch="sm_90")


def test_read_and_compare_results_are_what_compare_shows(capsys):
    old, new = RESULTS / "seed-before-h200.json", RESULTS / "seed-h200.json"
    read = dg.read_results(old)
    assert isinstance(read, dg.ResultsFile) and read.run.cases and read.notes == []
    comparisons = dg.compare_runs(read.run, dg.load_results(new))
    code = main(["compare", str(old), str(new), "--csv"])
    assert capsys.readouterr().out == comparison_csv(comparisons)
    assert code == (EXIT_FAILED if any(c.regression for c in comparisons) else EXIT_OK)


def test_tune_spec_takes_a_strategy_by_name_and_refuses_an_unknown_one(elsewhere):
    with pytest.raises(dg.DriverGemmError, match="unknown strategy 'bogus'; choose one of exhaustive"):
        dg.tune_spec("sweep-v8-small", "bogus")
    with pytest.raises(dg.DriverGemmError, match="leaves nothing to measure"):
        dg.Budget(configurations=0)


@pytest.mark.gpu
def test_tune_by_name_gives_the_winners_tune_writes(elsewhere):
    run, searches = dg.tune_spec("sweep-v8-small", "random", dg.Budget(configurations=2))
    assert searches and all(isinstance(search, dg.SearchResult) for search in searches)
    picks = dg.pick_winners(run)
    assert picks and any(pick.best for pick in picks)
    written = dg.winners_spec(dg.load_spec("sweep-v8-small"), picks, elsewhere / "winners.yaml")
    assert dg.load_spec(written, allow_outside_sources=True).kernels
