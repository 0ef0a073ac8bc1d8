"""Element types: exact encode/decode over every code, draws, type parsing and per-type tolerances."""

from __future__ import annotations

import math

import numpy as np
import pytest

from driver_gemm.errors import SpecError
from driver_gemm.gemm import dtypes
from driver_gemm.gemm.dtypes import ELEMENT_TYPES, GemmTypes, parse_types, error_bound
from driver_gemm.measure.verify import compare

SMALL_FLOATS = ("fp16", "bf16", "e4m3", "e5m2")


def all_codes(name: str) -> np.ndarray:
    element = ELEMENT_TYPES[name]
    return np.arange(2 ** element.float_format.bits).astype(element.storage_dtype)


def independent_decode(name: str, codes: np.ndarray) -> np.ndarray:
    """Decode through float32 bit manipulation (a second derivation, not the table)."""
    codes = codes.astype(np.uint32)
    if name == "bf16":
        with np.errstate(invalid="ignore"):       # NaN codes stay NaN
            return (codes << 16).view(np.float32).astype(np.float64)
    if name == "fp16":
        return codes.astype(np.uint16).view(np.float16).astype(np.float64)
    exponent_bits, mantissa_bits = (4, 3) if name == "e4m3" else (5, 2)
    bias = 2 ** (exponent_bits - 1) - 1
    out = []
    for code in codes.tolist():
        sign = -1.0 if code & 0x80 else 1.0
        exponent = (code >> mantissa_bits) & (2 ** exponent_bits - 1)
        fraction = code & (2 ** mantissa_bits - 1)
        if name == "e4m3" and exponent == 15 and fraction == 7:
            out.append(math.nan)
        elif name == "e5m2" and exponent == 31:
            out.append(sign * math.inf if fraction == 0 else math.nan)
        elif exponent == 0:
            out.append(sign * fraction * 2.0 ** (1 - bias - mantissa_bits))
        else:
            out.append(sign * (1 + fraction / 2 ** mantissa_bits) * 2.0 ** (exponent - bias))
    return np.array(out)


@pytest.mark.parametrize("name", SMALL_FLOATS)
def test_decode_matches_an_independent_derivation_for_every_code(name):
    codes = all_codes(name)
    assert np.array_equal(dtypes.decode(codes, name), independent_decode(name, codes), equal_nan=True)


@pytest.mark.parametrize("name", SMALL_FLOATS)
def test_every_code_survives_decode_then_encode(name):
    codes = all_codes(name)
    values = dtypes.decode(codes, name)
    finite = ~np.isnan(values)
    assert np.array_equal(dtypes.encode(values[finite], name), codes[finite])
    nan_codes = dtypes.encode(values[~finite], name)
    assert np.isnan(dtypes.decode(nan_codes, name)).all()


def test_format_limits():
    assert dtypes.decode(np.uint8(0x7E), "e4m3") == 448.0 == ELEMENT_TYPES["e4m3"].max_finite
    assert np.isnan(dtypes.decode(np.uint8(0x7F), "e4m3"))
    assert dtypes.decode(np.uint8(0x7B), "e5m2") == 57344.0 == ELEMENT_TYPES["e5m2"].max_finite
    assert dtypes.decode(np.uint8(0x01), "e4m3") == 2.0 ** -9        # smallest subnormal
    assert dtypes.decode(np.uint16(0x7F7F), "bf16") == ELEMENT_TYPES["bf16"].max_finite
    assert dtypes.decode(np.uint16(0x7BFF), "fp16") == 65504.0


def test_rounding_is_to_nearest_with_ties_to_even():
    # bf16 around 1: spacing 2**-7. 1 + 2**-8 is a tie between 1 (even code) and 1 + 2**-7 (odd): goes to 1.
    assert dtypes.round_to([1 + 2 ** -8], "bf16")[0] == 1.0
    assert dtypes.round_to([1 + 3 * 2 ** -8], "bf16")[0] == 1 + 2 * 2 ** -7     # tie, goes up to the even code
    assert dtypes.round_to([1 + 2 ** -8 + 2 ** -20], "bf16")[0] == 1 + 2 ** -7
    # e4m3: 464 is halfway between 448 (even code) and the 480 it lacks: stays 448; above it is NaN, no inf.
    assert dtypes.round_to([464.0], "e4m3")[0] == 448.0
    assert np.isnan(dtypes.round_to([465.0, 1e9], "e4m3")).all()
    # e5m2 and fp16 have infinities: past the last tie they overflow to inf, keeping the sign.
    assert dtypes.round_to([-61440.0], "e5m2")[0] == -math.inf
    assert dtypes.round_to([65520.0], "fp16")[0] == math.inf
    assert dtypes.round_to([65519.0], "fp16")[0] == 65504.0
    assert np.signbit(dtypes.round_to([-0.0], "bf16")[0])


