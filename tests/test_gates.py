"""Performance gates: minimum % of the baseline per case, and no regression against stored results."""

import pytest

from driver_gemm.measure.stats import summarize
from driver_gemm.report.gates import GateError, check_gates, min_pct_gate, parse_min_pct, regression_gate
from driver_gemm.results.records import CaseResult, RunResult
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status

SHAPE = Shape(1024, 1024, 1024)


def case(label, samples, pct=None, status=Status.PASS):
    return CaseResult(kernel=label, name=label.split("[")[0], shape=SHAPE, status=status,
                      timing=summarize(samples) if samples else None, pct_cublas=pct)


def run(*cases):
    return RunResult(spec="s", spec_path=None, cases=[case("cublas", [1.0, 1.01, 0.99], 100.0), *cases])


def test_min_pct_from_the_command_line_and_per_kernel():
    result = run(case("v4[T=4]", [2.0, 2.1, 1.9], 50.0), case("v8[T=8]", [1.05, 1.06, 1.04], 95.0),
                 case("v1", None, status=Status.FAIL), case("v2", None))
    failures = min_pct_gate(result, 80.0)
    assert [f.case for f in failures] == ["v4[T=4] at 1024x1024x1024", "v1 at 1024x1024x1024",
                                          "v2 at 1024x1024x1024"]
    text = str(failures[0])
    assert "measured 50.0% of cuBLAS (2 ms), required 80.0% of cuBLAS" in text and "noise 5.00%" in text
    assert "status FAIL" in str(failures[1]) and "untimed" in str(failures[2])
    only_v8 = min_pct_gate(result, per_kernel={"v8": 96.0})
    assert [f.case for f in only_v8] == ["v8[T=8] at 1024x1024x1024"]
    assert [f.case.split()[0] for f in min_pct_gate(result, 40.0, per_kernel={"v8": 90})] == ["v1", "v2"]
    assert min_pct_gate(result) == []                       # no gate asked for


def test_no_regression_against_stored_results():
    stored = run(case("v4", [2.0, 2.01, 1.99]), case("v8", [1.0, 1.01, 0.99]), case("v9", [1.0, 1.02, 0.98]))
    now = run(case("v4", [2.2, 2.21, 2.19]),                      # slower beyond the noise
              case("v8", [1.005, 1.015, 0.995]),                  # within the noise: SAME
              case("v9", None, status=Status.FAIL))               # BROKEN
    failures = regression_gate(now, stored)
    assert [(f.case.split()[0], f.gate) for f in failures] == [("v4", "regression"), ("v9", "regression")]
    assert "measured 2.2 ms (+10.0%), required at most 2 ms within noise" in str(failures[0])
    assert "noise 0.50% / 0.45%" in str(failures[0])
    assert "status FAIL" in str(failures[1]) and "status PASS as in the stored results" in str(failures[1])
    assert [f.case.split()[0] for f in regression_gate(now, stored, threshold=0.15)] == ["v9"]
    assert [f.gate for f in check_gates(now, min_pct=1000.0, stored=stored)][:1] == ["min-pct"]


def test_parse_min_pct():
    assert parse_min_pct(["80"]) == (80.0, {})
    assert parse_min_pct(["80", "v8=95", "v10=83.5"]) == (80.0, {"v8": 95.0, "v10": 83.5})
    for bad in ("fast", "v8=", "-5"):
        with pytest.raises(GateError):
            parse_min_pct([bad])
