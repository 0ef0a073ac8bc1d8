"""On a GPU: a small tune with successive halving, and run --profile of a seed case (skipped without ncu)."""

from __future__ import annotations

import json
import shutil

import pytest

from driver_gemm.cli import main
from driver_gemm.status import Status

from conftest import SPECS

pytestmark = pytest.mark.gpu


def test_a_small_tune_with_halving_records_full_measurements_and_screens(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    results, winners, dispatch = tmp_path / "tune.json", tmp_path / "w.yaml", tmp_path / "d.yaml"
    code = main(["tune", str(SPECS / "tiles.yaml"), "-s", "1024x1024x1024", "-s", "2048x2048x2048",
                 "--strategy", "halving", "--budget", "60s", "--json", str(results), "--out", str(winners),
                 "--dispatch", str(dispatch), "-q"])
    assert code == 0, capsys.readouterr().err
    recorded = json.loads(results.read_text())
    kernels = [c for c in recorded["cases"] if c["kernel"].startswith("v2")]
    assert kernels and all(c["status"] == Status.PASS and c["timing"] for c in kernels)
    assert all(c["pct_cublas"] for c in kernels)                        # cuBLAS rows ran per shape
    assert {c["seed"] for c in kernels if c["shape"]["label"] == "1024x1024x1024"}.__len__() == 1
    assert recorded["settings"]["tune"]["strategy"] == "halving"
    assert winners.exists() and dispatch.exists()
    # a second tune is answered by the tuning cache
    again = main(["tune", str(SPECS / "tiles.yaml"), "-s", "1024x1024x1024", "--json", str(tmp_path / "2.json"),
                  "--out", str(winners), "-q"])
    assert again == 0
    second = json.loads((tmp_path / "2.json").read_text())
    assert second["settings"]["tune"]["cache"]["hits"] >= 1


@pytest.mark.skipif(shutil.which("ncu") is None, reason="needs Nsight Compute's ncu on the PATH")
def test_run_profile_stores_counters_for_a_seed_case(tmp_path, capsys):
    results = tmp_path / "seed.json"
    code = main(["run", str(SPECS / "seed.yaml"), "-k", "v1", "-k", "v4", "-s", "1024x512x1024", "--profile",
                 "--json", str(results), "-q"])
    assert code == 0, capsys.readouterr().err
    cases = [c for c in json.loads(results.read_text())["cases"] if c["kernel"] != "cublas"]
    assert cases and all(c["status"] == Status.PASS for c in cases)
    for case in cases:
        profile = case["profile"]
        assert "error" not in profile, profile
        assert profile["duration_us"] > 0 and 0 < profile["achieved_occupancy_pct"] <= 100
        assert profile["arithmetic_intensity"] > 0
        timed = case["timing"]["median_ms"] * 1000       # one launch under ncu against the event-timed median
        assert 0.5 * timed < profile["duration_us"] < 2 * timed, (profile["duration_us"], timed)