def test_fp16_encoding_agrees_with_numpy_on_float64_input():
    rng = np.random.default_rng(3)
    values = rng.standard_normal(200_000) * np.exp2(rng.integers(-26, 17, 200_000))
    with np.errstate(over="ignore"):
        expected = values.astype(np.float16).view(np.uint16)
    assert np.array_equal(dtypes.encode(values, "fp16"), expected)


@pytest.mark.parametrize("name, ml_name", [("bf16", "bfloat16"), ("e4m3", "float8_e4m3fn"),
                                           ("e5m2", "float8_e5m2"), ("fp16", "float16")])
def test_agrees_with_ml_dtypes(name, ml_name):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    target = np.float16 if ml_name == "float16" else getattr(ml_dtypes, ml_name)
    codes = all_codes(name)
    with np.errstate(invalid="ignore"):
        assert np.array_equal(dtypes.decode(codes, name), codes.view(target).astype(np.float64), equal_nan=True)
    # ml_dtypes rounds float64 through float32 first; from float32 input both round once and must agree.
    rng = np.random.default_rng(5)
    values = (rng.standard_normal(100_000) * np.exp2(rng.integers(-20, 20, 100_000))).astype(np.float32)
    with np.errstate(all="ignore"):
        expected = values.astype(target).view(codes.dtype)
    mine = dtypes.encode(values, name)
    finite = np.isfinite(dtypes.decode(expected, name))
    assert np.array_equal(mine[finite], expected[finite])


def nearest_code_by_search(name: str, values: np.ndarray) -> np.ndarray:
    """Round to nearest, ties to the even code, by comparing with the two neighbouring finite values
    (a second derivation, not the encoder's scaling); past the largest finite value: the overflow code."""
    fmt = ELEMENT_TYPES[name].float_format
    positive = dtypes.decode(np.arange(2 ** (fmt.bits - 1)), name)
    finite = positive[: np.argmax(np.where(np.isfinite(positive), positive, -1.0)) + 1]   # codes 0 .. largest
    grid = np.append(finite, 2 * finite[-1] - finite[-2])       # what the next binade would start with
    magnitude = np.abs(values)
    high = np.minimum(np.searchsorted(grid, magnitude), len(grid) - 1)
    low = np.maximum(high - 1, 0)
    up = (2 * magnitude > grid[low] + grid[high]) | ((2 * magnitude == grid[low] + grid[high]) & (high % 2 == 0))
    code = np.where(magnitude > grid[-1], len(grid) - 1, np.where(up, high, low))
    overflowed = (2 ** fmt.exponent_bits - 1) << fmt.mantissa_bits if fmt.has_infinity else len(grid) - 1
    code = np.where(code == len(grid) - 1, overflowed, code)
    return np.where(np.signbit(values), code | (1 << (fmt.bits - 1)), code)


@pytest.mark.parametrize("name", SMALL_FLOATS)
def test_encoding_rounds_every_tie_and_its_neighbours_to_the_nearest_code(name):
    # Every midpoint between neighbouring finite values (the ties), a hair either side of each, and values
    # spread over every binade from below the subnormals to past the overflow, both signs.
    values = dtypes.decode(all_codes(name), name)
    finite = np.sort(np.unique(np.abs(values[np.isfinite(values)])))
    ties = (finite[:-1] + finite[1:]) / 2
    rng = np.random.default_rng(11)
    fmt = ELEMENT_TYPES[name].float_format
    spread = rng.random(50_000) * np.exp2(rng.integers(-fmt.bias - fmt.mantissa_bits - 3, fmt.bias + 3, 50_000))
    probes = np.concatenate([ties, np.nextafter(ties, 0), np.nextafter(ties, np.inf), finite, spread, [0.0]])
    probes = np.concatenate([probes, -probes])
    assert np.array_equal(dtypes.encode(probes, name), nearest_code_by_search(name, probes))


