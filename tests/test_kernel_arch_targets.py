"""A kernel's `arch:` planned for a device by CUDA's rule for machine code, as a prebuilt CUBIN is: plain sm_XY code
runs on X.Y and later minors of X, family code (sm_XYf) likewise, arch-specific code (sm_XYa) only on X.Y. No GPU
(plan_case reads the compiled resources it is given; nothing is compiled)."""

from __future__ import annotations

import pytest

from driver_gemm.cuda.occupancy import arch_limits, known_arches
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile.archs import KNOWN_ARCHS, machine_code_runs_on
from driver_gemm.specfile.model import Shape

from test_plan import kernel_from

SHAPE = Shape(64, 64, 64)


def _arch_problems(plan) -> list[str]:
    return [str(problem) for problem in plan.problems if (problem.field or "").endswith(".arch")]


@pytest.mark.parametrize("target, device", [("sm_80", "sm_86"), ("sm_80", "sm_89"), ("sm_100", "sm_103"),
                                            ("sm_100f", "sm_103"), ("sm_120", "sm_121")])
def test_plain_and_family_code_is_planned_on_later_minors_of_its_major(tmp_path, target, device):
    kernel = kernel_from(tmp_path, [("    function: sgemm_coarsen_2d",
                                     f"    function: sgemm_coarsen_2d\n    arch: {target}")])
    assert _arch_problems(plan_case(kernel, SHAPE, arch_limits(device))) == []


@pytest.mark.parametrize("target, device", [("sm_80", "sm_90"), ("sm_86", "sm_80"), ("sm_90", "sm_100")])
def test_plain_code_on_another_major_or_an_earlier_minor_is_refused_by_the_rule_not_as_arch_specific(
        tmp_path, target, device):
    kernel = kernel_from(tmp_path, [("    function: sgemm_coarsen_2d",
                                     f"    function: sgemm_coarsen_2d\n    arch: {target}")])
    said, = set(_arch_problems(plan_case(kernel, SHAPE, arch_limits(device))))
    assert f"built for {target}" in said and f"this device is {device}" in said
    assert "arch-specific" not in said and "later minors" in said
    assert "hint: leave out arch:" in said


def test_every_target_is_planned_where_its_machine_code_runs(tmp_path):
    kernel_text = "    function: sgemm_coarsen_2d\n    arch: {}"
    for index, target in enumerate(KNOWN_ARCHS):
        folder = tmp_path / str(index)
        folder.mkdir()
        kernel = kernel_from(folder, [("    function: sgemm_coarsen_2d", kernel_text.format(target))])
        for device in known_arches():
            refused = _arch_problems(plan_case(kernel, SHAPE, arch_limits(device)))
            assert (refused == []) == machine_code_runs_on(target, device), (target, device, refused)
