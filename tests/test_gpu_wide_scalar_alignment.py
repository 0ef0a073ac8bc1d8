"""On a GPU: a kernel that reads and writes fp16 rows two elements at a time through __half2 (one 32-bit scalar
access) passes at an even N and faults (CUDA_ERROR_MISALIGNED_ADDRESS) at the odd N its plan notes, with N == K
there, which the kernel tests for its reads of A."""

from __future__ import annotations

import pytest

from driver_gemm.planning.image_checks import MISALIGNED_VECTOR_NOTE
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.options import Placement, RunOptions
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from gpu_specs import quick, write_spec

pytestmark = pytest.mark.gpu

HALF2_KERNEL = """\
- name: half2
  source: "@TESTS@/half2_columns.cu"
  function: half2_columns
  types: {a: fp16}
  block: [16, 16]
  grid: [ceil(N / 32), ceil(M / 16)]
  tile: [16, 32]
"""


def test_half2_accesses_pass_at_an_even_n_and_fault_at_the_odd_n_the_plan_notes(tmp_path):
    path = write_spec(tmp_path, HALF2_KERNEL, ["256x258x258", "256x257x257"], extra="baseline: false\n")
    spec = quick(load_spec(path))
    plans = {plan.shape.label: plan for plan in plan_spec(spec).plans}
    assert not any(note.startswith(MISALIGNED_VECTOR_NOTE) for note in plans["256x258x258"].notes)
    assert any(note.startswith(MISALIGNED_VECTOR_NOTE) and "(ld.global.u32)" in note
               for note in plans["256x257x257"].notes), plans["256x257x257"].notes
    run = run_spec(spec, RunOptions(), Placement(isolate=True))
    cases = {case.shape.label: case for case in run.cases}
    assert cases["256x258x258"].status == Status.PASS, cases["256x258x258"].message
    faulted = cases["256x257x257"]
    assert faulted.status == Status.ERROR and "CUDA_ERROR_MISALIGNED_ADDRESS" in faulted.message, faulted.message
