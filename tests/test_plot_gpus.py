"""`plot` of runs on different GPUs draws each GPU's roofs from its own peaks and bandwidth, named by GPU, and
titles the roofline with every GPU; runs on one GPU draw its roofs once, unnamed."""

from __future__ import annotations

import json

import pytest

from driver_gemm.cli import EXIT_OK, main
from driver_gemm.report.plots import gpus_of
from driver_gemm.results.read import load_results

from conftest import ROOT

SEED = ROOT / "tests" / "data" / "results" / "seed-h200.json"
H100 = "NVIDIA H100 80GB HBM3"


def on_h100(tmp_path):
    """The seed run as if measured on an H100: its name and its HBM3's clock and bus (3.35 TB/s)."""
    document = json.loads(SEED.read_text())
    device = document["environment"]["device"]
    device.update(name=H100, memory_clock_khz=2_619_000, memory_bus_bits=5120)
    device["memory_bandwidth_gbs"] = 2 * 2_619_000 * 1e3 * 5120 / 8 / 1e9
    for case in document["cases"]:
        case["device"]["name"] = H100
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(document))
    return path


def test_runs_are_grouped_by_gpu(tmp_path):
    h200, again, h100 = load_results(SEED), load_results(SEED), load_results(on_h100(tmp_path))
    gpus = gpus_of([h200, h100, again])
    assert [device["name"] for device, _ in gpus] == ["NVIDIA H200", H100]
    assert [len(runs) for _, runs in gpus] == [2, 1]


def test_each_gpus_roofs_are_its_own(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "p.svg"
    assert main(["plot", str(SEED), str(on_h100(tmp_path)), "-o", str(out)]) == EXIT_OK
    text = out.read_text()
    assert f"roofline (NVIDIA H200, {H100})" in text
    assert "roof: NVIDIA H200: 66.9 TFLOP/s FP32 dense, 4.8 TB/s DRAM" in text
    assert f"roof: {H100}: 66.9 TFLOP/s FP32 dense, 3.4 TB/s DRAM" in text


def test_one_gpus_roofs_are_not_named(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "p.svg"
    assert main(["plot", str(SEED), str(SEED), "-o", str(out)]) == EXIT_OK
    text = out.read_text()
    assert "roofline (NVIDIA H200)" in text and "roof: 66.9 TFLOP/s FP32 dense, 4.8 TB/s DRAM" in text
