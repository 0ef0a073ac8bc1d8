"""Tensor maps given by their dims over A, B or C held to describing the matrix: a batch dimension stepping other
than the operand's batch stride, two coordinates naming one element, an operand no map reaches to its end; and a
cluster note on a grid the cluster does not divide. No GPU."""

from __future__ import annotations

import textwrap

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.cuda.tensormap import TensorMapPlan
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import Shape, parse_spec

from conftest import SPECS

SM90 = arch_limits("sm_90")

# A bf16 kernel taking A and B through maps; MAP_A is replaced per test.
MAPS = """\
shapes:
  - [1024, 512, 1024]
kernels:
  - name: maps
    source: ../kernels/outside/bf16_maps.cu
    function: gemm_bf16_maps_by_pointer
    arch: sm_90a
    types: {a: bf16, b: bf16, c: fp32, accumulate: fp32}
    params: {STAGES: 4, GROUP: 8, B_PANELS: 1}
    block: [384]
    grid: ["min(sm_count, ceil(N / 256) * ceil(M / 128))"]
    shared_bytes: STAGES * (128 + 256) * 128 + 16 * STAGES + 16 + 1024
    BATCH
    signature:
      - MAP_A
      - {name: map_b, type: tensormap, tensor: B, dims: [64, K, N // 64], strides: [N * 2, 128], box: [64, 64, 4],
         swizzle: 128B, pass: pointer}
      - C
      - M
      - N
      - K
"""


def planned(map_a: str, shape=Shape(1024, 512, 1024), batch: str = ""):
    text = MAPS.replace("MAP_A", "{name: map_a, type: tensormap, tensor: A, " + map_a + ", pass: pointer}")
    text = text.replace("    BATCH\n", f"    {batch}\n" if batch else "")
    kernel = parse_spec(textwrap.dedent(text), SPECS / "maps-test.yaml").kernels[0]
    return plan_case(kernel, shape, SM90)


def messages(plan) -> list[str]:
    return [str(problem) for problem in plan.problems]


BATCHED = "batch: {count: 3}"


# ------------------------------------------------------------------------------------ a batch dimension


@pytest.mark.parametrize("stride, needle", [
    ("M * K", "but steps 1048576 bytes (strides[1]), A's batch stride in elements (strides are bytes)"),
    ("strideB * 2", "but steps 1048576 bytes (strides[1])"),       # B's batch stride: 512 x 1024 x 2 bytes
])
def test_a_batch_dimension_stepping_other_than_the_operands_batch_stride_is_refused(stride, needle):
    plan = planned(f"dims: [K, M, batch], strides: [K * 2, {stride}], box: [64, 128, 1]", batch=BATCHED)
    refused = [problem for problem in plan.problems if "map_a" in str(problem)]
    assert len(refused) == 1, messages(plan)
    message = str(refused[0])
    assert "dimension 2 has A's 3 matrices as its extent (batch)" in message and needle in message, message
    assert "A's matrices are 2097152 bytes apart (strideA = 1048576 elements of 2 bytes)" in message, message
    assert refused[0].field == "kernels[maps].signature[0].strides" and refused[0].where.endswith("maps-test.yaml:15")
    assert "strides[1] is strideA * 2" in refused[0].hint and "dims [1024, 1024, 3], strides [2048, 2097152]" \
        in refused[0].hint, refused[0].hint


def test_a_batch_dimension_with_the_operands_batch_stride_plans_without_a_note():
    plan = planned("dims: [K, M, batch], strides: [K * 2, strideA * 2], box: [64, 128, 1]", batch=BATCHED)
    assert not any("map_a" in message for message in messages(plan)), messages(plan)
    assert not any("map_a: reaches the first" in note for note in plan.notes), plan.notes
    # B's panel map has no batch dimension: it reaches B's first matrix only, which is noted.
    assert any(note.startswith("tensor map map_b: reaches the first 1048576 bytes of B") and
               "B (3 matrices of 1024 x 512, bf16) ends at byte 3145728" in note and "from B[1][0][0] on" in note
               for note in plan.notes), plan.notes


def test_a_batch_dimension_over_an_operand_the_batch_shares_is_refused():
    plan = planned("dims: [K, M, batch], strides: [K * 2, M * K * 2], box: [64, 128, 1]",
                   batch="batch: {count: 3, stride: {a: 0}}")
    refused = [problem for problem in plan.problems if "the batch shares one A (its batch stride is 0)" in str(problem)]
    assert len(refused) == 1 and refused[0].field == "kernels[maps].signature[0].dims", messages(plan)
    assert "dims [1024, 1024], strides [2048]" in refused[0].hint, refused[0].hint
    # The shared operand described as the one matrix it is plans, with nothing noted.
    plan = planned("dims: [K, M], strides: [K * 2], box: [64, 128]", batch="batch: {count: 3, stride: {a: 0}}")
    assert not any("map_a" in message for message in messages(plan)), messages(plan)
    assert not any("map_a: reaches the first" in note for note in plan.notes), plan.notes


# ------------------------------------------------------------------------------ elements named twice


