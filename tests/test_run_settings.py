"""A run's settings and options are typed (`RunSettings`, `RunOptions`, `Placement`), and the settings still
read and write the JSON object results files have always held."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from driver_gemm.session.options import Placement, RunOptions
from driver_gemm.results.read import read_results
from driver_gemm.results.records import RunResult
from driver_gemm.results.settings import RunSettings

from conftest import ROOT

RECORDED = sorted(path for folder in (ROOT / "bench" / "results", ROOT / "tests" / "data" / "results")
                  for path in folder.rglob("*.json*") if path.name.endswith((".json", ".json.gz")))


def test_only_the_fields_that_are_set_are_written():
    settings = RunSettings(measure={"flush_l2": True}, isolate=True, tasks=[])
    assert settings.to_json() == {"measure": {"flush_l2": True}, "isolate": True, "tasks": []}
    assert RunSettings().to_json() == {}


def test_keys_this_version_does_not_know_are_kept_as_read():
    data = {"isolate": False, "sanitize": "memcheck", "a_later_key": {"x": 1}}
    settings = RunSettings.from_json(data)
    assert settings.isolate is False and settings.sanitize == "memcheck" and settings.other == {"a_later_key": {"x": 1}}
    assert settings.to_json() == data


def test_a_run_writes_its_settings_as_the_same_object(tmp_path):
    run = RunResult(spec="s", spec_path=None, settings=RunSettings(locked_sm_clock_mhz={"0": 1500}, isolate=True))
    path = run.write_json(tmp_path / "run.json")
    assert json.loads(path.read_text())["settings"] == {"isolate": True, "locked_sm_clock_mhz": {"0": 1500}}
    assert read_results(path).run.settings == run.settings


@pytest.mark.parametrize("path", RECORDED, ids=lambda path: str(path.relative_to(ROOT)))
def test_recorded_results_read_their_settings_back_unchanged(path: Path):
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    data = json.loads(text)
    if not isinstance(data, dict) or "cases" not in data or "spec" not in data:
        pytest.skip("not a results file")      # baselines.json.gz: baseline_check's own report
    recorded = data.get("settings", {})
    assert read_results(path).run.settings.to_json() == recorded


def test_options_name_the_field_that_is_wrong():
    with pytest.raises(TypeError, match="RunOptions.time"):
        RunOptions(time="no")
    with pytest.raises(TypeError, match="RunOptions.artifacts"):
        RunOptions(artifacts=5)
    with pytest.raises(ValueError, match="Placement.device"):
        Placement(device=-1)
    with pytest.raises(ValueError, match="Placement.stream: a caller's context or stream can only be used in-process"):
        Placement(isolate=True, stream=object())
    with pytest.raises(ValueError, match="Placement.gpu_worker"):
        Placement(isolate=False, gpu_worker=object())


def test_a_cases_sub_records_are_typed_and_write_the_same_json():
    from driver_gemm.results.records import BaselineRow, CaseDevice, CaseResult, DispatchChoice
    from driver_gemm.specfile.model import Shape
    from driver_gemm.status import Status

    gpu = CaseDevice(name="NVIDIA H200", uuid="GPU-1", ordinal=0)
    case = CaseResult(kernel="v4", name="v4", shape=Shape(64, 64, 64), status=Status.PASS, device=gpu,
                      dispatch=DispatchChoice(entry=1, shape="128x128x128", rule="nearest"),
                      measured_against=BaselineRow("cublas", "64x64x64", gpu))
    data = case.as_dict()
    assert data["device"] == {"name": "NVIDIA H200", "uuid": "GPU-1", "ordinal": 0}
    assert data["dispatch"] == {"entry": 1, "shape": "128x128x128", "rule": "nearest"}
    assert data["measured_against"] == {"kernel": "cublas", "shape": "64x64x64", "device": data["device"]}
    assert CaseResult.from_dict(data) == case
    unrun = CaseResult(kernel="v4", name="v4", shape=Shape(64, 64, 64), status=Status.ERROR)
    assert unrun.as_dict()["device"] is None and not unrun.device.known        # null, as before
    assert "dispatch" not in unrun.as_dict() and "measured_against" not in unrun.as_dict()
    assert CaseResult.from_dict({**data, "device": {"name": "GPU"}}).device == CaseDevice(name="GPU")


FIXED_KEY_PARTS = ("launch", "resources", "attributes", "occupancy", "verification", "diagnosis", "operands",
                   "sanitizer")


@pytest.mark.parametrize("path", RECORDED, ids=lambda path: str(path.relative_to(ROOT)))
def test_recorded_cases_read_their_typed_parts_back_unchanged(path: Path):
    from driver_gemm.results.records import CaseResult

    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        cases = [record for record in map(json.loads, filter(str.strip, text.splitlines()))
                 if record.get("type") == "case"]
    else:
        data = json.loads(text)
        if not isinstance(data, dict) or "cases" not in data or "spec" not in data:
            pytest.skip("not a results file")
        cases = data["cases"]
    for recorded in cases:
        case = CaseResult.from_dict({key: value for key, value in recorded.items() if key != "type"})
        written = case.as_dict()
        for key in FIXED_KEY_PARTS:
            part = getattr(case, key)
            if recorded.get(key) is not None:
                assert part is not None and not part.other, (key, part)       # every key recorded is known
            assert written.get(key) == recorded.get(key), key
            assert list(written.get(key) or {}) == list(recorded.get(key) or {}), key       # in the same order


def test_a_cases_fixed_key_parts_are_typed_and_keep_keys_they_do_not_know():
    from driver_gemm.results.records import (CaseResult, LaunchRecord, OccupancyRecord, ResourceRecord,
                                             VerificationRecord)
    from driver_gemm.specfile.model import Shape
    from driver_gemm.status import Status

    case = CaseResult(kernel="v4", name="v4", shape=Shape(64, 64, 64), status=Status.FAIL,
                      launch=LaunchRecord(grid=(4, 4, 1), block=(16, 16, 1), shared_bytes=0, threads_per_block=256,
                                          total_blocks=16),
                      resources=ResourceRecord(registers=40, spill_store_bytes=0),
                      occupancy=OccupancyRecord(blocks_per_sm=8, limited_by=("warps",), cluster=(2, 1, 1)),
                      verification=VerificationRecord(status="FAIL", unwritten=3, abs_tolerance=None,
                                                      rows="2 matrices stacked: row b * M + i"))
    data = case.as_dict()
    assert data["launch"] == {"grid": [4, 4, 1], "block": [16, 16, 1], "shared_bytes": 0, "threads_per_block": 256,
                              "total_blocks": 16}
    assert data["occupancy"]["limited_by"] == ["warps"] and data["occupancy"]["cluster"] == [2, 1, 1]
    assert "driver_blocks_per_sm" not in data["occupancy"]        # the driver's figures: written only when known
    assert data["verification"]["abs_tolerance"] is None and "padding_written" not in data["verification"]
    assert data["verification"]["rows"] == "2 matrices stacked: row b * M + i"
    assert data["attributes"] is None
    assert CaseResult.from_dict(json.loads(json.dumps(data))) == case
    later = {**data["resources"], "a_later_key": 7}
    read = ResourceRecord.from_json(later)
    assert read.registers == 40 and read.other == {"a_later_key": 7} and read.to_json() == later


def test_a_diagnosis_operands_and_sanitizer_report_write_the_objects_they_always_have():
    from driver_gemm.results.records import DiagnosisRecord, OperandsRecord, SanitizerRecord

    mismatch = {"row": 0, "col": 512, "expected": 1.5, "got": None, "kind": "unwritten", "block": [8, 0]}
    diagnosis = {"summary": "1 element unwritten", "unwritten": 1, "wrong": 0, "nonfinite": 0, "right": 3,
                 "tile": [64, 64], "first_mismatches": [mismatch]}
    read = DiagnosisRecord.from_json(diagnosis)
    assert read.tile == (64, 64) and read.error_map is None and read.to_json() == diagnosis   # no error map: no key
    operands = {"types": {"a": "bf16", "b": "bf16", "c": "bf16"}, "layout": "TN", "batch": 2,
                "ld": {"a": 64, "b": 64, "c": 64}, "batch_stride": {"a": 4096, "b": 4096, "c": 4096}}
    assert OperandsRecord.from_json(operands).layout == "TN" and OperandsRecord.from_json(operands).to_json() == operands
    finished = {"tool": "memcheck", "findings": [{"kind": "Invalid __global__ read", "kernel": "k", "block": [0, 0, 0]}],
                "summary": ["Invalid __global__ read in k"], "exit_code": 1}
    timed_out = {"tool": "memcheck", "findings": [], "summary": [], "message": "no answer after 600 s"}
    for report in (finished, timed_out):       # the exit code or the message: only the one there is
        assert SanitizerRecord.from_json(report).to_json() == report


def test_a_runs_settings_record_the_vendor_choice_and_the_timer_of_its_options():
    from driver_gemm.measure.vendor_choice import BaselineChoice
    from driver_gemm.runners.one_gpu import run_settings
    from driver_gemm.specfile.model import MeasureSettings, Spec

    spec = Spec(None, "s", "", (), (), measure=MeasureSettings(samples="do-bench"))
    options = RunOptions(baseline_choice=BaselineChoice.parse("best:4"), timer="cupti")
    settings = run_settings(RunResult("s", None), spec, False, options)
    assert settings.baseline_algorithm["choice"] == "best" and settings.baseline_algorithm["candidates"] == 4
    assert settings.timer == "cupti" and settings.measure["samples"] == "do-bench"
    assert run_settings(RunResult("s", None), spec, False).timer is None
    with pytest.raises(ValueError, match="RunOptions.timer"):
        RunOptions(timer="clock")
    with pytest.raises(TypeError, match="RunOptions.baseline_choice"):
        RunOptions(baseline_choice="best")
