"""``tune --from`` ranks configurations by their kernel labels: a case whose recorded params are not those its
label names is refused with its JSON path, and cases whose label is no configuration of the spec are said to be
left out, never dropped without a word."""

from __future__ import annotations

import pytest

from driver_gemm.cli import main
from driver_gemm.results.records import RunResult
from driver_gemm.specfile import load_spec

from test_spec import write
from test_tune import BK8, BK16, SMALL, SWEEP, case

PARAMS = {BK8: {"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4}, BK16: {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4}}


def recorded(tmp_path, edit=None, extra=()):
    """A results file of SWEEP's small shape, both configurations with their params, `edit` applied to the
    second's params, `extra` cases added."""
    cases = [case("cublas", SMALL, [0.5])]
    for label, samples in ((BK8, [1.50, 1.52, 1.49]), (BK16, [1.00, 1.01, 0.99])):
        row = case(label, SMALL, samples)
        row.params = dict(PARAMS[label])
        cases.append(row)
    if edit is not None:
        edit(cases[2].params)
    run = RunResult(spec="spec", spec_path=None, cases=cases + list(extra))
    return run.write_json(tmp_path / "recorded.json")


def tune_from(tmp_path, results, capsys):
    spec_path = write(tmp_path, SWEEP)
    code = main(["tune", str(spec_path), "--from", str(results), "--out", str(tmp_path / "w.yaml")])
    return code, capsys.readouterr()


@pytest.mark.parametrize("edit, said", [
    (lambda params: params.update(BK=32), "BK = 32"),
    (lambda params: params.update(BK="16"), 'BK = "16"'),
    (lambda params: params.update(BK=16.0), "BK = 16.0"),
    (lambda params: params.update(BM=True), "BM = true"),
    (lambda params: params.pop("TN"), "TN missing"),
    (lambda params: params.update(ZZ=1), "ZZ = 1"),
], ids=["other value", "text", "float", "bool", "missing", "extra"])
def test_a_case_whose_params_contradict_its_label_is_refused(tmp_path, capsys, edit, said):
    code, captured = tune_from(tmp_path, recorded(tmp_path, edit), capsys)
    assert code == 2
    error = captured.err.strip()
    assert error.startswith(f"driver-gemm: {tmp_path / 'recorded.json'}: cases[2].params: ")
    assert BK16 in error and said in error
    assert not (tmp_path / "w.yaml").exists()


def test_a_case_of_no_configuration_is_said_to_be_left_out(tmp_path, capsys):
    stray = case("v4[BM=999]", SMALL, [0.1])
    code, captured = tune_from(tmp_path, recorded(tmp_path, extra=[stray]), capsys)
    assert code == 0
    assert "1 case(s) of v4[BM=999] left out" in captured.err
    assert [kernel.params["BK"] for kernel in load_spec(tmp_path / "w.yaml").kernels] == [16]   # still the winner


def test_cases_that_agree_with_their_labels_are_picked_from(tmp_path, capsys):
    code, captured = tune_from(tmp_path, recorded(tmp_path), capsys)
    assert code == 0 and "left out" not in captured.err
