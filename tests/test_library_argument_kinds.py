"""Library arguments of the wrong kind, or naming what is not there, refused by name (WrongArgumentType /
WrongArgumentValue): the compile functions' folders and display name, `pick_winners`' `where`, and the device
object a peak is read from. Where None is the documented answer (a device object that lacks a figure), it stays."""

import dataclasses
from pathlib import Path

import pytest

from conftest import ROOT
from driver_gemm.cuda.compile import compile_source, compile_text
from driver_gemm.errors import WrongArgumentType, WrongArgumentValue
from driver_gemm.gemm.peaks import device_peak_gflops
from driver_gemm.results.read import read_results
from driver_gemm.tune.winners import MixedGpusError, pick_winners

SOURCE_PATH = ROOT / "kernels" / "02_smem_tiles.cu"
INSTANCES = ["sgemm_smem_tiles<32>"]
SEED_RESULTS = ROOT / "tests" / "data" / "results" / "seed-h200.json"


@pytest.mark.parametrize("argument", ["include_dir", "project"])
@pytest.mark.parametrize("there", ["nothing", "a file"])
def test_compile_text_refuses_a_folder_argument_where_no_folder_is(tmp_path, argument, there):
    folder = tmp_path / "headers"
    if there == "a file":
        folder.write_text("")
    with pytest.raises(WrongArgumentValue, match=f"compile_text: {argument} .*headers.* is no folder "
                                                 f"\\({there} is there\\)"):
        compile_text(SOURCE_PATH.read_text(), "k.cu", INSTANCES, **{argument: folder})


def test_compile_source_refuses_a_project_that_is_no_folder(tmp_path):
    with pytest.raises(WrongArgumentValue, match="compile_source: project .*missing.* is no folder"):
        compile_source(SOURCE_PATH, INSTANCES, project=tmp_path / "missing")


@pytest.mark.parametrize("option", ["-I{}", "--include-path={}"])
@pytest.mark.parametrize("function", [compile_source, compile_text])
def test_an_include_option_naming_no_folder_is_refused_naming_the_option(tmp_path, option, function):
    option = option.format(tmp_path / "missing")
    first = SOURCE_PATH if function is compile_source else SOURCE_PATH.read_text()
    arguments = (first, INSTANCES) if function is compile_source else (first, "k.cu", INSTANCES)
    with pytest.raises(WrongArgumentValue, match=f"{function.__name__}: extra_options\\[1\\]: option .*missing.* "
                                                 "names no folder"):
        function(*arguments, extra_options=["-DX=1", option])


@pytest.mark.parametrize("display_path, refusal", [(3, WrongArgumentType), (b"k.cu", WrongArgumentType),
                                                   ("k\x00.cu", WrongArgumentValue)])
def test_compile_text_refuses_a_display_path_that_is_no_path(display_path, refusal):
    with pytest.raises(refusal, match="compile_text: display_path"):
        compile_text(SOURCE_PATH.read_text(), "k.cu", INSTANCES, display_path=display_path)


@pytest.mark.parametrize("where", [3, b"results.json", ["results.json"]])
def test_pick_winners_refuses_a_where_that_is_no_place(where):
    with pytest.raises(WrongArgumentType, match="pick_winners: where is the results' file"):
        pick_winners(read_results(SEED_RESULTS), where=where)


def _mixed_gpus_file(tmp_path) -> Path:
    run = read_results(SEED_RESULTS).run
    kernel_rows = [index for index, case in enumerate(run.cases) if not case.is_baseline and case.ok and case.timing]
    other = run.cases[kernel_rows[0]]
    run.cases[kernel_rows[0]] = dataclasses.replace(other, device=dataclasses.replace(other.device, name="Other GPU"))
    path = tmp_path / "mixed.json"
    run.write_json(path)
    return path


def test_pick_winners_names_the_results_file_it_read_and_the_place_it_was_given(tmp_path):
    path = _mixed_gpus_file(tmp_path)
    with pytest.raises(MixedGpusError, match="mixed.json: these results hold times of 2 GPU models"):
        pick_winners(path)
    with pytest.raises(MixedGpusError, match="elsewhere.json: these results hold times of 2 GPU models"):
        pick_winners(read_results(path), where=tmp_path / "elsewhere.json")


def test_a_peak_of_the_whole_environment_is_refused_pointing_at_its_device():
    run = read_results(SEED_RESULTS).run
    case = next(case for case in run.cases if case.gflops)
    assert case.peak_gflops(run.environment["device"]) is not None
    with pytest.raises(WrongArgumentValue, match="holds 'device'.*run.environment\\['device'\\]"):
        case.peak_gflops(run.environment)


@pytest.mark.parametrize("device, refusal, said", [
    (None, WrongArgumentType, "device is a results file's device object"),
    ({"arch": "sm_90", "sm_count": "132", "clock_khz": 1980000}, WrongArgumentType, "device\\['sm_count'\\]"),
    ({"arch": 90, "sm_count": 132, "clock_khz": 1980000}, WrongArgumentType, "device\\['arch'\\] is a text"),
])
def test_a_device_object_of_the_wrong_kind_is_refused_by_name(device, refusal, said):
    with pytest.raises(refusal, match=f"device_peak_gflops: {said}"):
        device_peak_gflops(device, "fp32")


@pytest.mark.parametrize("clock_mhz, refusal", [("1500", WrongArgumentType), (float("nan"), WrongArgumentValue),
                                                (-1.0, WrongArgumentValue)])
def test_a_clock_that_is_no_clock_is_refused(clock_mhz, refusal):
    device = {"arch": "sm_90", "sm_count": 132, "clock_khz": 1980000}
    with pytest.raises(refusal, match="device_peak_gflops: clock_mhz"):
        device_peak_gflops(device, "fp32", clock_mhz=clock_mhz)


def test_a_device_object_lacking_a_figure_still_has_no_peak():
    assert device_peak_gflops({}, "fp32") is None
    assert device_peak_gflops({"name": "NVIDIA H200", "sm_count": 132}, "bf16") is None
