"""A weight-only quantized B (AWQ, GPTQ, Marlin): its parts (codes, scales, zero points) parsed and refused at their
field, planned per shape (sizes checked, a note each), packed bit for bit as the layouts say, laid out by a builder,
and drawn so that B = (q - z) * s is exact in fp16 and bf16. No GPU."""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.gemm import dtypes
from driver_gemm.planning.buffer_plans import QuantizedFillFailed
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.planning.quantized_layouts import QUANTIZED_SCALE_EXPONENTS, draw_quantized, pack_codes
from driver_gemm.specfile import Shape, parse_spec

from conftest import ROOT, SPECS

SM90 = arch_limits("sm_90")
SOURCE = ROOT / "kernels/outside/args_w4a16.cu"
CODES = ("{name: qweight, type: buffer, element: int32, size: K / 8 * N, "
         "quantized: {of: B, part: codes, bits: 4, group: 128, pack: {along: K}}}")
SCALES = "{name: scales, type: buffer, element: float16, size: K / 128 * N, quantized: {of: B, part: scales}}"
ZEROS = ("{name: qzeros, type: buffer, element: int32, size: K / 128 * ceil(N / 8), "
         "quantized: {of: B, part: zeros, pack: {along: N}}}")
TYPES = "types: {a: fp16, b: fp16, c: fp16, accumulate: fp32}"


def spec_text(codes: str = CODES, scales: str = SCALES, zeros: str = ZEROS, *, typed: str = TYPES, extra: str = "",
              shapes: str = "[[1001, 515, 768], [64, 4096, 4096]]", first: str = "A", last: str = "") -> str:
    arguments = [*first.split(", "), codes, scales, zeros, "C", "M", "N", "K", "{name: group, type: int32, value: 128}"]
    listed = "".join(f"    - {item}\n" for item in arguments if item) + (f"    - {last}\n" if last else "")
    return (f"shapes: {shapes}\nkernels:\n- name: w4a16\n  source: {SOURCE}\n  function: args_w4a16\n"
            f"  params: {{IGNORE_ZEROS: false}}\n  {typed}\n  epilogue: overwrite\n{extra}  block: [16, 16]\n"
            f"  grid: [ceil(N / 16), ceil(M / 16)]\n  signature:\n{listed}")


def parsed(text: str):
    return parse_spec(text, ROOT / "spec.yaml", allow_outside_sources=True)


def refusal(text: str) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parsed(text)
    return caught.value


# ------------------------------------------------------------------------------------------------ the spec


def test_a_gptq_style_kernel_parses_with_each_parts_layout():
    kernel = parsed(spec_text()).kernels[0]
    parts = {argument.name: argument.buffer for _, argument in kernel.device_buffers()}
    codes, scales, zeros = (parts[name].quantized for name in ("qweight", "scales", "qzeros"))
    assert (codes.part, codes.bits, codes.group.source, codes.along, codes.order) == ("codes", 4, "128", "K", None)
    assert (scales.part, scales.bits, scales.group, scales.along) == ("scales", None, None, None)
    assert (zeros.part, zeros.along) == ("zeros", "N")
    assert all(buffer.read_only and buffer.fill == "quantized" for buffer in parts.values())


