"""RunResult.write_json writes only what read_results reads back: a run a caller built or changed is checked as a
file is, and a field no results file can hold is refused by name, with nothing written."""

from __future__ import annotations

import copy
import dataclasses

import pytest

import driver_gemm as dg
from driver_gemm.errors import WrongArgumentValue

from conftest import ROOT

SEED_RESULTS = ROOT / "tests" / "data" / "results" / "seed-h200.json"


@pytest.fixture(scope="module")
def run():
    return dg.load_results(SEED_RESULTS)


def _timed(run):
    return next(index for index, case in enumerate(run.cases) if case.timing is not None)


def test_an_unchanged_run_reads_back_equal(run, tmp_path):
    path = run.write_json(tmp_path / "again.json")
    assert dg.load_results(path).as_dict() == run.as_dict()


def test_a_nan_figure_that_may_be_missing_reads_back_as_none(run, tmp_path):
    changed = copy.deepcopy(run)
    changed.cases[_timed(changed)].gflops = float("nan")
    assert dg.load_results(changed.write_json(tmp_path / "nan.json")).cases[_timed(changed)].gflops is None


@pytest.mark.parametrize("change, words", [
    (lambda run, index: setattr(run.cases[index], "timing",
                                dataclasses.replace(run.cases[index].timing, median_ms=float("nan"))),
     "timing.median_ms: must be number, got null (null: None, or a NaN or infinite number"),
    (lambda run, index: setattr(run.cases[index], "status", "GREAT"), "].status: must be one of PASS"),
    (lambda run, index: setattr(run, "spec", None), "spec: must be string, got null"),
    (lambda run, index: setattr(run.cases[index], "seed", 2**80), "].seed: a whole number of 81 bits"),
    (lambda run, index: setattr(run.cases[index], "message", "a\udc80"), "].message:"),
])
def test_what_a_file_cannot_hold_is_refused_before_writing(run, tmp_path, change, words):
    changed = copy.deepcopy(run)
    change(changed, _timed(changed))
    path = tmp_path / "changed.json"
    with pytest.raises(WrongArgumentValue) as info:
        changed.write_json(path)
    assert str(info.value).startswith(f"RunResult.write_json: nothing written to {path}: ")
    assert words in str(info.value)
    assert not path.exists()
