"""Case logs read for ``run --resume``, and the results file of a run, kept whatever the optional steps after it do."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from driver_gemm.cli import EXIT_USAGE, main
from driver_gemm.cli import run as run_command
from driver_gemm.cli.common import Output
from driver_gemm.cli.main import build_parser
from driver_gemm.errors import UsageError
from driver_gemm.measure.stats import summarize
from driver_gemm.results.read import load_results, read_finished_cases
from driver_gemm.results.records import CaseDevice, CaseLog, CaseResult, RunResult
from driver_gemm.runners import estimates
from driver_gemm.session.options import RunOptions
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status

from conftest import SPECS

SEED = str(SPECS / "seed.yaml")


def case(kernel: str, ms: float = 1.0) -> CaseResult:
    return CaseResult(kernel=kernel, name=kernel, shape=Shape(64, 64, 64), status=Status.PASS,
                      timing=summarize([ms, ms * 1.01, ms * 0.99]), device=CaseDevice("GPU", "GPU-0", 0),
                      phases={"plan": 0.1, "timing": 0.5})


def output() -> Output:
    return Output(console=Console(file=io.StringIO()), errors=Console(file=io.StringIO(), width=400))


def write_log(path: Path, kernels=("v1", "v2"), header: bool = True) -> Path:
    with CaseLog(path) as log:
        if header:
            log.write_header(RunResult(spec="seed", spec_path=None))
        for kernel in kernels:
            log.append(case(kernel))
    return path


def test_a_log_whose_phases_are_no_object_is_refused_at_its_line(tmp_path, capsys):
    path = write_log(tmp_path / "run.jsonl")
    lines = path.read_text().splitlines()
    record = json.loads(lines[2])
    record["phases"] = ["plan", 0.1]
    lines[2] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UsageError) as refused:
        read_finished_cases(path)
    assert refused.value.where == f"{path}:3" and refused.value.field == "phases"
    assert "an array" in str(refused.value) and "object" in str(refused.value)
    assert main(["run", SEED, "--resume", str(path)]) == EXIT_USAGE     # before any GPU is asked for
    assert f"{path}:3: phases:" in capsys.readouterr().err


def run_seed(monkeypatch, results: Path, runner) -> tuple[int, str]:
    """`run`'s spec loop over the seed spec with `runner` in place of the GPUs, its results file `results`: the exit
    code and what it said on stderr."""
    monkeypatch.setattr(run_command, "_runner", lambda *arguments: runner)
    args = build_parser().parse_args(["run", SEED, "--json", str(results), "-q"])
    args.json, args.devices, args.device = results, None, 0
    out = output()
    code = run_command._run_specs(args, [load_spec(SEED)], None, RunOptions(), [], (None, {}, None), None, {}, out)
    return code, out.errors.file.getvalue()


def test_the_results_file_is_written_before_the_costs_are_kept_and_whatever_keeping_them_does(tmp_path, monkeypatch):
    results = tmp_path / "out.json"

    class Runner:
        def run(self, spec, options, *, on_start, on_result, result, previous):
            finished = case("v1")
            result.cases.append(finished)
            on_result(finished)

    def remember(result):
        assert results.is_file()     # the results are on disk before the optional step starts
        raise RuntimeError("cannot keep the costs")

    monkeypatch.setattr(estimates, "remember", remember)
    _, said = run_seed(monkeypatch, results, Runner())
    assert [c.kernel for c in load_results(results).cases] == ["v1"]
    assert "costs were not kept" in said


def test_costs_are_kept_from_a_record_whose_phases_are_of_another_kind(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    odd = case("v1")
    odd.phases = ["plan", 0.1]     # type: ignore[assignment]   # as a caller may build it
    assert estimates.remember(RunResult(spec="seed", spec_path=None, cases=[odd, case("v2")])) == 2


def test_a_log_without_its_header_line_is_not_resumed(tmp_path, capsys):
    path = write_log(tmp_path / "other.jsonl", header=False)
    with pytest.raises(UsageError) as refused:
        run_command.read_log_to_resume(path, "seed", output())
    text = str(refused.value)
    assert refused.value.where == str(path) and refused.value.field == "--resume"
    assert "no header line" in text and '"spec": "seed"' in text
    assert main(["run", SEED, "--resume", str(path)]) == EXIT_USAGE
    assert "no header line" in capsys.readouterr().err


def test_a_whole_last_line_without_its_newline_is_a_finished_case_kept_when_the_log_grows(tmp_path):
    path = write_log(tmp_path / "run.jsonl")
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    header, cases = read_finished_cases(path)
    assert [c.kernel for c in cases] == ["v1", "v2"]
    with CaseLog(path) as log:      # as a resumed run appends
        log.append(case("v3"))
    assert [c.kernel for c in read_finished_cases(path)[1]] == ["v1", "v2", "v3"]


def test_a_torn_last_line_is_dropped_and_resuming_says_so(tmp_path):
    path = write_log(tmp_path / "run.jsonl")
    with open(path, "a") as handle:
        handle.write('{"type": "case", "kernel": "v3", "sha')
    out = output()
    previous = run_command.read_log_to_resume(path, "seed", out)
    assert [c.kernel for c in previous] == ["v1", "v2"]
    said = out.errors.file.getvalue()
    assert f"{path}:4" in said and "torn" in said
    with CaseLog(path) as log:
        log.append(case("v3"))
    assert [c.kernel for c in read_finished_cases(path)[1]] == ["v1", "v2", "v3"]


def test_a_run_interrupted_before_its_first_case_offers_no_log_to_resume(tmp_path, monkeypatch):
    results = tmp_path / "out.json"

    class Interrupted:
        def run(self, spec, options, *, on_start, on_result, result, previous):
            raise KeyboardInterrupt

    class OneCaseThenInterrupted:
        def run(self, spec, options, *, on_start, on_result, result, previous):
            finished = case("v1")
            result.cases.append(finished)
            on_result(finished)
            raise KeyboardInterrupt

    code, said = run_seed(monkeypatch, results, Interrupted())
    assert code == run_command.EXIT_INTERRUPTED
    assert "before any case finished" in said and "--resume" not in said   # no header: --resume would refuse it
    _, said = run_seed(monkeypatch, results, OneCaseThenInterrupted())
    assert f"continue with --resume {results.with_suffix('.jsonl')}" in said
    run_command.read_log_to_resume(results.with_suffix(".jsonl"), "seed", output())   # which it then takes