@pytest.mark.parametrize("map_a, shape, figures", [
    # dims written row-first: a 2048-element "row" over a 1024-byte pitch
    ("dims: [M, K], strides: [K * 2]", Shape(2048, 512, 512), "(a row of 2048 x 2 = 4096 bytes is longer than the "
                                                              "1024 bytes between rows)"),
    # the row stride in elements
    ("dims: [K, M], strides: [K]", Shape(2048, 512, 512), "one step along dimension 1 (512 bytes) is 256 steps "
                                                          "along dimension 0, fewer than its 512"),
])
def test_a_map_whose_rows_overlap_themselves_is_refused_with_the_operand_as_stored(map_a, shape, figures):
    plan = planned(f"{map_a}, box: [64, 128]", shape)
    refused = [problem for problem in plan.problems if "map_a" in str(problem)]
    assert len(refused) == 1, messages(plan)
    assert "map_a: dimensions 0 and 1 name the same elements of A" in str(refused[0]) and figures in str(refused[0])
    assert refused[0].field == "kernels[maps].signature[0].strides"
    assert "A as stored is dims [512, 2048], strides [1024]" in refused[0].hint, refused[0].hint


def test_panels_overlapping_their_rows_without_meeting_plan_and_meeting_ones_are_refused():
    panels = TensorMapPlan("bf16", (64, 512, 8), (1024, 128), (64, 64, 4))
    assert panels.aliased_dimensions() == []
    # fp32 panels of 64 elements are 256 bytes: a panel stride of 128 lands inside the panel before.
    assert TensorMapPlan("fp32", (64, 512, 8), (2048, 128), (64, 64, 4)).aliased_dimensions() == [(2, 0, 32)]
    plan = planned("dims: [64, M, K // 64], strides: [K * 2, 64], box: [64, 64, 4]")
    refused = [problem for problem in plan.problems if "map_a" in str(problem)]
    assert len(refused) == 1 and "dimensions 0 and 2 name the same elements of A: one step along dimension 2 " \
        "(64 bytes) is 32 steps along dimension 0" in str(refused[0]), messages(plan)
    assert not any("map_b" in message for message in messages(plan)), messages(plan)


# ------------------------------------------------------------------------------ an operand left unread


def test_an_operand_no_map_reaches_to_its_end_is_noted_with_what_is_left():
    plan = planned("dims: [K, N], strides: [K * 2], box: [64, 128]")       # B's dims over A: N < M
    assert plan.valid, messages(plan)
    [note] = [note for note in plan.notes if "reaches the first" in note]
    assert note.startswith("tensor map map_a: reaches the first 1048576 bytes of A, but A (1024 x 1024, bf16) ends "
                           "at byte 2097152: its last 1048576 bytes, from A[512][0] on, are reached by no map"), note
    assert "A as stored is dims [1024, 1024], strides [2048]" in note
    # Padded matrices of a batch, stepped by their own stride, are reached to the last one's end.
    plan = planned("dims: [K, M, batch], strides: [K * 2, strideA * 2], box: [64, 128, 1]",
                   batch="batch: {count: 3, stride: {a: M * K + 64}}")
    assert plan.valid and not any("map_a: reaches the first" in note for note in plan.notes), plan.notes


def test_two_maps_over_one_operand_count_together():
    part = "{name: map_a, type: tensormap, tensor: A, dims: [K, N], strides: [K * 2], box: [64, 128], pass: pointer}"
    whole = "{name: map_a_all, type: tensormap, tensor: A, box: [128, 64], pass: pointer}"
    for maps, noted in ((part, True), (f"{part}\n      - {whole}", False)):
        text = MAPS.replace("MAP_A", maps).replace("    BATCH\n", "")
        kernel = parse_spec(textwrap.dedent(text), SPECS / "maps-test.yaml").kernels[0]
        plan = plan_case(kernel, Shape(1024, 512, 1024), SM90)
        assert any("map_a: reaches the first" in note for note in plan.notes) == noted, plan.notes


def test_panels_that_leave_the_last_columns_of_b_are_noted():
    plan = planned("box: [128, 64]", Shape(1024, 520, 1024))                # N // 64 panels: 512 of 520 columns
    [note] = [note for note in plan.notes if "reaches the first" in note]
    assert note.startswith("tensor map map_b: reaches the first") and "from B[1023][512] on" in note, note
    plan = planned("box: [128, 64]", Shape(1024, 512, 1024))
    assert not any("reaches the first" in note for note in plan.notes), plan.notes


# ------------------------------------------------------------------------------------ clusters

CLUSTER = """\
shapes:
  - [64, 64, 64]
kernels:
  - name: pair
    source: ../kernels/cluster_split_k.cu
    function: cluster_split_k
    block: [16, 16]
    grid: GRID
    cluster: CLUSTER
"""


@pytest.mark.parametrize("grid, cluster, words", [
    ("[ceil(N / 16) + 1, 4]", "[2, 1, 1]", "cluster 2x1x1 (2 blocks, the grid of 5x4x1 blocks is no whole number "
                                           "of clusters)"),
    # 2 blocks, a cluster of 2: a count of 1 would pass for right, but y does not divide
    ("[2, 1]", "[1, 2, 1]", "cluster 1x2x1 (2 blocks, the grid of 2x1x1 blocks is no whole number of clusters)"),
    ("[4, 2]", "[2, 2, 1]", "cluster 2x2x1 (4 blocks, 2 clusters)"),
])
def test_the_cluster_note_counts_clusters_only_where_the_cluster_divides_the_grid(grid, cluster, words):
    kernel = parse_spec(CLUSTER.replace("GRID", grid).replace("CLUSTER", cluster), SPECS / "cluster-test.yaml")
    plan = plan_case(kernel.kernels[0], Shape(64, 64, 64), SM90)
    [note] = [note for note in plan.notes if note.startswith("launched with cuLaunchKernelEx")]
    assert words in note, note
