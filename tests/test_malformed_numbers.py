"""NaN, infinities, 5000-digit and int64-overflowing numbers, in every field that takes a number."""

import pytest
import yaml

from malformed import MINIMAL, refused

SHAPE_LINE = "  - [64, 32, 16]"
BAD_NUMBERS = [".nan", ".inf", "-.inf", "1e400", "9" * 5000, str(2 ** 63), str(-(2 ** 63) - 1), "true", "[1]",
               "{a: 1}", "'12'", "null"]


def shape(text: str) -> str:
    return MINIMAL.replace(SHAPE_LINE, f"  - {text}")


@pytest.mark.parametrize("number", BAD_NUMBERS + ["0", "-3", "64.5", str(2 ** 41)])
@pytest.mark.parametrize("template, field", [
    ("[{n}, 32, 16]", "shapes[0][0]"),
    ("{{M: {n}, N: 1, K: 1}}", "shapes[0].M"),
    ("{{MNK: [1, {n}]}}", "shapes[0].MNK[1]"),
    ("{{MNK: {{from: {n}, to: 64, step: 1}}}}", "shapes[0].MNK.from"),
    ("{{MNK: {{from: 1, to: {n}, step: 1}}}}", "shapes[0].MNK.to"),
])
def test_shape_numbers(tmp_path, monkeypatch, capsys, number, template, field):
    if number == "[1]" and "from" not in template:
        pytest.skip("a list is a valid dimension there")
    error = refused(tmp_path, shape(template.format(n=number)), monkeypatch, capsys)
    assert error.field.startswith(field), (error.field, field)


@pytest.mark.parametrize("key", ["step", "times"])
@pytest.mark.parametrize("number", BAD_NUMBERS + ["0", "1", "-2"])
def test_range_step_and_times(tmp_path, monkeypatch, capsys, key, number):
    if key == "step" and number == "1":
        pytest.skip("a step of 1 is valid")
    refused(tmp_path, shape(f"{{MNK: {{from: 1, to: 64, {key}: {number}}}}}"), monkeypatch, capsys,
            field=f"shapes[0].MNK.{key}")


@pytest.mark.parametrize("setting", ["warmup", "min_samples", "max_samples", "max_noise", "min_time_s", "timeout_s",
                                     "case_timeout_s", "graph_launches", "rounds"])
@pytest.mark.parametrize("number", BAD_NUMBERS + ["-1"])
def test_measure_numbers(tmp_path, monkeypatch, capsys, setting, number):
    refused(tmp_path, MINIMAL + f"measure: {{{setting}: {number}}}\n", monkeypatch, capsys,
            field=f"measure.{setting}")


@pytest.mark.parametrize("setting, field", [
    ("tolerance: {n}", "verify.tolerance"), ("tolerance: {{rel: {n}}}", "verify.tolerance.rel"),
    ("tolerance: {{abs: {n}}}", "verify.tolerance.abs"), ("tf32_tolerance: {n}", "verify.tf32_tolerance"),
    ("seed: {n}", "verify.seed"), ("cpu_reference_max_gflop: {n}", "verify.cpu_reference_max_gflop"),
])
@pytest.mark.parametrize("number", [n for n in BAD_NUMBERS if n != "null"] + ["-1"])
def test_verify_numbers(tmp_path, monkeypatch, capsys, setting, field, number):
    if field == "verify.tolerance" and number in ("{a: 1}",):
        field = "verify.tolerance.a"
    refused(tmp_path, MINIMAL + "verify: {" + setting.format(n=number) + "}\n", monkeypatch, capsys, field=field)


@pytest.mark.parametrize("number", BAD_NUMBERS)
def test_scalars(tmp_path, monkeypatch, capsys, number):
    refused(tmp_path, MINIMAL + f"scalars: {{alpha: {number}}}\n", monkeypatch, capsys, field="scalars.alpha")


# true/false are template arguments of their own (C++ bools), not numbers gone wrong: see the test below.
@pytest.mark.parametrize("number", [n for n in BAD_NUMBERS if n not in ("[1]", "true")] + ["16.0", "[]", "[16, .nan]"])
def test_template_params(tmp_path, monkeypatch, capsys, number):
    refused(tmp_path, MINIMAL.replace("BK: 16", f"BK: {number}"), monkeypatch, capsys, field="kernels[v4].params.BK")


