"""Names, functions, architectures and the type of every field: each wrong one refused at its field."""

import pytest

from driver_gemm.errors import SpecError
from driver_gemm.specfile import load_spec, spec_from_dict
from driver_gemm.specfile.archs import KNOWN_ARCHS

from malformed import MINIMAL, refused, write

FUNCTION = "    function: sgemm_coarsen_2d"


@pytest.mark.parametrize("name", ["../../etc/x", "a/b", "a\\\\b", ".hidden", "x" * 101, "'with space'", "'tab\\t'",
                                  "''", "42", "[a]", "{a: 1}", "null", "true", "'é'"])
def test_spec_names(tmp_path, monkeypatch, capsys, name):
    refused(tmp_path, f"name: {name}\n" + MINIMAL, monkeypatch, capsys, field="name")


@pytest.mark.parametrize("name", ["../x", "a/b", ".v4", "cublas", "cublas-tf32", "x" * 101, "'v 4'", "[v4]", "7"])
def test_kernel_names(tmp_path, monkeypatch, capsys, name):
    refused(tmp_path, MINIMAL.replace("  - name: v4", f"  - name: {name}"), monkeypatch, capsys,
            field="kernels[0].name")


@pytest.mark.parametrize("function", ["'sgemm; rm -rf /'", "'f<1, 2'", "'f<1>>'", "'f<1,,2>'", "'9abc'",
                                      "'f(1)'", "'a b'", "'f<\"x\">'", "'" + "f" * 9000 + "'", "[f]", "42"])
def test_functions(tmp_path, monkeypatch, capsys, function):
    refused(tmp_path, MINIMAL.replace(FUNCTION, f"    function: {function}"), monkeypatch, capsys,
            field="kernels[v4].function")


def test_a_long_mangled_function_name_is_accepted_and_one_too_long_is_refused_as_too_long(tmp_path):
    # CuTe's and CUTLASS's kernels have mangled names of hundreds to thousands of characters.
    mangled = "_Z1kI5tupleIJ1CILi128EE" + "S2_S1_ILi8EES0_IJS1_ILi32EES3_EE" * 40 + "EEvT_PKfS5_Pfiii"
    text = MINIMAL.replace(FUNCTION, f"    function: {mangled}").replace("    params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}\n", "")
    text = text.replace("BN / TN, BM / TM", "16, 16").replace("ceil(N / BN), ceil(M / BM)", "ceil(N / 64), ceil(M / 64)")
    assert load_spec(write(tmp_path, text)).kernels[0].function == mangled
    with pytest.raises(SpecError, match="function is 9,000 characters long, more than the 8,192"):
        load_spec(write(tmp_path, MINIMAL.replace(FUNCTION, "    function: " + "f" * 9000)))


def test_template_id_functions_are_accepted_without_params(tmp_path):
    text = MINIMAL.replace(FUNCTION, "    function: sgemm_coarsen_2d<64, 64, 16, 4, 4>")
    text = text.replace("    params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}\n", "")
    text = text.replace("BN / TN, BM / TM", "16, 16").replace("ceil(N / BN), ceil(M / BM)", "ceil(N / 64), ceil(M / 64)")
    kernel = load_spec(write(tmp_path, text)).kernels[0]
    assert kernel.instance == "sgemm_coarsen_2d<64, 64, 16, 4, 4>"
    with pytest.raises(SpecError, match="already a template-id"):
        load_spec(write(tmp_path, MINIMAL.replace(FUNCTION, "    function: sgemm_coarsen_2d<64, 64, 16, 4, 4>")))


@pytest.mark.parametrize("param", ["'B M'", "'1x'", "M", "threads", "ceil", "'é'", "'a-b'"])
def test_template_parameter_names(tmp_path, monkeypatch, capsys, param):
    refused(tmp_path, MINIMAL.replace("TN: 4}", f"TN: 4, {param}: 1}}"), monkeypatch, capsys)


@pytest.mark.parametrize("arch, message", [("sm_999", "unknown architecture"), ("sm_91", "unknown architecture"),
                                           ("sm_75a", "unknown architecture"), ("hopper", "such as sm_90a"),
                                           ("90", "such as sm_90a"), ("[sm_90]", "such as sm_90a")])
def test_architectures(tmp_path, monkeypatch, capsys, arch, message):
    error = refused(tmp_path, MINIMAL.replace(FUNCTION, FUNCTION + f"\n    arch: {arch}"), monkeypatch, capsys,
                    field="kernels[v4].arch")
    assert message in error.message
    if "unknown" in message:
        assert "sm_90a" in error.hint