@pytest.mark.parametrize("item, needle, field", [
    ("{name: q, type: buffer, element: int32, size: K * N, fill: 0, "
     "quantized: {of: B, part: codes, bits: 4, group: 128}}", "it takes no fill", "fill"),
    ("{name: q, type: buffer, element: int32, size: K * N, quantized: [B, codes]}", "quantized is a mapping",
     "quantized"),
    ("{name: q, type: buffer, element: int32, size: K * N, quantized: {part: codes, bits: 4, group: 128}}",
     "needs of", "quantized"),
    ("{name: q, type: buffer, element: int32, size: K * N, quantized: {of: A, part: codes, bits: 4, group: 128}}",
     "of is B, the weights", "quantized.of"),
    ("{name: q, type: buffer, element: int32, size: K * N, quantized: {of: B, part: weights, bits: 4, group: 128}}",
     "part is codes, scales, zeros", "quantized.part"),
    ("{name: q, type: buffer, element: int32, size: K * N, quantized: {of: B, part: codes, bits: 3, group: 128}}",
     "bits is 2, 4, 8", "quantized.bits"),
    ("{name: q, type: buffer, element: int32, size: K * N, quantized: {of: B, part: codes, bits: true, group: 1}}",
     "bits is 2, 4, 8", "quantized.bits"),
    ("{name: q, type: buffer, element: int32, size: K * N, quantized: {of: B, part: codes, group: 128}}",
     "codes part of a quantized B needs bits", "quantized"),
    ("{name: q, type: buffer, element: int32, size: K * N, quantized: {of: B, part: codes, bits: 4}}",
     "codes part of a quantized B needs group", "quantized"),
    ("{name: q, type: buffer, element: int32, size: K * N, "
     "quantized: {of: B, part: codes, bits: 4, group: 128, pack: {along: M}}}", "pack.along is K",
     "quantized.pack.along"),
    ("{name: q, type: buffer, element: int32, size: K * N, "
     "quantized: {of: B, part: codes, bits: 4, group: 128, pack: {along: N, order: [0, 1, 2, 3]}}}",
     "pack.order lists the positions 0 to 8 - 1", "quantized.pack.order"),
    ("{name: q, type: buffer, element: int32, size: K * N, "
     "quantized: {of: B, part: codes, bits: 4, group: 128, pack: {along: N, order: [0, 2, 4, 6, 1, 3, 5, 5]}}}",
     "each once", "quantized.pack.order"),
    ("{name: q, type: buffer, element: uint8, size: K * N, "
     "quantized: {of: B, part: codes, bits: 4, group: 128, pack: {along: K}}}", "packed along K are stored as int32",
     "element"),
    ("{name: q, type: buffer, element: float16, size: K * N, quantized: {of: B, part: codes, bits: 8, group: 128}}",
     "one to an element (no pack) are stored as uint8", "element"),
    ("{name: q, type: buffer, element: int32, size: K * N, "
     "quantized: {of: B, part: codes, bits: 4, group: 128, pack: {builder: 'x.py:f', along: K}}}",
     "takes no along", "quantized.pack.along"),
    ("{name: q, type: buffer, element: int32, size: K * N, quantized: {of: B, part: codes, bits: 4, group: 128},"
     " bias: N}", "a part of a quantized B or a bias, not both", "quantized"),
    ("{name: q, type: buffer, element: int32, size: K * N, "
     "quantized: {of: B, part: codes, bits: 4, group: 128, tile: 2}}", "tile", "quantized.tile"),
])
def test_a_malformed_codes_entry_is_refused_at_its_field(item, needle, field):
    error = refusal(spec_text(codes=item))
    assert needle in str(error), str(error)
    assert error.field == f"kernels[w4a16].signature[1].{field}", error.field
    assert error.where.endswith(":13"), error.where     # the codes entry's line


@pytest.mark.parametrize("scales, needle, field", [
    ("{name: scales, type: buffer, element: int32, size: N, quantized: {of: B, part: scales}}",
     "scales are stored as float16, bfloat16, float32", "element"),
    ("{name: scales, type: buffer, element: float16, size: N, quantized: {of: B, part: scales, pack: {along: K}}}",
     "they take no pack", "quantized.pack"),
    ("{name: scales, type: buffer, element: float16, size: N, quantized: {of: B, part: scales, bits: 8}}",
     "bits 8, but the codes (qweight) have 4", "quantized.bits"),
    ("{name: scales, type: buffer, element: float16, size: N, quantized: {of: B, part: scales, group: 64}}",
     "group 64, but the codes (qweight) have 128", "quantized.group"),
    ("{name: scales, type: buffer, element: uint8, size: N, quantized: {of: B, part: codes, bits: 4, group: 128}}",
     "B's codes are already buffer qweight", "quantized"),
])
def test_a_part_that_contradicts_the_codes_is_refused_at_its_field(scales, needle, field):
    error = refusal(spec_text(scales=scales))
    assert needle in str(error), str(error)
    assert error.field == f"kernels[w4a16].signature[2].{field}", error.field


