"""The library's functions called with the wrong kinds of arguments say what they take, as Python's own would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import driver_gemm as dg
from driver_gemm.cuda import compile as compiling
from driver_gemm.errors import CompileError, DriverGemmError, NoGpuError, WrongArgumentType, WrongArgumentValue
from driver_gemm.specfile.model import Shape

from conftest import ROOT, SPECS, _gpu_missing_reason

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


# ------------------------------------------------------------------------------------ an isolated run without GPU

@pytest.mark.skipif(_gpu_missing_reason() is None, reason="checks the behaviour on a machine with no GPU")
def test_an_isolated_run_without_a_gpu_says_only_that():
    # The worker spawned before the driver was asked for found its parent gone and printed a traceback of its own.
    script = ("import driver_gemm as dg\ntry:\n    dg.run_spec('seed', placement=dg.Placement(isolate=True))\n"
              "except dg.NoGpuError as exc:\n    print('NoGpuError:', exc)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("NoGpuError: ")
    assert done.stderr == ""


class _ParentGone:
    """The worker's end of a pipe whose parent has closed its own."""

    def send(self, message):
        raise BrokenPipeError(32, "Broken pipe")

    def recv(self):
        raise EOFError

    def close(self):
        pass


def test_a_worker_whose_parent_is_gone_ends_quietly():
    from driver_gemm.runners.worker import serve

    def no_session(*args):
        raise NoGpuError("no CUDA driver on this machine")

    serve(_ParentGone(), 0, dg.RunOptions(), True, session_factory=no_session)   # no BrokenPipeError


# ---------------------------------------------------------------------------------- a kernel source: path or text

def test_load_kernel_reads_its_source_by_check_kernels_rule(tmp_path, monkeypatch):
    from driver_gemm.cuda import module
    from driver_gemm.cuda.device import Device

    compiled = []
    monkeypatch.setattr(module, "compile_source", lambda source, *args: compiled.append(("path", str(source))))
    monkeypatch.setattr(module, "compile_text", lambda source, *args: compiled.append(("text", source)))
    monkeypatch.setattr(module, "Module", lambda device, cubin: SimpleNamespace(kernel=lambda instance: instance))
    device = object.__new__(Device)             # no GPU: only its architecture is read
    device.properties = SimpleNamespace(arch="sm_90")
    header = tmp_path / "kernel.cuh"
    header.write_text(KERNEL + "\n")
    dg.load_kernel(device, str(header), "k")    # a .cuh file was compiled as text, its path as the source
    dg.load_kernel(device, KERNEL, "k")
    assert compiled == [("path", str(header)), ("text", KERNEL)]
    one_line = 'extern "C" void k(float* out); // see k.cu'    # neither a file nor a kernel's text
    with pytest.raises(dg.ArgumentError, match="load_kernel: no kernel source file .*, nor a kernel's text"):
        dg.load_kernel(device, one_line, "k")
    with pytest.raises(dg.ArgumentError, match="check_kernel: no kernel source file 'no/such.cu', nor a kernel's"):
        compiling.source_is_path("check_kernel", "no/such.cu")
    assert compiling.source_is_path("check_kernel", header) and not compiling.source_is_path("x", "__global__ k")


# ------------------------------------------------------------------------------------------ Spec.select

SEED_SPEC = SPECS / "seed.yaml"


def test_select_takes_one_name_shapes_and_tuples_as_it_takes_lists():
    spec = dg.load_spec(SEED_SPEC)
    assert spec.select("v4") == spec.select(["v4"])
    assert [k.name for k in spec.select("v4").kernels] == ["v4"]
    by_text = spec.select(shapes=["7x5x3"])
    assert by_text.shapes == (Shape(7, 5, 3),)
    for shapes in ("7x5x3", Shape(7, 5, 3), (7, 5, 3), [Shape(7, 5, 3)], [(7, 5, 3)], (np.int64(7), 5, 3),
                   [[np.int64(7), np.int32(5), 3]]):
        assert spec.select(shapes=shapes) == by_text


@pytest.mark.parametrize("call, error, words", [
    (lambda spec: spec.select(None), WrongArgumentType, "Spec.select: kernels: a kernel's name or a list of names, "
                                                        "got None (NoneType)"),
    (lambda spec: spec.select([4]), WrongArgumentType, "Spec.select: kernels: kernels' names (str), got 4 (int)"),
    (lambda spec: spec.select(["v9"]), dg.SpecError, "Spec.select: kernels: no kernel named v9 in this spec"),
    (lambda spec: spec.select(shapes=["12x12"]), dg.SpecError,
     "Spec.select: shapes: shape '12x12' is not MxNxK"),
    (lambda spec: spec.select(shapes=[(7, 0, 3)]), WrongArgumentValue,
     "Spec.select: shapes: Shape: N must be at least 1, got 0"),
    (lambda spec: spec.select(shapes=5), WrongArgumentType, "Spec.select: shapes: shapes (MxNxK text"),
    (lambda spec: spec.select(shapes=[7.5]), WrongArgumentType, "Spec.select: shapes: a shape is MxNxK text"),
    (lambda spec: spec.select(["v9"], fields=("--kernel", "--shape")), dg.SpecError, "--kernel: no kernel named v9"),
])
def test_select_names_its_own_arguments(call, error, words):
    with pytest.raises(error) as info:
        call(dg.load_spec(SEED_SPEC))
    assert words in str(info.value) and ("--" in words or "--kernel" not in str(info.value))


