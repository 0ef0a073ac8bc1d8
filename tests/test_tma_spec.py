"""Clusters, PDL and TMA tensor maps written in a spec: read at file:line, planned per shape, packed. No GPU."""

from __future__ import annotations

import struct
import textwrap

import pytest

from driver_gemm.cuda import launch_attributes, tensormap
from driver_gemm.cuda.launch import PackedArguments
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.planning.build import check_offline
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import Shape, load_spec, parse_spec
from driver_gemm.specfile import launch_fields as spec_kernels

from conftest import SPECS

SM90 = arch_limits("sm_90")
SM80 = arch_limits("sm_80")

V11 = """\
shapes:
  - [1024, 512, 1024]
kernels:
  - name: v11
    source: ../kernels/11_tf32_tma_ws.cu
    function: sgemm_tf32_tma_ws
    precision: tf32
    arch: sm_90a
    params: {BM: 256, CWG: 2, STAGES: 4, GROUP: 8}
    block: [128 * (CWG + 1)]
    grid: [ceil(N / (64 * CWG)), ceil(M / BM)]
    shared_bytes: STAGES * (BM + 64 * CWG) * 128 + 16 * STAGES + 1024
    signature:
      - {name: map_a, type: tensormap, tensor: A, box: [BM, 32], swizzle: 128B}
      - {name: map_b, type: tensormap, tensor: B, box: [32, 32], swizzle: 128B}
      - C
      - M
      - N
      - K
"""

CLUSTER = """\
shapes:
  - [64, 64, 64]
kernels:
  - name: pair
    source: ../kernels/cluster_split_k.cu
    function: cluster_split_k
    block: [16, 16]
    grid: [2 * ceil(N / 16), ceil(M / 16)]
    cluster: [2, 1, 1]
"""


def parse(text: str):
    return parse_spec(textwrap.dedent(text), SPECS / "tma-test.yaml")


def spec_error(text: str) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse(text)
    return caught.value


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


# ------------------------------------------------------------------------------------------ reading


def test_tensor_map_arguments_are_read_with_their_defaults():
    kernel = parse(V11).kernels[0]
    (index_a, map_a), (index_b, map_b) = kernel.tensor_maps()
    assert (index_a, index_b) == (0, 1) and map_a.ctype == map_b.ctype == "tensormap"
    assert map_a.tensor_map.tensor == "A" and [e.source for e in map_a.tensor_map.box] == ["BM", "32"]
    assert map_a.tensor_map.swizzle == "128B" and map_a.tensor_map.oob_fill == "zero"
    assert map_a.tensor_map.element is None and map_a.tensor_map.l2_promotion == "none"
    assert kernel.launch_attributes is None


def test_cluster_fields_are_read():
    text = CLUSTER.replace("cluster: [2, 1, 1]", "cluster: [2]\n    cluster_scheduling: spread\n    pdl: true")
    attributes = parse(text).kernels[0].launch_attributes
    assert [e.source for e in attributes.cluster] == ["2", "1", "1"]
    assert attributes.scheduling == "spread" and attributes.pdl and not attributes.non_portable
    assert not attributes.cooperative
    cooperative = parse(CLUSTER.replace("cluster: [2, 1, 1]", "cooperative: true")).kernels[0].launch_attributes
    assert cooperative.cooperative and cooperative.cluster is None


