"""alpha and beta that a kernel does not take: a kernel without them computes C = A @ B (or C += A @ B) and is
checked against that, so its own scalars: of other values are refused at the value, as a scalar no kernel reads is,
and the spec's are noted in the plan of each kernel they do not reach. The values it computes with anyway, and those
a kernel takes, load without a word."""

from __future__ import annotations

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import Shape, load_spec

from malformed import MINIMAL, refused, write

TAKES_BOTH = "    signature: [A, B, C, M, N, K, alpha, beta]\n"


def test_a_kernels_own_beta_that_it_does_not_take_is_refused(tmp_path, monkeypatch, capsys):
    error = refused(tmp_path, MINIMAL + "    scalars: {beta: 2.0}\n", monkeypatch, capsys,
                    field="kernels[v4].scalars.beta")
    assert "beta = 2, but the kernel takes no beta" in error.message and "C = A @ B, beta = 0" in error.message
    refused(tmp_path, MINIMAL + "    epilogue: accumulate\n    scalars: {alpha: 0.5}\n", monkeypatch, capsys,
            field="kernels[v4].scalars.alpha", message="it computes C += A @ B, alpha = 1")


def test_a_kernels_own_scalars_load_where_it_takes_them_or_computes_with_them(tmp_path):
    taken = load_spec(write(tmp_path, MINIMAL + TAKES_BOTH + "    scalars: {alpha: 1.5, beta: -0.5}\n"))
    assert taken.kernels[0].signature[-1].name == "beta"
    assert load_spec(write(tmp_path, MINIMAL + "    scalars: {alpha: 1.0, beta: 0.0}\n")).kernels
    assert load_spec(write(tmp_path, MINIMAL + "    epilogue: accumulate\n    scalars: {beta: 1.0}\n")).kernels


def _notes(tmp_path, text: str) -> list[list[str]]:
    spec = load_spec(write(tmp_path, text))
    return [[note for note in plan_case(kernel, Shape(64, 32, 16), arch_limits("sm_90"), scalars=spec.scalars).notes
             if note.startswith("scalars:")] for kernel in spec.kernels]


def test_the_specs_alpha_or_beta_that_a_kernel_does_not_take_is_noted_in_its_plan(tmp_path):
    second = MINIMAL.split("kernels:\n", 1)[1].replace("name: v4", "name: v4-scaled") + TAKES_BOTH
    plain, taking = _notes(tmp_path, "scalars: {alpha: 1.0, beta: 2.0}\n" + MINIMAL + second)
    assert plain == ["scalars: beta = 2 does not reach this kernel, which takes no beta: it computes C = A @ B "
                     "(beta = 0) and is checked against that"]
    assert taking == []


def test_the_specs_scalars_are_not_noted_where_each_kernel_computes_with_them(tmp_path):
    assert _notes(tmp_path, "scalars: {alpha: 1.0, beta: 0.0}\n" + MINIMAL) == [[]]
    assert _notes(tmp_path, "scalars: {beta: 1.0}\n" + MINIMAL + "    epilogue: accumulate\n") == [[]]
