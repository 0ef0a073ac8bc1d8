"""An output on a file system mounted read-only is said to be on one, never "permission denied" with chmod
advice that cannot help there (where the folder's permissions would let the user write, EROFS refuses)."""

from __future__ import annotations

import os

import pytest

from driver_gemm.errors import UsageError
from driver_gemm.output_files import check_output, check_output_folder


def statvfs_flagged(read_only: bool):
    real = os.statvfs

    def statvfs(path):
        fields = list(real(path))
        fields[8] = (fields[8] | os.ST_RDONLY) if read_only else (fields[8] & ~os.ST_RDONLY)   # f_flag
        return os.statvfs_result(fields)
    return statvfs


@pytest.fixture
def unwritable(monkeypatch):
    """`os.access` answering no to any write, as it does on a read-only mount (and to a user without permission)."""
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kwargs: False if mode & os.W_OK else real(path, mode))


@pytest.mark.parametrize("read_only, said, not_said", [
    (True, "the file system is read-only", "permission denied"),
    (False, "permission denied", "read-only"),
], ids=["read-only mount", "no permission"])
@pytest.mark.parametrize("check", [check_output, check_output_folder])
def test_a_folder_on_a_read_only_mount_is_said_to_be_on_one(tmp_path, monkeypatch, unwritable, read_only, said,
                                                             not_said, check):
    monkeypatch.setattr(os, "statvfs", statvfs_flagged(read_only))
    with pytest.raises(UsageError) as info:
        check(tmp_path / "out.json" if check is check_output else tmp_path / "figures", "--out")
    assert f"cannot write in {tmp_path}" in info.value.message
    assert said in info.value.message and not_said not in info.value.message


@pytest.mark.parametrize("read_only", [True, False], ids=["read-only mount", "read-only file"])
def test_a_file_on_a_read_only_mount_gets_no_chmod_advice(tmp_path, monkeypatch, unwritable, read_only):
    existing = tmp_path / "out.json"
    existing.write_text("{}")
    monkeypatch.setattr(os, "statvfs", statvfs_flagged(read_only))
    with pytest.raises(UsageError) as info:
        check_output(existing, "--out")
    assert ("read-only file system" in info.value.message) == read_only
    assert ("chmod" in info.value.message) != read_only
