"""A plan whose kernel's resources are unknown (a PTX image, before the driver compiles it) shows its static shared
memory as unknown ("-"), as its registers are, in the terminal table and in Markdown, never as 0."""

from __future__ import annotations

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.cuda.resources import KernelResources
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.report.formats import plan_markdown_row
from driver_gemm.report.tables import plain_plan_lines
from driver_gemm.specfile import Shape, load_spec

from test_spec import MINIMAL, write


def _plans(tmp_path):
    kernel = load_spec(write(tmp_path, MINIMAL + "    shared_bytes: 256\n")).kernels[0]
    unknown = plan_case(kernel, Shape(64, 32, 16), arch_limits("sm_90"))
    known = plan_case(kernel, Shape(64, 32, 16), arch_limits("sm_90"),
                      resources=KernelResources(registers=40, static_shared_bytes=1024))
    return unknown, known


def test_unknown_static_shared_memory_is_shown_as_unknown(tmp_path):
    unknown, known = _plans(tmp_path)
    row = plain_plan_lines([unknown], "plan", {})[-1]
    assert "-+256" in row.split() and "0+256" not in row.split()
    assert "| -+256 |" in plan_markdown_row(unknown)
    row = plain_plan_lines([known], "plan", {})[-1]
    assert "1024+256" in row.split()
    assert "| 1024+256 |" in plan_markdown_row(known)