@pytest.mark.parametrize("old, new, needle, field", [
    ("swizzle: 128B}\n      - {name: map_b", "swizzle: 96B}\n      - {name: map_b", "swizzle is one of",
     "signature[0].swizzle"),
    ("tensor: A, box: [BM, 32]", "tensor: D, box: [BM, 32]", "A, B or C", "signature[0].tensor"),
    ("tensor: A, box: [BM, 32]", "tensor: A, box: [BM]", "box is [rows, cols]", "signature[0].box"),
    ("tensor: A, box: [BM, 32]", "tensor: A, box: [BX, 32]", "unknown name BX", "signature[0].box[0]"),
    ("swizzle: 128B}\n      - {name: map_b", "swizzle: 128B, oob_fill: inf}\n      - {name: map_b",
     "oob_fill is one of", "signature[0].oob_fill"),
    ("swizzle: 128B}\n      - {name: map_b", "swizzle: 128B, element: fp128}\n      - {name: map_b",
     "element is one of", "signature[0].element"),
    ("swizzle: 128B}\n      - {name: map_b", "swizzle: 128B, boxes: 2}\n      - {name: map_b",
     "unknown field 'boxes'", "signature[0].boxes"),
    ("{name: map_b, type: tensormap", "{name: map_a, type: tensormap", "map_a more than once", "signature"),
    ("{name: map_b, type: tensormap, tensor: B", "{name: map_b, type: tensormap, tensor: A", "must take B exactly once",
     "signature"),
])
def test_bad_tensor_map_entries_name_file_line_and_field(old, new, needle, field):
    assert old in V11
    text = V11.replace(old, new)
    error = spec_error(text)
    assert needle in str(error) and error.field == f"kernels[v11].{field}", str(error)
    line = line_of(text, new.split("\n")[0].strip()[:30]) if field != "signature" else line_of(text, "signature:")
    assert error.where.endswith(f"tma-test.yaml:{line}"), (error.where, line)


@pytest.mark.parametrize("new, needle, field", [
    ("cluster: [2, 1, 1, 1]", "1 to 3 extents", "cluster"),
    ("cluster: [W, 1, 1]", "unknown name W", "cluster"),
    ("cluster: 2", "1 to 3 extents", "cluster"),
    ("cluster: [2, 1, 1]\n    cluster_scheduling: round_robin", "cluster_scheduling is one of", "cluster_scheduling"),
    ("cluster: [2, 1, 1]\n    pdl: yes please", "pdl is true or false", "pdl"),
    ("cluster: [2, 1, 1]\n    cooperative: 1", "cooperative is true or false", "cooperative"),
    ("cluster_non_portable: true", "cluster_non_portable without a cluster", "cluster_non_portable"),
    ("clusters: [2, 1, 1]", "did you mean 'cluster'", "clusters"),
])
def test_bad_cluster_fields_name_file_line_and_field(new, needle, field):
    text = CLUSTER.replace("cluster: [2, 1, 1]", new)
    error = spec_error(text)
    assert needle in str(error) + str(error.hint) and error.field.endswith(f"].{field}"), str(error)
    assert error.where.endswith(f":{line_of(text, field + ':')}")


def test_the_spec_vocabulary_matches_the_driver_tables():
    assert spec_kernels.TENSOR_MAP_ELEMENTS == tuple(tensormap.ELEMENT_TYPES)
    assert spec_kernels.TENSOR_MAP_SWIZZLES == tuple(tensormap.SWIZZLE_BYTES)
    assert spec_kernels.TENSOR_MAP_L2_PROMOTIONS == tensormap.L2_PROMOTIONS
    assert spec_kernels.TENSOR_MAP_OOB_FILLS == tensormap.OOB_FILLS
    assert set(spec_kernels.CLUSTER_SCHEDULING) == set(launch_attributes.SCHEDULING_POLICIES)


# ------------------------------------------------------------------------------------------ planning


def test_a_tma_legal_shape_plans_both_maps_from_the_operands():
    kernel = parse(V11).kernels[0]
    plan = plan_case(kernel, Shape(1000, 516, 780), SM90)
    assert plan.valid, plan.problems
    map_a, map_b = plan.tensor_maps["map_a"], plan.tensor_maps["map_b"]
    assert map_a.extents == (780, 1000) and map_a.strides_bytes == (780 * 4,) and map_a.box == (32, 256)
    assert map_b.extents == (516, 780) and map_b.strides_bytes == (516 * 4,) and map_b.box == (32, 32)
    assert map_a.element_type == "fp32" and map_a.swizzle == "128B"
    assert plan.argument_values["map_a"] == "map_a" and plan.argument_values["K"] == 780
    assert plan.as_dict()["tensor_maps"]["map_b"]["box_bytes"] == 32 * 32 * 4


