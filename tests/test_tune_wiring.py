"""The wiring of tuning, gates and profiles into the command line, on recorded data (no GPU)."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest
from rich.console import Console

from driver_gemm.cli import main
from driver_gemm.cli.common import Output
from driver_gemm.cli.run import check_run_gates, read_gates
from driver_gemm.errors import UsageError
from driver_gemm.measure.profile import ncu_command, nvtx_filter_safe, parse_ncu_csv, summarize_profile
from driver_gemm.results.read import read_results
from driver_gemm.specfile import load_spec

from conftest import ROOT, SPECS

DATA = Path(__file__).resolve().parent / "data"
SEED_RESULTS = ROOT / "tests" / "data" / "results" / "seed-h200.json"


def output():
    stdout, stderr = io.StringIO(), io.StringIO()
    return Output(Console(file=stdout, width=200), Console(file=stderr, width=200)), stdout, stderr


def gate_args(*min_pct, baseline=None, threshold=0.0):
    return argparse.Namespace(min_pct=list(min_pct), baseline_results=baseline, threshold=threshold)


def test_run_gates_name_the_case_the_figures_and_the_noise():
    spec = load_spec(SPECS / "seed.yaml")
    run = read_results(SEED_RESULTS).run
    out, _, stderr = output()
    assert not check_run_gates(spec, run, read_gates(gate_args("30", "v0=1"), out), 0.0, out)
    lines = stderr.getvalue().splitlines()
    assert any("v1 at 1024x512x1024: min-pct gate: measured 19.9% of cuBLAS" in line and "required 30.0%" in line
               and "noise" in line for line in lines)
    assert not any(line.startswith("driver-gemm: gate failed: v0 ") for line in lines)     # v0=1 holds
    out, _, stderr = output()
    assert check_run_gates(spec, run, read_gates(gate_args(baseline=SEED_RESULTS), out), 0.0, out)
    # a kernel's own min_pct: in the spec gates it without any option
    strict = spec.__class__(**{**spec.__dict__, "kernels": tuple(
        k.__class__(**{**k.__dict__, "min_pct": 50.0}) if k.name == "v4" else k for k in spec.kernels)})
    out, _, stderr = output()
    assert not check_run_gates(strict, run, read_gates(gate_args(), out), 0.0, out)
    assert stderr.getvalue().count("gate failed: v4") == 2


@pytest.mark.parametrize("args, field", [
    (gate_args("fast"), "--min-pct"), (gate_args("0"), "--min-pct"),
    (gate_args(threshold=-1.0), "--threshold"),
])
def test_bad_gates_are_usage_errors(args, field):
    with pytest.raises(UsageError, match=field.lstrip("-")) as raised:
        read_gates(args, output()[0])
    assert raised.value.field == field


def test_a_kernels_min_pct_is_read_and_checked_at_its_line(tmp_path):
    from driver_gemm.errors import SpecError
    from test_spec import MINIMAL, write

    assert load_spec(write(tmp_path, MINIMAL + "    min_pct: 80\n")).kernels[0].min_pct == 80.0
    with pytest.raises(SpecError, match=r"spec.yaml:\d+.*min_pct"):
        load_spec(write(tmp_path, MINIMAL + "    min_pct: -5\n"))


def test_tune_refuses_a_bad_budget_or_strategy_before_any_gpu_work(capsys):
    assert main(["tune", str(SPECS / "sweep-v8.yaml"), "--budget", "soon"]) == 2
    assert "--budget 'soon'" in capsys.readouterr().err
    assert main(["tune", str(SPECS / "sweep-v8.yaml"), "--budget", "0s"]) == 2
    with pytest.raises(SystemExit) as raised:
        main(["tune", str(SPECS / "sweep-v8.yaml"), "--strategy", "annealing"])
    assert raised.value.code == 2


def test_tune_from_writes_the_winners_and_a_dispatch_spec_that_runs(tmp_path, capsys):
    from driver_gemm.planning.cases import cases_of

    results = ROOT / "tests" / "data" / "results" / "tune-v8-order-h200.json.gz"
    spec_path = SPECS / "sweep-v8-order.yaml"
    dispatch = tmp_path / "dispatch.yaml"
    code = main(["tune", str(spec_path), "--from", str(results), "--out", str(tmp_path / "w.yaml"),
                 "--dispatch", str(dispatch)])
    assert code == 0, capsys.readouterr().err
    spec = load_spec(dispatch, allow_outside_sources=True)     # written outside the checkout
    assert spec.dispatch and len(spec.kernels) == len(spec.dispatch)
    picked = [case for case in cases_of(spec) if not case.is_baseline]
    assert picked and all(case.dispatch.rule == "exact" for case in picked)


def test_tune_prepares_before_the_gpu_pruning_what_cannot_launch():
    from driver_gemm.cuda.occupancy import arch_limits
    from driver_gemm.tune.search import prepare_cases
    from driver_gemm.tune.strategies import Configuration

    spec = load_spec(SPECS / "sweep-v8.yaml")
    compiled_labels = []

    def no_compiler(spec, arch, skip=frozenset()):
        compiled_labels.extend(k.label for k in spec.kernels if k.label not in skip)
        return {}

    prepared = prepare_cases(spec, arch_limits("sm_90"), "sm_90", 132, compile=no_compiler)
    assert prepared.pruned and all(r.status == "INVALID" for r in prepared.pruned_records)
    assert len(prepared.cases) + len(prepared.pruned) == len(spec.kernels) * len(spec.shapes)
    assert set(compiled_labels) == {label for label, _ in prepared.cases}      # nothing pruned is compiled
    groups = prepared.groups(spec)
    assert [shape for _, shape in groups] == list(spec.shapes)
    assert all(isinstance(c, Configuration) for space, _ in groups for c in space)


def test_profile_table_from_a_recorded_ncu_csv_beside_the_theoretical_occupancy():
    from driver_gemm.report.tables import profile_rows, profile_table
    from driver_gemm.report.plots import arithmetic_intensity

    run = read_results(ROOT / "tests" / "data" / "results" / "tf32-v10-h200.json").run
    case = next(c for c in run.cases if c.kernel.startswith("v10") and c.occupancy)
    launch = parse_ncu_csv((DATA / "ncu-raw-sm90.csv").read_text())[0]
    case.profile = summarize_profile(launch, flops=case.shape.flops)
    row, = profile_rows(run)
    assert row["achieved_occupancy_pct"] == pytest.approx(12.47)
    assert row["theoretical_occupancy_pct"] == pytest.approx(100 * case.occupancy.occupancy)
    assert row["arithmetic_intensity"] == pytest.approx(case.shape.flops / ((197.53 + 67.11) * 1e6))
    assert arithmetic_intensity(case) == (row["arithmetic_intensity"], True)
    console = Console(file=io.StringIO(), width=200)
    console.print(profile_table(run))
    text = console.file.getvalue()
    assert "12.5 / " in text and "achieved / theoretical" in text
    # the record keeps the counters through the results file's schema
    from driver_gemm.results.records import CaseResult
    assert CaseResult.from_dict(case.as_dict()).profile["achieved_occupancy_pct"] == pytest.approx(12.47)


def test_profile_command_falls_back_to_the_kernel_name_when_the_range_cannot_be_filtered(tmp_path, monkeypatch):
    from driver_gemm.cuda import nvtx
    from driver_gemm.session.profile_case import profile_command
    from driver_gemm.results.records import CaseResult
    from driver_gemm.specfile.model import Shape
    from driver_gemm.status import Status

    spec = load_spec(SPECS / "seed.yaml")
    plain = CaseResult(kernel="v1", name="v1", shape=Shape(1024, 512, 1024), status=Status.PASS,
                       instance="sgemm_coalesced")
    swept = CaseResult(kernel="v2[TILE=32]", name="v2", shape=Shape(1024, 512, 1024), status=Status.PASS,
                       instance="sgemm_shared<32>")
    assert nvtx_filter_safe("v1", "1024x512x1024") and not nvtx_filter_safe("v2[TILE=32]", "1024x512x1024")
    monkeypatch.setattr(nvtx, "enabled", lambda: True)
    command = profile_command(spec, plain, "ncu", 0, tmp_path / "c.json")
    assert command[command.index("--nvtx-include") + 1] == "driver-gemm@v1 1024x512x1024/"
    assert command[command.index("-k") + 1] == "v1" and "--no-timing" in command and "--no-baseline" in command
    for case in (swept, plain):
        if case is plain:
            monkeypatch.setattr(nvtx, "enabled", lambda: False)
        command = profile_command(spec, case, "ncu", 0, tmp_path / "c.json")
        assert "--nvtx-include" not in command and command[command.index("--launch-skip") + 1] == "0"
        assert command[command.index("--kernel-name") + 1] == f"regex:{case.instance.split('<')[0]}"
        assert command[command.index("--clock-control") + 1] == "none"
    assert ncu_command(["x"], "v1", "1x1x1", "f", nvtx=False, launch_skip=3)[3:5] == ["--launch-skip", "3"]


def test_run_profile_without_ncu_says_so_once_and_changes_nothing(monkeypatch):
    from driver_gemm.cli.run import _profiler

    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("DRIVER_GEMM_NCU", raising=False)
    out, _, stderr = output()
    args = argparse.Namespace(profile=True, devices=None, scheduler=None, sanitize=None)
    assert _profiler(args, out) is None
    assert stderr.getvalue().count("not profiling: --profile needs Nsight Compute's ncu") == 1
