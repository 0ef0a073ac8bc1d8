import shutil
import textwrap
from pathlib import Path

import pytest

from driver_gemm.errors import SpecError
from driver_gemm.specfile import DEFAULT_SPEC, Shape, load_spec, parse_shape_text, parse_spec

from conftest import ROOT, SPECS

KERNEL = "../kernels/04_coarsen_2d.cu"


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    """A spec in specs/ of a small project (a pyproject.toml marks it) with a copy of kernels/ beside it,
    laid out like the repository, so that relative sources resolve and stay inside the project."""
    folder = tmp_path / "specs"
    folder.mkdir(exist_ok=True)
    (tmp_path / "pyproject.toml").touch()
    kernels = tmp_path / "kernels"
    if not kernels.exists():
        shutil.copytree(ROOT / "kernels", kernels)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


MINIMAL = f"""\
shapes:
  - [64, 32, 16]
kernels:
  - name: v4
    source: {KERNEL}
    function: sgemm_coarsen_2d
    params: {{BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}}
    block: [BN / TN, BM / TM]
    grid: [ceil(N / BN), ceil(M / BM)]
"""


def test_shipped_specs_load():
    seed = load_spec(SPECS / "seed.yaml")
    assert [k.name for k in seed.kernels] == ["v0", "v1", "v2", "v3", "v4"]
    assert seed.shapes == (Shape(1024, 512, 1024), Shape(1001, 513, 777))
    assert DEFAULT_SPEC == SPECS / "seed.yaml"
    tiles = load_spec(SPECS / "tiles.yaml")
    assert [k.label for k in tiles.kernels] == ["v2[TILE=16]", "v2[TILE=32]"]
    assert [s.M for s in tiles.shapes] == [512, 1024, 2048, 4096]
    for path in SPECS.glob("*.yaml"):
        load_spec(path)


def test_minimal_spec_gets_defaults(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL))
    kernel = spec.kernels[0]
    assert kernel.instance == "sgemm_coarsen_2d<64, 64, 16, 4, 4>"
    assert kernel.label == "v4[BM=64,BN=64,BK=16,TM=4,TN=4]"
    assert [a.name for a in kernel.signature] == ["A", "B", "C", "M", "N", "K"]
    assert [a.ctype for a in kernel.signature] == ["ptr", "ptr", "ptr", "int32", "int32", "int32"]
    assert spec.measure.min_samples == 10 and spec.measure.max_noise == 0.005 and spec.measure.flush_l2
    assert spec.verify.rel_tolerance is None and spec.baseline
    assert spec.name == "spec"
    assert kernel.source == (tmp_path / "kernels" / "04_coarsen_2d.cu").resolve()


def test_alpha_beta_signature(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + """\
    signature: [M, N, K, alpha, A, B, beta, C, {name: lda, type: int64, value: K}]
scalars: {alpha: 2.0, beta: 0.5}
"""))
    kernel = spec.kernels[0]
    assert [a.ctype for a in kernel.signature] == ["int32", "int32", "int32", "float32", "ptr", "ptr", "float32",
                                                  "ptr", "int64"]
    assert kernel.signature[3].value.evaluate({}) == 2.0
    assert kernel.reads_c()


def test_parameter_lists_sweep(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL.replace("TM: 4, TN: 4", "TM: [2, 4], TN: [4, 8]")))
    assert [k.params["TM"] * 10 + k.params["TN"] for k in spec.kernels] == [24, 28, 44, 48]


CONFIGURATIONS = """\
    params:
      - {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}
      - {BM: 128, BN: [64, 128], BK: 8, TM: 8, TN: 8}
      - {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}
"""


