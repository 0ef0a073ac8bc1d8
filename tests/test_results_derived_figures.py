"""Results files whose figures contradict their own cases, and inputs that are no results file, said as such."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from driver_gemm.cli import EXIT_USAGE, main
from driver_gemm.errors import UsageError
from driver_gemm.results.read import load_results

from conftest import ROOT, SPECS

SEED_RESULTS = ROOT / "tests" / "data" / "results" / "seed-h200.json"
KERNEL_CASE = 1      # v0 of the seed results: a kernel row


def changed(tmp_path: Path, **fields) -> Path:
    """The seed results with fields of one kernel case changed."""
    document = json.loads(SEED_RESULTS.read_text(encoding="utf-8"))
    document["cases"][KERNEL_CASE].update(fields)
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def as_case_log(document_path: Path) -> Path:
    document = json.loads(document_path.read_text(encoding="utf-8"))
    header = {"type": "run", **{key: value for key, value in document.items() if key != "cases"}}
    path = document_path.with_suffix(".jsonl")
    path.write_text("\n".join([json.dumps(header), *(json.dumps({"type": "case", **case})
                                                      for case in document["cases"])]) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("fields, field, words", [
    ({"not_run": True}, "status", "not_run is true with status PASS"),
    ({"status": "REF"}, "status", "REF is a baseline row's"),
    ({"phases": "x"}, "phases", "must be object or null"),
])
def test_figures_that_contradict_the_case_are_refused_by_file_case_and_field(tmp_path, fields, field, words):
    path = changed(tmp_path, **fields)
    with pytest.raises(UsageError) as refused:
        load_results(path)
    assert refused.value.where == str(path) and refused.value.field == f"cases[{KERNEL_CASE}].{field}"
    assert words in str(refused.value)
    log = as_case_log(path)
    with pytest.raises(UsageError) as refused:
        load_results(log)
    assert refused.value.where == f"{log}:{KERNEL_CASE + 2}" and refused.value.field == field


def exit_code(argv: list[str]) -> int:
    """`main`'s exit code for `argv`, whether it returns it or the argument parser exits with it."""
    try:
        return main(argv)
    except SystemExit as exited:
        return int(exited.code or 0)


def _results_files() -> list[Path]:
    found = []
    for folder in (ROOT / "bench" / "results", ROOT / "tests" / "data"):
        for path in sorted(folder.rglob("*.json*")):
            opened = gzip.open if path.suffix == ".gz" else open
            with opened(path, "rt", encoding="utf-8") as handle:
                text = handle.read()
            if ".jsonl" in path.name:
                found.append(path)
                continue
            document = json.loads(text)
            if isinstance(document, dict) and "spec" in document and "cases" in document:
                found.append(path)
    return found


def test_every_results_file_of_the_repository_still_reads():
    files = _results_files()
    assert files
    for path in files:
        load_results(path)


def test_an_empty_path_is_named_as_such(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="an empty path"):
        load_results("")
    assert exit_code(["show", ""]) == EXIT_USAGE
    assert "an empty path" in capsys.readouterr().err
    assert main(["tune", str(SPECS / "fast.yaml"), "--json", ""]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--json" in err and "not ''" in err and "folder" not in err
    assert exit_code(["tune", str(SPECS / "fast.yaml"), "--from", ""]) == EXIT_USAGE
    assert "an empty path" in capsys.readouterr().err


def test_gzip_data_without_its_gz_name_is_said_to_be_gzip(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_bytes(gzip.compress(SEED_RESULTS.read_bytes()))
    assert main(["show", str(path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert str(path) in err and "gzip data" in err and "results.json.gz" in err


@pytest.mark.parametrize("name", ["seed.yaml", "seed.json"])
def test_a_spec_given_as_results_is_said_to_be_a_spec(tmp_path, capsys, name):
    path = tmp_path / name
    path.write_text((SPECS / "seed.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["show", str(path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert str(path) in err and "looks like a spec" in err and "driver-gemm run" in err and "plan" in err


def test_an_empty_results_path_is_named_as_such_by_every_command(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    real = tmp_path / "real.json"
    real.write_text("{}")
    for argv in (["compare", "", str(real)], ["compare", str(real), ""], ["plot", "", "-o", "x.png"],
                 ["run", str(SPECS / "seed.yaml"), "--baseline-results", ""]):
        assert exit_code(argv) == EXIT_USAGE, argv
        err = capsys.readouterr().err
        assert "an empty path" in err and "folder" not in err, (argv, err)
