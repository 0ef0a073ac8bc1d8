"""A refusal about what a results file holds, rather than about its form, names the file it is about: a tune with no
configuration to draw (``plot --tune``), and two runs with no clock to compare at (``compare --equal-clock``)."""

from __future__ import annotations

import gzip
import json

import pytest

from driver_gemm.cli import EXIT_USAGE, main

from conftest import ROOT

RESULTS = ROOT / "tests" / "data" / "results"


def test_a_tune_with_no_passing_configuration_is_refused_naming_its_file(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    document = json.loads(gzip.decompress((RESULTS / "tune-v8-order-h200.json.gz").read_bytes()))
    for case in document["cases"]:
        if not case["kernel"].startswith("cublas"):    # every configuration an error, with no time
            case.update(status="ERROR", message="no launch", timing=None, gflops=None, pct_cublas=None,
                        pct_peak=None, verification=None, energy=None)
    path = tmp_path / "tune.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert main(["plot", "--tune", str(path), "-o", str(tmp_path / "t.png")]) == EXIT_USAGE
    assert capsys.readouterr().err == (f"driver-gemm: {path}: no timed, passing configuration in these results: "
                                       "nothing to draw\n")
    assert not (tmp_path / "t.png").exists()


def test_two_runs_without_a_clock_are_named_by_compare_equal_clock(capsys):
    old, new = RESULTS / "seed-h200.json", RESULTS / "seed-before-h200.json"
    assert main(["compare", str(old), str(new), "--equal-clock"]) == EXIT_USAGE
    assert capsys.readouterr().err == (f"driver-gemm: {old}, {new}: --equal-clock: neither run recorded an SM clock "
                                       "(NVML was not installed)\n")
