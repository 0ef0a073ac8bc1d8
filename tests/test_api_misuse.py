"""The library's functions called with the wrong kinds of arguments say what they take, as Python's own would."""

from __future__ import annotations

import numpy as np
import pytest

import driver_gemm as dg
from driver_gemm.cuda import compile as compiling
from driver_gemm.errors import CompileError, DriverGemmError, WrongArgumentType
from driver_gemm.specfile.model import Shape

from conftest import ROOT, SPECS

KERNEL = 'extern "C" __global__ void k(float* out) { out[0] = X; }'


@pytest.mark.parametrize("arguments, error, words", [
    (("a", None, -1), WrongArgumentType, "Shape: M must be a whole number, got 'a' (str)"),
    ((64, None, 16), WrongArgumentType, "Shape: N must be a whole number, got None (NoneType)"),
    ((64, 64, -1), ValueError, "Shape: K must be at least 1, got -1"),
    ((True, 64, 64), WrongArgumentType, "got True (bool)"),
    ((64.0, 64, 64), WrongArgumentType, "got 64.0 (float)"),
])
def test_a_shape_of_no_sizes_is_refused(arguments, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        Shape(*arguments)


def test_numpy_integers_make_a_shape_of_ints():
    shape = Shape(np.int64(64), 32, 16)
    assert shape == Shape(64, 32, 16) and type(shape.M) is int


def test_misuse_errors_are_type_errors_and_driver_gemm_errors():
    assert issubclass(WrongArgumentType, TypeError) and issubclass(WrongArgumentType, DriverGemmError)


def test_run_spec_of_a_mapping_says_what_it_takes():
    with pytest.raises(TypeError, match=r"run_spec takes a Spec \(from load_spec\(path\) or spec_from_dict\(mapping\)"
                                        r"\) or the path of a spec file, got dict"):
        dg.run_spec({"shapes": [[64, 64, 64]]})


def test_compare_runs_takes_paths_of_results_files_or_says_what_it_takes():
    path = ROOT / "tests" / "data" / "results" / "seed-h200.json"
    compared = dg.compare_runs(path, str(path))
    assert compared and all(c.verdict == "SAME" for c in compared if c.old is not None and c.new is not None)
    with pytest.raises(TypeError, match="compare_runs: old must be a RunResult .* got dict"):
        dg.compare_runs({}, path)


def test_options_given_as_one_string_are_split_as_a_shell_would():
    assert compiling.option_tuple("-DX=1 -DY='a b'") == ("-DX=1", "-DY=a b")
    cubin = dg.compile_text(KERNEL, "k.cu", ["k"], "sm_90", extra_options="-DX=1", use_cache=False)
    assert "-DX=1" in cubin.options and "-" not in [option for option in cubin.options if len(option) == 1]
    with pytest.raises(TypeError, match="compiler options are strings, got 1"):
        compiling.option_tuple(["-DX=1", 1])


def test_a_nul_in_source_text_is_refused_with_its_position():
    source = 'extern "C" __global__ void k(float* out) {\n  out[0] = 1;\x00 out[1] = 2;\n}\n'
    with pytest.raises(CompileError) as info:
        dg.compile_text(source, "k.cu", ["k"], "sm_90", use_cache=False)
    assert str(info.value).startswith("k.cu:2:14: a NUL character (offset 56) in the source")


def test_the_seed_spec_still_runs_through_the_path_form(monkeypatch):
    seen = []
    monkeypatch.setattr("driver_gemm.runners.one_gpu._run", lambda spec, *args, **kwargs: seen.append(spec))
    dg.run_spec(SPECS / "seed.yaml")
    assert seen and seen[0].name == "seed"


@pytest.mark.parametrize("call, words", [
    (lambda: dg.load_spec(None), "load_spec: path is a path (a str or a pathlib.Path), got NoneType"),
    (lambda: dg.load_results([]), "load_results: path is a path (a str or a pathlib.Path), got list"),
    (lambda: dg.plan_spec(0), "plan_spec: spec is a Spec (from load_spec or spec_from_dict) or the path of a spec "
                              "file, got int"),
    (lambda: dg.plan_spec(SPECS / "seed.yaml", target="sm_90"), "plan_spec: target is a PlanTarget"),
    (lambda: dg.plan_spec(SPECS / "seed.yaml", sm_count=1.5), "plan_spec: sm_count is a whole number"),
    (lambda: dg.spec_from_dict({"shapes": [[1, 1, 1]], "kernels": []}, base_dir=0),
     "spec_from_dict: base_dir is a path"),
    (lambda: dg.compile_source(None, ["k"]), "compile_source: path is a path"),
    (lambda: dg.compile_text(None, "k.cu", ["k"]), "compile_text: source is text, got NoneType"),
    (lambda: dg.compile_text(KERNEL, "k.cu", "k"), "compile_text: instances are the kernels' names"),
    (lambda: dg.compare_runs(ROOT / "tests" / "data" / "results" / "seed-h200.json",
                             ROOT / "tests" / "data" / "results" / "seed-h200.json", threshold="5%"),
     "compare_runs: threshold is a fraction such as 0.05, got str"),
])
def test_paths_and_options_of_the_wrong_kind_are_named_by_the_function_that_takes_them(call, words):
    with pytest.raises(WrongArgumentType) as info:
        call()
    assert words in str(info.value)


@pytest.mark.parametrize("call, words", [
    (lambda: dg.plan_spec(SPECS / "seed.yaml", sm_count=0), "plan_spec: sm_count is 1 to 10,000, got 0"),
    (lambda: dg.plan_spec(SPECS / "seed.yaml", sm_count=10**6), "plan_spec: sm_count is 1 to 10,000, got 1,000,000"),
    (lambda: dg.compare_runs(ROOT / "tests" / "data" / "results" / "seed-h200.json",
                             ROOT / "tests" / "data" / "results" / "seed-h200.json", threshold=float("nan")),
     r"compare_runs: threshold is a fraction from 0 to below 10,000 \(1,000,000%\), got nan"),
])
def test_values_no_caller_means_are_value_errors(call, words):
    with pytest.raises(ValueError, match=words):
        call()


@pytest.mark.parametrize("call, words", [
    (lambda: dg.load_results("runs/a\x00.json"), r"load_results: path 'runs/a\\x00.json' holds a NUL character"),
    (lambda: dg.compile_source("k\x00.cu", ["k"]), "compile_source: path 'k\\\\x00.cu' holds a NUL"),
    (lambda: dg.spec_from_dict({"shapes": [[1, 1, 1]], "kernels": []}, base_dir="specs\x00"),
     "spec_from_dict: base_dir 'specs\\\\x00' holds a NUL character"),
])
def test_a_nul_in_a_path_is_named_with_the_function_and_the_argument(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_plan_case_names_each_argument_of_the_wrong_kind_and_plans_for_the_sm_count_it_is_given():
    from driver_gemm.cuda.occupancy import arch_limits

    spec = dg.load_spec(SPECS / "outside-args.yaml")
    kernel = next(k for k in spec.kernels if k.name == "args-persistent")
    limits, shape = arch_limits("sm_90"), Shape(4096, 4096, 4096)
    for call, words in ((lambda: dg.plan_case(None, shape, limits), "plan_case: kernel is a kernel of load_spec"),
                        (lambda: dg.plan_case(kernel, (64, 64, 64), limits),
                         r"plan_case: shape is Shape\(M, N, K\), got tuple"),
                        (lambda: dg.plan_case(kernel, shape, "sm_90"), "plan_case: limits is arch_limits"),
                        (lambda: dg.plan_case(kernel, shape, limits, sm_count="132"), "sm_count is a whole number")):
        with pytest.raises(WrongArgumentType, match=words):
            call()
    with pytest.raises(ValueError, match="plan_case: sm_count is 1 to 10,000, got -5"):
        dg.plan_case(kernel, shape, limits, sm_count=-5)
    # The persistent grid reads sm_count: a GPU of 2 SMs gets the blocks of 2, as plan --sms 2 gives.
    assert dg.plan_case(kernel, shape, limits, sm_count=2).config.grid[0] < \
        dg.plan_case(kernel, shape, limits).config.grid[0]


def test_wrong_values_are_value_errors_and_driver_gemm_errors():
    from driver_gemm.errors import WrongArgumentValue

    assert issubclass(WrongArgumentValue, ValueError) and issubclass(WrongArgumentValue, DriverGemmError)


@pytest.mark.parametrize("value", ["no", "false", 0, 1, None])
def test_a_permission_is_true_or_false_and_nothing_that_reads_as_one(value, tmp_path):
    # A rig reading its settings from text passes "no": truthy, it would grant the leave it means to refuse.
    header = tmp_path / "outside.h"
    header.write_text("#define X 1\n")
    source = f'#include "{header}"\nextern "C" __global__ void k(float* out) {{ out[0] = X; }}\n'
    (tmp_path / "k.cu").write_text(source)
    spec = {"shapes": [[64, 64, 64]], "kernels": []}
    for call, words in (
            (lambda: dg.load_spec(SPECS / "seed.yaml", allow_outside_sources=value),
             "load_spec: allow_outside_sources is True or False"),
            (lambda: dg.spec_from_dict(spec, allow_outside_sources=value),
             "spec_from_dict: allow_outside_sources is True or False"),
            (lambda: dg.specfile.parse_spec("shapes: [[1, 1, 1]]\n", allow_outside_sources=value),
             "parse_spec: allow_outside_sources is True or False"),
            (lambda: dg.plan_spec(SPECS / "seed.yaml", arch="sm_90", allow_outside_sources=value),
             "plan_spec: allow_outside_sources is True or False"),
            (lambda: dg.compile_source(tmp_path / "k.cu", ["k"], use_cache=False, allow_outside_headers=value),
             "compile_source: allow_outside_headers is True or False"),
            (lambda: dg.compile_text(source, "k.cu", ["k"], use_cache=False, allow_outside_headers=value),
             "compile_text: allow_outside_headers is True or False")):
        with pytest.raises(WrongArgumentType) as info:
            call()
        assert words in str(info.value) and f"got {value!r}" in str(info.value)


@pytest.mark.parametrize("call, error, words", [
    (lambda: dg.plan_spec("seed", arch="sm_80", target=dg.plan_target("sm_90")), ValueError,
     "plan_spec: arch 'sm_80' and a target for 'sm_90' are both given"),
    (lambda: dg.plan_spec("seed", device="x"), WrongArgumentType,
     "plan_spec: device is a GPU's ordinal (a whole number), got 'x' (str)"),
    (lambda: dg.plan_spec("seed", device=-1), ValueError, "plan_spec: device is a GPU's ordinal (0 or more), got -1"),
    (lambda: dg.plan_target(None, device=True), WrongArgumentType,
     "plan_target: device is a GPU's ordinal (a whole number), got True (bool)"),
])
def test_a_plan_for_another_target_than_the_one_asked_for_is_refused(call, error, words, monkeypatch):
    monkeypatch.setattr("driver_gemm.planning.spec_plan.plan_stream", lambda *args, **kwargs: pytest.fail("planned"))
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value) and isinstance(info.value, DriverGemmError)


@pytest.mark.parametrize("call, words", [
    (lambda: dg.load_kernel(None, ROOT / "kernels" / "02_smem_tiles.cu", "sgemm_smem_tiles<32>"),
     "load_kernel: device is a Device (such as dg.Device(0)), got None (NoneType)"),
    (lambda: dg.load_kernel("0", ROOT / "kernels" / "02_smem_tiles.cu", "sgemm_smem_tiles<32>"),
     "load_kernel: device is a Device (such as dg.Device(0)), got '0' (str)"),
    (lambda: dg.CublasSgemm(None, None), "CublasSgemm: device is a Device (such as dg.Device(0)), got None"),
])
def test_what_is_no_device_is_named_as_the_argument_it_was_given_for(call, words):
    with pytest.raises(WrongArgumentType) as info:
        call()
    assert words in str(info.value)


MAPPING_KERNEL = {"name": "v2", "source": str(ROOT / "kernels" / "02_smem_tiles.cu"), "function": "sgemm_smem_tiles",
                  "params": {"TILE": 16}, "block": ["TILE", "TILE"], "grid": ["ceil(N / TILE)", "ceil(M / TILE)"]}


@pytest.mark.parametrize("data, base_dir, words", [
    ({"shapes": [[64, 64, 64]], "kernels": []}, None,
     "<spec given as a mapping>: kernels: must be a non-empty list of kernels, got an empty list"),
    ({"name": "mine", "shapes": [[64, 64, 0]], "kernels": [MAPPING_KERNEL]}, None,
     "<spec 'mine' given as a mapping>: shapes[0][2]: must be at least 1, got 0"),
    ({"shapes": [[64, 64, 64]], "kernels": [dict(MAPPING_KERNEL, block=["TILE", object()])]}, None,
     "<spec given as a mapping>: kernels[0].block[1]: holds <object object at"),
    ({"shapes": [[64, 64, 64]], "kernels": []}, SPECS / "seed.yaml",
     f"spec_from_dict: base_dir: {SPECS / 'seed.yaml'} is not a folder"),
])
def test_a_spec_given_as_a_mapping_places_its_mistakes_at_their_field_not_in_a_made_up_file(data, base_dir, words):
    with pytest.raises(dg.SpecError) as info:
        dg.spec_from_dict(data, base_dir=base_dir)
    assert str(info.value).startswith(words) and ".yaml:" not in str(info.value)


def test_a_spec_given_as_a_mapping_has_no_file_and_takes_numpy_numbers():
    spec = dg.spec_from_dict({"shapes": [[np.int64(64), np.int32(48), 32]],
                              "kernels": [dict(MAPPING_KERNEL, params={"TILE": np.int64(16)})]})
    assert spec.path is None and spec.shapes[0] == Shape(64, 48, 32) and spec.kernels[0].params == {"TILE": 16}
    assert spec.kernels[0].where == "<spec given as a mapping>"
