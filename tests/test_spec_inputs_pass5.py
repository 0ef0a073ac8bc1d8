"""Spec and command-line inputs that were accepted, misread or refused with Python's words, each refused at its place.

An architecture given to ``plan --arch`` that the spec's ``arch:`` refuses, a type-valued param read by an
expression, C++ keywords and macros as template arguments, options that cannot reach NVRTC or change what it
writes, YAML errors without their context, lone surrogates in expressions, numbers written with other digits
than 0-9 or with underscores, field paths that show YAML keys in Python's words, and a results file given as a
spec.
"""

from __future__ import annotations

import gzip
import shutil

import pytest

from driver_gemm.cli import EXIT_USAGE, main
from driver_gemm.specfile import load_spec, spec_from_dict
from driver_gemm.specfile.archs import arch_problem
from driver_gemm.specfile.expr import ExpressionError, parse
from driver_gemm.specfile.sample_patterns import SamplePattern

from conftest import ROOT, SPECS
from malformed import MINIMAL, refused, write

SEED = str(SPECS / "seed.yaml")
SWEEP = str(SPECS / "sweep-v4.yaml")
RESULTS = ROOT / "tests" / "data" / "results"
PARAMS = "params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}"
GRID = "grid: [ceil(N / BN), ceil(M / BM)]"


def _with(text: str, *changes: tuple[str, str]) -> str:
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    return text


def _command_refused(argv, tmp_path, monkeypatch, capsys, field: str, message: str = "") -> str:
    """`argv` ends in exit 2 with one line naming `field` (no traceback, no internal error, nothing written)."""
    workdir = tmp_path / "cwd"
    workdir.mkdir(exist_ok=True)
    monkeypatch.chdir(workdir)
    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as done:     # argparse's own refusal of an option's value
        code = done.code
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE, (argv, code, err)
    assert "Traceback" not in out + err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("driver-gemm: ")]   # argparse adds its usage
    assert len(lines) == 1, err
    assert field in lines[0] and message in lines[0], (field, message, lines[0])
    assert list(workdir.iterdir()) == [], "a refused command writes nothing"
    return lines[0]


# ----- 1. plan --arch


@pytest.mark.parametrize("arch, message", [("sm_089", "unknown architecture sm_089"),
                                           ("sm_90f", "unknown architecture sm_90f"),
                                           ("sm_75a", "unknown architecture sm_75a"),
                                           ("SM_90", "not a GPU architecture: 'SM_90'"),
                                           ("compute_90", "not a GPU architecture"),
                                           ("sm_９０", "not a GPU architecture")])
def test_plan_arch_is_refused_by_the_rule_of_the_spec_arch_field(arch, message, tmp_path, monkeypatch, capsys):
    line = _command_refused(["plan", SEED, "-k", "v1", "--arch", arch], tmp_path, monkeypatch, capsys,
                            "driver-gemm: --arch: ", message)
    spec_error = refused(tmp_path, MINIMAL.replace("    function: sgemm_coarsen_2d",
                                                   f"    function: sgemm_coarsen_2d\n    arch: '{arch}'"),
                         monkeypatch, capsys, field="kernels[v4].arch")
    assert spec_error.message in line and spec_error.message == arch_problem(arch)[0]


def test_an_arch_spelt_otherwise_is_pointed_at_its_name():
    assert "did you mean sm_89?" in arch_problem("sm_089")[1]
    assert "did you mean sm_90a?" in arch_problem("SM_90A")[1]
    assert arch_problem("sm_90a") is None and arch_problem("sm_100f") is None


# ----- 2. type params in expressions


@pytest.mark.parametrize("value", ["float", "'unsigned int'", "'::std'", "[4, float]", "dg::bfloat16_t"])
def test_a_type_param_read_by_an_expression_is_named_as_a_type_param(value, tmp_path, monkeypatch, capsys):
    error = refused(tmp_path, _with(MINIMAL, ("TN: 4}", f"TN: {value}}}")), monkeypatch, capsys,
                    field="kernels[v4].block")
    assert "reads TN, a type (non-numeric) param" in error.message and "unknown name" not in error.message


