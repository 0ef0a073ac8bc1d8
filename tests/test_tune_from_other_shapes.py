"""``tune --from`` picks from the shapes of the spec (as selected): cases recorded at a shape it does not have are
said to be left out, naming the shapes, as cases of a label it does not have are; never dropped without a word."""

from __future__ import annotations

from driver_gemm.cli import main
from driver_gemm.results.records import RunResult
from driver_gemm.specfile import Shape

from test_spec import write
from test_tune import BK8, BK16, LARGE, SMALL, SWEEP, case

OTHER = Shape(256, 256, 256)


def tune_from(tmp_path, capsys, cases, *options):
    results = RunResult(spec="spec", spec_path=None, cases=cases).write_json(tmp_path / "recorded.json")
    code = main(["tune", str(write(tmp_path, SWEEP)), "--from", str(results), "--out", str(tmp_path / "w.yaml"),
                 *options])
    return code, capsys.readouterr().err


def test_cases_at_a_shape_the_spec_lacks_are_said_to_be_left_out(tmp_path, capsys):
    code, err = tune_from(tmp_path, capsys, [
        case(BK8, SMALL, [1.5, 1.52, 1.49]), case(BK16, SMALL, [1.0, 1.01, 0.99]),
        case(BK8, OTHER, [4.0]), case(BK16, OTHER, [3.0]), case("cublas", OTHER, [2.0])])
    assert code == 0
    said = [line for line in err.splitlines() if "left out" in line]
    assert len(said) == 1, err
    assert "recorded.json: 3 case(s) at 256x256x256 left out" in said[0] and "no such shape" in said[0], said


def test_a_shape_left_out_by_the_selection_is_said_too(tmp_path, capsys):
    code, err = tune_from(tmp_path, capsys, [
        case(BK8, SMALL, [1.5]), case(BK16, SMALL, [1.0]), case(BK8, LARGE, [2.0]), case(BK16, LARGE, [2.1])],
        "--shape", SMALL.label)
    assert code == 0
    assert f"2 case(s) at {LARGE.label} left out" in err and "(as selected)" in err, err


def test_nothing_is_said_when_every_case_is_of_the_spec(tmp_path, capsys):
    code, err = tune_from(tmp_path, capsys, [case(BK8, SMALL, [1.5]), case(BK16, SMALL, [1.0])])
    assert code == 0 and "left out" not in err, err
