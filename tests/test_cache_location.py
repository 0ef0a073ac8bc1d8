"""Where the disk caches are in odd environments: an empty $HOME is as unset (the passwd entry's home), never the
root folder; a relative DRIVER_GEMM_CACHE_DIR is under the folder the command runs in, made absolute and said."""

from __future__ import annotations

import logging
import os
import pwd
from types import SimpleNamespace

import pytest

from driver_gemm.cuda import cache


@pytest.mark.parametrize("home", ["", " "])
def test_an_empty_home_is_as_unset(tmp_path, monkeypatch, home):
    for name in ("XDG_CACHE_HOME", "DRIVER_GEMM_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", home)
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: SimpleNamespace(pw_dir=str(tmp_path / "passwd-home")))
    assert cache.directory() == tmp_path / "passwd-home" / ".cache" / "driver-gemm"


def test_an_empty_home_and_no_passwd_entry_fall_back_to_a_folder_of_this_users_own(tmp_path, monkeypatch):
    for name in ("XDG_CACHE_HOME", "DRIVER_GEMM_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "")
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: (_ for _ in ()).throw(KeyError(uid)))
    monkeypatch.setattr(cache.tempfile, "tempdir", str(tmp_path))
    assert cache.directory() == tmp_path / f"driver-gemm-cache-{os.getuid()}"


def test_a_relative_cache_dir_is_made_absolute_and_said_once(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", "relative-cache")
    monkeypatch.setattr(cache, "_said_relative", set())     # as in a new process
    with caplog.at_level(logging.WARNING, logger="driver_gemm"):
        assert cache.directory() == tmp_path / "relative-cache"
        assert cache.directory() == tmp_path / "relative-cache"
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert len(warnings) == 1
    assert "DRIVER_GEMM_CACHE_DIR is the relative path relative-cache" in warnings[0]
    assert str(tmp_path / "relative-cache") in warnings[0]
