"""What a kernel's PTX does with its cluster (a TMA copy multicast to its blocks, its rank, its cluster's size), held
against a launch of one block a cluster: a kernel written for a fixed cluster of several blocks is refused there,
one that reads its cluster's size, or only its rank, gets a note."""

from __future__ import annotations

from driver_gemm.cuda.ptx_facts import KernelPtxFacts, ptx_facts
from driver_gemm.specfile import load_spec

_KERNELS = """\
__device__ unsigned rank_in_cluster() {
    unsigned r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r;
}
__device__ unsigned cluster_blocks() {
    unsigned n; asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n)); return n;
}
__device__ void multicast(const void* map, unsigned short mask) {
    __shared__ alignas(128) float tile[64 * 64];
    __shared__ alignas(8) unsigned long long barrier;
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;"
                 :: "r"((unsigned)__cvta_generic_to_shared(tile)), "l"(map), "r"(0), "r"(0),
                    "r"((unsigned)__cvta_generic_to_shared(&barrier)), "h"(mask) : "memory");
}
// rows of C split between the two blocks of a cluster by rank, B multicast to both
extern "C" __global__ void pair(const float* a, const float* b, float* c, int M, int N, int K) {
    unsigned rank = rank_in_cluster();
    if (threadIdx.x == 0 && M < 0) multicast(b, 3);
    int row = blockIdx.y * 32 + rank * 16 + threadIdx.x / 16, col = blockIdx.x * 16 + threadIdx.x % 16;
    if (row < M && col < N) c[row * N + col] = 0.f;
}
// the same, written for any cluster: it reads its cluster's size
extern "C" __global__ void any_size(const float* a, const float* b, float* c, int M, int N, int K) {
    unsigned rank = rank_in_cluster(), blocks = cluster_blocks();
    if (threadIdx.x == 0 && M < 0) multicast(b, (1u << blocks) - 1);
    int row = (blockIdx.y * blocks + rank) * 16 + threadIdx.x / 16, col = blockIdx.x * 16 + threadIdx.x % 16;
    if (row < M && col < N) c[row * N + col] = 0.f;
}
// rank only
extern "C" __global__ void ranked(const float* a, const float* b, float* c, int M, int N, int K) {
    unsigned rank = rank_in_cluster();
    int row = blockIdx.y * 32 + rank * 16 + threadIdx.x / 16, col = blockIdx.x * 16 + threadIdx.x % 16;
    if (row < M && col < N) c[row * N + col] = 0.f;
}
"""


def _entry(name: str, code: str) -> str:
    return f".visible .entry {name}(\n.param .u64 {name}_param_0\n)\n{{\n{code}\nret;\n}}\n"


def test_ptx_facts_name_what_an_entry_and_its_callees_do_with_their_cluster():
    module = (".func send()\n{\ncp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
              ".multicast::cluster [%r1], [%rd1, {%r2, %r3}], [%r4], %rs1;\n}\n"
              + _entry("through_call", "mov.u32 %r5, %cluster_ctarank;\ncall.uni send, ();")
              + _entry("sized", "mov.u32 %r5, %cluster_nctarank;\nmapa.shared::cluster.u32 %r6, %r7, 1;\n"
                                "barrier.cluster.arrive.release.aligned;")
              + _entry("plain", "mov.u32 %r5, %ctaid.x;"))
    facts = ptx_facts(module)
    assert facts["through_call"].cluster_uses == ("multicast", "rank")
    assert facts["sized"].cluster_uses == ("barrier.cluster", "mapa", "size")
    assert facts["plain"].cluster_uses == ()
    # kept beside the CUBIN and read back as they were; facts kept without them are unknown
    assert KernelPtxFacts.from_dict(facts["sized"].as_dict()).cluster_uses == ("barrier.cluster", "mapa", "size")
    assert KernelPtxFacts.from_dict({"copies": []}).cluster_uses is None


def _plans(tmp_path, entries: str):
    from driver_gemm.planning.spec_plan import plan_spec

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "k.cu").write_text(_KERNELS)
    spec = tmp_path / "spec.yaml"
    spec.write_text("shapes: [[64, 32, 16]]\nkernels:\n" + entries)
    return {plan.kernel.name: plan for plan in plan_spec(load_spec(spec), "sm_90").plans}


_LAUNCH = "block: [256], arch: sm_90a"


def test_a_multicasting_kernel_of_a_fixed_cluster_launched_one_block_a_cluster_is_refused_at_cluster(tmp_path):
    plans = _plans(tmp_path, f"  - {{name: none, source: k.cu, function: pair, {_LAUNCH}, grid: [2, 2]}}\n"
                             f"  - {{name: one, source: k.cu, function: pair, {_LAUNCH}, grid: [2, 2],\n"
                             "     cluster: [1, 1, 1]}\n"
                             f"  - {{name: two, source: k.cu, function: pair, {_LAUNCH}, grid: [2, 4],\n"
                             "     cluster: [1, 2, 1]}\n")
    for name, launch in (("none", "the launch has no cluster (one block a cluster)"),
                         ("one", "cluster: [1, 1, 1] makes clusters of one block")):
        problem, = plans[name].problems
        assert problem.field == f"kernels[{name}].cluster"
        assert problem.where.endswith(":3" if name == "none" else ":5")   # the entry, or its cluster: line
        assert ("multicasts TMA copies to the blocks of its cluster (cp.async.bulk ... multicast::cluster)"
                in str(problem))
        assert "reads its place in the cluster (%cluster_ctarank, %cluster_ctaid), and never reads its cluster's size" \
            in str(problem)
        assert "every block's rank is 0, so part of C would never be written" in str(problem)
        assert launch in str(problem) and "the copies name blocks that do not exist" in str(problem)
        assert "give cluster: the extents the kernel's launcher gives" in problem.hint
    assert plans["two"].valid, [str(problem) for problem in plans["two"].problems]
    assert not [note for note in plans["two"].notes if "multicast" in note]


def test_a_kernel_that_reads_its_cluster_size_or_only_its_rank_gets_a_note(tmp_path):
    plans = _plans(tmp_path, f"  - {{name: sized, source: k.cu, function: any_size, {_LAUNCH}, grid: [2, 4]}}\n"
                             "  - {name: ranked, source: k.cu, function: ranked, block: [256], grid: [2, 2]}\n"
                             "  - {name: ranked-one, source: k.cu, function: ranked, block: [256], grid: [2, 2],\n"
                             "     cluster: [1, 1, 1]}\n")
    assert all(plan.valid for plan in plans.values()), {name: [str(p) for p in plan.problems]
                                                        for name, plan in plans.items()}
    note, = [note for note in plans["sized"].notes if "multicast" in note]
    assert "reads its cluster's size, but the launch has no cluster" in note
    assert "it must pick plain copies for a cluster of one" in note
    note, = [note for note in plans["ranked"].notes if "cluster_ctarank" in note]
    assert "reads its place in its cluster (%cluster_ctarank, %cluster_ctaid) but the launch has no cluster" in note
    # a cluster: written out says the launch is meant: no note
    assert not [note for note in plans["ranked-one"].notes if "cluster_ctarank" in note]