def test_a_list_of_params_mappings_runs_those_configurations_and_no_other_pairing(tmp_path):
    text = MINIMAL.replace("    params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}\n", CONFIGURATIONS)
    spec = load_spec(write(tmp_path, text))
    # Each mapping's product, in the list's order, each configuration once: TM = 8 never meets BM = 64.
    assert [k.label for k in spec.kernels] == ["v4[BM=64,BN=64,BK=16,TM=4,TN=4]", "v4[BM=128,BN=64,BK=8,TM=8,TN=8]",
                                               "v4[BM=128,BN=128,BK=8,TM=8,TN=8]"]
    assert spec.kernels[1].instance == "sgemm_coarsen_2d<128, 64, 8, 8, 8>"
    # values: crossed with the params' configurations, and a list of mappings there too.
    spec = load_spec(write(tmp_path, text.replace("    block:", "    values: [{S: [1, 2]}, {S: 2}]\n    block:")))
    assert [(k.params["BM"], k.params["BN"], k.params["S"]) for k in spec.kernels] == [
        (64, 64, 1), (64, 64, 2), (128, 64, 1), (128, 64, 2), (128, 128, 1), (128, 128, 2)]


def test_a_bool_configuration_is_kept_apart_from_the_number_it_equals(tmp_path):
    text = MINIMAL.replace("    params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}\n", CONFIGURATIONS)
    spec = load_spec(write(tmp_path, text.replace("    block:", "    values: [{S: 1}, {S: 1}]\n    block:")))
    assert len(spec.kernels) == 3
    from driver_gemm.specfile.kernels import _configurations
    assert _configurations(None, {}, "params", "p", [[[True, 1], [2]]]) == [(True, 2), (1, 2)]


@pytest.mark.parametrize("params, line, field, needle", [
    ("[]", 7, "kernels[v4].params", "an empty list of configurations sweeps nothing"),
    ("[{BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}, 64]", 7, "kernels[v4].params[1]",
     "a list under params is one of configurations, each a mapping of names to values"),
    ("\n      - {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}\n      - {BM: 64, BN: 64, BK: 16, TM: 4}", 9,
     "kernels[v4].params[1]", "every configuration names the same params in the same order (BM, BN, BK, TM, TN, as "
     "kernels[v4].params[0] does); this one lacks TN"),
    ("[{BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}, {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4, X: 1}]", 7,
     "kernels[v4].params[1]", "this one gives X, which kernels[v4].params[0] does not"),
    ("[{BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}, {BN: 64, BM: 64, BK: 16, TM: 4, TN: 4}]", 7,
     "kernels[v4].params[1]", "this one gives them in the order BN, BM, BK, TM, TN"),
    ("[{BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}, {BM: 64, BN: 64, BK: 16, TM: 4, TN: 1.5}]", 7,
     "kernels[v4].params[1].TN", "template parameters are whole numbers"),
    ("[{BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}, {BM: 64, BN: 64, BK: 16, TM: 4, TN: []}]", 7,
     "kernels[v4].params[1].TN", "an empty list sweeps nothing"),
])
def test_a_wrong_list_of_configurations_is_named_by_its_item(tmp_path, params, line, field, needle):
    text = MINIMAL.replace("    params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}", f"    params: {params}")
    error = error_of(tmp_path, text)
    assert needle in error.message and error.field == field
    assert error.where.endswith(f"spec.yaml:{line}")


def test_a_list_of_configurations_is_counted_before_it_is_made(tmp_path, monkeypatch):
    from driver_gemm.specfile import kernels
    monkeypatch.setattr(kernels, "MAX_CASES", 5)
    many = "[{BM: 64, BN: 64, BK: 16, TM: 4, TN: [1, 2, 4]}, {BM: 64, BN: 64, BK: 16, TM: 4, TN: [1, 2, 4]}]"
    error = error_of(tmp_path, MINIMAL.replace("{BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}", many))
    assert "the parameter sweep expands to 6 kernels, more than the limit of 5" in error.message
    # Within the limit apart, beyond it crossed with values.
    fewer = many.replace("TN: [1, 2, 4]}]", "TN: 4}]")
    error = error_of(tmp_path, MINIMAL.replace("{BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}", fewer).replace(
        "    block:", "    values: {S: [1, 2]}\n    block:"))
    assert "the parameter sweep expands to 6 kernels" in error.message


