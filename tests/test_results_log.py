import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from driver_gemm.results.read import load_results, read_finished_cases
from driver_gemm.results.records import CaseDevice, CaseLog, CaseResult, RunResult, case_key
from driver_gemm.status import Status
from driver_gemm.specfile.model import Shape
from driver_gemm.measure.stats import summarize

from conftest import ROOT, SPECS


def case(kernel, shape=Shape(8, 8, 8), status=Status.PASS, ms=1.0):
    return CaseResult(kernel=kernel, name=kernel.split("[")[0], shape=shape, status=status,
                      timing=summarize([ms, ms * 1.01, ms * 0.99]))


def test_lines_are_written_as_cases_land_and_read_back(tmp_path):
    path = tmp_path / "run.jsonl"
    run = RunResult(spec="seed", spec_path="specs/seed.yaml", environment={"device": {"name": "GPU"}})
    with CaseLog(path) as log:
        log.write_header(run)
        log.append(case("cublas"))
        # a reader sees the finished case before the log is closed: it was flushed and fsynced
        assert len(read_finished_cases(path)[1]) == 1
        log.write_header(run)   # once only
        log.append(case("v4[BM=64]", ms=2.0))
    header, cases = read_finished_cases(path)
    assert header["spec"] == "seed" and header["environment"]["device"]["name"] == "GPU"
    assert [case_key(c) for c in cases] == [("cublas", "8x8x8"), ("v4[BM=64]", "8x8x8")]
    assert cases[1].timing.median_ms == 2.0
    assert sum(1 for line in path.read_text().splitlines() if '"type": "run"' in line) == 1


def test_a_torn_last_line_loses_nothing_finished(tmp_path):
    path = tmp_path / "run.jsonl"
    with CaseLog(path) as log:
        log.append(case("v1"))
        log.append(case("v2"))
    with open(path, "a") as handle:
        handle.write('{"type": "case", "kernel": "v3", "sha')     # killed mid-write
    header, cases = read_finished_cases(path)
    assert [c.kernel for c in cases] == ["v1", "v2"]


def test_a_resumed_log_appends_to_the_same_file(tmp_path):
    path = tmp_path / "run.jsonl"
    with CaseLog(path) as log:
        log.write_header(RunResult(spec="s", spec_path=None))
        log.append(case("v1"))
    with CaseLog(path) as log:
        assert log.has_header
        log.write_header(RunResult(spec="other", spec_path=None))
        log.append(case("v2"))
    header, cases = read_finished_cases(path)
    assert header["spec"] == "s" and [c.kernel for c in cases] == ["v1", "v2"]


def test_load_results_reads_both_forms(tmp_path):
    run = RunResult(spec="s", spec_path=None, cases=[case("v1")])
    run.write_json(tmp_path / "r.json")
    with CaseLog(tmp_path / "r.jsonl") as log:
        log.write_header(run)
        log.append(run.cases[0])
    assert load_results(tmp_path / "r.json").cases[0].kernel == "v1"
    assert load_results(tmp_path / "r.jsonl").cases[0].kernel == "v1"


