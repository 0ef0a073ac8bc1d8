"""Checks shared by the malformed-spec tests: a bad spec is refused by the library and by the CLI alike.

`refused` writes the spec (text or bytes) into a small project, expects
`load_spec` to raise `SpecError` naming the file, then runs ``driver-gemm plan``
on it from an empty working folder and expects exit code 2, one message naming
the file (and the field, when given), no traceback and nothing written.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from driver_gemm.cli import EXIT_USAGE, main
from driver_gemm.errors import SpecError
from driver_gemm.specfile import load_spec

from test_spec import MINIMAL, write

SECONDS_ALLOWED = 5.0    # of CPU time: a refusal comes from counting, never from building what it counts


def write_bytes(tmp_path: Path, data: bytes, name: str = "spec.yaml") -> Path:
    path = write(tmp_path, "", name)
    path.write_bytes(data)
    return path


def refused(tmp_path: Path, content: str | bytes, monkeypatch, capsys, *, field: str | None = None,
            message: str | None = None, **load_options) -> SpecError:
    """Assert that `content` is refused with a `SpecError` by `load_spec` and with exit 2 by the CLI."""
    path = write_bytes(tmp_path, content) if isinstance(content, bytes) else write(tmp_path, content)
    started = time.process_time()     # CPU time, which a loaded machine does not stretch
    with pytest.raises(SpecError) as info:
        load_spec(path, **load_options)
    assert time.process_time() - started < SECONDS_ALLOWED
    error = info.value
    assert error.where and error.where.startswith(str(path)), error.where
    if field is not None:
        assert error.field == field, (error.field, str(error))
    if message is not None:
        assert message in error.message, error.message

    workdir = tmp_path / "cwd"
    workdir.mkdir(exist_ok=True)
    monkeypatch.chdir(workdir)
    capsys.readouterr()
    assert main(["plan", str(path), "--arch", "sm_90"]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"driver-gemm: {path}"), err
    if field is not None:
        assert f": {field}: " in lines[0], lines[0]
    assert os.listdir(workdir) == [], "a refused spec must write nothing"
    return error


__all__ = ["MINIMAL", "refused", "write", "write_bytes"]