def test_known_architectures_are_accepted(tmp_path):
    for arch in ("sm_90a", "sm_100a", "sm_120", "sm_80"):
        assert arch in KNOWN_ARCHS
        kernel = load_spec(write(tmp_path, MINIMAL.replace(FUNCTION, FUNCTION + f"\n    arch: {arch}"))).kernels[0]
        assert kernel.arch == arch


WRONG_TYPES = ["[]", "{}", "[1, 2]", "{a: 1}", "true", "null", "3.5", "'text'"]


@pytest.mark.parametrize("top, valid", [("kernels", ()), ("shapes", ()), ("measure", ("{}",)), ("verify", ("{}",)),
                                        ("scalars", ("{}", "{a: 1}")), ("baseline", ("true",)),
                                        ("description", ("'text'",)), ("name", ("'text'",))])
@pytest.mark.parametrize("value", WRONG_TYPES)
def test_top_level_field_types(tmp_path, monkeypatch, capsys, top, valid, value):
    if value in valid:
        pytest.skip("a valid value")
    text = MINIMAL
    if top in ("kernels", "shapes"):
        start = text.index(f"{top}:")
        end = text.index("kernels:") if top == "shapes" else len(text)
        text = text[:start] + f"{top}: {value}\n" + text[end:]
    else:
        text += f"{top}: {value}\n"
    refused(tmp_path, text, monkeypatch, capsys)


@pytest.mark.parametrize("field", ["block", "grid", "shared_bytes", "tile", "require", "options", "precision",
                                   "signature", "params", "name", "source", "function"])
@pytest.mark.parametrize("value", WRONG_TYPES)
def test_kernel_field_types(tmp_path, monkeypatch, capsys, field, value):
    if (field, value) in {("require", "[]"), ("options", "[]"), ("params", "{}"), ("require", "'text'"),
                          ("shared_bytes", "'text'"), ("tile", "[1, 2]"), ("require", "[1, 2]"), ("grid", "[1, 2]"),
                          ("block", "[1, 2]"), ("name", "'text'"), ("function", "'text'")}:
        pytest.skip("a valid value")
    kept = [line for line in MINIMAL.splitlines() if not line.startswith(f"    {field}:")
            and not line.startswith(f"  - {field}:")]
    text = "\n".join(kept) + f"\n    {field}: {value}\n"
    if field == "name":
        text = text.replace("kernels:\n", "kernels:\n  -\n").replace("  -\n    source", "  - source")
    refused(tmp_path, text, monkeypatch, capsys)


@pytest.mark.parametrize("dims", ["[64, 32, 16, 8]", "[64, 32]", "[]", "[64, 0, 16]", "[64, -1, 16]", "64x32",
                                  "'64x32x0'", "'1099511627777x1x1'", "[1099511627777, 1, 1]", "{M: 1, N: 1}",
                                  "{MNK: 64, M: 1}", "{MN: 64}", "{M: [], N: 1, K: 1}"])
def test_shape_entries(tmp_path, monkeypatch, capsys, dims):
    refused(tmp_path, MINIMAL.replace("  - [64, 32, 16]", f"  - {dims}"), monkeypatch, capsys)


def test_select_raises_only_spec_errors(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL))
    for kernels, shapes in [(["nope"], []), ([], ["1e9x1x1"]), ([], ["9" * 5000 + "x1x1"]), ([], ["0x1x1"]),
                            ([], ["1099511627777x1x1"]), ([], ["x"]), ([], ["1x1x1x1"])]:
        with pytest.raises(SpecError):
            spec.select(kernels, shapes)


@pytest.mark.parametrize("data", [[], "text", None, {"kernels": [], "shapes": [object()]},
                                  {"shapes": [[1, 2, 3]], "kernels": [{"source": float("nan")}]},
                                  {"shapes": [[10 ** 5000, 1, 1]], "kernels": []}])
def test_spec_from_dict_raises_only_spec_errors(data):
    with pytest.raises(SpecError):
        spec_from_dict(data)


def test_spec_from_dict_with_a_cycle():
    data = {"shapes": [[1, 2, 3]], "kernels": []}
    data["kernels"].append(data)
    with pytest.raises(SpecError):
        spec_from_dict(data)


