"""A range's `times:` is the factor each value is multiplied by to give the next: one of 1 or less would never
pass `to`, and is refused as "more than 1", with the value given, at its field and line, and exit 2."""

import pytest

from driver_gemm.specfile import load_spec

from malformed import MINIMAL, refused
from test_spec import write

SHAPE_LINE = "  - [64, 32, 16]"


@pytest.mark.parametrize("times", ["1", "1.0", "0.5", "0"])
def test_a_factor_of_one_or_less_is_refused_as_not_more_than_one(tmp_path, monkeypatch, capsys, times):
    text = MINIMAL.replace(SHAPE_LINE, f"  - {{M: {{from: 256, to: 1024, times: {times}}}, N: 64, K: 64}}")
    error = refused(tmp_path, text, monkeypatch, capsys, field="shapes[0].M.times")
    assert f"must be more than 1, got {float(times):g}" in error.message
    assert "1.0000001" not in str(error)


def test_a_factor_just_above_one_is_taken(tmp_path):
    path = write(tmp_path, MINIMAL.replace(SHAPE_LINE, "  - {M: {from: 100, to: 121, times: 1.1}, N: 64, K: 64}"))
    assert [shape.M for shape in load_spec(path).shapes] == [100, 110, 121]
