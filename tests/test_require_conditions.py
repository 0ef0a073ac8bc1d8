"""A require: condition whose and, or or not reads a number as true or false (``BM % 16 or BN % 16``, ``M and N``)
holds wherever the number is not 0, the opposite of the ``% ... == 0`` it is mostly meant for: refused at its line,
as a bare number is. A param of true or false may stand there alone. And wave_efficiency takes whole numbers."""

from __future__ import annotations

import pytest

from driver_gemm.specfile import expr, load_spec

from malformed import MINIMAL, refused, write


@pytest.mark.parametrize("require, part", [("BM % 16 or BN % 16", "BM % 16"), ("M and N", "M"), ("not M", "M"),
                                           ("BM % 16 == 0 and BN % 16", "BN % 16"),
                                           ("not (BM > 0 or TM - 4)", "TM - 4")])
def test_and_or_not_of_a_number_is_refused_with_the_comparison_it_lacks(tmp_path, monkeypatch, capsys, require,
                                                                        part):
    error = refused(tmp_path, MINIMAL + f"    require: ['{require}']\n", monkeypatch, capsys,
                    field="kernels[v4].require[0]")
    assert f"'{require}' reads {part} as true or false: each part joined by and, or or not compares" in error.message
    assert error.hint is not None and f"'{part} == 0'" in error.hint


def test_a_param_of_true_or_false_may_be_read_alone_and_a_number_param_may_not(tmp_path, monkeypatch, capsys):
    flagged = MINIMAL.replace("TN: 4}", "TN: 4, CHECKED: [true, false]}")
    spec = load_spec(write(tmp_path, flagged + "    require: ['CHECKED or (M % BM == 0 and not CHECKED)']\n"))
    assert [kernel.require[0].source for kernel in spec.kernels] == ["CHECKED or (M % BM == 0 and not CHECKED)"] * 2
    mixed = MINIMAL.replace("TN: 4}", "TN: 4, CHECKED: [true, 0]}")
    refused(tmp_path, mixed + "    require: ['CHECKED or M % BM == 0']\n", monkeypatch, capsys,
            field="kernels[v4].require[0]", message="reads CHECKED as true or false")


def test_comparisons_joined_by_and_or_not_still_load(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + "    require: ['BM % 16 == 0 and not (BN < 16 or TN > 8)']\n"))
    assert spec.kernels[0].require[0].names == {"BM", "BN", "TN"}


def test_wave_efficiency_refuses_a_fraction_and_takes_a_whole_float():
    env = {"M": 2000, "N": 512}
    with pytest.raises(expr.ExpressionError, match="every argument is a whole number"):
        expr.evaluate("wave_efficiency(M, N, 64.5, 64, 132)", env)
    with pytest.raises(expr.ExpressionError, match="every argument is a whole number"):
        expr.evaluate("wave_efficiency(M, N, 64, 64, 265 / 2)", env)
    assert expr.evaluate("wave_efficiency(M, N, 64, 64, 264 / 2)", env) == \
        expr.evaluate("wave_efficiency(M, N, 64, 64, 132)", env)
