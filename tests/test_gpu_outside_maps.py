"""Tensor maps as outside kernels take them, on a GPU: by pointer, rank 3 panels, a compiled cluster.

specs/outside-maps.yaml's kernels (kernels/outside/bf16_maps.cu) must PASS beside v12p on shapes
that cut M, N and K and give each persistent block several tiles, and be timed with their vendor row.
"""

from __future__ import annotations

import dataclasses

import pytest

from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.state import RunOptions
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from conftest import SPECS
from gpu_specs import quick

pytestmark = pytest.mark.gpu

KERNELS = ["v12p", "maps-ptr", "maps-panels", "maps-cluster"]


def test_maps_by_pointer_rank_3_and_a_compiled_cluster_pass_where_tiles_are_cut():
    # 4104 x 2048: 33 x 8 tiles of 128 x 256, two per block on 132 SMs, the last tile row 8 rows deep;
    # K = 200 is 4 K-tiles, the last one partial; 1000x512x776 cuts M and K inside a single wave.
    shapes = ["1000x512x776", "4104x2048x200"]
    spec = dataclasses.replace(load_spec(SPECS / "outside-maps.yaml").select(kernels=KERNELS, shapes=shapes),
                               baseline=False)
    run = run_spec(spec, options=RunOptions(time=False))
    statuses = {(c.name, c.shape.label): (c.status, c.message) for c in run.cases}
    assert len(statuses) == len(KERNELS) * len(shapes)
    assert all(status == Status.PASS for status, _ in statuses.values()), statuses


def test_the_outside_kernels_are_timed_beside_their_vendor_row():
    spec = quick(load_spec(SPECS / "outside-maps.yaml").select(shapes=["1000x512x776"]))
    run = run_spec(spec)
    kernels = {c.name: c for c in run.cases if not c.is_baseline}
    assert sorted(kernels) == sorted(KERNELS)
    vendor = [c for c in run.cases if c.is_baseline]
    assert vendor and all(c.kernel.startswith("cublaslt-bf16") for c in vendor), [c.kernel for c in vendor]
    for name, case in kernels.items():
        assert case.status == Status.PASS and case.timing.median_ms > 0, (name, case.message)
        assert case.baseline and case.baseline.startswith("cublaslt-bf16"), case.baseline
