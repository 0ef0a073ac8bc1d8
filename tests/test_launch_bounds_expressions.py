"""A kernel whose ``__launch_bounds__`` (or ``__cluster_dims__``) holds an expression with parentheses of its own,
as ``__launch_bounds__((BM / WM) * (BN / WN) * 32)`` of the shipped warp-tiled kernels: its template header is read
as that of a plain one, so params in another order or of the wrong number are refused at `params`, and a misspelt
`function:` is answered with the kernels the file defines. No GPU."""

from __future__ import annotations

import re
import shutil
import textwrap

import pytest

from driver_gemm import bundled
from driver_gemm.cuda.compile_diagnostics import instance_advice, template_arguments_problem, template_parameters
from driver_gemm.planning.build import offline_problems
from driver_gemm.specfile import load_spec

QUALIFIERS = [
    "__launch_bounds__(256)",
    "__launch_bounds__((BM / 4) * (BN / 4))",
    "__launch_bounds__(128 * (BM / 64 + 1), 1)",
    "__cluster_dims__((1), 1, 1) __launch_bounds__(((BM)) * ((BN / 16)))",
]


def _source(qualifiers: str) -> str:
    return textwrap.dedent(f"""\
        template <int BM, int BN>
        __global__ void {qualifiers}
        tile(float* C, const float* A, const float* B, int M, int N, int K) {{ C[0] = A[0] * BM * BN; }}
        """)


def _spec(tmp_path, source: str, function: str, params: str):
    (tmp_path / "pyproject.toml").touch()
    (tmp_path / "k.cu").write_text(source)
    (tmp_path / "spec.yaml").write_text(textwrap.dedent(f"""\
        shapes: [[64, 64, 64]]
        kernels:
          - name: k
            source: k.cu
            function: {function}
            params: {params}
            signature: [C, A, B, M, N, K]
            block: [16, 16]
            grid: [ceil(N / 16), ceil(M / 16)]
        """))
    return load_spec(tmp_path / "spec.yaml")


@pytest.mark.parametrize("qualifiers", QUALIFIERS)
def test_params_in_another_order_are_refused_at_params_whatever_the_launch_bounds_hold(tmp_path, qualifiers):
    plans, failed = offline_problems(_spec(tmp_path, _source(qualifiers), "tile", "{BN: 32, BM: 64}"))
    problems = [str(problem) for plan in plans for problem in plan.problems]
    assert failed == {} and problems
    assert all("kernels[k].params: params name the template's parameters in another order than tile declares "
               "them" in problem and "BN would be passed as BM" in problem for problem in problems), problems


@pytest.mark.parametrize("qualifiers", QUALIFIERS)
def test_the_template_header_is_read_through_any_launch_bounds(qualifiers):
    plain = template_parameters("tile", [_source("")])
    assert plain and template_parameters("tile", [_source(qualifiers)]) == plain
    problem = template_arguments_problem("tile", {"BM": 64, "BN": 64, "EXTRA": 1},
                                         template_parameters("tile", [_source(qualifiers)]))
    assert problem is not None and "EXTRA is not a parameter of tile" in problem


@pytest.mark.parametrize("qualifiers", QUALIFIERS)
def test_a_misspelt_function_is_answered_with_the_kernel_behind_any_launch_bounds(qualifiers):
    advice = instance_advice([_source(qualifiers)], ["tileX<64, 64>"])
    assert "no function named tileX" in advice and "(tile)" in advice, advice


def _shipped_kernel_sources():
    kernels = bundled.kernels_dir()
    if not kernels.is_dir():
        pytest.skip("this install lacks the shipped kernels")
    return sorted(kernels.glob("*.cu"))


def test_every_shipped_kernel_source_lists_its_kernels_for_a_misspelt_function():
    for path in _shipped_kernel_sources():
        text = path.read_text()
        if "__global__" not in text:
            continue
        advice = instance_advice([text], ["no_such_kernel"])
        listed = re.search(r"the kernels the file defines \(([^)]*)\)", advice)
        assert listed and listed.group(1) != "none found", (path.name, advice)
        assert all(re.search(rf"__global__[^;{{]*\b{name}\s*\(", text) for name in listed.group(1).split(", "))


def test_every_shipped_spec_kernel_with_template_params_has_its_template_header_read():
    read = 0
    for path in bundled.shipped_specs():
        for kernel in load_spec(path).kernels:
            template_params = [name for name in kernel.params if name not in kernel.launch_values]
            if kernel.source is None or kernel.binary is not None or not template_params or "<" in kernel.function:
                continue
            texts = [kernel.source.read_text()]
            assert template_parameters(kernel.function, texts), (path.name, kernel.name, kernel.function)
            read += 1
    assert read


# The shipped kernel's own __launch_bounds__ holds one level of parentheses: this reads it without the scan under test.
_NESTED_KERNEL = re.compile(r"__global__\s+void\s+__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)\s*(\w+)\s*\(")


def test_the_shipped_warp_tiled_kernel_with_params_in_another_order_is_refused_at_params(tmp_path):
    source = next(path for path in _shipped_kernel_sources() if "__launch_bounds__((" in path.read_text())
    function = _NESTED_KERNEL.search(source.read_text()).group(1)
    declared, = template_parameters(function, [source.read_text()])
    names = [parameter.name for parameter in declared]
    swapped = [names[1], names[0], *names[2:]]
    spec = _spec(tmp_path, "", function, "{" + ", ".join(f"{name}: {index + 1}" for index, name in
                                                          enumerate(swapped)) + "}")
    shutil.copyfile(source, tmp_path / "k.cu")
    plans, _ = offline_problems(spec)
    problems = [str(problem) for plan in plans for problem in plan.problems]
    assert any(f"params name the template's parameters in another order than {function}" in problem
                            and f"{names[1]} would be passed as {names[0]}" in problem for problem in problems)


def test_a_launch_bounds_that_does_not_close_is_read_in_one_pass():
    source = _source("__launch_bounds__(" + "(BM " * 200_000) + "\n" + _source("")
    from test_header_containment import _finishes_within

    advice: list[str] = []
    assert _finishes_within(30, lambda: advice.append(instance_advice([source], ["zz"])))
    assert "no function named zz" in advice[0]
