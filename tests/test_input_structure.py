"""Structured inputs (``structure: {a: upper, b: symmetric}``): A and B drawn as before and then made triangular,
diagonal or symmetric, in the FP32 draw and the typed one (every matrix of a batch), before the reference is worked
out from them; and the refusals, each naming the field. No GPU."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.gemm.operands import impose_structure, make_typed_inputs
from driver_gemm.measure.inputs import draw_operand, make_inputs
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.session.state import HeldTypedInputs
from driver_gemm.session.typed_steps import held_inputs, reference_step
from driver_gemm.specfile import Shape, parse_spec

from conftest import ROOT

SM90 = arch_limits("sm_90")


def spec_text(structure: str | None, *, extra: str = "  batch: 3\n", shapes: str = "[[48, 40, 40]]",
              signature: str = "") -> str:
    structured = f"  structure: {structure}\n" if structure is not None else ""
    return (f"shapes: {shapes}\nkernels:\n- name: structured\n  source: {ROOT / 'kernels/04_coarsen_2d.cu'}\n"
            f"  function: sgemm_coarsen_2d\n  params: {{BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}}\n"
            f"  types: {{a: bf16, b: bf16, c: fp32, accumulate: fp32}}\n{extra}{structured}"
            f"  block: [BN / TN, BM / TM]\n  grid: [ceil(N / BN), ceil(M / BM)]\n{signature}")


def parsed(text: str):
    return parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True)


def has_structure(matrix: np.ndarray, structure: str) -> bool:
    rows, cols = matrix.shape
    outside = {"upper": np.tril(np.ones((rows, cols), bool), -1), "lower": np.triu(np.ones((rows, cols), bool), 1),
               "diagonal": ~np.eye(rows, cols, dtype=bool)}
    if structure == "symmetric":
        return bool((matrix == matrix.T).all())
    return bool((matrix[outside[structure]] == 0).all())


# ------------------------------------------------------------------------------------------------ the draws

@pytest.mark.parametrize("structure", ["upper", "lower", "diagonal"])
@pytest.mark.parametrize("rows, cols", [(7, 7), (5, 9), (9, 5)])
def test_triangles_and_diagonals_of_any_matrix_keep_the_drawn_values_there(structure, rows, cols):
    drawn = draw_operand(3, "A", rows, cols)
    made = impose_structure(drawn, structure)
    assert made.dtype == drawn.dtype and has_structure(made, structure)
    kept = made != 0
    assert (made[kept] == drawn[kept]).all() and kept.sum() > min(rows, cols) - 1


def test_a_symmetric_matrix_mirrors_its_upper_triangle_and_a_rectangular_one_is_refused():
    drawn = draw_operand(4, "B", 6, 6)
    made = impose_structure(drawn, "symmetric")
    assert has_structure(made, "symmetric") and (np.triu(made) == np.triu(drawn)).all()
    with pytest.raises(ValueError, match="symmetric matrix is square, this one is 6 x 4"):
        impose_structure(draw_operand(4, "B", 6, 4), "symmetric")


def test_the_fp32_draw_imposes_the_structure_on_the_same_values_and_leaves_c0_alone():
    shape = Shape(12, 12, 12)
    full = make_inputs(shape, 9, with_c=True)
    made = make_inputs(shape, 9, with_c=True, structure={"a": "lower", "b": "symmetric"})
    assert has_structure(made.A, "lower") and has_structure(made.B, "symmetric")
    assert (made.A == np.tril(full.A)).all() and (np.triu(made.B) == np.triu(full.B)).all()
    assert (made.C0 == full.C0).all()
    assert (make_inputs(shape, 9).A == draw_operand(9, "A", 12, 12)).all()     # without it, the draw of old


@pytest.mark.parametrize("structure", ["upper", "lower", "diagonal", "symmetric"])
def test_every_matrix_of_a_typed_batch_has_the_structure_and_the_same_draw_beneath(structure):
    kernel = parsed(spec_text(f"{{a: {structure}, b: {structure}}}")).kernels[0]
    plain = parsed(spec_text(None)).kernels[0]
    shape = Shape(40, 40, 40)
    plan, plain_plan = plan_case(kernel, shape, SM90), plan_case(plain, shape, SM90)
    assert not plan.problems, plan.problems
    made = make_typed_inputs(plan.operands, kernel.operands.types, 11)
    full = make_typed_inputs(plain_plan.operands, plain.operands.types, 11)
    assert made.a.shape == (3, 40, 40) and made.b.shape == (3, 40, 40)
    for index in range(3):
        assert has_structure(made.a[index], structure) and has_structure(made.b[index], structure)
        assert (made.a[index] == impose_structure(full.a[index], structure)).all()
        assert (made.b[index] == impose_structure(full.b[index], structure)).all()


def test_the_reference_is_the_product_of_the_structured_inputs():
    spec = parsed(spec_text("{a: upper, b: diagonal}", shapes="[[40, 24, 32]]"))
    kernel, shape = spec.kernels[0], Shape(40, 24, 32)
    plan = plan_case(kernel, shape, SM90)
    assert not plan.problems, plan.problems
    session = SimpleNamespace(typed_inputs_for=lambda key, draw, draw_bytes: draw())
    run = SimpleNamespace(case=SimpleNamespace(plan=plan, kernel=kernel, shape=shape, lt=None), spec=spec,
                          session=session, record=SimpleNamespace(seed=None), typed=None)
    held_inputs(run)
    assert isinstance(run.typed.held, HeldTypedInputs)
    a, b = run.typed.inputs.a, run.typed.inputs.b
    assert all(has_structure(matrix, "upper") for matrix in a) and all(has_structure(m, "diagonal") for m in b)
    reference_step(run)
    assert np.allclose(run.expected, np.matmul(a, b), rtol=1e-12, atol=1e-12)
    assert np.count_nonzero(np.tril(a[0], -1)) == 0 and np.count_nonzero(a[0]) > 0


def test_a_kernel_without_structure_draws_as_before():
    kernel = parsed(spec_text(None)).kernels[0]
    assert kernel.operands.structure == {}
    plan = plan_case(kernel, Shape(48, 40, 40), SM90)
    assert plan.operands.structure == () and plan.operands.structure_note() is None


# ---------------------------------------------------------------------------------------------- the refusals

@pytest.mark.parametrize("structure, needle, field", [
    ("{a: banded}", "the structure of A is one of upper, lower, diagonal, symmetric, got 'banded'", "structure.a"),
    ("{b: 3}", "the structure of B is one of upper, lower, diagonal, symmetric, got", "structure.b"),
    ("{c: upper}", "unknown field", "structure.c"),
    ("upper", "structure is a mapping like {a: upper, b: lower}", "structure"),
])
def test_a_malformed_structure_is_refused_at_its_line(structure, needle, field):
    with pytest.raises(SpecError, match=re.escape(needle)) as raised:
        parsed(spec_text(structure))
    assert raised.value.where and raised.value.field == f"kernels[structured].{field}"


def test_groups_take_no_structure():
    with pytest.raises(SpecError, match="groups take no structure") as raised:
        parsed(spec_text("{a: upper}", extra="  groups: {count: 4}\n"))
    assert raised.value.field == "kernels[structured].structure"


def test_a_quantized_b_takes_no_structure():
    codes = ("    - {name: qweight, type: buffer, element: int32, size: K / 8 * N, "
             "quantized: {of: B, part: codes, bits: 4, group: 8, pack: {along: K}}}\n")
    signature = f"  signature:\n    - A\n{codes}    - C\n    - M\n    - N\n    - K\n"
    with pytest.raises(SpecError, match="structure.b does not go with a quantized B") as raised:
        parsed(spec_text("{b: upper}", extra="", signature=signature))
    assert raised.value.field == "kernels[structured].structure.b"


def test_a_symmetric_operand_of_a_rectangular_shape_makes_the_case_invalid_naming_the_field():
    kernel = parsed(spec_text("{a: upper, b: symmetric}", shapes="[[48, 40, 40], [48, 24, 40]]")).kernels[0]
    assert not plan_case(kernel, Shape(48, 40, 40), SM90).problems
    problems = plan_case(kernel, Shape(48, 24, 40), SM90).problems
    assert problems and "a symmetric B is square, but it is 40 x 24" in problems[0].message
    assert problems[0].field.endswith("structure.b") and "K == N" in (problems[0].hint or "")


def test_the_schema_takes_the_structure_and_refuses_other_words_and_keys():
    jsonschema = pytest.importorskip("jsonschema")
    import json
    import yaml
    validator = jsonschema.Draft202012Validator(json.loads((ROOT / "driver_gemm/specfile/schema.json").read_text()))
    assert not list(validator.iter_errors(yaml.safe_load(spec_text("{a: upper, b: symmetric}"))))
    for wrong in ("{a: banded}", "{c: upper}"):
        assert list(validator.iter_errors(yaml.safe_load(spec_text(wrong)))), wrong


def test_the_plan_says_which_structure_the_inputs_are_drawn_with():
    kernel = parsed(spec_text("{a: upper, b: symmetric}")).kernels[0]
    notes = plan_case(kernel, Shape(48, 40, 40), SM90).notes
    assert any(note.startswith("inputs drawn structured: A upper triangular") and "B symmetric" in note
               for note in notes), notes
    plain = parsed(spec_text(None)).kernels[0]
    assert not any("structured" in note for note in plan_case(plain, Shape(48, 40, 40), SM90).notes)


def test_check_kernel_refuses_a_structure_it_cannot_draw():
    import driver_gemm as dg

    class Operand:
        def __init__(self, shape, address):
            self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (address, False),
                                             "version": 3, "strides": None}

    with pytest.raises(dg.ArgumentError, match="structure= is not taken.*make the tensors structured"):
        dg.check_kernel(source=ROOT / "kernels" / "02_smem_tiles.cu", function="sgemm_smem_tiles<16>",
                        a=Operand((64, 32), 0x7F0000000000), b=Operand((32, 48), 0x7F0001000000),
                        c=Operand((64, 48), 0x7F0002000000), grid=["ceil(N / 16)", "ceil(M / 16)"], block=[16, 16],
                        structure={"a": "upper"})