def test_a_type_param_read_by_a_leading_dimension_or_a_require_is_named_alike(tmp_path, monkeypatch, capsys):
    text = _with(MINIMAL, ("TN: 4}", "TN: 4, T: float}"), (GRID, GRID + "\n    require: ['K % T == 0']"))
    error = refused(tmp_path, text, monkeypatch, capsys, field="kernels[v4].require")
    assert "reads T, a type (non-numeric) param (T: float in params)" in error.message
    text = _with(MINIMAL, ("TN: 4}", "TN: 4, T: float}"), (GRID, GRID + "\n    ld: {a: K + T}"))
    error = refused(tmp_path, text, monkeypatch, capsys, field="kernels[v4].ld.a")
    assert "reads T, a type (non-numeric) param" in error.message


def test_a_type_param_read_by_an_argument_value_is_refused_at_load(tmp_path, monkeypatch, capsys):
    text = _with(MINIMAL, ("TN: 4}", "TN: 4, T: float}"),
                 (GRID, GRID + "\n    signature: [A, B, C, M, N, K, {name: x, type: int32, value: T + 1}]"))
    error = refused(tmp_path, text, monkeypatch, capsys, field="kernels[v4].signature[6]")
    assert "argument x: 'T + 1' reads T, a type (non-numeric) param" in error.message
    assert error.where.endswith(":10"), error.where


# ----- 3. keywords and macros


@pytest.mark.parametrize("value, message", [
    ("delete", "'delete' is a C++ keyword"), ("new", "C++ keyword"), ("sizeof", "C++ keyword"),
    ("this", "C++ keyword"), ("operator", "C++ keyword"), ("'std::int'", "holds int, a C++ keyword"),
    ("__LINE__", "'__LINE__' is a name the compiler defines itself"), ("__FILE__", "defines itself"),
    ("__CUDA_ARCH__", "defines itself"), ("__cplusplus", "defines itself"), ("'lib::__COUNTER__'", "defines itself"),
    ("'config<delete, 4>'", "holds delete, a C++ keyword"), ("'unsigned float'", "is no C++ type"),
    ("'long MyType'", "is no C++ type"), ("[float, delete]", "C++ keyword"),
])
def test_keywords_and_macros_are_no_template_arguments(value, message, tmp_path, monkeypatch, capsys):
    error = refused(tmp_path, _with(MINIMAL, ("TN: 4}", f"TN: 4, X: {value}}}")), monkeypatch, capsys,
                    field="kernels[v4].params.X")
    assert message in error.message, error.message


@pytest.mark.parametrize("value", ["int", "'unsigned int'", "'long long'", "'unsigned long long int'", "'long double'",
                                   "'signed char'", "void", "bool", "'true'", "nullptr", "__nv_bfloat16",
                                   "'lib::Order::Col'", "'config<sizeof(float), 4>'", "'config<unsigned int>'"])
def test_types_and_values_that_are_keywords_stay_accepted(value, tmp_path):
    kernel = load_spec(write(tmp_path, _with(MINIMAL, ("TN: 4}", f"TN: 4, X: {value}}}")))).kernels[0]
    assert isinstance(kernel.params["X"], str)


# ----- 4. options


@pytest.mark.parametrize("option, message", [
    (r'"-DX=\ud800"', "holds '\\ud800', half of a UTF-16 surrogate pair"),
    (r'"-DX=1\n#error boom"', "holds the control character '\\n'"),
    (r'"-DX=1\r"', "control character '\\r'"), (r'"-DX=\x07"', "control character '\\x07'"),
])
def test_options_are_one_line_of_unicode_text(option, message, tmp_path, monkeypatch, capsys):
    error = refused(tmp_path, _with(MINIMAL, (GRID, GRID + f"\n    options: [{option}]")), monkeypatch, capsys,
                    field="kernels[v4].options")
    assert message in error.message, error.message


@pytest.mark.parametrize("options", ['["--optix-ir"]', '["-optix-ir"]', '["-ltoir"]', '["--ltoir"]', '["-lto"]',
                                     '["-rdc=true"]', '["--relocatable-device-code=true"]', '["-rdc"]',
                                     '["-rdc", "true"]', '["-dc"]', '["-dlto"]', '["-r"]'])
