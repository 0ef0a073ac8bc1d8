"""A results file's GPU (``environment.device``) with a figure no GPU has, or an FP32 peak or a DRAM bandwidth that
is not the product of the figures it is made of: refused by every reader, named by the file (or the case log's
line) and the field, before a table prints the peak beside a product it is not, or a note divides by a bandwidth
of 5e-324 GB/s (a ridge at infinity, "inf%" of the DRAM's peak)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from driver_gemm.cli import EXIT_USAGE, main
from driver_gemm.errors import UsageError
from driver_gemm.results.read import load_results

from conftest import ROOT

SEED = ROOT / "tests" / "data" / "results" / "seed-h200.json"
LOG = ROOT / "tests" / "data" / "results" / "tma-bf16-8192-h200.jsonl"


def with_device(tmp_path: Path, **fields) -> Path:
    """The seed results with fields of their device changed (None: left out)."""
    document = json.loads(SEED.read_text(encoding="utf-8"))
    device = document["environment"]["device"]
    for name, value in fields.items():
        if value is None:
            device.pop(name)
        else:
            device[name] = value
    path = tmp_path / "device.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


WRONG_DEVICES = {
    "bandwidth denormal": ({"memory_bandwidth_gbs": 5e-324}, "memory_bandwidth_gbs", "GB/s is no figure a GPU run"),
    "bandwidth not its product": ({"memory_bandwidth_gbs": 1.5}, "memory_bandwidth_gbs",
                                  "but twice the memory clock of 3.201 GHz over a 6016-bit bus make 4814.3"),
    "clock of 1.5 kHz": ({"clock_khz": 1.5}, "clock_khz", "1.5 kHz is no figure a GPU run gives"),
    "peak not its product": ({"fp32_peak_gflops": 2.0}, "fp32_peak_gflops",
                             "but 132 SMs x 128 lanes x 2 x 1.98 GHz make 66908.2"),
    "SMs beyond any GPU": ({"sm_count": 2**63}, "sm_count", "SMs is no figure a GPU run gives"),
}


@pytest.mark.parametrize("variant", sorted(WRONG_DEVICES))
def test_a_device_no_gpu_has_is_refused_by_the_library_naming_the_field(variant, tmp_path):
    fields, field, words = WRONG_DEVICES[variant]
    path = with_device(tmp_path, **fields)
    with pytest.raises(UsageError) as refused:
        load_results(path)
    assert refused.value.where == str(path) and refused.value.field == f"environment.device.{field}"
    assert words in str(refused.value)


@pytest.mark.parametrize("command", ["show", "compare"])
@pytest.mark.parametrize("variant", ["bandwidth denormal", "peak not its product"])
def test_a_device_no_gpu_has_is_one_line_and_exit_2_from_each_command(variant, command, tmp_path, capsys):
    fields, field, words = WRONG_DEVICES[variant]
    path = with_device(tmp_path, **fields)
    argv = ["show", str(path)] if command == "show" else ["compare", str(SEED), str(path)]
    assert main(argv) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"driver-gemm: {path}: environment.device.{field}: ") and words in err


def test_a_case_log_s_header_is_held_to_the_same_figures(tmp_path):
    lines = LOG.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["environment"]["device"]["memory_bandwidth_gbs"] = 5e-324
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(UsageError) as refused:
        load_results(path)
    assert refused.value.where == f"{path}:1" and refused.value.field == "environment.device.memory_bandwidth_gbs"


def test_a_device_whose_figures_agree_is_read(tmp_path, capsys):
    # the peak rounded to a whole number, and a device that records no bandwidth's parts: both read
    path = with_device(tmp_path, fp32_peak_gflops=66908.0, memory_clock_khz=None, memory_bus_bits=None)
    assert load_results(path).environment["device"]["fp32_peak_gflops"] == 66908.0
    assert main(["show", str(path)]) == 0
    assert "FP32 peak 66,908 GFLOP/s = 132 SMs x 128 lanes x 2 x 1.98 GHz" in capsys.readouterr().out


@pytest.mark.parametrize("lanes", ["left out", "null"])
def test_a_peak_whose_lanes_are_not_recorded_reads_and_says_so(lanes, tmp_path, capsys):
    # a partial record: the product cannot be checked, and the line says what it does not know
    document = json.loads(with_device(tmp_path).read_text(encoding="utf-8"))
    if lanes == "left out":
        del document["environment"]["device"]["fp32_lanes_per_sm"]
    else:
        document["environment"]["device"]["fp32_lanes_per_sm"] = None
    path = tmp_path / "lanes.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert main(["show", str(path)]) == 0
    assert "FP32 peak 66,908 GFLOP/s = 132 SMs x ? lanes x 2 x 1.98 GHz" in capsys.readouterr().out
