"""Specs that would expand without bound: each is refused by counting, with the count in the message."""

import pytest

from driver_gemm.specfile.limits import MAX_CASES, MAX_SPEC_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES

from malformed import MINIMAL, refused

SHAPE_LINE = "  - [64, 32, 16]"


@pytest.mark.parametrize("shape, field, count", [
    ("{M: {from: 1, to: 1000000000, step: 1}, N: 1, K: 1}", "shapes[0].M", "1,000,000,000"),
    ("[{from: 1, to: 1000, step: 1}, {from: 1, to: 1000, step: 1}, {from: 1, to: 1000, step: 1}]",
     "shapes[0]", "1,000,000,000"),
    ("{M: {from: 1, to: 1000, step: 1}, N: {from: 1, to: 1000, step: 1}, K: {from: 1, to: 1000, step: 1}}",
     "shapes[0]", "1,000,000,000"),
    ("{MN: {from: 1, to: 100000, step: 1}, K: {from: 1, to: 100000, step: 1}}", "shapes[0]", "10,000,000,000"),
    ("{MNK: {from: 1, to: 1099511627776, times: 1.0000001}}", "shapes[0].MNK", None),
    ("[{from: 1, to: 1099511627776, step: 1}, 1, 1]", "shapes[0][0]", "1,099,511,627,776"),
])
def test_shape_ranges_and_products_are_counted(tmp_path, monkeypatch, capsys, shape, field, count):
    error = refused(tmp_path, MINIMAL.replace(SHAPE_LINE, f"  - {shape}"), monkeypatch, capsys, field=field)
    assert f"{MAX_CASES:,}" in error.message and "MAX_CASES" in error.message
    if count:
        assert count in error.message


def test_kernels_times_shapes_are_counted(tmp_path, monkeypatch, capsys):
    text = MINIMAL.replace(SHAPE_LINE, "  - {M: {from: 1, to: 1000, step: 1}, N: {from: 1, to: 1000, step: 1}, K: 1}")
    text = text.replace("TM: 4, TN: 4", "TM: [1, 2, 4], TN: 4")
    error = refused(tmp_path, text, monkeypatch, capsys, field="shapes[0]")
    assert "3,000,000 cases (1,000,000 shapes x 3 kernels)" in error.message


@pytest.mark.parametrize("values_per_param", [20, 100])
def test_parameter_sweeps_are_counted(tmp_path, monkeypatch, capsys, values_per_param):
    values = "[" + ", ".join(str(v) for v in range(1, values_per_param + 1)) + "]"
    text = MINIMAL.replace("BM: 64, BN: 64, BK: 16, TM: 4, TN: 4",
                           ", ".join(f"{p}: {values}" for p in ("BM", "BN", "BK", "TM", "TN")))
    error = refused(tmp_path, text, monkeypatch, capsys, field="kernels[v4].params")
    assert f"{values_per_param ** 5:,} kernels" in error.message


def laughs(levels: int, fan: int) -> str:
    lines = ["a0: &a0 [64, 32, 16]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * fan) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels, fan", [(9, 10), (20, 2), (6, 100)])
def test_alias_bombs_are_refused_while_reading(tmp_path, monkeypatch, capsys, levels, fan):
    text = "x:\n" + "".join(f"  {line}\n" for line in laughs(levels, fan).splitlines()) + \
        MINIMAL.replace(SHAPE_LINE, f"  - *a{levels - 1}")
    error = refused(tmp_path, text, monkeypatch, capsys)
    assert f"more than {MAX_YAML_NODES:,} YAML nodes" in error.message and "alias" in error.message


def test_a_long_plain_list_is_refused_without_blaming_aliases(tmp_path, monkeypatch, capsys):
    shapes = "".join(f"  - [{i + 1}, 8, 8]\n" for i in range(MAX_YAML_NODES // 4))
    error = refused(tmp_path, MINIMAL.replace(SHAPE_LINE + "\n", shapes), monkeypatch, capsys)
    assert f"holds more than {MAX_YAML_NODES:,} YAML nodes" in error.message and "alias" not in str(error)
    assert "set of ranges" in error.hint


def test_alias_bomb_in_shapes_only(tmp_path, monkeypatch, capsys):
    # anchors defined inside the shapes list itself, no unknown key to stop at first
    text = MINIMAL.replace(SHAPE_LINE, "  - &s0 [64, 32, 16]\n" + "".join(
        f"  - &s{i} [" + ", ".join([f"*s{i - 1}"] * 10) + "]\n" for i in range(1, 8)))
    error = refused(tmp_path, text, monkeypatch, capsys)
    assert "YAML nodes" in error.message


def test_recursive_alias_is_refused(tmp_path, monkeypatch, capsys):
    error = refused(tmp_path, MINIMAL.replace(SHAPE_LINE, "  - &loop [64, 32, *loop]"), monkeypatch, capsys)
    assert "recursive alias" in error.message


@pytest.mark.parametrize("megabytes", [1.5, 50])
def test_oversized_files_are_refused_unread(tmp_path, monkeypatch, capsys, megabytes):
    padding = "# " + "x" * 98 + "\n"
    text = MINIMAL + padding * int(megabytes * (1 << 20) / len(padding))
    error = refused(tmp_path, text, monkeypatch, capsys)
    assert f"{MAX_SPEC_BYTES:,} bytes" in error.message


@pytest.mark.parametrize("depth, flow", [(MAX_YAML_DEPTH + 1, True), (5000, True), (100_000, True),
                                         (MAX_YAML_DEPTH + 5, False), (600, False)])
def test_deep_nesting_is_refused(tmp_path, monkeypatch, capsys, depth, flow):
    if flow:
        nested = "[" * depth + "1" + "]" * depth
        text = MINIMAL.replace(SHAPE_LINE, f"  - {nested}")
    else:
        nested = "".join("  " * level + f"k{level}:\n" for level in range(depth)) + "  " * depth + "1\n"
        text = "description:\n" + "".join("  " + line + "\n" for line in nested.splitlines()) + MINIMAL
    error = refused(tmp_path, text, monkeypatch, capsys)
    assert "deep" in error.message


@pytest.mark.parametrize("expression, limit", ids=["long-sum", "long-parens", "deep-parens", "deep-minus",
                                                    "many-terms"], argvalues=[
    (" + ".join(["BN"] * 100_000), "MAX_EXPRESSION_CHARS"),
    ("(" * 5000 + "BN" + ")" * 5000, "MAX_EXPRESSION_CHARS"),
    ("(" * 400 + "BN" + ")" * 400, "MAX_EXPRESSION_DEPTH"),
    ("-" * 900 + "BN", "MAX_EXPRESSION_DEPTH"),
    ("max(" + ", ".join(["M"] * 300) + ")", "MAX_EXPRESSION_NODES"),
])
def test_huge_expressions_are_refused(tmp_path, monkeypatch, capsys, expression, limit):
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", f"grid: ['{expression}', 1]")
    error = refused(tmp_path, text, monkeypatch, capsys, field="kernels[v4].grid[0]")
    assert limit in error.message
