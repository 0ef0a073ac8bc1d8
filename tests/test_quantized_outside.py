"""A quantized B as kernels from outside lay it out: scales laid out by a pack builder or column after column
(bitsandbytes' absmax, [N, K / group]), a pack builder tried while planning as a fill builder is, a codebook
(NF4, FP4: B = codebook[q] * s) drawn, laid out and refused where it cannot hold; and the hint for an empty CuTe
object given as a struct of no fields. No GPU."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.gemm import dtypes
from driver_gemm.planning import buffer_plans, quantized_layouts
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.planning.quantized_layouts import draw_quantized, pack_codes
from driver_gemm.specfile import Shape, parse_spec

from conftest import ROOT

SM90 = arch_limits("sm_90")
SOURCE = ROOT / "kernels/outside/args_w4a16.cu"
TYPES = "types: {a: fp16, b: fp16, c: fp16, accumulate: fp32}"
# bitsandbytes' 4-bit weights: codes one to a byte here (the tests read them back), absmax one float per group of
# consecutive weights of a row of W = B^T.
CODES = "{name: q, type: buffer, element: uint8, size: K * N, quantized: {of: B, part: codes, bits: 4, group: 64}}"
ABSMAX_COL = "{name: absmax, type: buffer, element: float32, size: K / 64 * N, quantized: {of: B, part: scales, " \
             "order: col}}"
NF4_VALUES = (-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
              -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
              0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
              0.7229568362236023, 1.0)


def spec_text(*arguments: str, typed: str = TYPES, shapes: str = "[[1, 96, 256]]") -> str:
    listed = "".join(f"    - {item}\n" for item in ("A", *arguments, "C", "M", "N", "K") if item)
    return (f"shapes: {shapes}\nkernels:\n- name: outside\n  source: {SOURCE}\n  function: args_w4a16\n"
            f"  params: {{IGNORE_ZEROS: true}}\n  {typed}\n  epilogue: overwrite\n  block: [16, 16]\n"
            f"  grid: [ceil(N / 16), ceil(M / 16)]\n  signature:\n{listed}")


def parsed(text: str, folder=ROOT):
    return parse_spec(text, folder / "spec.yaml", allow_outside_sources=True)


def refusal(text: str) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parsed(text)
    return caught.value


def planned(text: str, shape: Shape, folder=ROOT):
    return plan_case(parsed(text, folder).kernels[0], shape, SM90)


# ------------------------------------------------------------------------------------------------ scales' layout


def test_scales_in_column_order_are_bitsandbytes_absmax_layout():
    plan = planned(spec_text(CODES, ABSMAX_COL), Shape(1, 96, 256))
    assert plan.valid, plan.problems
    draw = draw_quantized(256, 96, 4, 64, False, seed=5)
    absmax = plan.buffers["absmax"].initial_bytes(draw).view("<f4").astype(np.float64)
    scales = draw.scales()                                     # K / group x N
    for n in range(96):
        for k in range(0, 256, 37):
            assert absmax[(n * 256 + k) // 64] == scales[k // 64, n]      # kgemm_4bit_inference_naive's index
    assert "quantized absmax: a scale per 64 rows of B and column, float32 (4 x 96, column-major: 96 x 4 " \
           "row-major)" in plan.notes


def test_codes_packed_along_k_in_column_order_are_a_row_of_w_after_another():
    codes = ("{name: q, type: buffer, element: int32, size: K / 8 * N, "
             "quantized: {of: B, part: codes, bits: 4, group: 64, pack: {along: K}, order: col}}")
    zeros = "{name: z, type: buffer, element: uint8, size: K / 64 * N, quantized: {of: B, part: zeros, order: col}}"
    plan = planned(spec_text(codes, ABSMAX_COL, zeros), Shape(1, 24, 128))
    assert plan.valid, plan.problems
    draw = draw_quantized(128, 24, 4, 64, True, seed=2)
    words = plan.buffers["q"].initial_bytes(draw).view("<u4").reshape(24, 16)
    assert np.array_equal(words, pack_codes(draw.codes, 4, "K").T)
    zero_points = plan.buffers["z"].initial_bytes(draw).reshape(24, 2)
    assert np.array_equal(zero_points, draw.zeros.T)


def test_a_scales_pack_builder_lays_them_out(tmp_path):
    (tmp_path / "pack.py").write_text("import numpy as np\n\n\ndef absmax(values):\n"
                                      "    return np.asarray(values['scales']).T * 1.0\n")
    scales = ("{name: absmax, type: buffer, element: float32, size: K / 64 * N, "
              "quantized: {of: B, part: scales, pack: {builder: 'pack.py:absmax'}}}")
    plan = planned(spec_text(CODES, scales), Shape(1, 40, 128), tmp_path)
    assert plan.valid, plan.problems
    draw = draw_quantized(128, 40, 4, 64, False, seed=9)
    absmax = plan.buffers["absmax"].initial_bytes(draw).view("<f4").reshape(40, 2)
    assert np.array_equal(absmax.astype(np.float64), draw.scales().T)
    assert any("a scale per 64 rows of B and column, float32, laid out by pack.py:absmax" in note
               for note in plan.notes), plan.notes


@pytest.mark.parametrize("scales, needle, field", [
    ("{name: s, type: buffer, element: float32, size: N, quantized: {of: B, part: scales, order: rows}}",
     "order is row (the grid of scales", "quantized.order"),
    ("{name: s, type: buffer, element: float32, size: N, "
     "quantized: {of: B, part: scales, order: col, pack: {builder: 'kernels/outside/args_params_struct.py:params'}}}",
     "a pack builder lays the whole buffer out: the part takes no order", "quantized.order"),
    ("{name: s, type: buffer, element: float32, size: N, quantized: {of: B, part: scales, pack: {along: K}}}",
     "they take no pack but a builder", "quantized.pack"),
])
def test_a_scales_layout_that_cannot_be_is_refused_at_its_field(scales, needle, field):
    error = refusal(spec_text(CODES, scales))
    assert needle in str(error) and error.field.endswith(field), (str(error), error.field)


# ------------------------------------------------------------------------------------------------ plan tries builders


BUILDERS = '''
import numpy as np


def codes(values):
    return np.asarray(values["codes"]).T.reshape(-1)


def half(values):
    return np.asarray(values["codes"]).reshape(-1)[: values["K"] * values["N"] // 2]


def fails(values):
    raise RuntimeError("this builder always fails")


def text(values):
    return ["x"] * (values["K"] * values["N"])


def counted(values):
    with open(__file__.replace("pack.py", "calls.txt"), "a") as log:
        log.write("called\\n")
    return np.asarray(values["codes"]).reshape(-1)
'''


def builder_plan(tmp_path, function: str, shape: Shape = Shape(1, 32, 128), extra: str = ""):
    (tmp_path / "pack.py").write_text(BUILDERS)
    codes = ("{name: q, type: buffer, element: uint8, size: K * N, "
             f"quantized: {{of: B, part: codes, bits: 4, group: 64, pack: {{builder: 'pack.py:{function}'}}}}}}")
    scales = "{name: s, type: buffer, element: float32, size: K / 64 * N, quantized: {of: B, part: scales}}"
    return planned(spec_text(codes, scales, extra), shape, tmp_path)


@pytest.mark.parametrize("function, needle", [
    ("fails", "buffer q: builder pack.py:fails raised RuntimeError: this builder always fails (pack.py:"),
    ("half", "buffer q: builder pack.py:half returned 2,048 numbers, but the buffer holds 4,096 (its size)"),
    ("text", "buffer q: builder pack.py:text returned list of <U1 values, not numbers"),
])
def test_plan_tries_a_pack_builder_and_a_wrong_one_makes_the_case_invalid_at_its_line(tmp_path, function, needle):
    plan = builder_plan(tmp_path, function)
    assert not plan.valid
    found = [problem for problem in plan.problems if needle in str(problem)]
    assert found, [str(problem) for problem in plan.problems]
    assert found[0].field.endswith("signature[1].quantized.pack.builder"), found[0].field
    assert "spec.yaml:" in str(found[0])


def test_a_right_pack_builder_plans_ok(tmp_path):
    plan = builder_plan(tmp_path, "codes")
    assert plan.valid, plan.problems
    assert any("laid out by pack.py:codes when the case is bound" in note and "not tried" not in note
               for note in plan.notes), plan.notes


def test_a_pack_builder_is_tried_once_for_the_same_layout_and_shape(tmp_path):
    (tmp_path / "pack.py").write_text(BUILDERS)
    text = spec_text("{name: q, type: buffer, element: uint8, size: K * N, quantized: {of: B, part: codes, bits: 4, "
                     "group: 64, pack: {builder: 'pack.py:counted'}}}",
                     "{name: s, type: buffer, element: float32, size: K / 64 * N, quantized: {of: B, part: scales}}")
    kernel = parsed(text, tmp_path).kernels[0]
    for _ in range(3):     # as a sweep plans a case again with the driver's counts
        assert plan_case(kernel, Shape(1, 32, 128), SM90).valid
    assert (tmp_path / "calls.txt").read_text() == "called\n"
    assert plan_case(kernel, Shape(1, 48, 128), SM90).valid      # another shape: tried again
    assert (tmp_path / "calls.txt").read_text() == "called\ncalled\n"


def test_a_large_b_is_not_drawn_while_planning_and_its_note_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(quantized_layouts, "PLAN_DRAW_ELEMENTS", 1024)
    monkeypatch.setattr(buffer_plans, "PLAN_DRAW_ELEMENTS", 1024)
    plan = builder_plan(tmp_path, "fails", Shape(1, 32, 64))
    assert plan.valid, plan.problems
    assert any("laid out by pack.py:fails when the case is bound (not tried while planning: B has more than 1,024 "
               "elements)" in note for note in plan.notes), plan.notes


# ------------------------------------------------------------------------------------------------ a codebook


NF4_CODES = ("{name: q, type: buffer, element: uint8, size: K * N, "
             "quantized: {of: B, part: codes, bits: 4, group: 64, codebook: nf4}}")
TABLE = "{name: table, type: buffer, element: float32, size: 16, quantized: {of: B, part: codebook}}"


def test_nf4_is_bitsandbytes_table_and_its_buffer_holds_it_as_bs_type_rounds_it():
    kernel = parsed(spec_text(NF4_CODES, ABSMAX_COL, TABLE)).kernels[0]
    codes = next(argument.buffer.quantized for _, argument in kernel.device_buffers() if argument.name == "q")
    assert codes.codebook == NF4_VALUES and codes.codebook_name == "nf4"
    plan = plan_case(kernel, Shape(1, 96, 256), SM90)
    assert plan.valid, plan.problems
    draw = draw_quantized(256, 96, 4, 64, False, seed=1, codebook=plan.buffers["q"].quantized.codebook)
    table = plan.buffers["table"].initial_bytes(draw).view("<f4").astype(np.float64)
    assert np.array_equal(table, dtypes.round_to(np.array(NF4_VALUES), "fp16"))
    assert table[14] != NF4_VALUES[14]                          # 0.7229568... has more bits than fp16 holds
    assert "quantized q: B's 4-bit codes looked up in the NF4 codebook (B = codebook[q] * s), one to a uint8 " \
           "(256 x 96, row-major)" in plan.notes, plan.notes


@pytest.mark.parametrize("name, b_type", [("nf4", "fp16"), ("fp4", "bf16"), ("nf4", "bf16")])
def test_b_is_the_codebook_looked_up_times_the_scale_and_exact_in_its_type(name, b_type):
    codes = NF4_CODES.replace("nf4", name)
    plan = planned(spec_text(codes, ABSMAX_COL, typed=f"types: {{a: {b_type}, c: fp32}}"), Shape(1, 48, 512))
    assert plan.valid, plan.problems
    table = plan.buffers["q"].quantized.codebook
    draw = draw_quantized(512, 48, 4, 64, False, seed=4, codebook=table)
    values = draw.values()
    looked_up = np.array(table)[draw.codes] * np.repeat(draw.scales(), 64, axis=0)
    assert np.array_equal(values, looked_up)
    assert dtypes.is_representable(values, b_type).all()
    assert len(set(np.abs(np.array(table)))) > 4                # not an affine (q - z) * s


def test_fp4_has_bitsandbytes_magnitudes_and_its_sign_in_the_top_bit():
    kernel = parsed(spec_text(NF4_CODES.replace("nf4", "fp4"), ABSMAX_COL)).kernels[0]
    table = next(argument.buffer.quantized.codebook for _, argument in kernel.device_buffers()
                 if argument.name == "q")
    magnitudes = np.array([0.0, 0.005208333333, 0.66666667, 1.0, 0.33333333, 0.5, 0.16666667, 0.25])
    assert np.allclose(table[:8], magnitudes, rtol=1e-7) and np.allclose(table[8:], -magnitudes, rtol=1e-7)


def test_a_listed_codebook_and_the_draw_the_reference_multiplies():
    from driver_gemm.session.typed_steps import held_inputs

    listed = [-1, -0.75, -0.5, -0.25, -0.125, -0.0625, 0, 0.0625, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1]
    codes = NF4_CODES.replace("codebook: nf4", f"codebook: {listed}")
    kernel = parsed(spec_text(codes, ABSMAX_COL, TABLE)).kernels[0]
    shape = Shape(8, 16, 128)
    plan = plan_case(kernel, shape, SM90)
    assert plan.valid, plan.problems
    held: dict = {}
    session = SimpleNamespace(typed_inputs_for=lambda key, draw, size: held.setdefault(key, draw()))
    run = SimpleNamespace(case=SimpleNamespace(lt=None, plan=plan, kernel=kernel, shape=shape),
                          spec=SimpleNamespace(verify=SimpleNamespace(seed=0)), session=session,
                          record=SimpleNamespace(seed=None))
    held_inputs(run)
    draw = run.typed.held.quantized
    assert draw is not None and np.array_equal(draw.codebook, np.array(listed, dtype=np.float64))
    b = run.typed.inputs.b[0]
    assert np.array_equal(b, np.array(listed)[draw.codes] * np.repeat(draw.scales(), 64, axis=0))
    assert plan.buffers["q"].quantized.builder_values(draw)["codebook"].tolist() == listed


@pytest.mark.parametrize("arguments, needle, field", [
    ((CODES, "{name: s, type: buffer, element: float32, size: N, quantized: {of: B, part: scales, codebook: nf4}}"),
     "codebook is given on the codes part", "signature[2].quantized.codebook"),
    ((NF4_CODES.replace("bits: 4", "bits: 8"), ABSMAX_COL), "the NF4 codebook has 16 values, for 4-bit codes",
     "signature[1].quantized.codebook"),
    ((NF4_CODES.replace("nf4", "[0, 1, 2]"), ABSMAX_COL), "a list of the 16 values codes 0 to 15 stand for",
     "signature[1].quantized.codebook"),
    ((NF4_CODES.replace("nf4", "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0.0001]"), ABSMAX_COL),
     "a codebook value is 0 or of a magnitude from 2^-11 to 2^15", "signature[1].quantized.codebook"),
    ((NF4_CODES, ABSMAX_COL, "{name: z, type: buffer, element: uint8, size: K / 64 * N, "
                             "quantized: {of: B, part: zeros}}"),
     "B's codes are looked up in a codebook", "signature[3].quantized"),
    ((CODES, ABSMAX_COL, TABLE), "holds B's codebook, but the codes (q) give none", "signature[3].quantized"),
    ((NF4_CODES, ABSMAX_COL, TABLE.replace("float32", "int32")), "codebook are stored as float16",
     "signature[3].element"),
    ((NF4_CODES, ABSMAX_COL, TABLE.replace("part: codebook", "part: codebook, order: col")),
     "a codebook buffer holds the table", "signature[3].quantized.order"),
])
def test_a_codebook_that_cannot_hold_is_refused_at_its_field(arguments, needle, field):
    error = refusal(spec_text(*arguments))
    assert needle in str(error) and error.field.endswith(field), (str(error), error.field)


def test_a_codebook_buffer_narrower_than_bs_type_makes_the_case_invalid():
    plan = planned(spec_text(NF4_CODES, ABSMAX_COL, TABLE.replace("float32", "bfloat16")), Shape(1, 16, 128))
    assert not plan.valid
    assert any("holds the codebook as bfloat16, which does not hold every value of B's type fp16" in str(problem)
               for problem in plan.problems), [str(problem) for problem in plan.problems]


# ------------------------------------------------------------------------------------------------ CuTe's empty objects


def test_an_empty_struct_is_refused_with_the_one_byte_stand_in_as_its_hint():
    text = spec_text().replace("    - A\n", "    - A\n    - {name: cta_tiler, type: struct, fields: []}\n")
    error = refusal(text)
    assert "got an empty list" in str(error)
    assert error.hint == "an empty C++ object is one byte: {name: cta_tiler, type: uint8, value: 0}", error.hint


def test_a_codebook_makes_another_gemm_than_affine_codes_of_the_same_width():
    from driver_gemm.specfile.same_gemm import computes_differently

    affine = parsed(spec_text(CODES, ABSMAX_COL)).kernels[0]
    nf4 = parsed(spec_text(NF4_CODES, ABSMAX_COL)).kernels[0]
    assert "codebook nf4" in computes_differently(affine, nf4, Shape(1, 96, 256), {})
    assert computes_differently(nf4, nf4, Shape(1, 96, 256), {}) == ""
