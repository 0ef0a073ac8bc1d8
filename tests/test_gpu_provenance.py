"""GPU: a run records what it was made from (`Provenance`), and its typed cases get % of their own peak."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.specfile import load_spec

from conftest import ROOT
from gpu_specs import quick

pytestmark = pytest.mark.gpu


def test_a_run_records_its_gpu_versions_and_the_digests_of_its_files():
    spec = quick(load_spec(ROOT / "specs" / "seed.yaml")).select(kernels=["v0"], shapes=["1024x512x1024"])
    run = run_spec(spec)
    provenance = run.provenance
    assert provenance is not None
    assert provenance.gpus == [{"name": run.environment["device"]["name"], "uuid": run.environment["device"]["uuid"]}]
    assert provenance.versions["nvrtc"] == run.environment["nvrtc_version"]
    assert provenance.versions["cuda_driver_api"] == str(run.environment["driver_version"])
    assert provenance.versions.get("driver", "").count(".") >= 1      # NVML's release, e.g. 580.159.04
    assert provenance.versions.get("cublas")                          # the nvidia-cublas wheel
    assert provenance.clocks_locked is False
    # files are named from the top of the git checkout holding the spec (a test tree copied into another checkout
    # names them from that one's top), else from the kernels' project
    source = (ROOT / "kernels" / "00_naive_row_on_x.cu").resolve()
    top = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    root = Path(top.stdout.strip()).resolve() if top.returncode == 0 and provenance.commit else ROOT.resolve()
    assert list(provenance.sources) == [source.relative_to(root).as_posix()] and "v0" in provenance.kernels
    assert (provenance.commit is None) == (provenance.dirty is None)   # a git checkout gives both, else neither


def test_typed_cases_are_a_percentage_of_their_own_tensor_core_peak():
    spec = quick(load_spec(ROOT / "specs" / "types.yaml")).select(shapes=["1024x512x1024"])
    run = run_spec(spec)
    device = run.environment["device"]
    typed = [case for case in run.cases if case.operands is not None and case.gflops]
    assert typed
    for case in typed:
        assert case.math in ("fp16", "bf16", "fp8")
        assert case.pct_peak == pytest.approx(100 * case.gflops / case.peak_gflops(device))
        assert 0 < case.pct_peak < 100
