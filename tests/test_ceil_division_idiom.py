"""C's integer ceiling written with ``/`` (``(N + BN - 1) / BN``) where a whole number is needed is refused when the
spec is read, at its file, line and field, with the field rewritten both ways a spec writes the ceiling: ``/`` is
real division in a spec, so the C spelling would be whole only on the shapes where N % BN is 1. Real division
elsewhere (``ceil(N / BN)``, ``N / BN`` with a require that it divides) is read as it is."""

from __future__ import annotations

import math
import textwrap

import pytest

from driver_gemm.cli import main
from driver_gemm.errors import DriverGemmError, SpecError
from driver_gemm.specfile import expr, parse_spec

SOURCE = r"""
template <int BM, int BN>
__global__ void tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    int r = blockIdx.y * BM + threadIdx.y, c = blockIdx.x * BN + threadIdx.x;
    if (r >= M || c >= N) return;
    float s = 0; for (int k = 0; k < K; ++k) s += A[r * K + k] * B[k * N + c];
    C[r * N + c] = s;
}
"""

SPEC = """\
shapes: [[256, 256, 256], [241, 241, 64]]
kernels:
  - name: tiled
    source: k.cu
    function: tiled
    params: {{BM: 16, BN: 16}}
    block: [BN, BM]
    grid: ["{grid_x}", ceil(M / BM)]
    tile: [BM, BN]
{extra}"""


def _spec(tmp_path, grid_x: str = "ceil(N / BN)", extra: str = ""):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'ceiling'\n")
    (tmp_path / "k.cu").write_text(SOURCE)
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(grid_x=grid_x, extra=textwrap.indent(textwrap.dedent(extra), "    ")))
    return path


@pytest.mark.parametrize("written, floored, ceiled", [
    ("(N + BN - 1) / BN", "(N + BN - 1) // BN", "ceil(N / BN)"),
    ("(N + (BN - 1)) / BN", "(N + (BN - 1)) // BN", "ceil(N / BN)"),
    ("(BN - 1 + N) / BN", "(BN - 1 + N) // BN", "ceil(N / BN)"),
    ("(N + 15) / 16", "(N + 15) // 16", "ceil(N / 16)"),
    ("(N - 1) / BN + 1", "(N - 1) // BN + 1", "ceil(N / BN)"),
    ("(N + BN - 1) / BN * 1", "(N + BN - 1) // BN * 1", "ceil(N / BN) * 1"),
    ("ceil((N + BN - 1) / BN)", "(N + BN - 1) // BN", "ceil(N / BN)"),
])
def test_the_c_ceiling_with_a_slash_in_a_grid_is_refused_when_read_with_both_rewrites(tmp_path, written, floored,
                                                                                        ceiled):
    path = _spec(tmp_path, written)
    with pytest.raises(SpecError) as raised:
        parse_spec(path.read_text(), path)
    error = raised.value
    assert error.where == f"{path}:8" and error.field == "kernels[tiled].grid[0]", (error.where, error.field)
    assert "real division" in error.message and "N" in error.message, error.message
    assert error.hint is not None and repr(floored) in error.hint and repr(ceiled) in error.hint, error.hint
    for rewritten in (floored, ceiled):      # the hinted fields read, and give C's ceiling on every shape
        parse_spec(_spec(tmp_path, rewritten).read_text(), tmp_path / "spec.yaml")
        for n in (240, 241, 256):
            assert expr.evaluate_int(rewritten, {"N": n, "BN": 16}) == math.ceil(n / 16)


def test_the_refusal_is_a_bad_spec_exit_2_before_any_case(tmp_path, capsys):
    path = _spec(tmp_path, "(N + BN - 1) / BN")
    assert main(["plan", str(path), "--arch", "sm_90"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:8" in err and "kernels[tiled].grid[0]" in err and "(N + BN - 1) // BN" in err


@pytest.mark.parametrize("extra, where, field, floored", [
    ('shared_bytes: "(BM * BN * sizeof(float) + 127) / 128 * 128"\n', 10, "kernels[tiled].shared_bytes",
     "(BM * BN * sizeof(float) + 127) // 128 * 128"),
    ('signature: [A, B, C, M, {name: N, type: int32, value: "(N + 15) / 16 * 16"}, K]\n', 10,
     "kernels[tiled].signature[4].value", "(N + 15) // 16 * 16"),
    ('types: {a: fp32}\nld: {a: "(K + 3) / 4 * 4"}\n', 11, "kernels[tiled].ld.a", "(K + 3) // 4 * 4"),
])
def test_every_whole_number_field_refuses_it_and_shows_its_text_as_written(tmp_path, extra, where, field, floored):
    path = _spec(tmp_path, extra=extra)
    with pytest.raises(SpecError) as raised:
        parse_spec(path.read_text(), path)
    error = raised.value
    assert error.where == f"{path}:{where}" and error.field == field, (error.where, error.field)
    assert error.hint is not None and repr(floored) in error.hint, error.hint
    assert "__sizeof" not in str(error)       # a sizeof is shown as the spec wrote it


@pytest.mark.parametrize("grid_x, extra", [
    ("N / BN", "require: [N % BN == 0]\n"),            # real division that stays whole where it is required
    ("floor((N + BN - 1) / BN)", ""),                  # floor() makes it the ceiling
    ("(N + BN - 1) // BN", ""),
    ("-(-N // BN)", ""),
])
def test_real_division_that_means_what_it_says_is_read(tmp_path, grid_x, extra):
    path = _spec(tmp_path, grid_x, extra)
    spec = parse_spec(path.read_text(), path)
    assert spec.kernels[0].grid[0].source == grid_x


def test_slash_stays_real_division():
    assert expr.evaluate("17 / 16", {}) == 17 / 16
    assert expr.evaluate_int("ceil(N / BN)", {"N": 241, "BN": 16}) == 16
    assert not expr.slash_ceilings(expr.parse("ceil(M / 64) * (ceil(M / 64) + 1) / 2"))   # a triangle's tiles


@pytest.mark.parametrize("call, ceiling", [
    ("cdiv(M, BM)", "ceil(M / BM)"),
    ("ceil_div(M, BM)", "ceil(M / BM)"),
    ("triton.cdiv(M, BM)", "ceil(M / BM)"),
    ("cdiv(M * 2, BM + 1)", "ceil(M * 2 / (BM + 1))"),
])
def test_another_librarys_ceiling_division_is_refused_naming_ceil(call, ceiling):
    with pytest.raises(DriverGemmError) as raised:
        expr.parse(call)
    message = str(raised.value)
    assert "may be called" in message and f"{call} is {ceiling}" in message, message
