"""Grids sized by the clusters that fit (`max_active_clusters`) on a GPU: a run plans the launch again with the
driver's count for the loaded kernel, launches that grid with arguments of the same count, and the kernel still
computes C."""

from __future__ import annotations

import dataclasses
import math

import pytest

from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.state import RunOptions
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from gpu_specs import tma_ws_kernel, write_spec

pytestmark = pytest.mark.gpu

SHARED_BYTES = "STAGES * (64 * CWG + 64 * ceil(BN / 64)) * 128 + 16 * STAGES + 1024"
# v13 is persistent: any grid that is a multiple of SPLITS computes C, so the grid may be exactly what fits.
IN_CLUSTERS = tma_ws_kernel("13_tma_ws_split.cu", "gemm_tma_ws_split", cluster="[SPLITS, 1, 1]",
                            grid="SPLITS * min(max_active_clusters, ceil(N / BN) * ceil(M / (64 * CWG)))",
                            shared_bytes=SHARED_BYTES)
ALONE = tma_ws_kernel("13_tma_ws_split.cu", "gemm_tma_ws_split", shared_bytes=SHARED_BYTES,
                      grid="min(max_active_clusters, ceil(N / BN) * ceil(M / (64 * CWG)))")
KERNELS = "".join([
    # 1 block an SM; clusters of 4 need 4 SMs of one GPC
    IN_CLUSTERS(name="split-4", types="{a: bf16, c: bf16}", layout="NN", bk=64, b_box="[64, 64]",
                params="{ELEM: 16, BT: 0, CWG: 2, STAGES: 4, GROUP: 8, OUT: 16, SPLITS: 4, BN: 128}"),
    # no cluster: the count is of blocks, several an SM
    ALONE(name="alone", types="{a: bf16, c: bf16}", layout="NN", bk=64, b_box="[64, 64]",
          params="{ELEM: 16, BT: 0, CWG: 1, STAGES: 4, GROUP: 8, OUT: 16, SPLITS: 1, BN: 64}"),
])
# More tiles than either form has clusters (or blocks) that fit, so each takes several; M, N and K cut unevenly.
SHAPES = ["288x8192x1000", "1000x4000x512"]


def test_a_grid_of_the_clusters_that_fit_is_the_drivers_count_and_computes_c(tmp_path):
    spec = dataclasses.replace(load_spec(write_spec(tmp_path, KERNELS, SHAPES)), baseline=False)
    run = run_spec(spec, options=RunOptions(time=False))
    sm_count = run.environment["device"]["sm_count"]
    assert len(run.cases) == 2 * len(SHAPES)
    for case in run.cases:
        assert case.status == Status.PASS, (case.kernel, case.shape.label, case.message)
        M, N = case.shape.M, case.shape.N
        occupancy = case.occupancy
        if case.name == "split-4":
            tiles = math.ceil(N / 128) * math.ceil(M / 128)
            fit = occupancy.driver_max_active_clusters
            assert occupancy.cluster == (4, 1, 1) and 0 < fit <= sm_count // 4
            assert case.launch.total_blocks == 4 * min(fit, tiles) < 4 * tiles
            assert occupancy.driver_cluster_waves == pytest.approx(1.0)
        else:
            tiles = math.ceil(N / 64) * math.ceil(M / 64)
            fit = occupancy.driver_blocks_per_sm * sm_count
            assert occupancy.driver_blocks_per_sm > 1 and occupancy.driver_max_active_clusters is None
            assert case.launch.total_blocks == min(fit, tiles) < tiles
            assert occupancy.driver_waves == pytest.approx(1.0)


# One block an SM (its dynamic shared memory), in clusters of four: where the SMs do not divide into clusters of
# four, fewer fit than the offline estimate, and the run plans the grid and the argument again.
ARGUMENT = """\
- name: quads
  source: "@TESTS@/persistent_clusters.cu"
  function: persistent_clusters
  block: [128]
  grid: ["4 * max_active_clusters"]
  cluster: [4, 1, 1]
  shared_bytes: 200 * 1024
  signature: [A, B, C, M, N, K, {name: clusters, type: int32, value: max_active_clusters}]
"""
# The control: its argument the SM count's share, which is the count launched only where every cluster fits.
BY_SM_COUNT = ARGUMENT.replace("name: quads", "name: by-sm-count").replace("value: max_active_clusters",
                                                                           "value: sm_count // 4")


def test_an_argument_that_reads_the_count_gets_the_drivers_as_the_grid_does(tmp_path):
    spec = dataclasses.replace(load_spec(write_spec(tmp_path, ARGUMENT + BY_SM_COUNT, ["257x129x64", "64x64x16"])),
                               baseline=False)
    run = run_spec(spec, options=RunOptions(time=False))
    sm_count = run.environment["device"]["sm_count"]
    assert len(run.cases) == 4
    for case in run.cases:
        fit = case.occupancy.driver_max_active_clusters
        assert case.occupancy.driver_blocks_per_sm == 1 and case.launch.total_blocks == 4 * fit
        if case.name == "quads":
            assert case.status == Status.PASS, (case.shape.label, case.message)
        else:   # C unwritten where fewer clusters fit than the SM count's share
            assert case.status == (Status.PASS if fit == sm_count // 4 else Status.FAIL), (case.shape.label, fit)
