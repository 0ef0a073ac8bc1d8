"""scripts/read_ceiling.py on a machine without torch, triton or a GPU: its shapes and its refusal to run."""

import argparse

import pytest


@pytest.fixture()
def ceiling(load_script):
    return load_script("read_ceiling")


def test_a_shape_is_m_by_n_by_k(ceiling):
    assert ceiling.parse_shape("1x8192x8192") == (1, 8192, 8192)
    assert ceiling.parse_shape("128X14336x4096") == (128, 14336, 4096)
    for wrong in ("1x8192", "0x8192x8192", "1x-5x8", "axbxc", "1x2x3x4"):
        with pytest.raises(argparse.ArgumentTypeError, match="MxNxK"):
            ceiling.parse_shape(wrong)


def test_the_default_shapes_parse(ceiling):
    shapes = [ceiling.parse_shape(text) for text in ceiling.DEFAULT_SHAPES]
    assert (1, 8192, 8192) in shapes and all(m <= 128 for m, _, _ in shapes)


def test_without_torch_it_says_what_is_missing_and_exits_2(ceiling, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(ceiling, "MISSING", "No module named 'torch'")   # as on the CPU machines, wherever it runs
    out = tmp_path / "ceiling.json"
    assert ceiling.main(["-s", "1x4096x4096", "--json", str(out)]) == 2
    assert "read_ceiling: needs torch and triton (No module named 'torch')" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("arguments, said", [(["-s", "4096"], "MxNxK"), (["--rounds", "0"], "1 or more"),
                                             (["--rounds", "two"], "1 or more")])
def test_malformed_arguments_are_refused_by_the_parser(ceiling, capsys, arguments, said):
    with pytest.raises(SystemExit) as stop:
        ceiling.main(arguments)
    assert stop.value.code == 2
    assert said in capsys.readouterr().err
