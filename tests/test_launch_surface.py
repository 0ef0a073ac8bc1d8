"""Launch attributes (clusters, PDL) and TMA tensor maps, planned and packed without a GPU."""

from __future__ import annotations

import struct

import pytest
from cuda.bindings import driver

from driver_gemm.cuda.launch import ArgumentError, PackedArguments
from driver_gemm.cuda.launch_attributes import LaunchAttributes, launch_config
from driver_gemm.cuda.tensormap import TENSOR_MAP_BYTES, TensorMapPlan


def fields(problems):
    return [problem[0] for problem in problems]   # a LaunchProblem or a tensor map's (field, message)


def test_a_cluster_that_fits_has_no_problems():
    attributes = LaunchAttributes(cluster=(2, 1, 1))
    assert attributes.any and attributes.cluster_size == 2
    assert attributes.problems((64, 32, 1), 48 * 1024, 90, 228 * 1024) == []


@pytest.mark.parametrize("cluster, grid, arch, non_portable, needle", [
    ((2, 1, 1), (63, 1, 1), 90, False, "not a multiple of the cluster's 2"),
    ((1, 3, 1), (4, 10, 1), 90, False, "grid y = 10 blocks"),
    ((4, 4, 1), (16, 16, 1), 90, False, "over the portable limit of 8"),
    ((4, 8, 1), (16, 16, 1), 90, True, "over the non-portable limit of 16"),
    ((2, 1, 1), (2, 1, 1), 80, False, "need sm_90 or newer, not sm_80"),
    ((0, 1, 1), (2, 1, 1), 90, False, "at least 1"),
])
def test_impossible_clusters_are_refused_with_the_reason(cluster, grid, arch, non_portable, needle):
    problems = LaunchAttributes(cluster=cluster, non_portable=non_portable).problems(grid, 0, arch)
    assert problems and any(needle in problem.message for problem in problems), problems
    assert set(fields(problems)) == {"cluster"}


def test_sixteen_block_clusters_need_the_non_portable_opt_in():
    grid = (16, 1, 1)
    assert LaunchAttributes(cluster=(16, 1, 1)).problems(grid, 0, 90)
    assert LaunchAttributes(cluster=(16, 1, 1), non_portable=True).problems(grid, 0, 90) == []


def test_options_without_a_cluster_and_unknown_policies_are_refused():
    assert "cluster" in fields(LaunchAttributes(non_portable=True).problems((1, 1, 1), 0, 90))
    problems = LaunchAttributes(cluster=(2, 1, 1), cluster_scheduling="round_robin").problems((2, 1, 1), 0, 90)
    assert "cluster_scheduling" in fields(problems)
    assert "pdl" in fields(LaunchAttributes(programmatic_dependent_launch=True).problems((1, 1, 1), 0, 80))


def test_shared_memory_that_fits_no_sm_cannot_form_a_cluster():
    problems = LaunchAttributes(cluster=(2, 1, 1)).problems((2, 1, 1), 300 * 1024, 90, 228 * 1024)
    assert any("do not fit one SM" in problem.message for problem in problems)


def test_the_launch_config_carries_every_attribute():
    attributes = LaunchAttributes(cluster=(2, 1, 1), cluster_scheduling="spread", programmatic_dependent_launch=True)
    config = launch_config(driver, (8, 4, 1), (128, 1, 1), 1024, 0, attributes)
    assert (config.gridDimX, config.gridDimY, config.blockDimX, config.sharedMemBytes) == (8, 4, 128, 1024)
    assert config.numAttrs == 3
    ids = [item.id for item in config.attrs]
    assert driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION in ids
    assert driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION in ids
    cluster = config.attrs[ids.index(driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)]
    assert (cluster.value.clusterDim.x, cluster.value.clusterDim.y, cluster.value.clusterDim.z) == (2, 1, 1)
    assert not LaunchAttributes().any


def test_a_cooperative_launch_goes_through_cuLaunchKernelEx_with_the_cooperative_attribute():
    attributes = LaunchAttributes(cooperative=True)
    assert attributes.any and attributes.as_dict()["cooperative"] is True
    config = launch_config(driver, (132, 1, 1), (256, 1, 1), 0, 0, attributes)
    assert config.numAttrs == 1
    (item,) = config.attrs
    assert item.id == driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE and item.value.cooperative == 1


# ------------------------------------------------------------------------------------------ tensor maps


def test_a_row_major_matrix_maps_innermost_first():
    plan = TensorMapPlan.for_matrix("fp32", rows=1000, cols=780, leading_dimension=780, box_rows=64, box_cols=32)
    assert plan.extents == (780, 1000) and plan.strides_bytes == (780 * 4,) and plan.box == (32, 64)
    assert plan.problems(address=0x7F0000000000) == [] and plan.box_bytes == 64 * 32 * 4
    batched = TensorMapPlan.for_matrix("bf16", 128, 64, 64, 64, 64, batch=3, batch_stride=128 * 64)
    assert batched.rank == 3 and batched.strides_bytes == (128, 128 * 64 * 2) and batched.box == (64, 64, 1)


