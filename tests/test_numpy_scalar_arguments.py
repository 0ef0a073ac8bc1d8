"""NumPy scalars that are no numbers (a duration, a date, text, bytes, a record) given as kernel arguments or launch
extents: refused naming the argument and its C type, never a bare TypeError from int() or float()."""

import numpy as np
import pytest

from driver_gemm.cuda.launch import LaunchConfig, PackedArguments
from driver_gemm.errors import ArgumentError, WrongArgumentType

NOT_NUMBERS = [np.timedelta64(5, "s"), np.timedelta64(5, "us"), np.timedelta64("NaT", "s"), np.datetime64("2020-01-01"),
               np.str_("5"), np.bytes_(b"5"), np.void(b"12345678")]


@pytest.mark.parametrize("ctype", ["int32", "uint8", "int64", "bool", "ptr", "float32", "float16", "bfloat16",
                                   "float64"])
@pytest.mark.parametrize("value", NOT_NUMBERS, ids=repr)
def test_a_numpy_scalar_that_is_no_number_is_refused_naming_the_argument(ctype, value):
    with pytest.raises(ArgumentError) as refused:
        PackedArguments([ctype], [value], ["alpha"])
    message = str(refused.value)
    assert "argument alpha" in message
    if not isinstance(value, np.timedelta64) and ctype == "ptr":
        return   # read as an array a pointer could come from: refused as host memory, with the argument named
    assert ctype in message


def test_numpy_numbers_are_still_taken():
    packed = PackedArguments(["int32", "float32", "bool"], [np.int64(7), np.float16(0.5), np.True_], ["n", "a", "f"])
    assert packed.value_bytes(0) == (7).to_bytes(4, "little") and packed.value_bytes(2) == b"\x01"


@pytest.mark.parametrize("call", [lambda: LaunchConfig.of((np.timedelta64(2, "s"),), (32,)),
                                  lambda: LaunchConfig.of((2,), (np.timedelta64(32),)),
                                  lambda: LaunchConfig.of((2,), (32,), np.timedelta64(2, "s"))],
                         ids=["grid", "block", "shared_bytes"])
def test_a_duration_as_a_launch_extent_is_refused_naming_it(call):
    with pytest.raises(WrongArgumentType, match="LaunchConfig.of: (grid x|block x|shared_bytes) is a whole number"):
        call()


def test_a_duration_as_a_parameter_offset_is_refused_naming_the_argument():
    with pytest.raises(ArgumentError, match="argument n: offset .* is not a whole number of bytes"):
        PackedArguments(["int32"], [1], ["n"], offsets=[np.timedelta64(0, "s")])
