"""Tensor maps that reach a kernel other than by value, on a GPU (tests/kernels/tma_map_arrays.cu): maps in
``__constant__`` memory, encoded for the case's buffers and written there before the launch, and an array of
one map per matrix of a batch (``pass: pointer, count: batch``) that the kernel indexes by its matrix. Each
kernel PASSes as written and FAILs where it misreads its maps (the constant maps swapped, every matrix copied
through the array's first map), which shows that the maps written are the ones the spec describes."""

from __future__ import annotations

import pytest

from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.state import RunOptions
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from gpu_specs import quick, write_spec

pytestmark = pytest.mark.gpu

# Square, so that the swapped maps of the wrong constant kernel stay inside their buffers.
SHAPES = ["256x256x256", "96x96x96"]


def constant_kernel(wrong: bool) -> str:
    return f"""\
    - name: constant
      source: "@TESTS@/tma_map_arrays.cu"
      function: tma_constant_maps
      params: {{WRONG: {str(wrong).lower()}}}
      block: [32, 32]
      grid: [ceil(N / 32), ceil(M / 32)]
      tile: [32, 32]
      signature: [C, M, N, K]
      constants:
        - {{name: c_map_a, type: tensormap, tensor: A, box: [32, 32]}}
        - {{name: c_map_b, type: tensormap, tensor: B, box: [32, 32]}}
    """


def map_array_kernel(wrong: bool) -> str:
    return f"""\
    - name: array
      source: "@TESTS@/tma_map_arrays.cu"
      function: tma_map_array
      params: {{WRONG: {str(wrong).lower()}}}
      types: {{a: fp32, b: fp32, c: fp32}}
      batch: {{count: 3}}
      block: [32, 32]
      grid: [ceil(N / 32), ceil(M / 32), batch]
      tile: [32, 32]
      signature:
        - {{name: maps_a, type: tensormap, tensor: A, box: [32, 32], pass: pointer, count: batch}}
        - {{name: maps_b, type: tensormap, tensor: B, box: [32, 32], pass: pointer, count: batch}}
        - C
        - M
        - N
        - K
    """


def cases_of(tmp_path, kernel_yaml: str, name: str) -> list:
    run = run_spec(quick(load_spec(write_spec(tmp_path, kernel_yaml, SHAPES))), options=RunOptions())
    cases = [case for case in run.cases if case.name.startswith(name)]
    assert len(cases) == len(SHAPES), [(case.name, case.status, case.message) for case in run.cases]
    return cases


@pytest.mark.parametrize("kernel, name", [(constant_kernel, "constant"), (map_array_kernel, "array")])
def test_maps_in_constant_memory_and_in_an_array_reach_the_kernel_as_described(tmp_path, kernel, name):
    for case in cases_of(tmp_path, kernel(False), name):
        assert case.status == Status.PASS, (case.shape.label, case.status, case.message)


@pytest.mark.parametrize("kernel, name", [(constant_kernel, "constant"), (map_array_kernel, "array")])
def test_a_kernel_that_misreads_its_maps_fails(tmp_path, kernel, name):
    for case in cases_of(tmp_path, kernel(True), name):
        assert case.status == Status.FAIL, (case.shape.label, case.status, case.message)
        assert case.verification.wrong > 0