def test_rows_that_are_not_16_byte_multiples_are_refused_at_the_map():
    text = V11
    kernel = parse(text).kernels[0]
    plan = plan_case(kernel, Shape(1001, 513, 777), SM90)
    messages = [str(p) for p in plan.problems]
    assert len(messages) == 2, messages
    assert "map_a: dimension 1 stride 3108 bytes must be a positive multiple of 16" in messages[0]
    assert "map_b: dimension 1 stride 2052 bytes" in messages[1]
    assert plan.problems[0].field == "kernels[v11].signature[0].strides"
    assert plan.problems[0].where.endswith(f":{line_of(text, 'name: map_a')}")
    assert plan.problems[1].where.endswith(f":{line_of(text, 'name: map_b')}")


@pytest.mark.parametrize("old, new, field, needle", [
    ("box: [BM, 32], swizzle: 128B", "box: [BM, 64], swizzle: 128B", "signature[0].swizzle",
     "wider than the 128B swizzle span"),
    ("box: [BM, 32], swizzle: 128B", "box: [BM + 256, 32], swizzle: 128B", "signature[0].box", "must be 1 to 256"),
    ("box: [BM, 32], swizzle: 128B", "box: [BM, 3], swizzle: 128B", "signature[0].box", "multiple of 16"),
    ("tensor: B, box: [32, 32], swizzle: 128B", "tensor: B, box: [32, 32], swizzle: 128B, element: bf16",
     "signature[1].element", "map_b: element bf16 is 2 bytes, but B is stored as fp32"),
    ("tensor: B, box: [32, 32], swizzle: 128B", "tensor: B, box: [32, 32], swizzle: 128B, element: int32, "
     "oob_fill: nan", "signature[1].oob_fill", "floating-point"),
])
def test_bad_boxes_and_swizzles_are_refused_per_shape(old, new, field, needle):
    assert old in V11
    kernel = parse(V11.replace(old, new)).kernels[0]
    plan = plan_case(kernel, Shape(1024, 512, 1024), SM90)
    assert any(p.field == f"kernels[v11].{field}" and needle in str(p) for p in plan.problems), \
        [str(p) for p in plan.problems]


def test_a_cluster_plans_with_a_note_and_checks_the_grid():
    kernel = parse(CLUSTER).kernels[0]
    plan = plan_case(kernel, Shape(64, 64, 64), SM90)
    assert plan.valid and plan.attributes.cluster == (2, 1, 1)
    assert any("cluster 2x1x1 (2 blocks, 16 clusters)" in note for note in plan.notes), plan.notes
    assert plan.as_dict()["attributes"]["cluster"] == [2, 1, 1]
    odd_grid = parse(CLUSTER.replace("grid: [2 * ceil(N / 16), ceil(M / 16)]", "grid: [ceil(N / 16) + 1, 4]"))
    plan = plan_case(odd_grid.kernels[0], Shape(64, 64, 64), SM90)
    assert [p.field for p in plan.problems] == ["kernels[pair].cluster"]
    assert "grid x = 5 blocks is not a multiple of the cluster's 2" in str(plan.problems[0])
    assert plan.problems[0].where.endswith(f":{line_of(CLUSTER, 'cluster:')}")


def test_clusters_need_hopper_and_big_ones_the_non_portable_opt_in():
    kernel = parse(CLUSTER).kernels[0]
    assert any("need sm_90 or newer" in str(p) for p in plan_case(kernel, Shape(64, 64, 64), SM80).problems)
    big = CLUSTER.replace("cluster: [2, 1, 1]", "cluster: [16, 1, 1]")
    plan = plan_case(parse(big).kernels[0], Shape(64, 512, 64), SM90)
    assert any("over the portable limit of 8" in str(p) for p in plan.problems)
    opted_in = big.replace("cluster: [16, 1, 1]", "cluster: [16, 1, 1]\n    cluster_non_portable: true")
    assert plan_case(parse(opted_in).kernels[0], Shape(64, 512, 64), SM90).valid