def test_plan_spec_names_its_arch_argument_rather_than_the_command_lines_option():
    with pytest.raises(dg.SpecError) as info:
        dg.plan_spec("seed", arch="sm_999")
    assert str(info.value).startswith("plan_spec: arch: no architecture table for sm_999")
    assert "--arch" not in str(info.value) and "--sms" not in str(info.value)


def test_a_spec_given_as_a_mapping_takes_path_objects_for_its_files():
    kernel = dict(MAPPING_KERNEL, source=ROOT / "kernels" / "02_smem_tiles.cu")
    assert dg.spec_from_dict({"shapes": [[64, 64, 64]], "kernels": [kernel]}) == \
        dg.spec_from_dict({"shapes": [[64, 64, 64]], "kernels": [MAPPING_KERNEL]})
    with pytest.raises(dg.SpecError, match="kernels.0..name: holds PosixPath"):   # a name is no path
        dg.spec_from_dict({"shapes": [[64, 64, 64]], "kernels": [dict(MAPPING_KERNEL, name=Path("v2"))]})


# --------------------------------------------------------------------------- messages naming the right function

@pytest.mark.parametrize("call, error, words", [
    (lambda: dg.compile_source(ROOT / "kernels" / "02_smem_tiles.cu", "sgemm<16>"), WrongArgumentType,
     "compile_source: instances are the kernels' names (a list of str), got str"),
    (lambda: dg.compile_source(ROOT / "kernels" / "02_smem_tiles.cu", ["k"], extra_options=b"-DX=1"),
     WrongArgumentType, "compile_source: extra_options: compiler options are a list of strings (or one string), "
                        "got bytes"),
    (lambda: dg.compile_text(KERNEL, "k.cu", ["k"], extra_options="-DX='a b"), WrongArgumentValue,
     "compile_text: extra_options: compiler options \"-DX='a b\": No closing quotation"),
    (lambda: dg.compile_text('#include "/etc/passwd"\n' + KERNEL, "k.cu", ["k"], use_cache=False), CompileError,
     "to compile_source or compile_text, allow_outside_headers=True"),
])
def test_messages_name_the_function_called_and_its_own_parameters(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value)


def test_check_kernels_hint_lists_only_the_fields_it_takes():
    from test_api_arguments import _check

    with pytest.raises(dg.SpecError) as info:
        _check(bogus=1)
    allowed = info.value.hint.removeprefix("allowed: ").split(", ")
    assert "grid" in allowed and not {"source", "layout", "layouts", "ld", "groups"} & set(allowed)


# -------------------------------------------------------------------------------------------------- reprs

def test_reprs_give_the_size_of_an_image_not_its_bytes():
    cubin = dg.compile_source(ROOT / "kernels" / "02_smem_tiles.cu", ["sgemm_smem_tiles<16>"], "sm_90")
    assert f"image={len(cubin.image):,} bytes" in repr(cubin) and len(repr(cubin)) < 1000
    planned = dg.plan_spec("seed", arch="sm_90")
    assert repr(planned) == ("SpecPlan(spec='seed', arch='sm_90', sm_count=132, plans=10 (10 ok, 0 INVALID), "
                             "compiled=5 kernel(s))")


# ------------------------------------------------------------------------------------------- the pytest plugin

def test_the_plugin_takes_a_shipped_specs_name_as_load_spec_does(pytester):
    from conftest import plugin_args

    result = pytester.runpytest(*plugin_args(), "--driver-gemm-spec", "seed", "--collect-only", "-q")
    ids = [line.strip() for line in result.outlines if "::" in line]
    assert len(ids) == 12 and any(id_.endswith("specs/seed.yaml::cublas-1024x512x1024") for id_ in ids)
    missing = pytester.runpytest(*plugin_args(), "--driver-gemm-spec", "nosuchspec")
    missing.stderr.fnmatch_lines(["*--driver-gemm-spec: nosuchspec: no such file, nor a shipped spec*"])


# --------------------------------------------------------------------------------------------- the examples

@pytest.mark.parametrize("example, module", [("torch_rig.py", "torch"), ("cupy_rig.py", "cupy")])
def test_a_rig_example_without_its_library_says_so_in_one_line(example, module, tmp_path):
    # The library hidden by a stand-in that refuses to import, as on a machine without it.
    (tmp_path / f"{module}.py").write_text(f"raise ModuleNotFoundError(\"No module named '{module}'\")\n")
    done = subprocess.run([sys.executable, str(ROOT / "examples" / example)], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}, timeout=120)
    assert done.returncode == 3 and len(done.stdout.splitlines()) == 1 and "not installed" in done.stdout
    assert "Traceback" not in done.stderr