def test_the_other_parts_may_repeat_the_codes_bits_and_group():
    scales = ("{name: scales, type: buffer, element: bfloat16, size: K / 128 * N, "
              "quantized: {of: B, part: scales, bits: 4, group: 128}}")
    zeros = ("{name: qzeros, type: buffer, element: int32, size: K / 128 * N, "
             "quantized: {of: B, part: zeros, bits: 4, pack: {along: N, order: [0, 2, 4, 6, 1, 3, 5, 7]}}}")
    parsed(spec_text(scales=scales, zeros=zeros))
    bad = zeros.replace("bits: 4, ", "").replace("[0, 2, 4, 6, 1, 3, 5, 7]", "[0, 1, 2, 3]")
    assert "pack.order lists 4 positions, but a 32-bit word holds 8 codes of 4 bits" in str(refusal(
        spec_text(scales=scales, zeros=bad)))


@pytest.mark.parametrize("typed, extra, needle", [
    ("precision: fp32", "", "needs a kernel with typed operands"),
    (TYPES, "  batch: 2\n", "a quantized B is one matrix"),
    ("types: {a: fp32}", "", "types: gives B as fp32"),
    ("types: {a: e4m3, c: fp16}", "", "types: gives B as e4m3"),
])
def test_a_quantized_b_needs_a_typed_kernel_of_one_fp16_or_bf16_matrix(typed, extra, needle):
    error = refusal(spec_text(typed=typed, extra=extra))
    assert needle in str(error), str(error)
    assert error.field == "kernels[w4a16].signature[1].quantized", error.field


def test_codes_need_scales_and_parts_need_codes():
    assert "B's codes need a buffer of their scales" in str(refusal(spec_text(scales="")))
    assert "B's scales need a buffer of its codes" in str(refusal(spec_text(codes="", first="A, B")))


def test_block_scales_of_a_quantized_b_are_refused():
    block = ("{name: sb, type: buffer, element: float32, size: N * K, scales: {of: B, block: [128, 128]}}")
    error = refusal(spec_text(last=block))
    assert "block scales of B would scale it twice" in str(error), str(error)


def test_b_may_be_left_out_of_the_signature_only_where_its_codes_are_given():
    parsed(spec_text())                                      # no B, codes given
    parsed(spec_text(first="A", last="B"))                   # B too: a kernel may take both
    plain = (f"shapes: [[64, 64, 128]]\nkernels:\n- name: no-b\n  source: {SOURCE}\n  function: args_w4a16\n"
             f"  params: {{IGNORE_ZEROS: false}}\n  {TYPES}\n  block: [16, 16]\n  grid: [4, 4]\n"
             "  signature: [A, C, M, N, K]\n")
    error = refusal(plain)
    assert "signature must take B exactly once" in str(error) and "as a quantized B's codes" in str(error)
    # a scales part alone does not stand for B
    assert "signature must take B exactly once" in str(refusal(spec_text(codes="")))


# ------------------------------------------------------------------------------------------------ packing


def test_packing_along_k_puts_row_8r_plus_i_in_bit_field_i_as_gptq_does():
    codes = np.arange(16 * 3, dtype=np.uint8).reshape(16, 3) % 16
    packed = pack_codes(codes, 4, "K")
    assert packed.shape == (2, 3) and packed.dtype == np.uint32
    for r in range(2):
        for n in range(3):
            expected = sum(int(codes[8 * r + i, n]) << (4 * i) for i in range(8))
            assert int(packed[r, n]) == expected
    # column 0 holds rows 0..7 = 0, 3, 6, 9, 12, 15, 2, 5 (mod 16) in nibbles 0..7
    assert int(packed[0, 0]) == 0x52FC9630


def test_packing_along_n_in_awqs_order_puts_column_order_i_in_bit_field_i():
    codes = (np.arange(2 * 16, dtype=np.uint8).reshape(2, 16) % 16)
    order = (0, 2, 4, 6, 1, 3, 5, 7)
    packed = pack_codes(codes, 4, "N", order)
    assert packed.shape == (2, 2)
    # word (0, 0): columns 0..7 hold 0..7; bit field i holds column order[i]: 0, 2, 4, 6, 1, 3, 5, 7
    assert int(packed[0, 0]) == 0x75316420
    for row in range(2):
        for word in range(2):
            expected = sum(int(codes[row, 8 * word + order[i]]) << (4 * i) for i in range(8))
            assert int(packed[row, word]) == expected
    assert int(pack_codes(codes, 4, "N")[0, 0]) == 0x76543210


