"""A spec over the YAML node bound is refused at its first node too many, never after the whole document is
built; and every message about a spec's bytes names the line YAML counts, whatever the file's line ends."""

import pytest
import yaml

from driver_gemm.errors import SpecError
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.limits import MAX_SPEC_BYTES, MAX_YAML_NODES

from malformed import MINIMAL, refused, write_bytes


def test_a_spec_over_the_node_bound_is_refused_before_the_rest_is_read(tmp_path, monkeypatch, capsys):
    # A list never closed: a refusal by counting stops at its first node too many and never meets the error.
    items = ", ".join(["1"] * (MAX_YAML_NODES + 10))
    text = MINIMAL + f"description: [{items}, {{a: [\n"
    error = refused(tmp_path, text, monkeypatch, capsys)
    assert f"more than {MAX_YAML_NODES:,} YAML nodes" in error.message


def test_a_block_list_over_the_node_bound_is_refused_before_the_rest_is_read(tmp_path, monkeypatch, capsys):
    items = "".join("  - 1\n" for _ in range(MAX_YAML_NODES + 10))
    text = MINIMAL + f"description:\n{items}  - [\n"
    error = refused(tmp_path, text, monkeypatch, capsys)
    assert f"more than {MAX_YAML_NODES:,} YAML nodes" in error.message


def test_a_spec_as_large_as_allowed_of_one_flat_list_is_refused_by_counting(tmp_path, monkeypatch, capsys):
    head = MINIMAL + "description: ["
    items = ",".join(["1"] * ((MAX_SPEC_BYTES - len(head) - 2) // 2))
    error = refused(tmp_path, f"{head}{items}]\n", monkeypatch, capsys)   # in the CPU time `refused` allows
    assert f"more than {MAX_YAML_NODES:,} YAML nodes" in error.message


def spec_bytes(line_end: bytes, bad_line: bytes) -> bytes:
    """MINIMAL with `line_end` ending each line, and `bad_line` as its line 7."""
    lines = MINIMAL.encode().splitlines()
    return line_end.join(lines[:6] + [bad_line] + lines[6:]) + line_end


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
@pytest.mark.parametrize("bad_line, said", [(b"# caf\xe9", "not UTF-8 text"), (b"# a\x00b", "NUL character")],
                         ids=["latin-1", "NUL"])
def test_a_bad_byte_is_placed_on_the_line_yaml_counts(tmp_path, line_end, bad_line, said):
    path = write_bytes(tmp_path, spec_bytes(line_end, bad_line))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert said in info.value.message
    assert info.value.where == f"{path}:7"


@pytest.mark.parametrize("line_end", ["\u2028", "\x85"], ids=["LS", "NEL"])
def test_unicode_line_ends_count_as_yaml_counts_them(tmp_path, line_end):
    lines = MINIMAL.splitlines()
    path = write_bytes(tmp_path, line_end.join(lines[:6] + ["# a\x00b"] + lines[6:]).encode() + b"\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.where == f"{path}:7"


def over_the_bound(layout: str) -> str:
    if layout == "block":
        return MINIMAL + "description:\n" + "".join("  - 1\n" for _ in range(MAX_YAML_NODES + 10))
    return MINIMAL + "description: [" + ", ".join(["1"] * (MAX_YAML_NODES + 10)) + "]\n"


@pytest.mark.parametrize("layout", ["block", "flow"])
def test_libyaml_count_refuses_where_the_composer_does(tmp_path, monkeypatch, layout):
    # The early count (libyaml's events) and the composer's own count must name the same node, line and hint.
    path = write_bytes(tmp_path, over_the_bound(layout).encode())
    errors = []
    for with_libyaml in (True, False):
        monkeypatch.setattr(yaml, "__with_libyaml__", with_libyaml)
        with pytest.raises(SpecError) as info:
            load_spec(path)
        errors.append((info.value.message, info.value.where, info.value.hint))
    assert errors[0] == errors[1]
    assert f"holds more than {MAX_YAML_NODES:,} YAML nodes" in errors[0][0]


def test_an_alias_before_the_bound_leaves_the_count_to_the_composer(tmp_path):
    # An alias counts as what it stands for, which only the composer knows: the message blames the aliases.
    text = over_the_bound("block").replace("description:\n", "x: &big [1, 2, 3]\ndescription:\n  - *big\n", 1)
    with pytest.raises(SpecError) as info:
        load_spec(write_bytes(tmp_path, text.encode()))
    assert "counting every use of an alias" in info.value.message


def test_text_libyaml_cannot_parse_gets_the_composers_message(tmp_path):
    # A tab before the list: both parsers stop there, and the message is the composer's, on the tab's line.
    text = over_the_bound("block").replace("description:\n  - 1\n", "description:\n\t- 1\n", 1)
    path = write_bytes(tmp_path, text.encode())
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert "not valid YAML" in info.value.message
    assert info.value.where == f"{path}:{text.splitlines().index(chr(9) + '- 1') + 1}"