def test_options_that_change_what_the_compiler_writes_are_refused(options, tmp_path, monkeypatch, capsys):
    refused(tmp_path, _with(MINIMAL, (GRID, GRID + f"\n    options: {options}")), monkeypatch, capsys,
            field="kernels[v4].options")


@pytest.mark.parametrize("options", ['["-rdc=false"]', '["--relocatable-device-code=false"]', '["-rdc", "false"]',
                                     '["-DX=1\\t2"]', '["-ewp"]'])
def test_harmless_spellings_of_those_options_stay_accepted(options, tmp_path):
    kernel = load_spec(write(tmp_path, _with(MINIMAL, (GRID, GRID + f"\n    options: {options}")))).kernels[0]
    assert kernel.options


# ----- 5. YAML's own errors


def test_yaml_errors_keep_their_context(tmp_path, monkeypatch, capsys):
    anchors = _with(MINIMAL, ("  - [64, 32, 16]", "  - &a [64, 32, 16]\n  - &a [128, 32, 16]"))
    error = refused(tmp_path, anchors, monkeypatch, capsys)
    assert "found duplicate anchor 'a'; first occurrence (line 2), second occurrence (line 3)" in error.message
    assert error.where.endswith(":3")
    error = refused(tmp_path, MINIMAL + "---\nshapes: []\n", monkeypatch, capsys)
    assert "expected a single document in the stream" in error.message
    assert "but found another document" in error.message


# ----- 6, 7. expressions


@pytest.mark.parametrize("change, field", [((GRID, r'grid: ["ceil(N / BN)\ud800", 1]'), "kernels[v4].grid[0]"),
                                           ((GRID, GRID + '\n    require: ["BM > 0 \\ud800"]'),
                                            "kernels[v4].require[0]")])
def test_a_lone_surrogate_in_an_expression_is_named_and_placed(change, field, tmp_path, monkeypatch, capsys):
    error = refused(tmp_path, _with(MINIMAL, change), monkeypatch, capsys, field=field)
    assert "holds '\\ud800', half of a UTF-16 surrogate pair" in error.message and "column" in error.message
    assert "UnicodeEncodeError" not in error.message


@pytest.mark.parametrize("source, message", [("ceil(Ｎ / BN)", "invalid character 'Ｎ' (U+FF2E) at column 6"),
                                             ("６４", "invalid character '６'"), ("1_0 + N", "underscore"),
                                             ("N // 1_000.5", "underscore"), ("N # x", "no comments"),
                                             ("N\u2212 1", "U+2212")])
def test_expressions_are_ascii_with_plain_numbers(source, message):
    with pytest.raises(ExpressionError) as caught:
        parse(source)
    assert message in str(caught.value), str(caught.value)


def test_a_full_width_name_in_a_grid_is_refused_at_its_field(tmp_path, monkeypatch, capsys):
    refused(tmp_path, _with(MINIMAL, (GRID, 'grid: ["ceil(Ｎ / BN)", ceil(M / BM)]')), monkeypatch, capsys,
            field="kernels[v4].grid[0]")
    assert parse("N + 0x10 + 1e3").evaluate({"N": 1}) == 1017   # C's spellings of numbers stay


