"""Large inputs within the documented limits: a plan of many shapes and a results file of thousands of cases are
shown without per-case work that grows with their number (checks once per kernel, cases grouped once, plain
aligned lines instead of a terminal table past a few thousand rows)."""

from __future__ import annotations

import copy
import json
import time

from driver_gemm.cli import EXIT_OK, main
from driver_gemm.measure.stats import gflops
from driver_gemm.planning import build
from driver_gemm.report import tables

from conftest import ROOT
from test_spec import MINIMAL, write

MANY = MINIMAL.replace("  - [64, 32, 16]", "  - {M: {from: 64, to: 3200, step: 64}, N: {from: 64, to: 3200, step: 64}, "
                                           "K: 64}")


def test_a_plan_of_many_shapes_checks_each_kernel_once_and_prints_plain_lines(tmp_path, capsys, monkeypatch):
    calls = []
    real = build.signature_error
    monkeypatch.setattr(build, "signature_error", lambda kernel, built: calls.append(1) or real(kernel, built))
    spec = write(tmp_path, MANY)
    began = time.monotonic()
    assert main(["plan", "--arch", "sm_90", str(spec)]) == EXIT_OK
    assert time.monotonic() - began < 120
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(calls) == 1                                   # 2,500 shapes, one kernel: one signature check
    assert lines[1].split() == ["kernel", "shape", "grid", "block", "regs", "smem", "blk/SM", "occ", "limited",
                                "by", "waves", "check"]
    assert set(lines[2]) == {"-"} and "━" not in out
    assert sum(line.startswith("v4#1 ") or line.startswith("v4[") for line in lines) >= 2500
    assert lines[-1] == "2500 ok, 0 INVALID"


def test_a_large_results_file_is_shown_in_seconds(tmp_path, capsys):
    seed = json.loads((ROOT / "tests" / "data" / "results" / "seed-h200.json").read_text())
    big = copy.deepcopy(seed)
    big["cases"] = []
    for step in range(500):                                   # 6,000 cases on 1,000 shapes: about 11 MB
        for case in seed["cases"]:
            case = copy.deepcopy(case)
            case["shape"]["M"] += step
            case["shape"]["label"] = f"{case['shape']['M']}x{case['shape']['N']}x{case['shape']['K']}"
            if case.get("gflops") is not None:      # the rate of the larger product in the same time
                rate = gflops(2 * case["shape"]["M"] * case["shape"]["N"] * case["shape"]["K"],
                              case["timing"]["median_ms"])
                if case.get("pct_peak") is not None:
                    case["pct_peak"] *= rate / case["gflops"]
                case["gflops"] = rate
            big["cases"].append(case)
    path = tmp_path / "big.json"
    path.write_text(json.dumps(big))
    before = path.read_bytes()
    began = time.monotonic()
    assert main(["show", str(path)]) == EXIT_OK
    assert time.monotonic() - began < 60
    out = capsys.readouterr().out
    assert out.count("(M x N x K) on NVIDIA H200") == 1000
    assert "1523x512x1024 (M x N x K)" in out and "━" not in out
    assert path.read_bytes() == before


def test_cases_are_grouped_by_shape_in_one_pass():
    class Case:
        def __init__(self, shape):
            self.shape = shape

    class Run:
        cases = [Case("a"), Case("b"), Case("a")]

    assert {shape: len(cases) for shape, cases in tables.cases_by_shape(Run()).items()} == {"a": 2, "b": 1}
    assert list(tables.cases_by_shape(Run())) == ["a", "b"]