def test_log_survives_kill_9_of_the_writer(tmp_path):
    """A writer killed with SIGKILL after some cases: every case it reported finished is on disk."""
    path = tmp_path / "run.jsonl"
    ready = tmp_path / "ready"
    script = textwrap.dedent(f"""
        import os, time
        from driver_gemm.results.records import CaseLog, CaseResult
        from driver_gemm.specfile.model import Shape
        log = CaseLog({str(path)!r})
        for i in range(5):
            log.append(CaseResult(kernel=f"k{{i}}", name="k", shape=Shape(1, 1, 1), status="PASS"))
        open({str(ready)!r}, "w").close()
        time.sleep(60)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        for _ in range(600):
            if ready.exists():
                break
            __import__("time").sleep(0.05)
        child.kill()
    finally:
        child.wait()
    assert [c.kernel for c in read_finished_cases(path)[1]] == [f"k{i}" for i in range(5)]


def test_resuming_a_log_with_a_torn_line_appends_clean_lines(tmp_path):
    """A run killed mid-line, then resumed: the torn piece is dropped, not glued to the next case."""
    path = tmp_path / "run.jsonl"
    with CaseLog(path) as log:
        log.write_header(RunResult(spec="s", spec_path=None))
        log.append(case("v1"))
    with open(path, "a") as handle:
        handle.write('{"type": "case", "kernel": "v2", "sha')
    header, cases = read_finished_cases(path)
    assert [c.kernel for c in cases] == ["v1"]
    with CaseLog(path) as log:
        log.write_header(RunResult(spec="s", spec_path=None))   # kept: the log has its header
        log.append(case("v2"))
    assert [c.kernel for c in read_finished_cases(path)[1]] == ["v1", "v2"]
    assert all(line.startswith('{"type": ') for line in path.read_text().splitlines())


def test_status_reads_back_as_the_enum(tmp_path):
    run = RunResult(spec="s", spec_path=None, cases=[case("v1", status=Status.FAIL)])
    again = load_results(run.write_json(tmp_path / "r.json"))
    assert again.cases[0].status is Status.FAIL


def test_a_resume_reads_the_later_row_of_a_case_written_twice(tmp_path):
    from driver_gemm.results.records import CaseLog, CaseResult, RunResult
    from driver_gemm.specfile.model import Shape
    from driver_gemm.status import Status

    shape = Shape(64, 64, 64)
    gave_up = CaseResult(kernel="v1", name="v1", shape=shape, status=Status.ERROR, message="not run: no worker",
                         not_run=True, device=CaseDevice(ordinal=0))
    ran = CaseResult(kernel="v1", name="v1", shape=shape, status=Status.PASS, device=CaseDevice(ordinal=1))
    baselines = [CaseResult(kernel="cublas", name="cublas", shape=shape, status=Status.PASS,
                            device=CaseDevice(ordinal=gpu, uuid=f"GPU-{gpu}")) for gpu in (0, 1)]
    path = tmp_path / "run.jsonl"
    with CaseLog(path) as log:
        log.write_header(RunResult(spec="s", spec_path=None))
        for case in (baselines[0], gave_up, baselines[1], ran):
            log.append(case)
    _, cases = read_finished_cases(path)
    assert [(c.kernel, c.status, c.device.ordinal) for c in cases] == [
        ("cublas", Status.PASS, 0), ("cublas", Status.PASS, 1), ("v1", Status.PASS, 1)]


def test_a_fresh_log_replaces_an_earlier_runs_log_with_its_own_header(tmp_path):
    path = tmp_path / "run.jsonl"
    with CaseLog(path) as log:
        log.write_header(RunResult(spec="earlier", spec_path=None))
        log.append(case("v1"))
    with CaseLog(path, fresh=True) as log:
        assert not log.has_header
        log.write_header(RunResult(spec="new", spec_path=None))
        log.append(case("v2"))
    header, cases = read_finished_cases(path)
    assert header["spec"] == "new" and [c.kernel for c in cases] == ["v2"]


def test_a_fresh_log_that_writes_nothing_leaves_the_earlier_one(tmp_path):
    path = tmp_path / "run.jsonl"
    with CaseLog(path) as log:
        log.write_header(RunResult(spec="earlier", spec_path=None))
        log.append(case("v1"))
    before = path.read_text()
    with CaseLog(path, fresh=True):
        pass
    assert path.read_text() == before


# ------------------------------------------------------------------------------ run's files, with a stand-in GPU


def test_a_second_run_with_the_same_json_starts_its_case_log_afresh(tmp_path, monkeypatch, capsys):
    from driver_gemm.cli import EXIT_OK, main
    from test_outside_args import _fake_run

    _fake_run(monkeypatch, [])
    out = tmp_path / "out.json"
    for kernel in ("v0", "v4"):
        assert main(["run", str(SPECS / "seed.yaml"), "-k", kernel, "--json", str(out), "-q", "--in-process"]) \
            == EXIT_OK
    header, cases = read_finished_cases(out.with_suffix(".jsonl"))
    assert [c.name for c in cases] == ["v4"]
    assert header["started"] == json.loads(out.read_text())["started"]     # the header of the run that wrote it
    assert f"{out.with_suffix('.jsonl')}: the case log of an earlier run, replaced" in capsys.readouterr().out


def test_runs_of_one_spec_name_in_one_second_write_files_of_their_own(tmp_path, monkeypatch):
    from driver_gemm.cli import EXIT_OK, common, main
    from test_outside_args import _fake_run

    _fake_run(monkeypatch, [])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(common, "default_json", lambda name: Path("results") / f"{name}-20260101-120000.json")
    results = tmp_path / "results"
    results.mkdir()
    (results / "seed-20260101-120000.jsonl").write_text("")    # another command's run, started that second
    seed = str(SPECS / "seed.yaml")
    assert main(["run", seed, seed, "-k", "v0", "-q", "--in-process"]) == EXIT_OK
    assert sorted(path.name for path in results.iterdir()) == [
        "seed-20260101-120000-2.json", "seed-20260101-120000-2.jsonl", "seed-20260101-120000-3.json",
        "seed-20260101-120000-3.jsonl", "seed-20260101-120000.jsonl"]
    for count in (2, 3):
        header, cases = read_finished_cases(results / f"seed-20260101-120000-{count}.jsonl")
        assert header["spec"] == "seed" and [c.name for c in cases] == ["v0"]
        assert len(load_results(results / f"seed-20260101-120000-{count}.json").cases) == 1


def test_a_default_name_is_taken_once_and_let_go_where_the_run_writes_nothing(tmp_path, monkeypatch):
    from driver_gemm.cli.common import claimed_default_json

    monkeypatch.chdir(tmp_path)
    with claimed_default_json("seed") as first, claimed_default_json("seed") as second:
        assert first != second and first.is_file() and second.is_file()
        first.write_text("{}")                  # the results of a run
    assert [path.name for path in (tmp_path / "results").iterdir()] == [first.name]


def test_show_and_compare_read_a_resumed_log_as_its_later_rows(tmp_path, capsys):
    # The log a resumed run leaves: v1 given up as "not run", then run. show and compare read it as --resume does,
    # each case once, as its last row says: no ERROR already fixed, no BROKEN against a run that had it PASS.
    from driver_gemm.cli import EXIT_OK, main
    resumed, whole = tmp_path / "resumed.jsonl", tmp_path / "whole.jsonl"
    gave_up = CaseResult(kernel="v1", name="v1", shape=Shape(8, 8, 8), status=Status.ERROR,
                         message="not run: the worker died", not_run=True)
    for path, cases in ((resumed, [case("v0"), gave_up, case("v1")]), (whole, [case("v0"), case("v1")])):
        with CaseLog(path) as log:
            log.write_header(RunResult(spec="s", spec_path=None))
            for row in cases:
                log.append(row)
    assert [(c.kernel, c.status) for c in load_results(resumed).cases] == [("v0", Status.PASS), ("v1", Status.PASS)]
    assert main(["show", str(resumed)]) == EXIT_OK
    assert "1 case written again later (a resumed run): each read as its last row" in capsys.readouterr().err
    assert main(["compare", str(whole), str(resumed)]) == EXIT_OK
    assert "2 cases: 2 SAME" in capsys.readouterr().out


def test_a_case_whose_status_contradicts_its_check_is_refused_naming_the_field(tmp_path):
    from driver_gemm.errors import UsageError
    run = RunResult(spec="s", spec_path=None, cases=[case("v0")])
    path = run.write_json(tmp_path / "run.json")
    document = json.loads(path.read_text())
    document["cases"][0]["verification"] = {"status": "FAIL", "rel_fro_error": 0.5, "tolerance": 1e-5}
    path.write_text(json.dumps(document))
    with pytest.raises(UsageError) as info:
        load_results(path)
    assert info.value.field == "cases[0].verification.status" and "the case is PASS but its check of C says FAIL" \
        in str(info.value)
    document["cases"][0]["verification"] = {"status": "PASS", "wrong": "many"}
    path.write_text(json.dumps(document))
    with pytest.raises(UsageError) as info:
        load_results(path)
    assert info.value.field == "cases[0].verification.wrong"


@pytest.mark.parametrize("path, kind", [(None, "WrongArgumentType"), ("", "WrongArgumentValue"),
                                        (" ", "WrongArgumentValue")])
def test_write_json_names_a_path_that_is_none_or_empty(path, kind):
    from driver_gemm import errors
    with pytest.raises(getattr(errors, kind), match="RunResult.write_json"):
        RunResult(spec="s", spec_path=None).write_json(path)