@pytest.mark.parametrize("name", list(dtypes.INPUT_TYPES) + ["int32"])
def test_draws_are_exactly_representable_and_spread(name):
    values = dtypes.draw((64, 48), name, np.random.default_rng(7))
    assert values.shape == (64, 48) and values.dtype == np.float64
    assert dtypes.is_representable(values, name).all()
    if name == "uint8":     # unsigned: every whole number of [0, 8]
        assert set(np.unique(values)) == set(range(dtypes.INTEGER_DRAW_LIMIT + 1))
    else:
        assert len(np.unique(values)) > 10 and values.min() < 0 < values.max()
    assert np.abs(values).max() <= (dtypes.INTEGER_DRAW_LIMIT if ELEMENT_TYPES[name].is_integer else 0.5)
    round_trip = dtypes.from_bytes(dtypes.to_bytes(values, name), name, values.shape)
    assert np.array_equal(round_trip, values)
    assert len(dtypes.to_bytes(values, name)) == values.size * ELEMENT_TYPES[name].storage_bytes


def test_tf32_draws_are_float32_not_tf32():
    values = dtypes.draw((4096,), "tf32", np.random.default_rng(1))
    assert (dtypes.round_to(values, "tf32") != values).mean() > 0.99
    assert np.abs(dtypes.round_to(values, "tf32") - values).max() <= 2.0 ** -11 * 0.5


def test_is_representable_says_no_to_values_between_codes():
    assert not dtypes.is_representable([0.1], "e4m3")[0]
    assert dtypes.is_representable([0.1015625], "e4m3")[0]     # 13/128
    assert not dtypes.is_representable([128.0], "int8")[0]
    assert not dtypes.is_representable([1.5], "int8")[0]


def test_from_bytes_checks_the_length():
    with pytest.raises(ValueError, match="expected 6"):
        dtypes.from_bytes(b"\x00" * 10, "bf16", (2, 3))


def test_poison_codes_are_nans_no_conversion_produces():
    for name in ("fp16", "bf16"):
        code = dtypes.poison_code(name)
        assert np.isnan(dtypes.decode(np.uint16(code), name))
        assert dtypes.encode([math.nan], name)[0] != code
        codes = dtypes.encode([1.0, 2.0], name)
        codes[1] = code
        assert dtypes.unwritten_mask(codes, name).tolist() == [False, True]
    int32_codes = np.array([dtypes.poison_code("int32"), 0], np.int32)
    assert dtypes.unwritten_mask(int32_codes, "int32").tolist() == [True, False]


@pytest.mark.parametrize("name", ["fp32", "tf32", "fp16", "bf16", "int32"])
def test_poison_codes_hold_the_pattern_bit_for_bit(name):
    # A float32 output filled with the number 0x7FC0DEAD (2.1e9) instead of the NaN with that bit pattern lets
    # a kernel that reads C with beta = 0 pass (0 x 2.1e9 = 0).
    element = dtypes.element_type(name)
    codes = dtypes.poison_codes(3, name)
    assert codes.dtype == element.storage_dtype
    width = 8 * element.storage_bytes
    assert codes.view(f"uint{width}").tolist() == [dtypes.poison_code(name) % 2 ** width] * 3
    if not element.is_integer:
        assert np.isnan(dtypes.decode(codes, name)).all()
    codes[1] = dtypes.encode([1.0], name)[0]
    assert dtypes.unwritten_mask(codes, name).tolist() == [True, False, True]
    # A NaN the hardware makes (its canonical payload) is written, not the poison.
    if name in ("fp32", "tf32"):
        assert not dtypes.unwritten_mask(np.array([np.float32("nan")]), name)[0]


def test_cuda_enum_values_match_nvmath():
    nvmath = pytest.importorskip("nvmath")
    for element in ELEMENT_TYPES.values():
        name = {"fp32": "CUDA_R_32F", "tf32": "CUDA_R_32F", "fp16": "CUDA_R_16F", "bf16": "CUDA_R_16BF",
                "e4m3": "CUDA_R_8F_E4M3", "e5m2": "CUDA_R_8F_E5M2", "int8": "CUDA_R_8I", "uint8": "CUDA_R_8U",
                "int32": "CUDA_R_32I"}
        assert element.cuda_data_type == int(getattr(nvmath.CudaDataType, name[element.name]))


# ------------------------------------------------------------------------------------------- parsing