def test_shape_sets(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL.replace("  - [64, 32, 16]", """\
  - [64, 32, 16]
  - 7x5x3
  - {M: [1, 2], N: 3, K: {from: 4, to: 12, step: 4}}
  - {MNK: {from: 256, to: 2048, times: 2}}
  - {MN: 100, K: [1, 2]}
  - [64, 32, 16]""")))
    labels = [s.label for s in spec.shapes]
    assert labels == ["64x32x16", "7x5x3", "1x3x4", "1x3x8", "1x3x12", "2x3x4", "2x3x8", "2x3x12",
                      "256x256x256", "512x512x512", "1024x1024x1024", "2048x2048x2048", "100x100x1", "100x100x2"]


def error_of(tmp_path, text) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text))
    return info.value


@pytest.mark.parametrize("change, line, field, message", [
    (("    block: [BN / TN, BM / TM]", "    blok: [BN / TN, BM / TM]"), 8, "kernels[v4].blok",
     "unknown field 'blok'"),
    (("grid: [ceil(N / BN), ceil(M / BM)]", "grid: [ceil(N / BX), ceil(M / BM)]"), 9, "kernels[v4].grid",
     "uses unknown name BX"),
    (("grid: [ceil(N / BN), ceil(M / BM)]", "grid: [N ** 2, 1]"), 9, "kernels[v4].grid[0]",
     "Pow is not allowed"),
    (("  - [64, 32, 16]", "  - [64, 32]"), 2, "shapes[0]", "three entries"),
    (("  - [64, 32, 16]", "  - [64, 0, 16]"), 2, "shapes[0][1]", "at least 1"),
    (("BK: 16", "BK: 16.5"), 7, "kernels[v4].params.BK", "whole numbers"),
    (("BK: 16", "BK: K // 64"), 7, "kernels[v4].params.BK", "reads the shape (K), but template arguments are fixed"),
    (("source: ../kernels/04_coarsen_2d.cu", "source: ../kernels/nope.cu"), 5, "kernels[v4].source",
     "does not exist"),
    (("    function: sgemm_coarsen_2d", "    function: sgemm_coarsen_2d\n    precision: fp16"), 7,
     "kernels[v4].precision", "precision is fp32 or tf32"),
    (("    function: sgemm_coarsen_2d", "    function: sgemm_coarsen_2d\n    arch: hopper"), 7,
     "kernels[v4].arch", "not a GPU architecture: 'hopper'; one is written such as sm_90a"),
])
def test_errors_name_file_line_and_field(tmp_path, change, line, field, message):
    error = error_of(tmp_path, MINIMAL.replace(*change))
    assert error.where.endswith(f"spec.yaml:{line}"), error.where
    assert error.field == field
    assert message in error.message
    assert f"spec.yaml:{line}: {field}: " in str(error)


def test_typo_gets_a_suggestion(tmp_path):
    error = error_of(tmp_path, MINIMAL.replace("    block:", "    blok:"))
    assert error.hint == "did you mean 'block'?"


def test_an_expression_cut_at_its_comma_in_a_flow_collection_is_told_to_be_quoted(tmp_path):
    # YAML ends an item of [...] or {...} at a comma: min(4, K) arrives as 'min(4' and a stray 'K)'.
    error = error_of(tmp_path, MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]", "grid: [min(4, N), 1]"))
    assert error.field == "kernels[v4].grid[0]" and "never closed" in error.message
    assert "put the whole expression in quotes" in error.hint
    signature = "    signature: [A, B, C, M, N, K, {name: tiles, type: int32, value: min(132, ceil(M / 16))}]\n"
    error = error_of(tmp_path, MINIMAL + signature)
    assert error.field == "kernels[v4].signature[6].ceil(M / 16))"
    assert "the rest of value's expression, 'min(132, ceil(M / 16))', cut off at its comma" in error.message
    assert error.hint.endswith('value: "min(132, ceil(M / 16))"')


