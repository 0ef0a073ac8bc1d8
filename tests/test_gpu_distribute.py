"""Two GPUs on one run: the large shape shared, every kernel measured against a baseline of its own GPU."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT, SPECS

pytestmark = pytest.mark.gpu


def test_a_mixed_run_on_two_gpus_measures_every_kernel_against_its_own_gpu(tmp_path):
    from driver_gemm.cuda.device import device_count

    if device_count() < 2:
        pytest.skip("needs two GPUs")
    out = tmp_path / "mixed.json"
    shapes = ["4096x4096x4096", "1024x512x1024", "1001x513x777", "512x512x512"]
    command = [sys.executable, "-m", "driver_gemm", "run", str(SPECS / "seed.yaml"), "-q", "--device", "0,1",
               "--json", str(out)]
    for shape in shapes:
        command += ["-s", shape]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    run = json.loads(out.read_text())
    cases = run["cases"]
    baselines = {(c["shape"]["label"], c["device"]["uuid"]): c for c in cases if c["kernel"] == "cublas"}
    kernels = [c for c in cases if c["kernel"] != "cublas"]
    assert len(kernels) == 5 * len(shapes) and len({(c["kernel"], c["shape"]["label"]) for c in kernels}) == 20
    for case in kernels:
        against = case["measured_against"]
        assert against["device"]["uuid"] == case["device"]["uuid"], case["kernel"]
        baseline = baselines[case["shape"]["label"], case["device"]["uuid"]]
        if case["timing"] and baseline["timing"]:
            assert case["pct_cublas"] == pytest.approx(100 * baseline["timing"]["median_ms"]
                                                       / case["timing"]["median_ms"])
    assert len(baselines) == len([c for c in cases if c["kernel"] == "cublas"])   # one per shape per GPU
    assert len({c["device"]["uuid"] for c in cases}) == 2
    header = json.loads(out.with_suffix(".jsonl").read_text().splitlines()[0])
    assert len({gpu["device"]["uuid"] for gpu in header["environment"]["gpus"]}) == 2
