"""On a GPU: a launch of then: that only reads C (row statistics after the GEMM) runs in the case and leaves C as
the GEMM wrote it, and a kernel whose float4 accesses the plan notes as misaligned on a shape does fault there
(CUDA_ERROR_MISALIGNED_ADDRESS) while it passes on an aligned one."""

from __future__ import annotations

import textwrap

import pytest

from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.options import Placement, RunOptions
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from gpu_specs import quick
from test_then_reads_c_sequence import SOURCE as SEQUENCE_SOURCE, SPEC as SEQUENCE_SPEC
from test_vector_access_alignment import FLOAT4_ENTRY, FLOAT4_KERNEL

pytestmark = pytest.mark.gpu


def test_a_launch_that_reads_c_after_the_gemm_runs_and_c_passes(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "kernels.cu").write_text(SEQUENCE_SOURCE)
    path = tmp_path / "spec.yaml"
    path.write_text(SEQUENCE_SPEC)
    spec = quick(load_spec(path).select(kernels=["gemm-then-row-max"]))
    run = run_spec(spec, options=RunOptions())
    (case,) = [case for case in run.cases if case.name == "gemm-then-row-max"]
    assert case.status == Status.PASS, case.message
    assert case.timing is not None and case.timing.median_ms > 0


def test_float4_accesses_pass_on_aligned_rows_and_fault_on_the_shape_the_plan_notes(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "float4.cu").write_text(FLOAT4_KERNEL)
    path = tmp_path / "spec.yaml"
    path.write_text("shapes: [[256, 256, 256], [1001, 513, 777]]\nbaseline: false\nkernels:\n- name: k\n"
                    + textwrap.indent(FLOAT4_ENTRY, "  "))
    spec = quick(load_spec(path))
    run = run_spec(spec, RunOptions(), Placement(isolate=True))
    statuses = {case.shape.label: case for case in run.cases}
    assert statuses["256x256x256"].status == Status.PASS, statuses["256x256x256"].message
    faulted = statuses["1001x513x777"]
    assert faulted.status == Status.ERROR and "CUDA_ERROR_MISALIGNED_ADDRESS" in faulted.message, faulted.message