@pytest.mark.parametrize("argv, field", [
    (["plan", SEED, "--sms", "１２"], "--sms"), (["plan", SEED, "--sms", "1_000"], "--sms"),
    (["run", SEED, "--device", "１"], "--device"), (["run", SEED, "--device", "0,1_0"], "--device"),
    (["tune", SWEEP, "--device", "０"], "--device"), (["tune", SWEEP, "--seed", "1_0"], "--seed"),
    (["tune", SWEEP, "--budget", "５m"], "--budget"), (["run", SEED, "--min-pct", "v1=８０"], "--min-pct"),
    (["run", SEED, "--baseline-results", str(RESULTS / "seed-h200.json"), "--threshold", "５"], "--threshold"),
    (["run", SEED, "--baseline-results", str(RESULTS / "seed-h200.json"), "--threshold", "1_0"], "--threshold"),
    (["run", SEED, "--samples", "flush-idle:５"], "--samples"),
    (["compare", str(RESULTS / "seed-h200.json"), str(RESULTS / "seed-h200.json"), "--threshold", "５"], "--threshold"),
    (["compare", str(RESULTS / "seed-h200.json"), str(RESULTS / "seed-h200.json"), "--threshold", "1_0"],
     "--threshold"),
])
def test_command_line_numbers_are_written_with_ascii_digits(argv, field, tmp_path, monkeypatch, capsys):
    _command_refused(argv, tmp_path, monkeypatch, capsys, field)


@pytest.mark.parametrize("value", ["１", "1_0", "+1", " 1x"])
def test_the_device_variable_is_written_with_ascii_digits(value, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DRIVER_GEMM_DEVICE", value)
    _command_refused(["plan", SEED, "-k", "v1"], tmp_path, monkeypatch, capsys, "DRIVER_GEMM_DEVICE", "digits 0-9")


def test_a_sample_pause_is_written_with_ascii_digits():
    for text in ("flush-idle:５", "flush-idle:1_0", "burst:4:0_5"):
        with pytest.raises(ValueError):
            SamplePattern.parse(text)
    assert SamplePattern.parse("flush-idle:0.5").pause_ms == 0.5


# ----- 8. keys as YAML wrote them


@pytest.mark.parametrize("line, field", [("~: 1", "~"), ("null: 1", "null"), ("yes: 1", "yes"), ("True: 1", "True"),
                                         ("off: 1", "off")])
def test_a_top_level_key_yaml_reads_as_no_text_is_shown_as_written(line, field, tmp_path, monkeypatch, capsys):
    error = refused(tmp_path, MINIMAL + line + "\n", monkeypatch, capsys, field=field)
    assert f"unknown field '{field}'" in error.message and "None" not in str(error)
    assert field == "True" or "True" not in error.message
    assert error.where.endswith(":10"), error.where     # the key's own line, not the document's


@pytest.mark.parametrize("key, field", [("~", "kernels[v4].params.~"), ("yes", "kernels[v4].params.yes"),
                                        ("0x10", "kernels[v4].params.0x10")])
def test_a_param_key_yaml_reads_as_no_text_is_shown_as_written(key, field, tmp_path, monkeypatch, capsys):
    error = refused(tmp_path, _with(MINIMAL, ("TN: 4}", f"TN: 4, {key}: 1}}")), monkeypatch, capsys, field=field)
    assert "None" not in str(error) and "True" not in str(error)


def test_a_key_of_a_dictionary_is_shown_as_its_yaml_value(tmp_path):
    data = {"shapes": [[64, 32, 16]], None: 1,
            "kernels": [{"source": str(ROOT / "kernels" / "04_coarsen_2d.cu"), "function": "f", "block": 1,
                         "grid": 1}]}
    with pytest.raises(Exception) as caught:
        spec_from_dict(data)
    assert caught.value.field == "null" and "None" not in str(caught.value)


# ----- 9. results as a spec


@pytest.mark.parametrize("name", ["seed-h200.json", "tma-bf16-8192-h200.jsonl", "fast-h200.json.gz"])
def test_a_results_file_given_as_a_spec_says_what_it_is(name, tmp_path, monkeypatch, capsys):
    given = tmp_path / name
    shutil.copyfile(RESULTS / name, given)
    line = _command_refused(["plan", given], tmp_path, monkeypatch, capsys, str(given), "not a spec")
    assert f"driver-gemm show {given}" in line and "did you mean" not in line


def test_a_gzip_file_that_is_no_results_is_still_no_spec(tmp_path, monkeypatch, capsys):
    given = tmp_path / "spec.yaml.gz"
    given.write_bytes(gzip.compress(MINIMAL.encode()))
    line = _command_refused(["plan", given], tmp_path, monkeypatch, capsys, str(given), "gzip-compressed data")
    assert "UTF-8" not in line
