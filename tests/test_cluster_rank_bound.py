"""__launch_bounds__'s third argument, the most blocks a cluster of the kernel's launch may have (.maxclusterrank in
its PTX, an attribute of its CUBIN): read from both, and a spec's cluster over it refused at `cluster` with a hint,
since the driver refuses that launch (CUDA_ERROR_INVALID_CLUSTER_SIZE). The cluster refusals of a launch's
attributes name the launch's failure and a way out."""

from __future__ import annotations

import pytest

from driver_gemm.cuda.compile import compile_text
from driver_gemm.cuda.cubin import read_cubin
from driver_gemm.cuda.launch_attributes import LaunchAttributes
from driver_gemm.cuda.ptx_facts import KernelPtxFacts, ptx_facts
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.build import plan_cases
from driver_gemm.specfile import load_spec

BOUNDED_SOURCE = """\
template <int MAXC>
__global__ void __launch_bounds__(256, 1, MAXC) bounded(const float* A, const float* B, float* C, int M, int N, int K)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    float sum = 0.0f;
    if (row < M && col < N) {
        for (int k = 0; k < K; ++k) sum += A[row * K + k] * B[k * N + col];
        C[row * N + col] = sum;
    }
}
"""

PTX_ENTRY = """\
.visible .entry capped(
.param .u64 capped_param_0
)
.maxntid 128, 1, 1
.maxclusterrank 4
{
ret;
}
.visible .entry free(
.param .u64 free_param_0
)
{
ret;
}
"""


def test_the_ptx_facts_read_the_most_blocks_a_cluster_may_have():
    facts = ptx_facts(PTX_ENTRY)
    assert facts["capped"].max_cluster_blocks == 4 and facts["free"].max_cluster_blocks is None
    assert KernelPtxFacts.from_dict(facts["capped"].as_dict()) == facts["capped"]
    assert facts["capped"].as_dict()["max_cluster_blocks"] == 4


def test_nvrtc_and_the_cubin_carry_it():
    built = compile_text(BOUNDED_SOURCE, "bounded.cu", ["bounded<2>"], "sm_90")
    symbol = built.symbol("bounded<2>")
    assert built.ptx_facts[symbol].max_cluster_blocks == 2
    assert read_cubin(built.image).kernel(symbol).max_cluster_blocks == 2


def bounded_spec(tmp_path, clusters: str):
    (tmp_path / "bounded.cu").write_text(BOUNDED_SOURCE)
    (tmp_path / "spec.yaml").write_text(f"""\
name: bounded
shapes: [[1024, 1024, 256]]
baseline: false
kernels:
  - name: mc
    source: bounded.cu
    function: bounded
    params: {{MAXC: 2}}
    values: {{CX: {clusters}}}
    block: [32, 8]
    grid: [ceil(N / 32), ceil(M / 8)]
    tile: [8, 32]
    cluster: [CX, 1, 1]
""")
    return load_spec(tmp_path / "spec.yaml")


def test_a_cluster_over_the_bound_is_refused_at_cluster_with_a_hint(tmp_path):
    limits = arch_limits("sm_90")
    cases, _ = plan_cases(bounded_spec(tmp_path, "[2, 4]"), limits, "sm_90", 132)
    by_cluster = {case.kernel.label: case.plan for case in cases if case.kernel is not None}
    fits = next(plan for label, plan in by_cluster.items() if "CX=2" in label)
    over = next(plan for label, plan in by_cluster.items() if "CX=4" in label)
    assert fits.valid, [str(problem) for problem in fits.problems]
    assert not over.valid
    problem, = [problem for problem in over.problems if "maxBlocksPerCluster" in str(problem)]
    assert problem.field.endswith(".cluster") and "spec.yaml:13: kernels[mc].cluster" in str(problem)
    assert "a cluster of 4 blocks" in str(problem) and ".maxclusterrank 2" in str(problem)
    assert "CUDA_ERROR_INVALID_CLUSTER_SIZE" in str(problem)
    assert problem.hint and "at most 2 blocks" in problem.hint and "__launch_bounds__" in problem.hint


@pytest.mark.parametrize("cluster, arch, non_portable, failure, ways_out", [
    ((4, 4, 1), 90, False, "CUDA_ERROR_INVALID_CLUSTER_SIZE", ("at most 8 blocks", "cluster_non_portable")),
    ((4, 8, 1), 90, True, "CUDA_ERROR_INVALID_CLUSTER_SIZE", ("at most 16 blocks",)),
    ((2, 1, 1), 80, False, "fails", ("plan for sm_90", "drop cluster:")),
])
def test_cluster_refusals_name_the_failure_and_the_way_out(cluster, arch, non_portable, failure, ways_out):
    problems = LaunchAttributes(cluster=cluster, non_portable=non_portable).problems((16, 16, 1), 0, arch)
    assert any(failure in problem.message for problem in problems), problems
    hints = " ".join(problem.hint for problem in problems if problem.hint)
    for needle in ways_out:
        assert needle in hints, (needle, problems)