def test_a_bool_template_param_is_passed_as_a_cpp_bool(tmp_path):
    from driver_gemm.specfile import load_spec
    from test_spec import write

    kernel, = load_spec(write(tmp_path, MINIMAL.replace("BK: 16", "BK: true"))).kernels
    assert kernel.params["BK"] is True and ", true, " in kernel.instance and "BK=true" in kernel.label


@pytest.mark.parametrize("expression, message", [
    ("ceil(1e308*10)", "not a finite number"),
    ("1e400", "not a finite number"),
    ("ceil(1e308)", "does not fit a 64-bit integer"),
    ("9223372036854775807 + 1", "does not fit a 64-bit integer"),
    ("99999999999999999999", "does not fit a 64-bit integer"),
    ("1 // 0", "division by zero"),
    ("ceil(.5 % 0)", "division by zero"),
    (".nan", "cannot parse"),
])
def test_constant_expressions_are_evaluated_while_reading(tmp_path, monkeypatch, capsys, expression, message):
    text = MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", f"grid: [ceil(N / BN), '{expression}']")
    error = refused(tmp_path, text, monkeypatch, capsys, field="kernels[v4].grid[1]")
    assert message in error.message


@pytest.mark.parametrize("argument, message", [
    ("{name: lda, type: int32, value: 4294967296}", "does not fit int32"),
    ("{name: lda, type: uint32, value: -1}", "does not fit uint32"),
    ("{name: s, type: float32, value: 1e39}", "beyond the range of float32"),
    ("{name: s, type: float64, value: .inf}", "not a finite number"),
])
def test_constant_arguments_fit_their_type(tmp_path, monkeypatch, capsys, argument, message):
    error = refused(tmp_path, MINIMAL + f"    signature: [A, B, C, M, N, K, {argument}]\n", monkeypatch, capsys)
    assert message in error.message


def test_evaluation_turns_math_errors_into_expression_errors():
    from driver_gemm.specfile import expr

    for source, env in [("ceil(M / N)", {"M": float("inf"), "N": 1}), ("M * M * M", {"M": 2 ** 40}),
                        ("ceil(M)", {"M": float("nan")}), ("M + 1", {"M": 2 ** 64})]:
        with pytest.raises(expr.ExpressionError):
            expr.parse(source).evaluate(env)


@pytest.mark.parametrize("setting, field", [
    ("verify: {{tolerance: {n}}}", "verify.tolerance"), ("verify: {{tolerance: {{rel: {n}}}}}", "verify.tolerance.rel"),
    ("scalars: {{alpha: {n}}}", "scalars.alpha"), ("measure: {{max_noise: {n}}}", "measure.max_noise"),
    ("verify: {{tf32_tolerance: {n}}}", "verify.tf32_tolerance"),
])
@pytest.mark.parametrize("number, written", [("1e-5", "1.0e-5"), ("2E+3", "2.0e+3"), ("-3e2", "-3.0e+2"),
                                             ("1.0e5", "1.0e+5"), ("5.e3", "5.0e+3")])
def test_numbers_yaml_reads_as_text_say_how_to_write_them(tmp_path, monkeypatch, capsys, setting, field, number,
                                                          written):
    """YAML 1.1 (PyYAML) needs a dot and a signed exponent in a float with one: 1e-5 and 1.0e5 are text, refused with
    a hint whose form YAML reads as the number."""
    error = refused(tmp_path, MINIMAL + setting.format(n=number) + "\n", monkeypatch, capsys, field=field)
    assert error.hint and error.hint.endswith(f"write {written}"), error.hint
    assert yaml.safe_load(f"x: {written}")["x"] == float(number)


@pytest.mark.parametrize("value", ["0", "0.0", "-1"])
def test_a_case_timeout_of_zero_would_stop_every_case(tmp_path, monkeypatch, capsys, value):
    refused(tmp_path, MINIMAL + f"measure: {{case_timeout_s: {value}}}\n", monkeypatch, capsys,
            field="measure.case_timeout_s")


def test_a_null_tolerance_is_not_the_default(tmp_path, monkeypatch, capsys):
    refused(tmp_path, MINIMAL + "verify: {tolerance: null}\n", monkeypatch, capsys, field="verify.tolerance",
            message="got nothing (null)")