def test_a_top_level_scalar_no_kernel_reads_is_refused_as_a_likely_misspelling(tmp_path):
    error = error_of(tmp_path, MINIMAL + "scalars: {alpah: 2.0}\n")
    assert error.field == "scalars.alpah" and "no kernel reads alpah" in error.message
    assert error.hint == "did you mean 'alpha'?"
    # A scalar an argument's value reads is what such names are for.
    text = MINIMAL.replace("    grid:", "    signature: [A, B, C, M, N, K, {name: gamma, type: float32, "
                                        "value: 2 * gamma}]\n    grid:") + "scalars: {gamma: 0.25}\n"
    spec = load_spec(write(tmp_path, text))
    assert spec.scalars["gamma"] == 0.25 and spec.kernels[0].grid_or_signature_reads("gamma")


def test_a_key_with_an_invisible_character_is_shown_escaped_and_a_long_value_is_cut(tmp_path):
    error = error_of(tmp_path, MINIMAL.replace("shapes:", "sha\u200bpes:"))
    assert error.field == "sha\\u200bpes" and "unknown field 'sha\\u200bpes'" in error.message
    assert error.hint == "did you mean 'shapes'?"
    error = error_of(tmp_path, MINIMAL.replace(f"source: {KERNEL}", "source: " + "x" * 5000))
    assert error.field == "kernels[v4].source" and "... (5,000 characters)" in error.message
    assert len(str(error)) < 400


def test_a_kernel_name_that_does_not_print_is_echoed_escaped(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL))
    with pytest.raises(SpecError) as info:
        spec.select(kernels=["\x1b[2Jv4"])
    assert "no kernel named '\\x1b[2Jv4' in this spec" in str(info.value) and "\x1b" not in str(info.value)


def test_missing_required_fields(tmp_path):
    error = error_of(tmp_path, MINIMAL.replace("    function: sgemm_coarsen_2d\n", ""))
    assert "missing required field 'function'" in error.message and error.field == "kernels[v4]"
    error = error_of(tmp_path, "kernels: []\n")
    assert "missing required field 'shapes'" in error.message


def test_bad_yaml_names_the_line(tmp_path):
    error = error_of(tmp_path, "shapes: [[1, 2, 3]]\nkernels: [\n  - x: : y\n")
    assert "not valid YAML" in error.message and error.where.rsplit(":", 1)[1].isdigit()


def test_duplicate_keys_are_refused(tmp_path):
    error = error_of(tmp_path, MINIMAL + "shapes: [[1, 1, 1]]\n")
    assert "duplicate key 'shapes'" in error.message and error.where.endswith(":10")


def test_yaml_tags_are_not_constructed(tmp_path):
    error = error_of(tmp_path, "!!python/object/apply:os.system ['true']\n")
    assert "not valid YAML" in error.message


@pytest.mark.parametrize("extra, field, message", [
    ("measure: {min_samples: 0}\n", "measure.min_samples", "at least"),
    ("measure: {flush_l2: 1}\n", "measure.flush_l2", "true or false"),
    ("measure: {warmpu: 1}\n", "measure.warmpu", "unknown field"),
    ("verify: {reference: gpu}\n", "verify.reference", "auto, cpu or cublas"),
    ("verify: {tolerance: {rel: -1}}\n", "verify.tolerance.rel", "at least 0"),
    ("verify: {tf32_tolerance: -1}\n", "verify.tf32_tolerance", "at least 0"),
    ("verify: {tolerance: {rel: null}}\n", "verify.tolerance.rel", "got nothing"),
    ("verify: {tolerance: {abs: null}}\n", "verify.tolerance.abs", "got nothing"),
    ("baseline: yes please\n", "baseline", "true or false"),
])
def test_settings_errors(tmp_path, extra, field, message):
    error = error_of(tmp_path, MINIMAL + extra)
    assert error.field == field and message in error.message


def test_a_tolerance_left_out_stays_each_kernels_own(tmp_path):
    absolute = load_spec(write(tmp_path, MINIMAL + "verify: {tolerance: {abs: 1.0e-3}}\n")).verify
    assert absolute.rel_tolerance is None and absolute.abs_tolerance == 1e-3
    given = load_spec(write(tmp_path, MINIMAL + "verify: {tolerance: 1.0e-5}\n")).verify
    assert given.rel_tolerance == 1e-5


