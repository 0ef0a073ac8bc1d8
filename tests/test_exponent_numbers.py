"""Numbers written with an exponent (``1e-05``, ``2.5E+07``), as YAML gives a small float back and as a spec may
write one in an expression: their exponent's zeros are decimal, not the octal a leading zero would make, so they are
read as they are, while a leading zero elsewhere is still refused."""

from __future__ import annotations

import pytest

from driver_gemm.specfile import expr, parse_spec

from conftest import ROOT

SPEC = """\
shapes: [[64, 64, 64]]
scalars: {alpha: 1.0e-5, beta: 0.5}
kernels:
  - name: ab
    source: tests/kernels/sgemm_alpha_beta.cu
    function: sgemm_alpha_beta
    signature: [M, N, K, alpha, A, B, beta, C]
    block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16)]
"""


@pytest.mark.parametrize("source, value", [("2e-05 * M", 2e-05 * 64), ("1.5e+07", 1.5e+07), ("1.E-05", 1e-05),
                                           (1e-05, 1e-05), (2.5e-300, 2.5e-300)])
def test_an_exponent_with_zeros_is_a_decimal_number(source, value):
    assert expr.parse(source).evaluate({"M": 64}) == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize("source", ["007", "M - 07", "size-05", "M * 010"])
def test_a_leading_zero_outside_an_exponent_is_still_refused(source):
    with pytest.raises(expr.ExpressionError, match="leading zero"):
        expr.parse(source)


def test_a_small_scalar_that_yaml_reads_as_a_float_reaches_the_kernel():
    spec = parse_spec(SPEC, ROOT / "spec.yaml")
    (alpha,) = [argument for argument in spec.kernels[0].signature if argument.name == "alpha"]
    assert alpha.value.evaluate({}) == pytest.approx(1e-05, rel=1e-15)
