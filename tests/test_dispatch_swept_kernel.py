"""A dispatch table names a kernel whose params or values sweep: the refusal says that the kernel sweeps, how many
configurations, and which field (with its line), and how to fix it, rather than counting kernels of that name."""

from __future__ import annotations

import pytest

from driver_gemm.errors import SpecError
from driver_gemm.specfile import parse_spec

SOURCE = r"""
template <int BM, int BN>
__global__ void tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    int r = blockIdx.y * BM + threadIdx.y, c = blockIdx.x * BN + threadIdx.x;
    if (r >= M || c >= N) return;
    float s = 0; for (int k = 0; k < K; ++k) s += A[r * K + k] * B[k * N + c];
    C[r * N + c] = s;
}
"""

SPEC = """\
shapes: [[256, 256, 256], [64, 512, 128]]
kernels:
  - name: fab
    source: k.cu
    function: tiled
    {sweep}
    block: [16, 16]
    grid: [ceil(N / BN), ceil(M / BM)]
    tile: [BM, BN]
dispatch:
  fab:
    - {{shape: [256, 256, 256], params: {{BM: 16, BN: 16}}}}
"""


def _refusal(tmp_path, sweep: str) -> SpecError:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'swept'\n")
    (tmp_path / "k.cu").write_text(SOURCE)
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(sweep=sweep))
    with pytest.raises(SpecError) as raised:
        parse_spec(path.read_text(), path)
    return raised.value


@pytest.mark.parametrize("sweep, field, written, fix", [
    ("params: {BM: [16, 32], BN: 16}", "kernels[fab].params.BM", "[16, 32]", "one value of BM (BM: 16)"),
    ("params: [{BM: 16, BN: 16}, {BM: 32, BN: 16}]", "kernels[fab].params", "a list of 2 configurations",
     "one configuration (params: {BM: 16, BN: 16})"),
])
def test_a_swept_kernel_given_a_table_is_said_to_sweep_at_its_field(tmp_path, sweep, field, written, fix):
    error = _refusal(tmp_path, sweep)
    assert error.field == "dispatch.fab" and error.where == f"{tmp_path / 'spec.yaml'}:11", error.where   # the table
    assert "kernel fab sweeps 2 configurations" in error.message, error.message
    assert f"{field}: {written}, at {tmp_path / 'spec.yaml'}:6" in error.message, error.message
    assert "kernels are named" not in error.message
    assert error.hint is not None and fix in error.hint, error.hint


def test_a_kernel_swept_by_values_is_said_to_sweep_its_values(tmp_path):
    error = _refusal(tmp_path, "params: {BM: 16, BN: 16}\n    values: {S: [8, 16]}")
    assert "kernel fab sweeps 2 configurations (kernels[fab].values.S: [8, 16]" in error.message, error.message
    assert f"{tmp_path / 'spec.yaml'}:7" in error.message and "params." not in error.message, error.message
    assert error.hint is not None and "one value of S (S: 8)" in error.hint, error.hint