DISPATCH = MINIMAL + """\
dispatch:
  v4:
    - shape: [64, 32, 16]
      params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}
      label: v4-best
      when: {M: [1, 128]}
"""


@pytest.mark.parametrize("old, new, field", [
    ("label: v4-best", "label: [1, 2]", "dispatch.v4[0].label"),
    ("label: v4-best", "label: {a: 1}", "dispatch.v4[0].label"),
    ("label: v4-best", "label: .nan", "dispatch.v4[0].label"),
    ("label: v4-best", "label: 7", "dispatch.v4[0].label"),
    ("shape: [64, 32, 16]", f"shape: [{2 ** 63}, 32, 16]", "dispatch.v4[0].shape"),
    ("shape: [64, 32, 16]", f"shape: [64, {2 ** 41}, 16]", "dispatch.v4[0].shape"),
    ("when: {M: [1, 128]}", f"when: {{M: [1, {2 ** 63}]}}", "dispatch.v4[0].when.M"),
    ("when: {M: [1, 128]}", f"when: {{M: [{2 ** 41}, null]}}", "dispatch.v4[0].when.M"),
    ("BK: 16, TM: 4, TN: 4}\n      label", f"BK: {2 ** 64}, TM: 4, TN: 4}}\n      label", "dispatch.v4[0].params.BK"),
])
def test_dispatch_entries_out_of_range_or_of_the_wrong_type(tmp_path, monkeypatch, capsys, old, new, field):
    assert old in DISPATCH
    error = refused(tmp_path, DISPATCH.replace(old, new), monkeypatch, capsys, field=field)
    assert "List" not in error.message and "Dict" not in error.message   # said as a list or a mapping


def test_a_dispatch_entry_that_could_never_be_chosen(tmp_path, monkeypatch, capsys):
    text = DISPATCH + "    - shape: 64x32x16\n      params: {BM: 32, BN: 32, BK: 8, TM: 4, TN: 4}\n"
    refused(tmp_path, text, monkeypatch, capsys, field="dispatch.v4[1].shape", message="also the shape of entry 0")


def test_the_dispatch_table_itself_loads(tmp_path):
    spec = load_spec(write(tmp_path, DISPATCH))
    assert spec.dispatch["v4"].entries[0].label == "v4-best"


@pytest.mark.parametrize("require", ["[1, 2]", "3.5", "[true]", "[BM > 0, 7]", "[[BM > 0]]", "[null]"])
def test_conditions_that_are_not_text(tmp_path, monkeypatch, capsys, require):
    """A bare number or flag holds always or never: it checks nothing about a case, so it is refused."""
    error = refused(tmp_path, MINIMAL + f"    require: {require}\n", monkeypatch, capsys)
    assert error.field.startswith("kernels[v4].require") and "condition" in error.message


@pytest.mark.parametrize("require", ["'TM - 4'", "BM", "'BM * BN'", "'max(BM, 0)'", "'-BM'"])
def test_require_text_that_computes_a_number_rather_than_a_condition(tmp_path, monkeypatch, capsys, require):
    """'TM - 4' where 'TM == 4' was meant is true for every TM but 4: refused, as a dispatch entry's if: is."""
    error = refused(tmp_path, MINIMAL + f"    require: [{require}]\n", monkeypatch, capsys)
    assert error.field == "kernels[v4].require[0]" and "is a number, not a condition" in error.message


@pytest.mark.parametrize("value, kind", [("null", "nothing (null)"), ("{}", "an empty mapping"), ("true", "true"),
                                         ("[BM > 0, BN > 0]", "a list of 2")])
def test_a_value_of_the_wrong_kind_is_named_in_yaml_words(tmp_path, monkeypatch, capsys, value, kind):
    error = refused(tmp_path, MINIMAL + f"    require: [{value}]\n", monkeypatch, capsys)
    assert kind in error.message and "NoneType" not in error.message and "dict" not in error.message


@pytest.mark.parametrize("path", ['"kernels/a\\nb.cu"', '"kernels/a\\x07.cu"', '"kernels/a\\tb.cu"'])
def test_a_source_path_with_control_characters_is_refused_and_shown_escaped(tmp_path, monkeypatch, capsys, path):
    text = "\n".join(f"    source: {path}" if line.startswith("    source: ") else line
                     for line in MINIMAL.splitlines()) + "\n"
    error = refused(tmp_path, text, monkeypatch, capsys, field="kernels[v4].source", message="printable text")
    assert "\n" not in str(error) and "\x07" not in str(error)
