"""Clusters and TMA tensor maps through a spec on a GPU: planned, encoded, launched, verified, timed, sanitized."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.state import RunOptions
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from conftest import ROOT, SPECS
from gpu_specs import quick, with_measure, write_spec

pytestmark = pytest.mark.gpu

TMA_LEGAL_SHAPES = ["1000x516x780", "1024x512x1024", "129x132x68"]

CLUSTER_KERNEL = """\
- name: pair
  source: "@KERNELS@/cluster_split_k.cu"
  function: cluster_split_k
  block: [16, 16]
  grid: [2 * ceil(N / 16), ceil(M / 16)]
  cluster: [2, 1, 1]
- name: unpaired
  source: "@KERNELS@/cluster_split_k.cu"
  function: cluster_split_k
  block: [16, 16]
  grid: [2 * ceil(N / 16), ceil(M / 16)]
"""


def _no_baseline(spec):
    return dataclasses.replace(spec, baseline=False)


def test_v10_and_v11_pass_on_tma_legal_awkward_shapes_and_v11_is_refused_where_rows_misalign():
    spec = _no_baseline(load_spec(SPECS / "tma.yaml").select(kernels=["v10", "v11"],
                                                                 shapes=TMA_LEGAL_SHAPES + ["1001x513x777"]))
    run = run_spec(spec, options=RunOptions(time=False))
    statuses = {(c.name, c.shape.label): (c.status, c.message) for c in run.cases}
    for shape in TMA_LEGAL_SHAPES:
        assert statuses["v11", shape][0] == Status.PASS, statuses["v11", shape]
        assert statuses["v10", shape][0] == Status.PASS, statuses["v10", shape]
    status, message = statuses["v11", "1001x513x777"]
    assert status == Status.INVALID and "map_a: dimension 1 stride 3108 bytes" in message
    assert statuses["v10", "1001x513x777"][0] == Status.PASS


def test_v12_and_its_persistent_forms_pass_where_blocks_take_several_partial_tiles():
    # 4104 x 1032 is 33 x 5 tiles of 128 x 256 (65 x 5 of 64 x 256): more than one tile per block on 132
    # SMs, cut by M and N on the last row and column; K = 200 and 72 are 4 and 2 K-tiles, the last one
    # partial, so the ring's slots and parities run on across tiles out of step with the stage count.
    kernels = ["v12", "v12-bf16-out", "v12p", "v12p-bf16-out", "v12pp", "v12pp-bf16-out"]
    shapes = ["4104x1032x200", "4104x1032x72", "1001x520x776"]
    spec = _no_baseline(load_spec(SPECS / "tma-bf16.yaml").select(kernels=kernels, shapes=shapes))
    run = run_spec(spec, options=RunOptions(time=False))
    statuses = {(c.name, c.shape.label): (c.status, c.message) for c in run.cases}
    assert len(statuses) == len(kernels) * len(shapes)
    assert all(status == Status.PASS for status, _ in statuses.values()), statuses


def test_a_cluster_kernel_passes_with_its_cluster_and_fails_without(tmp_path):
    spec = _no_baseline(load_spec(write_spec(tmp_path, CLUSTER_KERNEL, ["64x64x64", "1001x513x777"])))
    run = run_spec(spec, options=RunOptions(time=False))
    cases = {(c.name, c.shape.label): c for c in run.cases}
    for shape in ("64x64x64", "1001x513x777"):
        paired, unpaired = cases["pair", shape], cases["unpaired", shape]
        assert paired.status == Status.PASS, paired.message
        assert unpaired.status == Status.FAIL, unpaired.message
        assert paired.occupancy.cluster == (2, 1, 1) and paired.occupancy.driver_max_active_clusters > 0
        assert unpaired.occupancy.driver_max_active_clusters is None
        assert "driver_max_active_clusters" not in unpaired.occupancy.to_json()
        # the grid's waves on this GPU, of blocks by the driver's blocks per SM and of clusters by its resident ones
        sm_count = run.environment["device"]["sm_count"]
        for case in (paired, unpaired):
            assert case.occupancy.driver_waves == pytest.approx(
                case.launch.total_blocks / (case.occupancy.driver_blocks_per_sm * sm_count))
        assert paired.occupancy.driver_cluster_waves == pytest.approx(
            paired.launch.total_blocks / 2 / paired.occupancy.driver_max_active_clusters)
        assert unpaired.occupancy.driver_cluster_waves is None


@pytest.mark.parametrize("mode", ["events", "graph"])
def test_cluster_and_tma_launches_are_timed_in_both_modes(tmp_path, mode):
    spec = load_spec(SPECS / "tma.yaml").select(kernels=["v11", "cluster-split-k"], shapes=["1024x512x1024"])
    spec = with_measure(quick(_no_baseline(spec)), mode=mode, graph_launches=4)
    run = run_spec(spec)
    for case in run.cases:
        assert case.status == Status.PASS, (case.kernel, case.message)
        assert case.timing is not None and case.timing.median_ms > 0


def test_the_sanitizer_runs_tma_and_cluster_kernels(tmp_path):
    out = tmp_path / "memcheck.json"
    command = [sys.executable, "-m", "driver_gemm", "run", str(SPECS / "tma.yaml"), "-k", "v11", "-k",
               "cluster-split-k", "-s", "129x132x68", "--no-baseline", "--sanitize", "memcheck", "--json", str(out),
               "-q"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    cases = {c["kernel"]: c for c in json.loads(out.read_text())["cases"]}
    assert len(cases) == 2
    for case in cases.values():
        assert case["status"] == Status.PASS and not case["sanitizer"]["findings"], case
