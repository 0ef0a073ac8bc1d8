"""The grids a coverage hint proposes are expressions of the spec's own language that give what the message means:
a compound tile is put in parentheses (``ceil(M / (8 * S))``), and a grid whose rows are shared out over two axes
with a division rounded down is told to round it up, not to number every tile on one axis."""

from __future__ import annotations

import re
import textwrap

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.build import launch_plans
from driver_gemm.specfile import expr, parse_spec

SOURCE = r"""
// rows of C on blockIdx.x, shared out over x and z as (blockIdx.z * gridDim.x + blockIdx.x); columns on y.
__global__ void rows_split(const float* A, const float* B, float* C, int M, int N, int K) {
    const int row = (blockIdx.z * gridDim.x + blockIdx.x) * 16 + threadIdx.y, col = blockIdx.y * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}
// 8 x 8 of C per thread, rows on blockIdx.x
__global__ void eight_by_eight(const float* A, const float* B, float* C, int M, int N, int K) {}
// tiles numbered on one axis
template <int H>
__global__ void numbered(const float* A, const float* B, float* C, int M, int N, int K) {}
"""

SHAPES = [(1000, 520, 776), (4096, 128, 64), (64, 4096, 64)]


def _hints(tmp_path, kernel: str) -> list[tuple[dict, str, str]]:
    """(the case's names and values, its problem, its hint) for each case of `kernel` on `SHAPES` that leaves
    some of C unwritten."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'hints'\n")
    (tmp_path / "k.cu").write_text(SOURCE)
    shapes = ", ".join(f"[{m}, {n}, {k}]" for m, n, k in SHAPES)
    spec = parse_spec(f"shapes: [{shapes}]\nkernels:\n" + textwrap.indent(textwrap.dedent(kernel), "  "),
                      tmp_path / "spec.yaml")
    found = []
    for (label, _), plan in launch_plans(spec, arch_limits("sm_90")).items():
        env = {"M": plan.shape.M, "N": plan.shape.N, "K": plan.shape.K, **plan.kernel.params}
        for problem in plan.problems:
            text = str(problem)
            if "would never be written" not in text:   # (a grid of no block at all is refused otherwise)
                continue
            hint = re.search(r"\(hint: (.*)\)(?: \[[^\]]*\])?$", text)
            assert hint, text
            found.append((env, text, hint.group(1)))
    assert found, "no case was refused"
    return found


def _tiles(size: int, tile: int) -> int:
    return -(-size // tile)


def test_a_hint_dividing_by_a_compound_tile_gives_the_tile_rows_the_message_means(tmp_path):
    for env, problem, hint in _hints(tmp_path, """\
            - name: k4
              source: k.cu
              function: eight_by_eight
              values: {S: 16}
              rows_on: x
              block: [S, S]
              grid: [M // (8 * S), ceil(N / (8 * S))]
              tile: [8 * S, 8 * S]
            """):
        suggested = re.fullmatch(r"grid x should be (.+)", hint)
        assert suggested, problem
        assert "(8 * S)" in suggested.group(1)
        assert expr.evaluate_int(suggested.group(1), env) == _tiles(env["M"], 8 * env["S"]), problem


def test_a_hint_numbering_tiles_of_compound_sides_counts_them(tmp_path):
    for env, problem, hint in _hints(tmp_path, """\
            - name: numbered
              source: k.cu
              function: numbered
              params: {H: 32}
              block: [256]
              grid: ["(M // (2 * H)) * ceil(N / (2 * H))"]
              tile: [2 * H, 2 * H]
            """):
        suggested = re.fullmatch(r"a grid that numbers the tiles is (.+)", hint)
        assert suggested, problem
        side = 2 * env["H"]
        assert expr.evaluate_int(suggested.group(1), env) == _tiles(env["M"], side) * _tiles(env["N"], side), problem
        assert f"tiles of {side} x {side} (ceil(M / (2 * H)) x ceil(N / (2 * H)))" in problem


def test_rows_shared_out_over_two_axes_rounded_down_are_told_to_round_up_that_axis(tmp_path):
    for env, problem, hint in _hints(tmp_path, """\
            - name: split
              source: k.cu
              function: rows_split
              values: {S: 3}
              rows_on: x
              block: [16, 16]
              grid: ["ceil(M / 16) // S", ceil(N / 16), S]
              tile: [16, 16]
            """):
        suggested = re.match(r"grid x should be (.+?): ", hint)
        assert suggested, problem
        assert "numbers the tiles" not in hint
        x = expr.evaluate_int(suggested.group(1), env)
        column_tiles, row_tiles = _tiles(env["N"], 16), _tiles(env["M"], 16)
        assert x * env["S"] >= row_tiles and (x - 1) * env["S"] < row_tiles, problem   # enough, none to spare
        assert f"C's {row_tiles * column_tiles:,} tiles" in problem
