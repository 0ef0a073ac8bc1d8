"""What a refused batch stride or a per-case expression says: the overlap of a batch's matrices names the
smallest stride that puts them one after another, a stride the layout itself accepts, and an expression that gives
a fraction is quoted once."""

from __future__ import annotations

import re

import pytest

from driver_gemm.errors import SpecError
from driver_gemm.gemm.operands import matrix_layout
from driver_gemm.planning.spec_plan import plan_spec

from gpu_specs import write_spec
from test_interleaved_batch import heads_kernel


@pytest.mark.parametrize("order, rows, cols, ld", [("row", 100, 64, 256), ("col", 48, 30, 64), ("row", 10, 12, 12)])
def test_the_overlap_message_names_the_smallest_stride_the_layout_accepts(order, rows, cols, ld):
    # a stride that drops the last line's padding puts the matrices one after another: the message says so
    lines, length = (rows, cols) if order == "row" else (cols, rows)
    span = (lines - 1) * ld + length
    with pytest.raises(SpecError) as caught:
        matrix_layout("A", rows, cols, order, ld=ld, batch=3, batch_stride=span - 1, broadcast_allowed=True)
    stated = int(re.search(r"putting the matrices one after another needs >= (\d+)", str(caught.value)).group(1))
    hinted = int(re.search(r"a stride of at least (\d+)", caught.value.hint).group(1))
    assert stated == hinted
    matrix_layout("A", rows, cols, order, ld=ld, batch=3, batch_stride=stated, broadcast_allowed=True)
    with pytest.raises(SpecError):
        matrix_layout("A", rows, cols, order, ld=ld, batch=3, batch_stride=stated - 1, broadcast_allowed=True)


def _problems(tmp_path, kernel: str) -> list[str]:
    planned = plan_spec(write_spec(tmp_path, kernel, ["100x64x64"]), arch="sm_90")
    return [str(problem) for plan in planned.plans for problem in plan.problems]


@pytest.mark.parametrize("field, kernel", [
    ("batch.stride.a", heads_kernel(strides="{a: K / 7, b: K * N, c: N}")),
    ("block[0]", heads_kernel().replace("block: [16, 16]", "block: [K / 7, 16]")),
])
def test_a_fractional_expression_is_quoted_once(tmp_path, field, kernel):
    problem, = (problem for problem in _problems(tmp_path, kernel) if f".{field}:" in problem)
    assert "not a whole number" in problem
    assert problem.count("'K / 7'") == 1, problem