def test_a_run_past_the_edge_is_completed_with_code_0_and_8_bit_codes_pack_4_to_a_word():
    codes = np.array([[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]], dtype=np.uint8)
    assert pack_codes(codes, 4, "N").tolist() == [[0x87654321, 0x000000A9]]
    assert pack_codes(np.array([[255, 1, 128, 7]], dtype=np.uint8), 8, "N").tolist() == [[0x078001FF]]
    two_bits = pack_codes(np.array([[3], [1], [2], [0], [1]], dtype=np.uint8), 2, "K")
    assert two_bits.tolist() == [[3 | 1 << 2 | 2 << 4 | 0 << 6 | 1 << 8]]


# ------------------------------------------------------------------------------------------------ the draw


@pytest.mark.parametrize("bits, with_zeros", [(2, True), (4, True), (4, False), (8, True), (8, False)])
def test_b_drawn_as_q_minus_z_times_s_is_exact_in_fp16_and_bf16(bits, with_zeros):
    draw = draw_quantized(256, 77, bits, 64, with_zeros, seed=12345)
    assert draw.codes.shape == (256, 77) and draw.exponents.shape == (4, 77)
    assert draw.codes.max() < 1 << bits and (draw.zeros is not None) == with_zeros
    low, high = QUANTIZED_SCALE_EXPONENTS
    assert draw.exponents.min() >= low and draw.exponents.max() <= high
    values = draw.values()
    for element in ("fp16", "bf16"):
        assert dtypes.is_representable(values, element).all()
    z = draw.zero_points() if with_zeros else np.full((4, 77), 1 << (bits - 1))
    expected = (draw.codes.astype(np.float64) - np.repeat(z, 64, axis=0)) * np.repeat(draw.scales(), 64, axis=0)
    assert np.array_equal(values, expected)
    again = draw_quantized(256, 77, bits, 64, with_zeros, seed=12345)
    assert np.array_equal(again.values(), values)            # the same shape and seed: the same B


def planned(text: str, shape: Shape):
    return plan_case(parsed(text).kernels[0], shape, SM90)


