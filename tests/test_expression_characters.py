"""An expression holding a control character is refused at its column; the whitespace YAML may leave is read."""

from __future__ import annotations

import pytest

from driver_gemm.specfile import expr
from driver_gemm.specfile.expr import ExpressionError


@pytest.mark.parametrize("text, column", [("1\x00", 2), ("ceil(N / BN)\x1b", 13), ("M\x7f", 2)])
def test_a_control_character_is_refused_at_its_column(text, column):
    with pytest.raises(ExpressionError, match=rf"invalid character .* at column {column}: an expression is "
                                              "printable ASCII"):
        expr.parse(text)


@pytest.mark.parametrize("text", ["M\t+ 1", "ceil(N /\n 4)", "ceil(N /\r\n 4)"])
def test_tabs_and_line_breaks_inside_an_expression_are_whitespace(text):
    assert expr.parse(text).names <= {"M", "N"}


def test_a_syntax_error_without_a_column_names_none():
    with pytest.raises(ExpressionError) as info:
        expr.parse("M +")
    assert "column None" not in str(info.value)
