"""Spec files that are not YAML text, or not a mapping: refused at the byte or line that is wrong."""

import pytest

from malformed import MINIMAL, refused


@pytest.mark.parametrize("data, offset", [
    (b"\xff\xfe\x00s\x00h", 0),                                   # UTF-16 with its byte-order mark
    (MINIMAL.encode() + b"# caf\xe9\n", len(MINIMAL) + 5),        # Latin-1 in a comment
    (b"name: \xc3\n" + MINIMAL.encode(), 6),                       # a truncated UTF-8 sequence
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 0),                   # a picture
    (bytes(range(256)) * 4, 128),                                  # binary noise (NUL first, but not UTF-8)
])
def test_bytes_that_are_not_utf8(tmp_path, monkeypatch, capsys, data, offset):
    error = refused(tmp_path, data, monkeypatch, capsys)
    assert "not UTF-8" in error.message and f"offset {offset}" in error.message


@pytest.mark.parametrize("data", [b"\x00", MINIMAL.encode() + b"\x00", b"shapes: [[1, 2, 3]]\x00\nkernels: []\n",
                                  b"\x00" * 4096])
def test_nul_bytes(tmp_path, monkeypatch, capsys, data):
    error = refused(tmp_path, data, monkeypatch, capsys)
    assert "NUL" in error.message


@pytest.mark.parametrize("text, message", [
    ("", "empty"), ("\n\n# only a comment\n", "empty"), ("---\n...\n", "empty"), ("null\n", "empty"),
    ("42\n", "got 42"), ("just some words\n", "got 'just some words'"), ("- a\n- b\n", "got a list of 2"),
    ("[1, 2, 3]\n", "got a list of 3"), ("true\n", "got true"), ("2024-01-01\n", "got '2024-01-01'"),
    ("[]\n", "got an empty list"),
])
def test_documents_that_are_not_a_mapping(tmp_path, monkeypatch, capsys, text, message):
    error = refused(tmp_path, text, monkeypatch, capsys)
    assert message in error.message


@pytest.mark.parametrize("text", [
    MINIMAL + "--- \nshapes: []\n",                          # two documents
    "shapes: [\x07]\n",                                      # a control character
    "\tshapes: [[1, 2, 3]]\n",                               # a tab as indentation
    "shapes: *nothing\n",                                    # an undefined alias
    "a: &x 1\nb: &x 2\n" + MINIMAL,                          # a duplicate anchor
    "shapes: !!binary aGVsbG8=\n",                           # a tag no spec field takes
    "!!python/object/apply:os.system ['true']\n",            # a tag SafeLoader refuses
    "shapes: [[1, 2, 3]\nkernels: x\n",                      # unclosed flow sequence
    "? [1, 2]\n: x\n" + MINIMAL,                             # a list as a key
])
def test_yaml_that_cannot_be_a_spec(tmp_path, monkeypatch, capsys, text):
    refused(tmp_path, text, monkeypatch, capsys)


def test_a_folder_or_a_missing_file(tmp_path, monkeypatch, capsys):
    from driver_gemm.cli import EXIT_USAGE, main

    (tmp_path / "folder.yaml").mkdir()
    for path in (tmp_path / "folder.yaml", tmp_path / "missing.yaml"):
        assert main(["plan", str(path), "--arch", "sm_90"]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert "cannot read spec" in err and str(path) in err and "Traceback" not in err


@pytest.mark.parametrize("value, message", [("!!set {a: null}", "!!set is not a kind of value"),
                                            ("!!omap [a: 1]", "!!omap is not a kind of value"),
                                            ("!!binary aGVsbG8=", "!!binary is not a kind of value"),
                                            ("[2024-13-45, 32, 16]", "'2024-13-45'"),
                                            ("[1:2:3, 32, 16]", "'1:2:3'"),
                                            # zero-padded: octal to YAML 1.1, or text with an 8 or a 9
                                            ("[0512, 32, 16]", "0512 is written with a leading zero, which YAML "
                                                               "1.1 reads as octal, 330"),
                                            ("[64, 0128, 16]", "0128 is written with a leading zero, which YAML "
                                                               "1.1 reads as text"),
                                            ("[-064, 32, 16]", "-064 is written with a leading zero")])
def test_yaml_kinds_a_spec_never_holds_are_refused_at_their_line(tmp_path, monkeypatch, capsys, value, message):
    # A date is read as the text it is, so an impossible one (month 13) fails at its field, not in YAML's parser;
    # so is YAML 1.1's base 60 (1:2:3 would be 3723).
    text = MINIMAL.replace("  - [64, 32, 16]", f"  - {value}")
    error = refused(tmp_path, text, monkeypatch, capsys)
    assert message in error.message and error.where.endswith("spec.yaml:2")