def test_each_buffer_is_filled_from_the_draw_as_its_layout_says():
    plan = planned(spec_text(), Shape(33, 20, 256))
    assert plan.valid, plan.problems
    draw = draw_quantized(256, 20, 4, 128, True, seed=7)
    words = plan.buffers["qweight"].initial_bytes(draw).view("<u4").reshape(32, 20)
    assert np.array_equal(words, pack_codes(draw.codes, 4, "K"))
    scales = plan.buffers["scales"].initial_bytes(draw).view("<f2").reshape(2, 20)
    assert np.array_equal(scales.astype(np.float64), draw.scales())
    zeros = plan.buffers["qzeros"].initial_bytes(draw).view("<u4").reshape(2, 3)
    unpacked = np.stack([(zeros[:, n // 8] >> (4 * (n % 8))) & 0xF for n in range(20)], axis=1)
    assert np.array_equal(unpacked, draw.zeros)
    assert all(buffer.read_only and buffer.repeated_word() is None for buffer in plan.buffers.values())


def test_one_code_to_an_element_holds_its_bits_and_bf16_scales_are_exact():
    codes = "{name: q, type: buffer, element: int8, size: K * N, quantized: {of: B, part: codes, bits: 8, group: K}}"
    scales = "{name: s, type: buffer, element: bfloat16, size: N, quantized: {of: B, part: scales}}"
    plan = planned(spec_text(codes=codes, scales=scales, zeros="", typed="types: {a: bf16, c: fp32}",
                             first="A, B"), Shape(16, 24, 64))
    assert plan.valid, plan.problems
    draw = draw_quantized(64, 24, 8, 64, False, seed=3)
    assert np.array_equal(plan.buffers["q"].initial_bytes(draw).view(np.uint8).reshape(64, 24), draw.codes)
    bits = plan.buffers["s"].initial_bytes(draw).view("<u2").astype(np.uint32) << 16
    assert np.array_equal(bits.view(np.float32).astype(np.float64), draw.scales().reshape(-1))
    assert any("no zero points: each is 128" in note for note in plan.notes), plan.notes


def test_a_quantized_part_with_no_draw_says_so():
    plan = planned(spec_text(), Shape(33, 20, 256))
    with pytest.raises(QuantizedFillFailed, match="buffer qweight: .*this run drew none"):
        plan.buffers["qweight"].initial_bytes()


# ------------------------------------------------------------------------------------------------ planning


def test_k_not_a_multiple_of_the_group_or_a_buffer_too_small_makes_the_case_invalid_naming_both():
    plan = planned(spec_text(), Shape(64, 64, 200))
    problems = [(str(problem), problem.field) for problem in plan.problems]
    assert any("K = 200 is no multiple of group 128" in message and field.endswith("signature[1].quantized")
               for message, field in problems), problems
    small = CODES.replace("size: K / 8 * N", "size: K / 8 * N - 1")
    plan = planned(spec_text(codes=small), Shape(64, 64, 256))
    messages = [str(problem) for problem in plan.problems]
    assert any("holds 2,047 elements, but B's 4-bit codes, 8 to an int32 along K (32 x 64 words, row-major) need "
               "2,048 for B of 256 x 64" in message for message in messages), messages


def test_plan_notes_say_what_each_buffer_holds():
    plan = planned(spec_text(), Shape(1001, 515, 768))
    assert plan.valid, plan.problems
    notes = [note for note in plan.notes if note.startswith("quantized")]
    assert notes == [
        "quantized qweight: B's 4-bit codes, 8 to an int32 along K (96 x 515 words, row-major)",
        "quantized scales: a scale per 128 rows of B and column, float16 (6 x 515, row-major)",
        "quantized qzeros: a 4-bit zero point per 128 rows of B and column, 8 to an int32 along N "
        "(6 x 65 words, row-major)"]


# ------------------------------------------------------------------------------------------------ a builder


BUILDER = '''
import numpy as np


def tiles(values):
    # The codes transposed (N x K), packed 8 to a word along K, and the scales by column: any layout at all.
    codes = np.asarray(values["codes"]).T
    words = np.zeros((codes.shape[0], codes.shape[1] // 8), dtype=np.uint64)
    for i in range(8):
        words |= codes[:, i::8].astype(np.uint64) << (4 * i)
    return words


def short(values):
    return [1, 2, 3]


def raises(values):
    raise ValueError("no layout for group %d" % values["group"])
'''


def builder_spec(tmp_path, function: str) -> str:
    (tmp_path / "pack.py").write_text(BUILDER)
    codes = ("{name: qweight, type: buffer, element: int32, size: K / 8 * N, "
             f"quantized: {{of: B, part: codes, bits: 4, group: 128, pack: {{builder: 'pack.py:{function}'}}}}}}")
    return spec_text(codes=codes)


def test_a_pack_builder_gets_the_drawn_values_and_lays_the_buffer_out(tmp_path):
    spec = parse_spec(builder_spec(tmp_path, "tiles"), tmp_path / "spec.yaml", allow_outside_sources=True)
    kernel = spec.kernels[0]
    assert tmp_path / "pack.py" in kernel.builder_files
    plan = plan_case(kernel, Shape(8, 24, 256), SM90)
    assert plan.valid, plan.problems
    assert "laid out by pack.py:tiles when the case is bound" in " ".join(plan.notes)
    draw = draw_quantized(256, 24, 4, 128, True, seed=11)
    words = plan.buffers["qweight"].initial_bytes(draw).view("<u4").reshape(24, 32)
    assert np.array_equal(words, pack_codes(draw.codes.T, 4, "N"))     # unsigned words taken as the int32's bits
    given = plan.buffers["qweight"].quantized.builder_values(draw)
    assert {"codes", "scales", "zeros", "group", "bits", "M", "N", "K"} <= set(given)
    assert given["group"] == 128 and given["bits"] == 4 and given["scales"].shape == (2, 24)


@pytest.mark.parametrize("function, needle", [
    ("short", "buffer qweight: builder pack.py:short returned 3 numbers, but the buffer holds 768"),
    ("raises", "buffer qweight: builder pack.py:raises raised ValueError: no layout for group 128"),
])
def test_a_pack_builder_that_fails_is_said_with_its_buffer(tmp_path, function, needle):
    spec = parse_spec(builder_spec(tmp_path, function), tmp_path / "spec.yaml", allow_outside_sources=True)
    plan = plan_case(spec.kernels[0], Shape(8, 24, 256), SM90)
    with pytest.raises(QuantizedFillFailed) as caught:
        plan.buffers["qweight"].initial_bytes(draw_quantized(256, 24, 4, 128, True, seed=11))
    assert needle in str(caught.value), str(caught.value)
    assert caught.value.buffer == "qweight"


# ------------------------------------------------------------------------------------------------ the real kernel


def test_the_outside_args_w4a16_entries_plan_with_their_notes():
    from driver_gemm.specfile import load_spec
    spec = load_spec(SPECS / "outside-args.yaml").select(kernels=["args-w4a16", "args-w4a16-symmetric"])
    for kernel in spec.kernels:
        for shape in spec.shapes:
            plan = plan_case(kernel, shape, SM90)
            assert plan.valid, (kernel.name, shape.label, plan.problems)
            notes = [note for note in plan.notes if note.startswith("quantized")]
            assert len(notes) == (3 if kernel.name == "args-w4a16" else 2), notes


class _Session:
    """Holds typed inputs by key, as `session.state.Session.typed_inputs_for` does."""

    def __init__(self):
        self.held: dict = {}

    def typed_inputs_for(self, key, draw, draw_bytes):
        if key not in self.held:
            self.held[key] = draw()
        return self.held[key]


def test_a_quantized_kernel_draws_b_from_its_codes_apart_from_a_plain_kernel_of_the_shape():
    from types import SimpleNamespace

    from driver_gemm.session.typed_steps import held_inputs

    shape = Shape(16, 20, 256)
    quantized = parsed(spec_text(first="A, B")).kernels[0]
    # The same kernel described without its quantized parts: planned only, its parameters never bound.
    plain = parsed(spec_text(codes="", scales="", zeros="", first="A, B")).kernels[0]
    session = _Session()

    def run_of(kernel):
        plan = plan_case(kernel, shape, SM90)
        assert plan.valid, plan.problems
        case = SimpleNamespace(lt=None, plan=plan, kernel=kernel, shape=shape)
        run = SimpleNamespace(case=case, spec=SimpleNamespace(verify=SimpleNamespace(seed=0)), session=session,
                              record=SimpleNamespace(seed=None))
        held_inputs(run)
        return run

    coded, ordinary = run_of(quantized), run_of(plain)
    draw = coded.typed.held.quantized
    assert draw is not None and ordinary.typed.held.quantized is None and len(session.held) == 2
    assert np.array_equal(coded.typed.inputs.b[0], draw.values())
    assert np.array_equal(coded.typed.inputs.a, ordinary.typed.inputs.a)       # A drawn as for any kernel
    assert not np.array_equal(coded.typed.inputs.b, ordinary.typed.inputs.b)
    again = run_of(quantized)
    assert again.typed.held is coded.typed.held                                # kept for the next case



def test_a_pack_builder_that_changes_its_arrays_changes_no_later_layout(tmp_path):
    # A format storing z - 1, written as a packer writes it: zeros -= 1 in place. The draw is the session's, made
    # once for the shape's reference: a builder changing it would make the next case lay out other codes.
    spec = parse_spec(builder_spec(tmp_path, "tiles"), tmp_path / "spec.yaml", allow_outside_sources=True)
    plan = plan_case(spec.kernels[0], Shape(8, 24, 256), SM90)
    draw = draw_quantized(256, 24, 4, 128, True, seed=11)
    codes, zeros = draw.codes.copy(), draw.zero_points().copy()
    given = plan.buffers["qweight"].quantized.builder_values(draw)
    given["zeros"] -= 1
    given["codes"] ^= 1
    assert np.array_equal(draw.codes, codes) and np.array_equal(draw.zero_points(), zeros)


def test_bits_given_as_a_float_are_refused_at_the_field():
    error = refusal(spec_text(codes=CODES.replace("bits: 4", "bits: 4.0")))
    assert error.field == "kernels[w4a16].signature[1].quantized.bits", error.field


def test_a_group_a_param_names_is_the_codes_group_of_the_same_value():
    text = spec_text(scales=SCALES.replace("part: scales}", "part: scales, group: G}")).replace(
        "params: {IGNORE_ZEROS: false}", "params: {IGNORE_ZEROS: false, G: 128}")
    parsed(text)
    assert "group G, but the codes (qweight) have 128" in str(refusal(text.replace("G: 128}", "G: 64}")))
