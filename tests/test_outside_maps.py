"""Tensor maps as outside kernels take them: by pointer, rank 1 to 5 with every encoder field, checked
by the driver's own rules; the rank a kernel's TMA copies use, its compiled cluster and its setmaxnreg
moves read from the image and checked before launch; CCCL and the C-header stand-ins together under
NVRTC. No GPU."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from driver_gemm.cli.main import main
from driver_gemm.cuda.compile import compile_source
from driver_gemm.cuda.cubin import ParamSlot
from driver_gemm.cuda.launch import PackedArguments
from driver_gemm.cuda.mangling import ParamType
from driver_gemm.cuda.nvcc import find_nvcc
from driver_gemm.cuda.ptx_facts import KernelPtxFacts, TmaCopy, ptx_facts
from driver_gemm.cuda.signature_check import check_signature
from driver_gemm.cuda.tensormap import TensorMapPlan, passed_by_pointer
from driver_gemm.errors import SpecError
from driver_gemm.planning.build import check_offline, offline_problems
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.specfile import Shape, load_spec, parse_spec

from conftest import ROOT, SPECS, TEST_KERNELS

SM90 = arch_limits("sm_90")


def plan(element="bf16", extents=(4096, 4096), strides=(8192,), box=(64, 64), **options) -> TensorMapPlan:
    return TensorMapPlan(element, tuple(extents), tuple(strides), tuple(box), **options)


# ----------------------------------------------------------------------------------- the encoder's rules


@pytest.mark.parametrize("accepted", [
    plan(),
    # B in 64-column panels: dimension 2 steps 128 bytes, inside dimension 1's rows (overlapping strides).
    plan(extents=(64, 4096, 64), strides=(8192, 128), box=(64, 64, 4), swizzle="128B"),
    plan(extents=(100,), strides=(), box=(256,)),                      # rank 1
    # unit dimensions added for a rank-5 copy, never stepped along: stride 0 (as the encoder's rule allows)
    plan(extents=(64, 4096, 64, 1, 1), strides=(8192, 128, 0, 0), box=(64, 64, 1, 1, 1)),
    plan(extents=(8, 4, 4, 4, 4), strides=(16, 64, 256, 1024), box=(8, 4, 4, 4, 4)),   # rank 5
    plan(extents=(40, 64), strides=(80,), box=(64, 64)),               # a box wider than its dimension
    plan(element_strides=(1, 8)), plan(l2_promotion="256B"), plan(oob_fill="nan"),
    plan(extents=(64, 8, 8), strides=(128, 1024), box=(8, 8, 8), interleave="16B"),
    plan(extents=(64, 8, 8), strides=(128, 1024), box=(8, 8, 8), interleave="32B", swizzle="32B"),
])
def test_maps_the_driver_accepts_pass(accepted):
    assert accepted.problems() == []


@pytest.mark.parametrize("refused, field, needle", [
    (plan(extents=(1,) * 6, strides=(16,) * 5, box=(1,) * 6), "dims", "1 to 5 dimensions"),
    (plan(extents=(64, 64), strides=(128,), box=(64, 64), interleave="16B"), "interleave", "rank 3 to 5"),
    (plan(extents=(2**32 + 1, 2), box=(64, 1)), "dims", "must be 1 to 2^32"),
    (plan(extents=(0, 2), box=(64, 1)), "dims", "must be 1 to 2^32"),
    (plan(strides=(8200,)), "strides", "multiple of 16 below 2^40"),
    (plan(strides=(2**40,)), "strides", "below 2^40"),
    (plan(extents=(64, 8, 8), strides=(144, 1024), box=(8, 8, 8), interleave="32B", swizzle="32B"), "strides",
     "multiple of 32"),
    (plan(strides=(8192, 16)), "strides", "need 1 strides"),
    (plan(extents=(64, 4096, 2), strides=(8192, 0), box=(64, 64, 1)), "strides", "positive multiple of 16"),
    (plan(box=(64, 257)), "box", "must be 1 to 256"),
    (plan(box=(64, 0)), "box", "must be 1 to 256"),
    (plan(box=(4, 64)), "box", "multiple of 16"),
    (plan(box=(64,)), "box", "need 2 box extents"),
    (plan(box=(128, 64), swizzle="128B"), "swizzle", "wider than the 128B swizzle span"),
    (plan(extents=(64, 8, 8), strides=(128, 1024), box=(8, 8, 8), interleave="32B"), "swizzle",
     "needs the 32B swizzle"),
    (plan(swizzle="96B"), "swizzle", "one of"),
    (plan(interleave="8B"), "interleave", "one of"),
    (plan(element_strides=(1, 9)), "element_strides", "must be 1 to 8"),
    (plan(element_strides=(0, 1)), "element_strides", "must be 1 to 8"),
    (plan(element_strides=(1,)), "element_strides", "need 2 element strides"),
    (plan(element="int32", strides=(16384,), box=(16, 16), oob_fill="nan"), "oob_fill", "floating-point"),
    (plan(l2_promotion="512B"), "l2_promotion", "one of"),
])
def test_maps_the_driver_refuses_are_named_by_field_and_rule(refused, field, needle):
    problems = refused.problems()
    assert any(f == field and needle in message for f, message in problems), problems


def test_the_address_must_be_16_bytes_aligned_and_32_with_32_byte_interleave():
    assert plan().problems(0x1000) == [] and plan().problems(0x1008)[0][0] == "address"
    interleaved = plan(extents=(64, 8, 8), strides=(128, 1024), box=(8, 8, 8), interleave="32B", swizzle="32B")
    assert "32-byte aligned" in interleaved.problems(0x1010)[0][1]


def test_a_map_describes_itself_for_the_plan():
    panels = plan(extents=(64, 4096, 64), strides=(8192, 128), box=(64, 64, 4), swizzle="128B",
                  element_strides=(1, 1, 2), l2_promotion="128B")
    assert panels.describe() == ("bf16, rank 3, dims {64, 4096, 64}, strides {8192, 128} B, box {64, 64, 4} "
                                 "(32768 B), swizzle 128B, element strides {1, 1, 2}, L2 promotion 128B")
    assert panels.reach_bytes == 2 * 64 + 4095 * 8192 + 63 * 128


# ----------------------------------------------------------------------------------- the spec's fields

PANELS = """\
shapes:
  - [1024, 512, 1024]
