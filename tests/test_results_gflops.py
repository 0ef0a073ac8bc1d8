"""A case's GFLOP/s are its FLOPs (its shape, its batch's matrices) over its median, and its % of peak those
GFLOP/s over its math's peak on the run's GPU, as every run computes them: a file whose rate is of another product
or another time, or whose % is of another peak, is refused at the case's field, by every reader."""

from __future__ import annotations

import copy
import json

import pytest

from driver_gemm.cli import EXIT_USAGE, main
from driver_gemm.errors import UsageError
from driver_gemm.measure.stats import gflops
from driver_gemm.results.read import read_results

from conftest import ROOT
from test_results_hardening import case_log, one_error_line

SEED = ROOT / "tests" / "data" / "results" / "seed-h200.json"
FLOPS = 2 * 1024 * 512 * 1024        # the seed run's first shape, of its cases 0 to 5


def seed() -> dict:
    return json.loads(SEED.read_text())


def written(tmp_path, document: dict, name: str = "r.json"):
    path = tmp_path / name
    path.write_text(case_log(document) if name.endswith(".jsonl") else json.dumps(document))
    return path


def test_a_run_of_its_own_reads():
    run = read_results(SEED).run
    assert {case.shape.label for case in run.cases} == {"1024x512x1024", "1001x513x777"}
    for case in run.cases:
        flops = 2 * case.shape.M * case.shape.N * case.shape.K
        assert case.gflops == pytest.approx(gflops(flops, case.median_ms), rel=1e-12)


@pytest.mark.parametrize("factor", [3.0, 1 / 3, 1.01])
def test_a_rate_of_another_time_is_refused_at_its_field(tmp_path, capsys, factor):
    document = seed()
    document["cases"][4]["gflops"] *= factor
    path = written(tmp_path, document)
    with pytest.raises(UsageError) as raised:
        read_results(path)
    assert raised.value.where == str(path) and raised.value.field == "cases[4].gflops"
    median = document["cases"][4]["timing"]["median_ms"]
    assert f"{FLOPS:,} FLOPs in a median of {median!r} ms make {gflops(FLOPS, median):.6g}" in raised.value.message
    for command in (["show", str(path)], ["compare", str(SEED), str(path)]):
        assert main(command) == EXIT_USAGE
        assert one_error_line(capsys.readouterr().err).startswith(f"driver-gemm: {path}: cases[4].gflops: ")


def test_a_case_log_names_the_line(tmp_path):
    document = seed()
    document["cases"][2]["gflops"] *= 2
    path = written(tmp_path, document, "r.jsonl")
    with pytest.raises(UsageError) as raised:
        read_results(path)
    assert raised.value.where == f"{path}:4" and raised.value.field == "gflops"     # line 1 is the run's header


def test_a_rate_rounded_to_four_significant_digits_reads(tmp_path):
    document = seed()
    for case in document["cases"]:
        case["gflops"] = float(f"{case['gflops']:.4g}")
    read_results(written(tmp_path, document))


def test_a_batch_counts_every_matrix(tmp_path):
    document = seed()
    case = document["cases"][1]
    case["operands"] = {**(case.get("operands") or {}), "batch": 4}
    with pytest.raises(UsageError, match=f"{4 * FLOPS:,} FLOPs") as raised:
        read_results(written(tmp_path, document))           # the rate of one matrix, for four
    assert raised.value.field == "cases[1].gflops"
    case["gflops"] *= 4
    case["pct_peak"] *= 4
    assert read_results(written(tmp_path, document)).run.cases[1].gflops == case["gflops"]


def test_a_rate_without_a_time_is_refused(tmp_path):
    document = seed()
    without = copy.deepcopy(document["cases"][3])
    without.update(status="ERROR", message="a launch failed")
    del without["timing"]
    document["cases"][3] = without
    with pytest.raises(UsageError, match="without a timing") as raised:
        read_results(written(tmp_path, document))
    assert raised.value.field == "cases[3].gflops"


def test_a_percent_of_another_peak_is_refused(tmp_path):
    document = seed()
    document["cases"][5]["pct_peak"] *= 2
    with pytest.raises(UsageError, match=r"pct_peak = .*, but .* GFLOP/s of a fp32 peak of 66908.2 GFLOP/s on "
                                         r"NVIDIA H200 make") as raised:
        read_results(written(tmp_path, document))
    assert raised.value.field == "cases[5].pct_peak"


def test_a_case_log_checks_the_percent_against_its_headers_gpu(tmp_path):
    document = seed()
    document["cases"][5]["pct_peak"] /= 3
    path = written(tmp_path, document, "r.jsonl")
    with pytest.raises(UsageError, match="pct_peak") as raised:
        read_results(path)
    assert raised.value.where == f"{path}:7" and raised.value.field == "pct_peak"


def test_a_case_of_another_gpu_than_the_file_records_is_not_held_to_its_peak(tmp_path):
    # a run spread over GPUs of two models: the file records one, each case's % is of its own GPU's peak
    document = seed()
    document["cases"][5]["pct_peak"] *= 2
    document["cases"][5]["device"] = {**document["cases"][5]["device"], "name": "NVIDIA H100 80GB HBM3"}
    assert read_results(written(tmp_path, document)).run.cases[5].pct_peak == document["cases"][5]["pct_peak"]
