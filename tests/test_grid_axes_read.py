"""Which grid axes a kernel tells its blocks apart on (its PTX's %ctaid, cluster ids and cluster rank), and the
grid checks and hints that follow: blocks along an axis the kernel never reads are copies; a grid with C's rows on
x is noted; a grid that numbers rows alone is told how to reach N; a require: that excludes a shape is said alone."""

from __future__ import annotations

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.cuda.ptx_facts import KernelPtxFacts, ptx_facts
from driver_gemm.errors import SpecError
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.planning.coverage import ROWS_ON_X_NOTE
from driver_gemm.planning.image_checks import NO_BLOCK_INDEX_NOTE
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import Shape

from test_spec import MINIMAL, write


def _entry(name: str, code: str) -> str:
    return f".visible .entry {name}(\n.param .u64 {name}_param_0\n)\n{{\n{code}\nret;\n}}\n"


# ------------------------------------------------------------------------------------------- what the PTX says

def test_ptx_facts_collect_the_block_indices_an_entry_and_its_callees_read():
    module = (".extern .func (.param .b32 func_retval0) vprintf\n(\n.param .b64 vprintf_param_0\n)\n;\n"
              ".func (.param .b32 func_retval0) row_of()\n{\nmov.u32 %r1, %ctaid.y;\n}\n"
              + _entry("through_call", "mov.u32 %r2, %ctaid.x;\ncall.uni (retval0), row_of, ();\n"
                                       "call.uni (retval0), vprintf, (param0);")
              + _entry("x_only", "mov.u32 %r2, %ctaid.x;\nmov.u32 %r3, %nctaid.y;\nmov.u32 %r4, %nctaid.z;")
              + _entry("cluster", "mov.u32 %r2, %clusterid.z;\nmov.u32 %r3, %cluster_ctaid.x;")
              + _entry("rank", "mov.u32 %r2, %cluster_ctarank;\nmov.u32 %r3, %cluster_nctarank;")
              + _entry("counter", "atom.global.add.u32 %r1, [%rd1], 1;")
              + _entry("vector", "mov.v4.u32 {%r1, %r2, %r3, %r4}, %ctaid;"))
    facts = ptx_facts(module)
    reads = {name: [fact.reads_block_axis(axis) for axis in range(3)] for name, fact in facts.items()}
    assert reads == {"through_call": [True, True, False], "x_only": [True, False, False],
                     "cluster": [True, False, True], "rank": [True, True, True], "counter": [False, False, False],
                     "vector": [True, True, True]}
    assert facts["through_call"].block_reads == ("ctaid.x", "ctaid.y")
    assert facts["counter"].block_reads == ()
    # kept beside the CUBIN and read back as they were
    assert KernelPtxFacts.from_dict(facts["cluster"].as_dict()).block_reads == ("cluster_ctaid.x", "clusterid.z")


def test_a_call_whose_code_is_not_in_the_module_leaves_the_reads_unknown():
    module = (".extern .func elsewhere()\n;\n"
              + _entry("extern_call", "mov.u32 %r2, %ctaid.x;\ncall.uni elsewhere, ();")
              + _entry("pointer_call", "mov.u32 %r2, %ctaid.x;\ncall (retval0), %rd4, (param0), prototype_0;"))
    facts = ptx_facts(module)
    assert facts["extern_call"].block_reads is None and facts["pointer_call"].block_reads is None
    assert facts["extern_call"].reads_block_axis(1) is None
    # facts kept by a version that did not read them are unknown, not "reads nothing"
    assert KernelPtxFacts.from_dict({"copies": []}).block_reads is None


# ------------------------------------------------------------------------------- blocks along an unread axis

_ONE_AXIS_KERNEL = """\
__global__ void by_x(const float* a, const float* b, float* c, int M, int N, int K) {
    // tiles numbered from blockIdx.x alone, as a 1-D grid of ceil(M / 16) * ceil(N / 16) launches them
    int tiles_n = (N + 15) / 16;
    int row = blockIdx.x / tiles_n * 16 + threadIdx.y, col = blockIdx.x % tiles_n * 16 + threadIdx.x;
    if (row < M && col < N) { float s = 0; for (int k = 0; k < K; ++k) s += a[row * K + k] * b[k * N + col];
                              c[row * N + col] = s; }
}
__device__ __noinline__ int row_of() { return blockIdx.y * 16 + threadIdx.y; }
__global__ void by_xy(const float* a, const float* b, float* c, int M, int N, int K) {
    int row = row_of(), col = blockIdx.x * 16 + threadIdx.x;
    if (row < M && col < N) { float s = 0; for (int k = 0; k < K; ++k) s += a[row * K + k] * b[k * N + col];
                              c[row * N + col] = s; }
}
__global__ void by_counter(const float* a, const float* b, float* c, int M, int N, int K, int* next) {
    __shared__ int tile;
    int tiles_n = (N + 15) / 16;
    while (true) {
        if (threadIdx.x == 0 && threadIdx.y == 0) tile = atomicAdd(next, 1);
        __syncthreads();
        int taken = tile;
        __syncthreads();
        if (taken >= tiles_n * ((M + 15) / 16)) break;
        int row = taken / tiles_n * 16 + threadIdx.y, col = taken % tiles_n * 16 + threadIdx.x;
        if (row < M && col < N) { float s = 0; for (int k = 0; k < K; ++k) s += a[row * K + k] * b[k * N + col];
                                  c[row * N + col] = s; }
    }
}
"""


