"""Template arguments a BLAS-style kernel takes: C character literals (``blasy<'N', 'T', 16>``, ``TA: "'N'"``),
passed to the compiler as written and shown in the label; and enumerators named as a shape size (``enum Op { N, T
}``), whose refusal says how to qualify them (``Op::N``)."""

from __future__ import annotations

import json
import time
import textwrap
from pathlib import Path

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.planning.build import plan_cases
from driver_gemm.specfile import parse_spec

SOURCE = r"""
template <char TA, char TB, int TILE>
__global__ void blasy(const float* A, const float* B, float* C, int M, int N, int K) {
    int r = blockIdx.y * TILE + threadIdx.y, c = blockIdx.x * TILE + threadIdx.x;
    if (r >= M || c >= N) return;
    float s = 0;
    for (int k = 0; k < K; ++k)
        s += A[TA == 'N' ? r * K + k : k * M + r] * B[TB == 'N' ? k * N + c : c * K + k];
    C[r * N + c] = s;
}

/* enum Mode { M }: not a declaration */
enum Op { N = 0, T = 1 };
template <Op TA, Op TB, int TILE>
__global__ void opk(const float* A, const float* B, float* C, int M, int n, int K) {
    int r = blockIdx.y * TILE + threadIdx.y, c = blockIdx.x * TILE + threadIdx.x;
    if (r >= M || c >= n) return;
    float s = 0; for (int k = 0; k < K; ++k) s += A[r * K + k] * B[k * n + c];
    C[r * n + c] = s;
}
"""

SPEC = """\
shapes: [[64, 48, 32]]
kernels:
  - name: k
    source: k.cu
    function: "{function}"
    block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16)]
    tile: [16, 16]
"""


def _spec(tmp_path, function: str, params: str | None = None, source: str = SOURCE):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'literals'\n")
    (tmp_path / "k.cu").write_text(source)
    text = SPEC.format(function=function) + (f"    params: {params}\n" if params else "")
    return parse_spec(textwrap.dedent(text), tmp_path / "spec.yaml")


def _planned(spec):
    cases = [case for case in plan_cases(spec, arch_limits("sm_90"), "sm_90")[0] if case.kernel is not None]
    assert cases and all(case.plan.valid for case in cases), [case.plan.problems for case in cases]
    return cases


def test_character_literals_in_a_template_id_are_passed_as_written(tmp_path):
    spec = _spec(tmp_path, "blasy<'N', 'T', 16>")
    assert spec.kernels[0].instance == "blasy<'N', 'T', 16>"
    _planned(spec)


def test_character_literals_as_params_sweep_and_show_in_the_label(tmp_path):
    spec = _spec(tmp_path, "blasy", "{TA: \"'N'\", TB: [\"'N'\", \"'T'\"], TILE: 16}")
    assert [kernel.instance for kernel in spec.kernels] == ["blasy<'N', 'N', 16>", "blasy<'N', 'T', 16>"]
    assert [kernel.label for kernel in spec.kernels] == ["k[TA='N',TB='N',TILE=16]", "k[TA='N',TB='T',TILE=16]"]
    _planned(spec)


def test_a_letter_inside_a_literal_is_no_name_to_put_a_param_in(tmp_path):
    spec = _spec(tmp_path, "blasy<'T', T, TILE>", "{T: \"'N'\", TILE: 16}")
    assert spec.kernels[0].instance == "blasy<'T', 'N', 16>"


@pytest.mark.parametrize("function, params, field, code", [
    ("blasy<'<', 'T', 16>", None, "kernels[k].function", "60"),
    ("blasy", "{TA: \"'\\\\n'\", TB: \"'T'\", TILE: 16}", "kernels[k].params.TA", "10"),
])
def test_a_literal_that_cannot_be_written_is_refused_with_its_code(tmp_path, function, params, field, code):
    with pytest.raises(SpecError) as raised:
        _spec(tmp_path, function, params)
    error = raised.value
    assert error.field == field and error.where == f"{tmp_path / 'spec.yaml'}:{5 if 'function' in field else 9}"
    assert error.hint is not None and f"write its code, {code}" in error.hint, error.hint