@pytest.mark.parametrize("plan, field, needle", [
    (TensorMapPlan.for_matrix("fp32", 1001, 777, 777, 32, 32), "strides", "multiple of 16"),
    (TensorMapPlan.for_matrix("fp32", 64, 512, 512, 32, 300), "box", "must be 1 to 256"),
    (TensorMapPlan.for_matrix("bf16", 64, 512, 512, 32, 4), "box", "multiple of 16"),
    (TensorMapPlan.for_matrix("fp32", 64, 512, 512, 32, 64, swizzle="128B"), "swizzle", "wider than the 128B"),
    (TensorMapPlan.for_matrix("fp32", 64, 512, 512, 32, 32, swizzle="96B"), "swizzle", "one of"),
    (TensorMapPlan.for_matrix("int32", 64, 512, 512, 32, 32, oob_fill="nan"), "oob_fill", "floating-point"),
    (TensorMapPlan.for_matrix("fp32", 64, 512, 512, 32, 32, l2_promotion="512B"), "l2_promotion", "one of"),
    (TensorMapPlan("fp32", (512, 64), (), (32, 32)), "strides", "need 1 strides"),
    (TensorMapPlan("fp99", (512, 64), (2048,), (32, 32)), "type", "unknown element type"),
])
def test_bad_tensor_maps_name_the_field(plan, field, needle):
    problems = plan.problems()
    assert any(f == field and needle in message for f, message in problems), problems


def test_a_misaligned_global_address_is_refused():
    plan = TensorMapPlan.for_matrix("fp32", 64, 512, 512, 32, 32)
    assert fields(plan.problems(address=0x1008)) == ["address"]


def test_a_swizzle_as_wide_as_the_box_row_is_fine():
    assert TensorMapPlan.for_matrix("fp32", 64, 512, 512, 32, 32, swizzle="128B").problems() == []
    assert TensorMapPlan.for_matrix("bf16", 64, 512, 512, 32, 64, swizzle="128B").problems() == []


class RecordingEncoder:
    """The bindings' driver module with cuTensorMapEncodeTiled replaced by one that keeps its arguments."""

    def __init__(self):
        self.calls: list[tuple] = []

    def __getattr__(self, name):
        return getattr(driver, name)

    def cuTensorMapEncodeTiled(self, *arguments):
        self.calls.append(arguments)
        return driver.CUresult.CUDA_SUCCESS, driver.CUtensorMap()


@pytest.mark.parametrize("plan, strides", [
    # The driver reads tensorRank - 1 strides, but the bindings pass an empty list as a null pointer, which it refuses
    # with CUDA_ERROR_INVALID_VALUE: a rank-1 map hands it one stride it never reads, itself a valid one.
    (TensorMapPlan("fp32", (1001,), (), (16,)), [4016]),
    (TensorMapPlan("bf16", (64,), (), (64,)), [128]),
    (TensorMapPlan.for_matrix("fp32", 1000, 780, 780, 64, 32), [3120]),
])
def test_the_encoder_gets_a_stride_list_it_accepts(plan, strides):
    encoder = RecordingEncoder()
    assert len(plan.encode(encoder, 0x10000)) == TENSOR_MAP_BYTES
    (call,) = encoder.calls
    rank, extents, passed = call[1], call[3], call[4]
    assert rank == plan.rank and [int(v) for v in extents] == list(plan.extents)
    assert [int(v) for v in passed] == strides and all(int(v) % 16 == 0 for v in passed)


# ------------------------------------------------------------------------------------------ packing


def test_a_tensor_map_is_packed_as_128_opaque_bytes_at_128_byte_alignment():
    # CUDA 13's <cuda.h> aligns CUtensorMap to 128 bytes (the image's own offsets, where known, are used instead).
    blob = bytes(range(TENSOR_MAP_BYTES))
    packed = PackedArguments(["ptr", "int32", "tensormap", "int32"], [0x1000, 7, blob, 9])
    assert packed.offsets == [0, 8, 128, 256]
    assert packed.value_bytes(2) == blob
    assert struct.unpack("<i", packed.value_bytes(3))[0] == 9


def test_the_image_offsets_override_the_computed_layout():
    blob = bytes(TENSOR_MAP_BYTES)
    packed = PackedArguments(["tensormap", "tensormap", "ptr"], [blob, blob, 0x10], offsets=[0, 128, 256])
    assert packed.offsets == [0, 128, 256] and packed.storage.size >= 264


@pytest.mark.parametrize("value", [b"short", 12345, bytes(129)])
def test_a_tensor_map_argument_must_be_exactly_128_bytes(value):
    with pytest.raises(ArgumentError, match="tensormap needs 128 bytes"):
        PackedArguments(["tensormap"], [value])