def test_the_shipped_tma_spec_refuses_only_the_tma_kernels_at_1001x513x777():
    spec = load_spec(SPECS / "tma.yaml")
    assert check_offline(spec) == []
    refused = check_offline(spec.select(shapes=["1001x513x777"]))
    assert [plan.kernel.name for plan in refused] == ["v11"]
    assert "stride 3108 bytes" in str(refused[0].problems[0])


# ------------------------------------------------------------------------------------------ packing


def test_a_planned_case_packs_its_maps_where_the_kernel_reads_them():
    kernel = parse(V11).kernels[0]
    plan = plan_case(kernel, Shape(1024, 512, 1024), SM90)
    encoded = {"map_a": bytes([1]) * 128, "map_b": bytes([2]) * 128}
    values = [encoded[a.name] if a.tensor_map else 0x7000 if a.ctype == "ptr" else plan.argument_values[a.name]
              for a in kernel.signature]
    packed = PackedArguments([a.ctype for a in kernel.signature], values, [a.name for a in kernel.signature])
    assert packed.offsets == [0, 128, 256, 264, 268, 272]
    assert packed.value_bytes(0) == encoded["map_a"] and packed.value_bytes(1) == encoded["map_b"]
    assert struct.unpack("<Q", packed.value_bytes(2))[0] == 0x7000
    assert [struct.unpack("<i", packed.value_bytes(i))[0] for i in (3, 4, 5)] == [1024, 512, 1024]


def test_bf16_maps_need_bf16_operands():
    # v12's maps read bf16: with its types: the operands are stored in bf16 and it plans; without, they
    # are float32 and every map is refused.
    spec = load_spec(SPECS / "tma-bf16.yaml")
    assert [k.name for k in spec.kernels] == ["v12", "v12-bf16-out", "v12p", "v12p-bf16-out", "v12pp",
                                              "v12pp-bf16-out"]
    assert check_offline(spec.select(shapes=["1024x512x1024"])) == []
    text = (SPECS / "tma-bf16.yaml").read_text()
    without_types = "\n".join(line for line in text.splitlines() if not line.strip().startswith("types:"))
    refused = check_offline(parse_spec(without_types, SPECS / "tma-bf16.yaml").select(shapes=["1024x512x1024"]))
    assert len(refused) == 6
    assert all("map_a: element bf16 is 2 bytes, but A is stored as fp32" in str(p.problems[0]) for p in refused)


def test_persistent_v12_takes_one_block_per_sm_or_per_tile():
    # v12p's 128 x 256 tiles and v12pp's 64 x 256: at most sm_count blocks, never more than the tiles.
    spec = load_spec(SPECS / "tma-bf16.yaml")
    grids = {(k.name, s.label): plan_case(k, s, SM90).config.grid for k in spec.kernels for s in spec.shapes
             if k.name in ("v12p", "v12pp")}
    assert grids[("v12p", "1024x512x1024")] == (8 * 2, 1, 1)
    assert grids[("v12p", "1001x520x776")] == (8 * 3, 1, 1)
    assert grids[("v12pp", "1001x520x776")] == (16 * 3, 1, 1)
    assert grids[("v12p", "4096x4096x4096")] == grids[("v12pp", "8192x8192x8192")] == (132, 1, 1)
    boxes = {k.name: {name: m.box for name, m in plan_case(k, Shape(4096, 4096, 4096), SM90).tensor_maps.items()}
             for k in spec.kernels if k.name in ("v12p", "v12pp")}
    assert boxes == {"v12p": {"map_a": (64, 128), "map_b": (64, 64)},       # innermost (K) first
                     "v12pp": {"map_a": (64, 64), "map_b": (64, 64)}}


def test_the_quick_bf16_spec_runs_the_same_kernels_as_tma_bf16():
    quick, full = load_spec(SPECS / "tma-bf16-dev.yaml"), load_spec(SPECS / "tma-bf16.yaml")
    assert [(k.label, k.instance) for k in quick.kernels] == [(k.label, k.instance) for k in full.kernels]
    assert quick.measure.case_timeout_s < full.measure.case_timeout_s
