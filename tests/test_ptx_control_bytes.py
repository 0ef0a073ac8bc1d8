"""A PTX file holding a NUL or another control character is refused as not PTX text at its line and offset, as a
source with a NUL is, before any checker reads it (whose message would echo the raw byte to the terminal); one that
begins with a UTF-8 byte-order mark is said to. The NULs a compiler ends a PTX string with are its own."""

from __future__ import annotations

import pytest

from driver_gemm.cuda.prebuilt import load_binary
from driver_gemm.errors import ImageError

from test_prebuilt_compat import ptx, write


@pytest.mark.parametrize("byte, said", [(b"\x00", "a NUL byte"), (b"\x01", "the control character 0x01"),
                                        (b"\x1b", "the control character 0x1B")], ids=["NUL", "SOH", "ESC"])
def test_a_control_byte_inside_the_ptx_is_refused_at_its_line(tmp_path, byte, said):
    data = ptx("sm_90").encode().replace(b"ret;", b"ret;" + byte)
    line = data[:data.index(byte)].count(b"\n") + 1
    with pytest.raises(ImageError) as info:
        load_binary(write(tmp_path, "k.ptx", data), ["tiny"], "sm_90")
    message = str(info.value)
    assert f"k.ptx:{line}: not PTX text: offset {data.index(byte)} holds {said}" in message
    assert not any(character < " " and character != "\n" for character in message)


def test_a_byte_order_mark_is_named(tmp_path):
    with pytest.raises(ImageError, match=r"k.ptx:1: not PTX text: it begins with a UTF-8 byte-order mark"):
        load_binary(write(tmp_path, "k.ptx", b"\xef\xbb\xbf" + ptx("sm_90").encode()), ["tiny"], "sm_90")


def test_the_nuls_that_end_a_ptx_string_are_read_as_its_end(tmp_path):
    cubin = load_binary(write(tmp_path, "k.ptx", ptx("sm_90").encode() + b"\x00\x00"), ["tiny"], "sm_90")
    assert cubin.image_format == "ptx"
