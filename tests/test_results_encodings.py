"""A results file saved in another encoding than UTF-8 (UTF-16 or UTF-32, or UTF-8 with a byte-order mark, as
Windows editors and PowerShell write them) is refused with the encoding named, and a JSON error is said in plain
words, its place given once."""

from __future__ import annotations

import json

import pytest

from driver_gemm.errors import UsageError
from driver_gemm.results import read

from test_malformed_results import _log_lines, good_run


def refusal(path) -> UsageError:
    with pytest.raises(UsageError) as info:
        read.load_results(path)
    assert info.value.where is not None and info.value.where.startswith(str(path))
    return info.value


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
@pytest.mark.parametrize("encoding, named", [("utf-16", "UTF-16"), ("utf-16-le", "UTF-16"), ("utf-16-be", "UTF-16"),
                                             ("utf-32", "UTF-32"), ("utf-32-le", "UTF-32")])
def test_utf16_and_utf32_files_are_named_by_their_encoding(tmp_path, suffix, encoding, named):
    text = json.dumps(good_run()) if suffix == ".json" else "\n".join(_log_lines(good_run())) + "\n"
    path = tmp_path / f"run{suffix}"
    path.write_bytes(text.encode(encoding))
    error = refusal(path)
    assert f"{named} text" in error.message and "a results file is UTF-8" in error.message
    assert "iconv" in error.hint


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_a_utf8_byte_order_mark_is_named_as_one(tmp_path, suffix):
    text = json.dumps(good_run()) if suffix == ".json" else "\n".join(_log_lines(good_run())) + "\n"
    path = tmp_path / f"run{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    error = refusal(path)
    assert "byte-order mark" in error.message and "utf-8-sig" not in error.message


def test_a_json_error_gives_its_place_once(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(good_run())[:-40])   # cut inside a string
    error = refusal(path)
    assert "at at" not in error.message
    assert "Unterminated string starting at line 1, column" in error.message


def test_a_json_error_in_a_case_log_line_gives_its_column(tmp_path):
    lines = _log_lines(good_run())
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join([lines[0], lines[1][:30], *lines[2:]]) + "\n")
    error = refusal(path)
    assert error.where == f"{path}:2"
    assert "Unterminated string starting at column " in error.message and "at at" not in error.message
