import pytest

from driver_gemm.specfile import expr


@pytest.mark.parametrize("source, env, expected", [
    ("ceil(N / 64)", {"N": 513}, 9),
    ("ceil(M / BM)", {"M": 1001, "BM": 64}, 16),
    ("BN / TN", {"BN": 64, "TN": 4}, 16.0),
    ("(M + 31) // 32", {"M": 33}, 2),
    ("M % 32", {"M": 33}, 1),
    ("min(M, 4) * max(N, 2)", {"M": 7, "N": 1}, 8),
    ("-K + 2 * 3", {"K": 1}, 5),
    ("floor(7 / 2)", {}, 3),
    (128, {}, 128),
    ("max(1, 2, 3)", {}, 3),
    ("wave_efficiency(M, N, 128, 256, 132)", {"M": 2048, "N": 2048}, 128 / 132),   # one wave, 4 SMs idle
    ("wave_efficiency(2048, 3072, 128, 256, 132)", {}, 192 / 264),                 # a wave and 60 of the next
    ("wave_efficiency(320, 4096, 256, 128, 66)", {}, 320 * 4096 / (66 * 256 * 128)),  # 64 tiles, rows past M
    ("wave_efficiency(4096, 4096, 128, 256, 132)", {}, 512 / 528),
    ("wave_efficiency(4160, 4096, 128, 256, 132)", {}, 4160 * 4096 / (4 * 132 * 128 * 256)),  # half a tile row
    ("wave_efficiency(128, 256, 128, 256, 1)", {}, 1.0),
    ("'N'", {}, 78),                     # a BLAS-style kernel's transpose, as C reads the character
    ("'t' - 'a' + 1", {}, 20),
])
def test_arithmetic(source, env, expected):
    assert expr.evaluate(source, env) == expected


@pytest.mark.parametrize("source, env, expected", [
    ("blockDim_x * TN == BN", {"blockDim_x": 16, "TN": 4, "BN": 64}, True),
    ("(BM * BK) % threads == 0", {"BM": 64, "BK": 16, "threads": 768}, False),
    ("1 <= M < 10 and not N > 3", {"M": 5, "N": 3}, True),
    ("M == 1 or N == 1", {"M": 2, "N": 2}, False),
    ("TRANSA == 'T'", {"TRANSA": 84}, True),
])
def test_conditions(source, env, expected):
    assert expr.evaluate(source, env, condition=True) is expected


@pytest.mark.parametrize("source, message", [
    ("__import__('os')", "only ceil, floor, min, max, wave_efficiency may be called"),
    ("M ** 2", "Pow is not allowed"),
    ("M.real", "Attribute is not allowed"),
    ("[M]", "List is not allowed"),
    ("'text'", "only numbers are allowed"),
    ("M if N else K", "IfExp is not allowed"),
    ("ceil(M, N)", "ceil() takes 1 argument"),
    ("max(M)", "max() takes at least 2 arguments"),
    ("wave_efficiency(M, N)", "wave_efficiency() takes 5 arguments, got 2"),
    ("ceil(x=1)", "takes no keyword arguments"),
    ("M ==", "cannot parse"),
    ("", "empty expression"),
    ("M << 2", "LShift is not allowed"),
    ("lambda: 1", "Lambda is not allowed"),
    ("True", "only numbers are allowed"),
    ('"N"', "a C character literal, one printable character in single quotes as 'N', is read as its code"),
    ("'NN'", "only numbers are allowed, not 'NN'"),
    ("'\\n'", "only numbers are allowed"),
    ("''", "only numbers are allowed"),
])
def test_rejects_everything_else(source, message):
    with pytest.raises(expr.ExpressionError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("*", r"\*")):
        expr.parse(source)


def test_wave_efficiency_refuses_what_is_no_tiling():
    for source in ("wave_efficiency(64, 64, 64, 64, 0)", "wave_efficiency(0, 64, 64, 64, 132)",
                   "wave_efficiency(64, 64, -64, 64, 132)"):
        with pytest.raises(expr.ExpressionError, match="every argument must be 1 or more"):
            expr.evaluate(source, {})


def test_comparisons_only_in_conditions():
    with pytest.raises(expr.ExpressionError, match="Compare is not allowed"):
        expr.parse("M == 1")
    assert expr.parse("M == 1", condition=True).names == {"M"}


def test_unknown_names_are_listed():
    with pytest.raises(expr.ExpressionError, match="unknown name BQ .*known: BM, M"):
        expr.evaluate("BQ * M", {"M": 1, "BM": 2})


def test_division_by_zero_is_reported():
    with pytest.raises(expr.ExpressionError, match="division by zero"):
        expr.evaluate("M // (N - N)", {"M": 1, "N": 2})


def test_whole_number_results():
    assert expr.evaluate_int("BN / TN", {"BN": 64, "TN": 4}) == 16
    with pytest.raises(expr.ExpressionError, match="not a whole number"):
        expr.evaluate_int("M / 2", {"M": 3})


def test_names_collected():
    assert expr.parse("ceil(N / BN) + min(M, BM)").names == {"N", "BN", "M", "BM"}