@pytest.mark.parametrize("signature, message", [
    ("[A, B, M, N, K]", "must take C exactly once"),
    ("[A, B, C, C, M]", "must take C exactly once"),
    ("[A, B, C, ldd]", "unknown argument 'ldd'"),
    ("[A, B, C, {name: lda, type: short, value: K}]", "type must be one of"),
    ("[A, B, C, {name: lda, type: int32}]", "needs a value"),
])
def test_signature_errors(tmp_path, signature, message):
    error = error_of(tmp_path, MINIMAL + f"    signature: {signature}\n")
    assert message in error.message


@pytest.mark.parametrize("kind", ["tensormapp", "null", "3", "[tensormap]"])
def test_a_misspelt_argument_type_is_named_before_the_fields_it_would_allow(tmp_path, kind):
    # A tensor map whose type is wrong: its tensor and box are not the mistake, its type is.
    signature = f"[{{name: map_a, type: {kind}, tensor: A, box: [64, 32]}}, B, C, M, N, K]"
    error = error_of(tmp_path, MINIMAL + f"    signature: {signature}\n")
    assert error.field == "kernels[v4].signature[0].type" and "type must be one of" in error.message


def test_selection():
    spec = load_spec(SPECS / "seed.yaml")
    chosen = spec.select(["v4", "v2[TILE=32]"], ["7x5x3"])
    assert [k.name for k in chosen.kernels] == ["v2", "v4"]
    assert chosen.shapes == (Shape(7, 5, 3),)
    with pytest.raises(SpecError, match="no kernel named v9"):
        spec.select(["v9"])


@pytest.mark.parametrize("text, shape", [("1024x512x1024", Shape(1024, 512, 1024)), ("7*5*3", Shape(7, 5, 3)),
                                         ("1,2,3", Shape(1, 2, 3))])
def test_shape_text(text, shape):
    assert parse_shape_text(text) == shape


def test_bad_shape_text():
    with pytest.raises(SpecError, match="not MxNxK"):
        parse_shape_text("10x10")


def test_inline_spec_without_file():
    text = MINIMAL.replace(KERNEL, str(ROOT / "kernels" / "04_coarsen_2d.cu"))
    spec = parse_spec(text, allow_outside_sources=True)
    assert spec.path is None and spec.kernels[0].where.startswith("<spec>:")


def test_schema_accepts_shipped_specs_and_rejects_mistakes():
    jsonschema = pytest.importorskip("jsonschema")
    import json

    import yaml

    schema = json.loads((ROOT / "driver_gemm" / "specfile" / "schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for path in [*SPECS.glob("*.yaml"), *(ROOT / "tests" / "kernels").glob("*/specs/*.yaml")]:
        errors = list(validator.iter_errors(yaml.safe_load(path.read_text())))
        assert not errors, (path, errors[:1])
    broken = yaml.safe_load(MINIMAL.replace("block:", "blok:"))
    assert list(validator.iter_errors(broken))


def test_tf32_kernels_get_their_own_tolerance_and_baseline(tmp_path):
    from driver_gemm.planning.cases import cases_of

    spec = load_spec(SPECS / "tf32.yaml").select(shapes=["64x64x64"])
    assert {k.name: k.precision for k in spec.kernels} == {"v8": "fp32", "v9": "tf32", "v9_big": "tf32", "v10": "tf32"}
    assert spec.verify.tf32_rel_tolerance == 2e-3 and spec.verify.rel_tolerance is None
    assert [c.label for c in cases_of(spec)][:2] == ["cublas", "cublas-tf32"]
    assert [c.precision for c in cases_of(spec)] == ["fp32", "tf32", "fp32", "tf32", "tf32", "tf32"]
    # no TF32 kernel, no TF32 baseline
    assert [c.label for c in cases_of(load_spec(SPECS / "seed.yaml"))][:2] == ["cublas", "v0"]
    spec = load_spec(write(tmp_path, MINIMAL + "verify: {tf32_tolerance: 0.01}\n"))
    assert spec.verify.tf32_rel_tolerance == 0.01