def test_an_enumerator_named_like_the_shape_in_a_template_id_is_refused_with_its_qualified_name(tmp_path):
    with pytest.raises(SpecError) as raised:
        _spec(tmp_path, "opk<N, T, 16>")
    error = raised.value
    assert error.field == "kernels[k].function" and "reads N" in error.message
    assert error.hint is not None and "k.cu declares N in enum Op" in error.hint, error.hint
    assert "function: 'opk<Op::N, T, 16>'" in error.hint, error.hint
    assert "dispatch:" in error.hint          # the way for a kernel templated on its shape, still given


def test_an_enumerator_named_like_the_shape_as_a_param_is_refused_with_its_qualified_name(tmp_path):
    with pytest.raises(SpecError) as raised:
        _spec(tmp_path, "opk", "{TA: N, TB: T, TILE: 16}")
    error = raised.value
    assert error.field == "kernels[k].params.TA"
    assert error.hint is not None and "TA: Op::N" in error.hint, error.hint


def test_a_name_the_source_does_not_declare_gets_the_general_way_to_qualify(tmp_path):
    with pytest.raises(SpecError) as raised:
        _spec(tmp_path, "blasy<M, 'T', 16>")     # M is declared only inside a comment of the source
    error = raised.value
    assert error.hint is not None and "enumerator or a constant" in error.hint and "Op::M" in error.hint, error.hint
    assert "declares M" not in error.hint, error.hint


def test_the_qualified_enumerator_plans(tmp_path):
    _planned(_spec(tmp_path, "opk<Op::N, ::T, 16>"))
    _planned(_spec(tmp_path, "opk", "{TA: 'Op::N', TB: 'Op::T', TILE: 16}"))


def test_the_schema_takes_what_the_reader_takes():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).resolve().parents[1] / "driver_gemm" / "specfile" / "schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    for function, params in (("blasy<'N', 'T', 16>", None), ("blasy", {"TA": "'N'", "TB": ["'N'", "'T'"], "TILE": 16})):
        kernel = {"source": "k.cu", "function": function, "block": [16, 16], "grid": [1, 1]}
        if params is not None:
            kernel["params"] = params
        errors = [error.message for error in validator.iter_errors({"shapes": [[64, 48, 32]], "kernels": [kernel]})]
        assert not errors, errors


def test_a_character_argument_finds_its_symbol_in_a_built_image():
    """nvcc's and prebuilt images are searched by symbol: the demangled name shows a char argument as its code
    ((char)78), which the spec's 'N' must match, and only that code."""
    from driver_gemm.cuda.mangling import find_symbol
    from driver_gemm.errors import ImageError

    n_t = "_Z5blasyILc78ELc84ELi16EEvPKfS1_Pfiii"        # blasy<(char)78, (char)84, 16>
    t_t = "_Z5blasyILc84ELc84ELi16EEvPKfS1_Pfiii"        # blasy<(char)84, (char)84, 16>
    assert find_symbol("blasy<'N', 'T', 16>", [t_t, n_t]) == n_t
    assert find_symbol("blasy<'T','T',16>", [n_t, t_t]) == t_t
    with pytest.raises(ImageError, match="no kernel matches"):
        find_symbol("blasy<'N', 'N', 16>", [n_t, t_t])


def test_the_enum_that_declares_a_name_is_found_with_its_underlying_type_and_quickly(tmp_path):
    # An underlying type of several words is read; a source of many "enum X :" without a body takes linear time.
    typed_enum = SOURCE.replace("enum Op { N = 0, T = 1 };", "enum class Op : unsigned int { N = 0, T = 1 };")
    with pytest.raises(SpecError) as raised:
        _spec(tmp_path, "opk<N, T, 16>", source=typed_enum)
    assert "k.cu declares N in enum Op" in (raised.value.hint or ""), raised.value.hint
    started = time.process_time()     # CPU time, which a loaded machine does not stretch
    with pytest.raises(SpecError) as raised:      # M is no enumerator: every "enum A :" is looked at
        _spec(tmp_path, "opk<M, T, 16>", source=SOURCE + "enum A : " * 20000)
    assert time.process_time() - started < 5
    assert "qualify it as C++ may: Op::M" in (raised.value.hint or ""), raised.value.hint