def _plans(tmp_path, entries: str):
    from driver_gemm.planning.spec_plan import plan_spec

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "k.cu").write_text(_ONE_AXIS_KERNEL)
    spec = tmp_path / "spec.yaml"
    spec.write_text("shapes: [[100, 60, 32]]\nkernels:\n" + entries)
    return plan_spec(load_spec(spec), "sm_90").plans


_SIGNATURE = "signature: [A, B, C, M, N, K], block: [16, 16], tile: [16, 16]"


def test_a_grid_axis_the_kernel_never_reads_is_refused_at_its_line(tmp_path):
    # by_x numbers its tiles from blockIdx.x: a 2-D grid launches 7 copies of each of its first 4 tiles.
    plan, = _plans(tmp_path, f"  - {{name: k, source: k.cu, function: by_x, {_SIGNATURE},\n"
                             "     grid: [ceil(N / 16), ceil(M / 16)]}\n")
    assert [(problem.field, problem.where.rsplit(":", 1)[1]) for problem in plan.problems] == [("kernels[k].grid[1]",
                                                                                                "4")]
    problem, = plan.problems
    assert ("grid y extent 7 ('ceil(M / 16)'): the kernel never reads blockIdx.y (its PTX names no %ctaid.y nor a "
            "cluster id on y; it reads blockIdx.x), so the 7 blocks along y are copies of one another") in str(problem)
    assert problem.hint == ("the kernel numbers its tiles from blockIdx.x alone: a 1-D grid, [ceil(N / 16) * "
                            "ceil(M / 16)], counts them on x")


def test_a_grid_on_the_axes_the_kernel_reads_is_not_refused(tmp_path):
    # the 1-D grid of by_x, and by_xy's 2-D grid whose row comes from blockIdx.y in a function it calls
    one_d, called = _plans(tmp_path, f"  - {{name: one-d, source: k.cu, function: by_x, {_SIGNATURE},\n"
                                      "     grid: ['ceil(M / 16) * ceil(N / 16)']}\n"
                                      f"  - {{name: called, source: k.cu, function: by_xy, {_SIGNATURE},\n"
                                      "     grid: [ceil(N / 16), ceil(M / 16)]}\n")
    assert one_d.valid and called.valid, [str(p) for p in one_d.problems + called.problems]
    assert not [note for note in one_d.notes + called.notes if NO_BLOCK_INDEX_NOTE in note]


def test_a_kernel_that_reads_no_block_index_takes_any_grid_with_a_note(tmp_path):
    # a persistent kernel taking tiles from an atomic counter: its blocks are told apart at run time
    plan, = _plans(tmp_path, "  - {name: k, source: k.cu, function: by_counter, block: [16, 16],\n"
                             "     signature: [A, B, C, M, N, K,\n"
                             "                 {name: next, type: buffer, element: int32, size: 1, fill: zero}],\n"
                             "     grid: [4, 2]}\n")
    assert plan.valid, [str(p) for p in plan.problems]
    note, = [note for note in plan.notes if note.startswith(NO_BLOCK_INDEX_NOTE)]
    assert "its blocks are told apart only by what they take at run time" in note


# ------------------------------------------------------------------------------------ rows of C on grid x

def _plan(tmp_path, grid: str, extra: str = "", shape=Shape(1001, 513, 777)):
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", f"grid: {grid}") + extra
    return plan_case(load_spec(write(tmp_path, text)).kernels[0], shape, arch_limits("sm_90"))


def test_a_grid_with_c_rows_on_x_is_noted_as_covering_c_only_for_a_kernel_reading_rows_from_x(tmp_path):
    rows_on_x = _plan(tmp_path, "[ceil(M / BM), ceil(N / BN)]")
    assert rows_on_x.valid and ROWS_ON_X_NOTE in rows_on_x.notes
    assert "right for a kernel that reads its row from blockIdx.x" in ROWS_ON_X_NOTE
    assert "would leave rows of C unwritten" in ROWS_ON_X_NOTE
    assert ROWS_ON_X_NOTE not in _plan(tmp_path, "[ceil(N / BN), ceil(M / BM)]").notes
    assert ROWS_ON_X_NOTE not in _plan(tmp_path, "['ceil(M / BM) * ceil(N / BN)']").notes