kernels:
  - name: panels
    source: ../kernels/outside/bf16_maps.cu
    function: gemm_bf16_maps_by_pointer
    arch: sm_90a
    types: {a: bf16, b: bf16, c: fp32, accumulate: fp32}
    params: {STAGES: 4, GROUP: 8, B_PANELS: 1}
    block: [384]
    grid: ["min(sm_count, ceil(N / 256) * ceil(M / 128))"]
    shared_bytes: STAGES * (128 + 256) * 128 + 16 * STAGES + 16 + 1024
    signature:
      - {name: map_a, type: tensormap, tensor: A, box: [128, 64], swizzle: 128B}
      - {name: map_b, type: tensormap, tensor: B, dims: [64, K, N // 64], strides: [N * 2, 128], box: [64, 64, 4], swizzle: 128B, pass: pointer}
      - C
      - M
      - N
      - K
"""


def parse(text: str):
    return parse_spec(textwrap.dedent(text), SPECS / "outside-test.yaml")


def spec_error(text: str) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse(text)
    return caught.value


def test_a_rank_3_map_is_read_innermost_first_with_its_pass():
    kernel = parse(PANELS).kernels[0]
    description = kernel.signature[1].tensor_map
    assert [e.source for e in description.dims] == ["64", "K", "N // 64"]
    assert [e.source for e in description.strides] == ["N * 2", "128"]
    assert [e.source for e in description.box] == ["64", "64", "4"]
    assert description.passing == "pointer" and kernel.signature[0].tensor_map.passing is None
    planned = plan_case(kernel, Shape(1024, 512, 1024), SM90)
    assert planned.valid, planned.problems
    assert planned.tensor_maps["map_b"] == TensorMapPlan("bf16", (64, 1024, 8), (1024, 128), (64, 64, 4),
                                                         swizzle="128B")
    assert "tensor map map_b: bf16, rank 3, dims {64, 1024, 8}, strides {1024, 128} B, box {64, 64, 4}" in \
        " ".join(planned.notes)


@pytest.mark.parametrize("old, new, field, needle", [
    ("strides: [N * 2, 128], ", "", "strides", "needs strides"),
    ("strides: [N * 2, 128]", "strides: [N * 2]", "strides", "a list of 2 expressions"),
    ("box: [64, 64, 4]", "box: [64, 64]", "box", "a list of 3 expressions"),
    ("dims: [64, K, N // 64]", "dims: [1, 2, 3, 4, 5, 6]", "dims", "1 to 5 expressions"),
    ("pass: pointer", "pass: reference", "pass", "value, pointer"),
    ("pass: pointer", "interleave: 64B", "interleave", "none, 16B, 32B"),
    ("pass: pointer", "element_strides: [1, 1]", "element_strides", "a list of 3 expressions"),
    ("dims: [64, K, N // 64]", "dims: [64, K, N // BQ]", "dims[2]", "unknown name BQ"),
    ("box: [128, 64], swizzle: 128B}", "box: [128, 64], strides: [16], swizzle: 128B}", "strides",
     "belongs to a map given by its dims"),
])
def test_bad_map_fields_name_file_line_and_field(old, new, field, needle):
    text = PANELS.replace(old, new)
    assert text != PANELS
    error = spec_error(text)
    assert needle in error.message and field in error.field, (error.message, error.field)
    assert error.where.endswith(f"outside-test.yaml:{14 if 'box: [128' in old else 15}")


BATCHED_MAP = ("{name: map_b, type: tensormap, tensor: B, dims: [N, K, batch], strides: [N * 2, strideB * 2], "
               "box: [64, 64, 1], swizzle: 128B}")


@pytest.mark.parametrize("in_struct", [False, True])
def test_a_maps_names_follow_one_rule_at_the_top_and_inside_a_struct(in_struct):
    # A rank-3 map over a batched B reads the batch and B's batch stride, in the signature or as a struct's field
    # (a library's params struct); a misspelt name is refused at load either way, at the map's own field.
    entry = f"      - {BATCHED_MAP}"
    if in_struct:
        entry = f"      - {{name: p, type: struct, fields: [{BATCHED_MAP}, {{name: s, type: int32, value: 1}}]}}"
    text = PANELS.replace("    signature:\n", "    batch: {count: 3, stride: {b: K * N + 64}}\n    signature:\n")
    old = next(line for line in text.splitlines() if "name: map_b" in line)
    text = text.replace(old, entry)
    kernel = parse(text).kernels[0]
    planned = plan_case(kernel, Shape(1024, 512, 1024), SM90)
    assert planned.tensor_maps["map_b"] == TensorMapPlan("bf16", (512, 1024, 3), (1024, (1024 * 512 + 64) * 2),
                                                         (64, 64, 1), swizzle="128B")
    error = spec_error(text.replace("K, batch]", "K, batchh]"))
    field = "signature[1].fields[0]" if in_struct else "signature[1]"
    assert error.field == f"kernels[panels].{field}.dims[2]", error.field
    assert "unknown name batchh" in error.message and error.hint == "names available: M, N, K, lda, ldb, ldc, " \
        "strideA, strideB, strideC, batch, groups, STAGES, GROUP, B_PANELS", (error.message, error.hint)
    assert error.where.endswith("outside-test.yaml:16")
    # sm_count is the GPU's, not the memory's: no map reads it, here or there.
    assert "unknown name sm_count" in spec_error(text.replace("K, batch]", "K, sm_count]")).message


def test_a_map_reaching_past_its_operand_is_refused_per_shape():
    kernel = parse(PANELS.replace("N // 64]", "N // 64 + 1]")).kernels[0]
    planned = plan_case(kernel, Shape(1024, 512, 1024), SM90)
    assert any("map_b: the map reaches" in str(p) and "past its 1048576-byte buffer" in str(p)
               for p in planned.problems), planned.problems


# ----------------------------------------------------------------------------------- by value or by pointer

TENSOR_MAP = next(a for a in parse(PANELS).kernels[0].signature if a.name == "map_a")
BY_POINTER = next(a for a in parse(PANELS).kernels[0].signature if a.name == "map_b")


def test_a_pointer_parameter_takes_a_map_by_pointer_without_the_old_size_error():
    pointer = ParamType("pointer", 8, "const CUtensorMap_st*")
    assert check_signature([(0, 0, 8)], [pointer], [TENSOR_MAP]) == []
    assert check_signature([(0, 0, 8)], [pointer], [BY_POINTER]) == []
    assert check_signature([(0, 0, 128)], None, [TENSOR_MAP]) == []
    assert passed_by_pointer(None, 8) and passed_by_pointer("pointer", None) and not passed_by_pointer(None, 128)


def test_a_pass_that_disagrees_with_the_parameter_is_refused():
    pointer = ParamType("pointer", 8, "const CUtensorMap_st*")
    by_value = TENSOR_MAP.__class__(TENSOR_MAP.name, "tensormap", None,
                                    TENSOR_MAP.tensor_map.__class__(**{**TENSOR_MAP.tensor_map.__dict__,
                                                                       "passing": "value"}))
    [problem] = check_signature([(0, 0, 8)], [pointer], [by_value])
    assert "pass: value needs a 128-byte parameter" in problem and "write pass: pointer" in problem
    [problem] = check_signature([(0, 0, 128)], None, [BY_POINTER])
    assert "pass: pointer, but the kernel's parameter is 128 bytes" in problem
    [problem] = check_signature([(0, 0, 4)], None, [TENSOR_MAP])
    assert "128 bytes by value or as an 8-byte const CUtensorMap*" in problem


def test_a_map_by_pointer_is_packed_as_its_copy_s_address():
    class Copy:
        address = 0x7F0000001000

    packed = PackedArguments(["ptr", "int32"], [Copy(), 5], ["map_b", "M"], offsets=[0, 8])
    assert packed.value_bytes(0) == (0x7F0000001000).to_bytes(8, "little")


# ----------------------------------------------------------------------------------- what the image says

def test_ptx_facts_trace_each_copy_to_its_parameter_and_read_the_cluster():
    built = compile_source(TEST_KERNELS / "tma_ranks.cu", ["copy_3d", "pair_cluster"], arch="sm_90a", use_cache=False)
    copies = built.ptx_facts["copy_3d"]
    assert [(c.rank, c.param) for c in copies.copies] == [(3, 0), (2, 1)]
    assert copies.copies[0].instruction.startswith("cp.async.bulk.tensor.3d")
    assert copies.ranks_for(0) == {3: copies.copies[0].instruction}
    assert built.ptx_facts["pair_cluster"] == KernelPtxFacts((), (2, 1, 1))
    assert KernelPtxFacts.from_dict(copies.as_dict()) == copies


def test_untraced_copies_count_for_every_map():
    facts = ptx_facts(".visible .entry k(\n.param .u64 k_param_0\n)\n.reqnctapercluster 4\n{\n"
                      "ld.global.u64 %rd1, [%rd9];\n"
                      "cp.async.bulk.prefetch.tensor.2d.L2.global [%rd1, {%r1, %r2}];\n}\n")["k"]
    assert facts.cluster == (4, 1, 1)
    assert facts.copies == (TmaCopy(2, "cp.async.bulk.prefetch.tensor.2d.L2.global", None),)
    assert facts.ranks_for(0) == facts.ranks_for(5) == {2: "cp.async.bulk.prefetch.tensor.2d.L2.global"}


def _planned_cases(spec, arch="sm_90a"):
    """The kernel cases of `spec` as a run plans them: each launch completed with what its compiled image says."""
    from driver_gemm.planning.build import plan_cases
    return [case for case in plan_cases(spec, SM90, arch)[0] if case.kernel is not None]


RANKS = """\
shapes:
  - [256, 256, 256]
kernels:
  - name: copy3
    source: ../tests/kernels/tma_ranks.cu
    function: copy_3d
    arch: sm_90a
    block: [128]
    grid: [2, 2]
    signature:
      - {name: map_b, type: tensormap, tensor: B, box: [64, 64]}
      - {name: map_a, type: tensormap, tensor: A, box: [64, 64]}
      - C
      - M
      - N
      - K
  - name: pairs
    source: ../tests/kernels/tma_ranks.cu
    function: pair_cluster
    block: [32]
    grid: [4]
"""


def test_a_rank_3_copy_described_with_a_2d_map_is_refused_offline_and_a_cluster_is_checked():
    spec = parse(RANKS + RANKS[RANKS.index("  - name: pairs"):].replace("pairs", "odd").replace("[4]", "[3]"))
    refused, failed = offline_problems(spec, "sm_90")
    assert not failed
    messages = {plan.kernel.label: " ".join(str(p) for p in plan.problems) for plan in refused}
    # map_b, parameter 1, is copied with a rank-3 instruction; map_a (rank 2) matches its copy.
    assert "map_b: the spec's map has rank 2, but the kernel copies through parameter 1 with " \
           "cp.async.bulk.tensor.3d" in messages["copy3"] and "(rank 3)" in messages["copy3"]
    assert "map_a" not in messages["copy3"] and "outside-test.yaml:11" in messages["copy3"]
    assert "grid 3x1x1 is not a whole number of the kernel's __cluster_dims__ clusters (2x1x1)" in messages["odd"]
    assert len(refused) == 2
    fixed = parse(RANKS.replace("box: [64, 64]}\n      - {name: map_a",
                                "dims: [64, 256, 4], strides: [1024, 256], box: [64, 64, 1]}\n      - {name: map_a"))
    [ok] = [plan for plan in offline_problems(fixed, "sm_90")[0] if plan.kernel.label == "copy3"] or [None]
    assert ok is None


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_nvcc_builds_keep_their_ptx_so_the_rank_and_cluster_checks_hold_as_for_nvrtc():
    spec = parse(RANKS.replace("    arch: sm_90a\n", "    arch: sm_90a\n    compiler: nvcc\n")
                 .replace("    block: [32]\n", "    compiler: nvcc\n    block: [32]\n"))
    assert {kernel.compiler for kernel in spec.kernels} == {"nvcc"}
    refused, failed = offline_problems(spec, "sm_90")
    assert not failed
    messages = {plan.kernel.label: " ".join(str(p) for p in plan.problems) for plan in refused}
    assert set(messages) == {"copy3"}
    assert "map_b: the spec's map has rank 2, but the kernel copies through parameter 1 with " \
           "cp.async.bulk.tensor.3d" in messages["copy3"] and "map_a" not in messages["copy3"]
    pairs = next(case.plan for case in _planned_cases(spec, "sm_90") if case.label == "pairs")
    assert "cluster 2x1x1 from the kernel's __cluster_dims__ (2 blocks, 2 clusters)" in pairs.notes


def test_a_spec_cluster_other_than_the_compiled_one_is_refused_and_the_compiled_one_noted():
    spec = parse(RANKS.replace("grid: [4]", "grid: [4]\n    cluster: [4, 1, 1]"))
    refused = {plan.kernel.label: plan for plan in check_offline(spec, "sm_90")}
    assert "cluster: [4, 1, 1] disagrees with the kernel's __cluster_dims__(2, 1, 1)" in \
        " ".join(str(p) for p in refused["pairs"].problems)
    pairs = next(case.plan for case in _planned_cases(parse(RANKS), "sm_90") if case.label == "pairs")
    assert pairs.valid and "cluster 2x1x1 from the kernel's __cluster_dims__ (2 blocks, 2 clusters)" in pairs.notes


def test_ptx_facts_read_each_setmaxnreg_count_once_and_keep_them_beside_the_cubin():
    facts = ptx_facts(".visible .entry k(\n.param .u64 k_param_0\n)\n{\n"
                      "setmaxnreg.dec.sync.aligned.u32 40;\n@%p1 setmaxnreg.inc.sync.aligned.u32 232;\n"
                      "setmaxnreg.inc.sync.aligned.u32 232;\nsetmaxnreg.inc.sync.aligned.u32 152;\n}\n")["k"]
    assert (facts.register_increases, facts.register_decreases) == ((152, 232), (40,))
    assert KernelPtxFacts.from_dict(facts.as_dict()) == facts
    assert KernelPtxFacts.from_dict({"copies": []}).register_increases == ()    # facts kept before the field


MOVES = """\
shapes:
  - [64, 64, 64]
kernels:
  - name: moves
    source: ../tests/kernels/register_moves.cu
    function: register_moves
    arch: sm_90a
    params: {ASK: [104, 112, 120]}
    block: [640]
    grid: [7]
    signature: [A, B, C, M, N, K]
"""




def test_warpgroups_asking_setmaxnreg_for_more_than_the_launch_allocated_are_noted_with_what_fits():
    # 640 threads under a bound of 640: 96 registers a thread, 61440 a block; one warpgroup down to 40 leaves the
    # four others 104 a thread. Asking for 112 or 120 would wait forever.
    notes = {case.label: [n for n in case.plan.notes if n.startswith("setmaxnreg")] for case in
             _planned_cases(parse(MOVES))}
    assert notes["moves[ASK=104]"] == []
    assert notes["moves[ASK=112]"] == [
        "setmaxnreg: 4 warpgroups asking for 112 registers a thread and one giving back down to 40 need 62464 "
        "registers, but the block is launched with 61440 (96 a thread x 640 threads): the increase would wait for "
        "registers forever (a hang); with that layout the most a thread can ask for is 104"]
    assert "need 66560 registers" in notes["moves[ASK=120]"][0]


def test_a_case_stopped_for_hanging_names_the_setmaxnreg_request_its_plan_noted():
    from driver_gemm.planning.cases import timeout_record
    from driver_gemm.status import Status

    cases = {case.label: case for case in _planned_cases(parse(MOVES))}
    hung = timeout_record(cases["moves[ASK=112]"], 30)
    assert hung.status == Status.TIMEOUT and hung.kernel == "moves[ASK=112]"
    assert hung.message.startswith("no result after 30 s: the case was stopped (measure.case_timeout_s); its plan "
                                   "noted why it may hang: setmaxnreg: 4 warpgroups asking for 112")
    plain = timeout_record(cases["moves[ASK=104]"], 30)
    assert plain.message == "no result after 30 s: the case was stopped (measure.case_timeout_s)"


def test_the_shipped_kernels_ask_setmaxnreg_for_no_more_registers_than_their_launch_allocated():
    # v14 with four consumer warpgroups once asked for 112 of a block launched with 96 a thread, and hung.
    spec = load_spec(SPECS / "sweep-band.yaml").select(kernels=["v14-bf16-out-swap", "v15-bf16-out-192"],
                                                       shapes=["320x5120x5120"])
    plans = [case.plan for case in _planned_cases(spec) if case.plan.resources is not None]
    assert {plan.kernel.params["CWG"] for plan in plans} == {2, 3, 4}
    assert not [(plan.kernel.label, note) for plan in plans for note in plan.notes if note.startswith("setmaxnreg")]


# ----------------------------------------------------------------------------------- headers and the shipped kernels

def test_the_c_header_stand_ins_and_cccl_compile_together(tmp_path):
    (tmp_path / "k.cu").write_text(
        "#include <cassert>\n#include <cstdio>\n#include <cstdint>\n#include <cuda/barrier>\n"
        "#include <cuda/std/cstdint>\n"
        "__global__ void k(int64_t a, cuda::std::int64_t* out) {\n"
        "    assert(a < INT64_MAX);\n    if (a < 0) printf(\"%lld\\n\", static_cast<long long>(a));\n"
        "    out[0] = a;\n}\n")
    built = compile_source(tmp_path / "k.cu", ["k"], arch="sm_90", use_cache=False)
    assert built.symbol("k") == "_Z1kxPx"   # int64_t is CCCL's long long, the same type as cuda::std::int64_t
    assert "redefinition" not in built.log


def test_the_outside_spec_plans_offline_and_plan_prints_its_maps(capsys):
    spec = load_spec(SPECS / "outside-maps.yaml")
    assert {kernel.name for kernel in spec.kernels} == {"v12p", "maps-ptr", "maps-panels", "maps-cluster"}
    assert spec.baseline
    code = main(["plan", str(SPECS / "outside-maps.yaml"), "--arch", "sm_90", "-s", "1000x512x776"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "4 ok, 0 INVALID" in out
    assert "tensor map map_b: bf16, rank 3, dims {64, 776, 8}, strides {1024, 128} B, box {64, 64, 4} (32768 B), " \
           "swizzle 128B" in out
    assert "tensor map map_a: passed by pointer (const CUtensorMap*)" in out
    assert "cluster 2x1x1 from the kernel's __cluster_dims__" in out
    assert (ROOT / "kernels" / "outside" / "bf16_maps.cu").is_file()


SASS = """\
        code for sm_90a
                Function : copy_3d
        /*0080*/                   UTMALDG.3D [UR8], [UR4] ;                 /* 0x0000000804007db4 */
        /*0090*/              @P0  UTMALDG.2D [UR12], [UR6] ;                /* 0x0000000c06007db4 */
        /*00a0*/                   UTMACCTL.PF [UR4] ;                       /* 0x00000000040079b9 */
                Function : pair_cluster
        /*0080*/                   STG.E [R2.64], R5 ;                       /* 0x0000000502007986 */
"""


def test_sass_names_the_ranks_of_a_cubin_without_ptx(monkeypatch):
    from driver_gemm.cuda import sass
    from driver_gemm.planning import image_checks

    assert sass.tma_copies(SASS) == {"copy_3d": ((3, "UTMALDG.3D"), (2, "UTMALDG.2D")), "pair_cluster": ()}
    built = compile_source(TEST_KERNELS / "tma_ranks.cu", ["copy_3d"], arch="sm_90a", use_cache=False)
    from_nvcc = dataclasses.replace(built, ptx_facts=None)
    monkeypatch.setattr(image_checks, "find_disassembler", lambda: ("cuobjdump", "cuobjdump"))
    monkeypatch.setattr(image_checks, "disassemble", lambda image: SASS)
    image_checks._sass_reading.cache_clear()
    facts = image_checks.facts_of(from_nvcc, "copy_3d", with_sass=True)
    assert facts.ranks_for(0) == {3: "UTMALDG.3D", 2: "UTMALDG.2D"}   # untraced: every map may have either rank
    assert image_checks.facts_of(from_nvcc, "copy_3d") is None
    image_checks._sass_reading.cache_clear()


def _limits_kernel(name: str, function: str, threads: int, grid: str | None = None, arch: str = "") -> str:
    """A spec entry of tests/kernels/launch_limits.cu: one element of C a thread."""
    return (f"  - name: {name}\n    source: ../tests/kernels/launch_limits.cu\n    function: {function}\n"
            + (f"    arch: {arch}\n" if arch else "")
            + f"    block: [{threads}]\n    grid: [{grid or f'ceil(M * N / {threads})'}]\n")


LIMITS = "shapes:\n  - [64, 64, 64]\nkernels:\n" + "".join([
    _limits_kernel("bounded", "bounded", 64), _limits_kernel("overbound", "bounded", 128),
    _limits_kernel("deep_stack", "deep_stack", 128), _limits_kernel("wide_cluster", "wide_cluster", 128, "32", "sm_90a")])


def test_launches_the_compiled_image_forbids_are_refused_at_their_field():
    # A block over the kernel's __launch_bounds__, a stack frame over a thread's local memory, a compiled cluster
    # over the portable 8 without cluster_non_portable: the driver would refuse each, so plan does first.
    text = LIMITS.replace("    grid: [32]\n",
                          "    grid: [32]\n    cluster: [16, 1, 1]\n    cluster_non_portable: true\n")
    plans = {case.label: case.plan for case in _planned_cases(parse(LIMITS), "sm_90")}
    assert plans["bounded"].valid
    message, = (str(p) for p in plans["overbound"].problems)
    assert "a block of 128 threads (128 x 1 x 1) is over the kernel's __launch_bounds__ of 64 threads" in message
    assert "kernels[overbound].block" in message
    message, = (str(p) for p in plans["deep_stack"].problems)
    assert "stack frame is 600,000 bytes a thread, over the 524,288" in message
    assert "kernels[deep_stack].source" in message
    message, = (str(p) for p in plans["wide_cluster"].problems)
    assert "__cluster_dims__(16, 1, 1) make clusters of 16 blocks, over the portable limit of 8" in message
    non_portable = next(case.plan for case in _planned_cases(parse(text), "sm_90") if case.label == "wide_cluster")
    assert non_portable.valid


def test_a_block_other_than_the_kernels_required_one_is_refused():
    # .reqntid (a block the kernel was compiled for exactly): read from the image, checked like .maxntid
    from driver_gemm.planning.image_checks import _check_compiled_bounds
    from driver_gemm.cuda.cubin import KernelImage
    plan = next(case.plan for case in _planned_cases(parse(LIMITS), "sm_90") if case.label == "bounded")
    found = []
    image = KernelImage("bounded", (), 0, 32, required_threads=(32, 2, 1))
    _check_compiled_bounds(plan, image, lambda message, field, hint=None: found.append((message, field)))
    assert found == [("block 64 x 1 x 1 is not the kernel's required block 32 x 2 x 1 (.reqntid): the driver "
                      "refuses the launch", "block")]
