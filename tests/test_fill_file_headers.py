""".npy fill files whose header and data disagree, or which are another format under a .npy name: each refused
in words, at the fill's field, in a message of bounded length."""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.specfile.model import Shape

from test_buffer_fill_files import buffer_plan, spec_with

FIELD = "kernels[k].signature[6].fill.file"


def npy_with_header(header: bytes, data: bytes) -> bytes:
    """A version 1.0 .npy file of `header` (padded as numpy.save pads it) and `data`."""
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + data


def problem_of(tmp_path, data: bytes) -> str:
    spec = spec_with(tmp_path, "{file: 'tables/order-{M}x{N}.npy'}")
    (tmp_path / "tables" / "order-128x192.npy").write_bytes(data)
    plan, problems = buffer_plan(spec, Shape(128, 192, 64))
    assert plan is None and len(problems) == 1 and problems[0].field == FIELD
    return str(problems[0])


def test_bytes_after_the_declared_data_are_refused(tmp_path):
    path = tmp_path / "whole.npy"
    np.save(path, np.arange(6, dtype=np.int32))
    message = problem_of(tmp_path, path.read_bytes() + bytes(8))
    assert "holds 8 bytes after the data its header declares (6 elements of int32, 24 bytes)" in message


def test_a_header_of_a_narrower_type_than_its_data_is_refused(tmp_path):
    data = np.arange(6, dtype=np.int64).tobytes()
    message = problem_of(tmp_path, npy_with_header(b"{'descr': '<i4', 'fortran_order': False, 'shape': (6,), }", data))
    assert "holds 24 bytes after the data its header declares" in message


def test_a_negative_dimension_is_said_as_one(tmp_path):
    message = problem_of(tmp_path, npy_with_header(b"{'descr': '<i4', 'fortran_order': False, 'shape': (-6,), }",
                                                   bytes(24)))
    assert "declares the shape (-6,) in its header, with a negative dimension" in message
    assert "-6 elements" not in message


def test_an_npz_archive_named_npy_is_said_to_be_one(tmp_path):
    np.savez(tmp_path / "arrays.npz", order=np.arange(6, dtype=np.int32))
    message = problem_of(tmp_path, (tmp_path / "arrays.npz").read_bytes())
    assert "is a zip archive (an .npz of numpy.savez, named .npy)" in message
    assert "a text or other file" not in message


@pytest.mark.parametrize("depth", [3000, 30_000])
def test_a_deeply_nested_header_gives_a_message_of_bounded_length(tmp_path, depth):
    header = b"{'descr': '<i4', 'fortran_order': False, 'shape': " + b"(" * depth + b")" * depth + b", }"
    message = problem_of(tmp_path, npy_with_header(header, bytes(24)))
    assert "is no NumPy array saved with numpy.save" in message
    assert len(message) < 1000