def test_rows_on_says_which_block_index_the_kernel_reads_its_row_from_and_holds_the_grid_to_it(tmp_path):
    # said, and as the grid has it: no note
    said = _plan(tmp_path, "[ceil(M / BM), ceil(N / BN)]", "    rows_on: x\n")
    assert said.valid and ROWS_ON_X_NOTE not in said.notes
    assert _plan(tmp_path, "[ceil(N / BN), ceil(M / BM)]", "    rows_on: y\n").valid
    # a launcher that puts M on x for a kernel that reads its row from blockIdx.y (the bug such a grid hides
    # on square shapes), and the reverse
    swapped = _plan(tmp_path, "[ceil(M / BM), ceil(N / BN)]", "    rows_on: y\n")
    problem, = swapped.problems
    assert problem.field == "kernels[v4].grid"
    assert str(problem).endswith(
        "grid x counts C's rows and grid y its columns, but the kernel reads its row from blockIdx.y (rows_on: y): "
        "its blocks would take tile rows for columns, leaving rows of C unwritten and writing past its columns "
        "where M and N differ (hint: a grid with C's rows on y is [ceil(N / cols), ceil(M / rows)])")
    problem, = _plan(tmp_path, "[ceil(N / BN), ceil(M / BM)]", "    rows_on: x\n").problems
    assert "grid y counts C's rows and grid x its columns, but the kernel reads its row from blockIdx.x" in str(problem)


def test_rows_on_is_x_or_y(tmp_path):
    with pytest.raises(SpecError, match=r"rows_on is x or y \(the block index the kernel reads its row of C from\), "
                                        r"got 'M'"):
        load_spec(write(tmp_path, MINIMAL + "    rows_on: M\n"))


# ------------------------------------------------------------------------- a grid that numbers rows alone

def test_a_gemv_grid_over_rows_alone_is_told_to_add_an_axis_over_n_or_require_n_of_1(tmp_path):
    # one warp a row, four rows a block: the grid counts M only, so N = 2 leaves column 1 unwritten
    plan = _plan(tmp_path, "[ceil(M / 4)]", "    tile: [4, 1]\n", Shape(1000, 2, 1024))
    problem, = plan.problems
    assert problem.field == "kernels[v4].grid[0]"
    assert "tiles of 4 x 1 (ceil(M / 4) x N): 250 tiles would never be written" in str(problem)
    assert problem.hint == ("the grid numbers C's rows (grid x reads M alone): add a grid axis over its columns, N, "
                            "that the kernel reads its column from, or require: N == 1, for a matrix-vector kernel")
    assert "/ 1)" not in str(problem)


def test_a_grid_over_rows_alone_with_a_wider_tile_is_told_its_bound_on_n(tmp_path):
    plan = _plan(tmp_path, "[ceil(M / BM)]", "    tile: [BM, BN]\n")
    problem, = plan.problems
    assert problem.hint.endswith("add a grid axis over its columns, ceil(N / BN), that the kernel reads its "
                                 "column from, or require: N <= BN")


def test_a_one_axis_grid_of_too_few_tiles_keeps_the_numbering_hint(tmp_path):
    plan = _plan(tmp_path, "['ceil(M / BM) * (N // BN)']", "    tile: [BM, BN]\n", Shape(64, 513, 777))
    problem, = plan.problems
    assert problem.hint == "a grid that numbers the tiles is ceil(M / BM) * ceil(N / BN)"


# ----------------------------------------------------------------------- a require: that excludes the shape

def test_a_require_that_excludes_the_shape_is_said_without_the_grid_it_breaks(tmp_path):
    # TensorRT-LLM's cudaCoreGemm: TILE_M == M, grid [M / TILE_M, N / TILE_N]; TILE_M = 4 on M = 1
    plan = _plan(tmp_path, "[M / 4, N / 2]", "    require: [M == 4]\n", Shape(1, 4096, 4096))
    assert [problem.field for problem in plan.problems] == ["kernels[v4].require[0]"]
    assert "'M == 4' does not hold with M=1" in str(plan.problems[0])
    # the grid's own mistake, on a shape the require lets through, is still said
    plan = _plan(tmp_path, "[M / 8, N / 2]", "    require: [M % 4 == 0]\n", Shape(4, 4096, 4096))
    assert [problem.field for problem in plan.problems] == ["kernels[v4].grid[0]"]