def test_parse_types_defaults_and_labels():
    assert parse_types({"a": "bf16"}).as_dict() == {"a": "bf16", "b": "bf16", "c": "bf16", "accumulate": "fp32"}
    assert parse_types({"a": "fp8_e4m3"}).as_dict() == {"a": "e4m3", "b": "e4m3", "c": "fp32", "accumulate": "fp32"}
    assert parse_types({"a": "int8"}).as_dict() == {"a": "int8", "b": "int8", "c": "int32", "accumulate": "int32"}
    # unsigned bytes (immaTensorCoreGemm's uint8_t*), alone or beside signed ones as IMMA takes them
    assert parse_types({"a": "uint8"}).as_dict() == {"a": "uint8", "b": "uint8", "c": "int32", "accumulate": "int32"}
    assert parse_types({"a": "u8", "b": "int8"}).label == "uint8.int8-int32"
    assert parse_types({"a": "bf16"}).label == "bf16"
    assert parse_types({"a": "e4m3", "c": "bf16"}).label == "e4m3-bf16"
    assert parse_types({"a": "e4m3", "b": "e5m2", "c": "fp16"}).label == "e4m3.e5m2-fp16"
    assert parse_types(None) == dtypes.FP32


@pytest.mark.parametrize("node, field, message", [
    ({"a": "bf17"}, "types.a", "unknown element type 'bf17'"),
    ({"a": "bf16", "d": "fp32"}, "types.d", "unknown key 'd'"),
    ({"b": "bf16"}, "types.a", "type of A is missing"),
    ({"a": "bf16", "c": "e4m3"}, "types.c", "e4m3 cannot be C's type"),
    ({"a": "bf16", "accumulate": "bf16"}, "types.accumulate", "cannot be the accumulator's type"),
    ({"a": "int8", "b": "bf16"}, "types", "8-bit integer inputs go together"),
    ({"a": "bf16", "accumulate": "int32"}, "types.accumulate", "accumulate in fp32 or fp16"),
    ({"a": "tf32", "b": "fp32"}, "types", "tf32 is tensor-core math"),
    ("bf16", "types", "types is a mapping"),
])
def test_parse_types_errors_name_the_field(node, field, message):
    with pytest.raises(SpecError, match=message) as caught:
        parse_types(node, where="specs/types.yaml:12")
    assert caught.value.field == field
    assert str(caught.value).startswith(f"specs/types.yaml:12: {field}: ")


# ----------------------------------------------------------------------------------------- tolerance

def test_tolerance_grows_with_k_and_with_coarser_types():
    bf16, fp16, fp32 = (parse_types({"a": name}) for name in ("bf16", "fp16", "fp32"))
    for types in (bf16, fp16, fp32):
        assert error_bound(types, 64) < error_bound(types, 1024) < error_bound(types, 8192)
    assert error_bound(fp32, 1024) < error_bound(fp16, 1024) < error_bound(bf16, 1024)
    fp16_accumulate = parse_types({"a": "fp16", "accumulate": "fp16"})
    assert error_bound(fp16_accumulate, 1024) > 4 * error_bound(fp16, 1024)
    assert error_bound(parse_types({"a": "tf32"}), 1024) > 50 * error_bound(fp32, 1024)
    assert error_bound(parse_types({"a": "int8"}), 4096) == 0.0
    # fp32 keeps the order of the project's fixed 1e-5 at K = 1024.
    assert 5e-6 < error_bound(fp32, 1024) < 2e-5


def test_fp8_tolerance_admits_hoppers_tensor_core_accumulation_and_still_catches_a_dropped_term():
    e4m3_fp32 = parse_types({"a": "e4m3", "c": "fp32"})
    # cuBLASLt's e4m3 -> fp32 matmul on an H200 at K = 160 is 8.7e-5 off the float64 product
    assert error_bound(e4m3_fp32, 160) > 2 * 8.7e-5
    assert error_bound(e4m3_fp32, 160) > 100 * error_bound(parse_types({"a": "fp32"}), 160)
    # bf16 output rounding still dominates an e4m3 -> bf16 bound
    e4m3_bf16 = parse_types({"a": "e4m3", "c": "bf16"})
    assert error_bound(e4m3_bf16, 160) < 1.5 * error_bound(parse_types({"a": "bf16", "c": "bf16"}), 160)
    # one missing K term in a hundred costs ~10 %, far above the bound even at K = 8192
    assert error_bound(e4m3_fp32, 8192) < 0.05


