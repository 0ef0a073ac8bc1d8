"""Clusters and TMA tensor maps launched on a GPU: results that are right only if the launcher set them up."""

from __future__ import annotations

import math

import numpy as np
import pytest

import driver_gemm as dg
from driver_gemm.cuda.launch_attributes import LaunchAttributes
from driver_gemm.cuda.tensormap import TensorMapPlan

from conftest import ROOT, TEST_KERNELS

KERNELS = ROOT / "kernels"

pytestmark = pytest.mark.gpu


def _inputs(M, N, K, seed=3):
    rng = np.random.default_rng(seed)
    a = (rng.random((M, K), dtype=np.float32) - 0.5)
    b = (rng.random((K, N), dtype=np.float32) - 0.5)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def _rel_error(c, expected):
    return float(np.linalg.norm(c - expected) / np.linalg.norm(expected))


@pytest.mark.parametrize("shape", [(64, 64, 64), (1001, 513, 777), (17, 3, 1)])
def test_a_cluster_kernel_is_right_only_with_its_cluster(shape):
    M, N, K = shape
    a, b, expected = _inputs(M, N, K)
    with dg.Device(0) as device:
        stream = device.stream()
        kernel = dg.load_kernel(device, KERNELS / "cluster_split_k.cu", "cluster_split_k")
        A, B, C = device.upload(a, stream), device.upload(b, stream), device.alloc(4 * M * N)
        grid, block = (2 * math.ceil(N / 16), math.ceil(M / 16)), (16, 16)
        arguments = [("ptr", A), ("ptr", B), ("ptr", C), ("int32", M), ("int32", N), ("int32", K)]
        cluster = LaunchAttributes(cluster=(2, 1, 1))
        launch = kernel.prepare(grid, block, arguments, stream, attributes=cluster)
        assert kernel.max_active_clusters(launch.config, cluster, stream) > 0
        C.fill_u32(0x7FC0DEAD, stream)
        launch()
        assert _rel_error(C.download((M, N), np.float32, stream), expected) < 1e-5
        if K > 1:   # without the cluster each block sums half of K: wrong
            C.fill_u32(0x7FC0DEAD, stream)
            kernel.launch(grid, block, arguments, stream)
            wrong = C.download((M, N), np.float32, stream)
            assert not np.allclose(wrong, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(64, 64, 64), (1000, 516, 780), (33, 4, 4), (129, 132, 68)])
def test_tma_tiles_with_tensor_maps_and_zero_fill_at_the_edges(shape):
    M, N, K = shape
    a, b, expected = _inputs(M, N, K)
    with dg.Device(0) as device:
        stream = device.stream()
        kernel = dg.load_kernel(device, TEST_KERNELS / "tma_tiles.cu", "tma_tiles")
        A, B, C = device.upload(a, stream), device.upload(b, stream), device.alloc(4 * M * N)
        map_a = TensorMapPlan.for_matrix("fp32", M, K, K, 32, 32)
        map_b = TensorMapPlan.for_matrix("fp32", K, N, N, 32, 32)
        assert map_a.problems(A.address) == [] and map_b.problems(B.address) == []
        arguments = [("tensormap", map_a.encode(device.driver, A.address)),
                     ("tensormap", map_b.encode(device.driver, B.address)),
                     ("ptr", C), ("int32", M), ("int32", N), ("int32", K)]
        C.fill_u32(0x7FC0DEAD, stream)
        kernel.launch((math.ceil(N / 32), math.ceil(M / 32)), (32, 32), arguments, stream)
        c = C.download((M, N), np.float32, stream)
        assert np.isfinite(c).all() and _rel_error(c, expected) < 1e-5
