import ctypes
import struct

import numpy as np
import pytest

from driver_gemm.cuda.launch import ArgumentError, LaunchConfig, PackedArguments


class FakeBuffer:
    address = 0x7F00_0000_1200


def test_default_signature_bytes_and_addresses():
    packed = PackedArguments(["ptr", "ptr", "ptr", "int32", "int32", "int32"],
                             [0x1000, FakeBuffer(), 0x3000, 1001, 513, 777], list("ABCMNK"))
    assert packed.offsets == [0, 8, 16, 24, 28, 32]
    assert packed.storage[:36].tobytes() == struct.pack("<QQQiii", 0x1000, 0x7F00_0000_1200, 0x3000, 1001, 513, 777)
    base = packed.storage.ctypes.data
    assert packed.pointers.tolist() == [base + o for o in packed.offsets]
    assert packed.address == packed.pointers.ctypes.data
    # What the driver does with kernelParams: dereference each pointer.
    assert ctypes.c_int.from_address(int(packed.pointers[4])).value == 513
    assert ctypes.c_uint64.from_address(int(packed.pointers[1])).value == FakeBuffer.address


def test_scalars_are_typed_from_the_signature_not_from_python():
    packed = PackedArguments(["int32", "float32", "ptr", "float32", "float64", "int64"],
                             [7, 1.5, 0xABC, 0.1, 0.1, -(2**40)])
    # float32 after an int32 needs no padding; ptr aligns to 8; float64 and int64 to 8.
    assert packed.offsets == [0, 4, 8, 16, 24, 32]
    assert packed.value_bytes(1) == struct.pack("<f", 1.5)
    assert packed.value_bytes(3) == np.float32(0.1).tobytes()          # rounded to float32, 4 bytes
    assert packed.value_bytes(4) == np.float64(0.1).tobytes()          # a true double, 8 bytes
    assert packed.value_bytes(5) == struct.pack("<q", -(2**40))
    assert packed.value_bytes(0) == struct.pack("<i", 7)


def test_alpha_beta_order_of_a_foreign_kernel():
    names = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
    types = ["int32", "int32", "int32", "float32", "ptr", "ptr", "float32", "ptr"]
    packed = PackedArguments(types, [4, 5, 6, 2.0, 0x10, 0x20, 0.5, 0x30], names)
    assert packed.offsets == [0, 4, 8, 12, 16, 24, 32, 40]
    assert packed.storage[:48].tobytes() == struct.pack("<iiifQQf4xQ", 4, 5, 6, 2.0, 0x10, 0x20, 0.5, 0x30)


@pytest.mark.parametrize("ctype, value, message", [
    ("int32", 2**31, "does not fit int32"),
    ("uint32", -1, "does not fit uint32"),
    ("int32", 1.5, "needs a whole number"),
    ("int32", True, "needs a whole number"),
    ("float32", "1", "needs a number"),
    ("ptr", -5, "does not fit ptr"),
    ("short", 1, "unknown C type"),
])
def test_values_that_do_not_fit_are_refused(ctype, value, message):
    with pytest.raises(ArgumentError, match=message):
        PackedArguments([ctype], [value], ["x"])


def test_count_mismatch():
    with pytest.raises(ArgumentError, match="2 values for 1 arguments"):
        PackedArguments(["int32"], [1, 2])


def test_launch_config():
    config = LaunchConfig.of([9, 16], [16, 16], 1024)
    assert config.grid == (9, 16, 1) and config.block == (16, 16, 1)
    assert config.threads_per_block == 256 and config.total_blocks == 144
    assert config.as_dict()["shared_bytes"] == 1024
    with pytest.raises(ValueError):
        LaunchConfig.of([1, 1, 1, 1], [1])


def test_names_must_be_one_per_value():
    # zip() stopped at the shortest list: the values past a short list of names were left as zeros
    with pytest.raises(ArgumentError, match="1 names for 3 arguments"):
        PackedArguments(["int32", "int32", "float32"], [7, 9, 2.5], names=["M"])


@pytest.mark.parametrize("types, offsets, message", [
    (["int32", "int32"], [-4, 0], "argument #0: offset -4 puts its 4 bytes outside the 32,764 bytes"),
    (["int32"], [2**40], "argument #0: offset 1099511627776 puts its 4 bytes outside"),
    (["int32"], [32_762], "offset 32762 puts its 4 bytes outside"),
    (["int64", "int32"], [0, 4], r"argument #1 at offset 4 overlaps argument #0 \(bytes 0 to 7\)"),
    (["int32", "int64"], [0, 4], "argument #1: offset 4 is not a multiple of 8, the alignment of int64"),
    (["int32"], [1.0], "argument #0: offset 1.0 is not a whole number of bytes"),
])
def test_offsets_that_would_point_outside_the_arguments_or_into_another_are_refused(types, offsets, message):
    with pytest.raises(ArgumentError, match=message):
        PackedArguments(types, [1] * len(types), offsets=offsets)


def test_offsets_of_an_over_aligned_image_and_of_opaque_objects_are_taken():
    packed = PackedArguments(["int32", "int64", "tensormap"], [1, 2, bytes(128)], offsets=[0, 16, 64])
    assert packed.offsets == [0, 16, 64] and packed.value_bytes(1) == struct.pack("<q", 2)


def test_arguments_beyond_what_a_launch_may_pass_are_refused():
    with pytest.raises(ArgumentError, match="the arguments take 40,000 bytes, more than the 32,764"):
        PackedArguments(["int64"] * 5000, [1] * 5000)