def simulated_gemm(a: np.ndarray, b: np.ndarray, types: GemmTypes) -> np.ndarray:
    """What a correct kernel computes: sequential accumulation in the declared type, then rounding to C's type."""
    accumulator = np.float16 if types.accumulate.name == "fp16" else np.float32
    a_math = dtypes.round_to(a, "tf32") if types.a.name == "tf32" else a
    b_math = dtypes.round_to(b, "tf32") if types.b.name == "tf32" else b
    total = np.zeros((a.shape[0], b.shape[1]), dtype=accumulator)
    for k in range(a.shape[1]):
        product = (a_math[:, k:k + 1] * b_math[k:k + 1, :]).astype(accumulator)
        total = (total + product).astype(accumulator)
    return dtypes.round_to(total.astype(np.float64), types.c)


CASES = [{"a": "bf16"}, {"a": "fp16"}, {"a": "fp16", "accumulate": "fp16"}, {"a": "e4m3", "c": "bf16"},
         {"a": "e5m2", "c": "fp16"}, {"a": "e4m3", "b": "e5m2"}, {"a": "fp32"}, {"a": "tf32"}]


@pytest.mark.parametrize("node", CASES, ids=lambda n: "-".join(n.values()))
def test_tolerance_admits_a_correct_result_and_rejects_one_wrong_element(node):
    types = parse_types(node)
    rng = np.random.default_rng(11)
    M, N, K = 48, 40, 777
    a, b = dtypes.draw((M, K), types.a, rng), dtypes.draw((K, N), types.b, rng)
    expected = a @ b
    result = simulated_gemm(a, b, types)
    rel_tolerance = error_bound(types, K)
    verdict = compare(result, expected, rel_tolerance=rel_tolerance)
    assert verdict.status == "PASS" and verdict.wrong == 0
    assert verdict.rel_fro_error < rel_tolerance / 2          # a correct result sits well inside
    wrong = result.copy()
    wrong[M // 2, N // 3] += 1.5 * rel_tolerance * np.linalg.norm(expected)
    verdict = compare(wrong, expected, rel_tolerance=rel_tolerance)
    assert verdict.status == "FAIL" and verdict.wrong == 1 and verdict.masks["wrong"][M // 2, N // 3]


def test_tolerance_rejects_a_kernel_that_drops_the_last_partial_k_tile():
    types = parse_types({"a": "bf16"})
    rng = np.random.default_rng(2)
    a, b = dtypes.draw((64, 777), types.a, rng), dtypes.draw((777, 64), types.b, rng)
    dropped = dtypes.round_to(a[:, :768] @ b[:768, :], types.c)      # 9 of 777 terms missing
    assert compare(dropped, a @ b, rel_tolerance=error_bound(types, 777)).status == "FAIL"


def test_unsigned_bytes_are_padded_with_the_largest_and_have_no_vendor_matmul():
    from driver_gemm.gemm.operands import padding_value
    from driver_gemm.measure.cublaslt import _compute_and_scale as lt_combination
    assert padding_value(ELEMENT_TYPES["uint8"]) == 255.0     # 0, the smallest, is drawn: it would hide a read
    assert padding_value(ELEMENT_TYPES["int8"]) == -128.0
    assert math.isnan(padding_value(ELEMENT_TYPES["bf16"]))
    assert lt_combination(parse_types({"a": "uint8"})) == "cuBLASLt has no matmul of unsigned 8-bit inputs"
    assert lt_combination(parse_types({"a": "int8"}))[0] == "COMPUTE_32I"


@pytest.mark.parametrize("c", ["int8", "uint8", "e4m3", "e5m2"])
def test_an_8_bit_c_is_refused_saying_a_requantized_output_is_not_described(c):
    a = "int8" if c in ("int8", "uint8") else "e4m3"
    with pytest.raises(SpecError, match=f"{c} cannot be C's type") as caught:
        parse_types({"a": a, "c": c}, where="spec.yaml:3")
    assert "an 8-bit C (an output requantized with a scale of its own) is not described" in caught.value.hint
    with pytest.raises(SpecError) as wider:
        parse_types({"a": "bf16", "accumulate": "int8"}, where="spec.yaml:3")
    assert "requantized" not in (wider.value.hint or "")
