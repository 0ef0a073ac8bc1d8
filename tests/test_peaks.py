"""Dense peaks per math kind and architecture (`gemm.peaks`), and the bytes and % of peak of typed cases."""

from __future__ import annotations

import pytest

from driver_gemm.cuda.occupancy import FP32_LANES_PER_SM
from driver_gemm.gemm import peaks
from driver_gemm.report.plots import arithmetic_intensity, bytes_moved, roofs
from driver_gemm.results.read import read_results

from conftest import ROOT

RESULTS = ROOT / "tests" / "data" / "results"
H200_SMS = 132


@pytest.mark.parametrize("math, clock_mhz, published_tflops", [
    # NVIDIA H100 Tensor Core GPU Architecture, table 2 (H100 SXM5; the H200 has the same GH100 SMs): FP32 is
    # quoted at 1980 MHz, the dense tensor figures at 1830 MHz.
    ("fp32", 1980, 66.9), ("tf32", 1830, 494.7), ("bf16", 1830, 989.4), ("fp16", 1830, 989.4),
    ("fp8", 1830, 1978.9), ("int8", 1830, 1978.9),
])
def test_h200_peaks_match_the_published_figures(math, clock_mhz, published_tflops):
    peak = peaks.peak_gflops("sm_90", math, H200_SMS, clock_mhz)
    assert peak / 1e3 == pytest.approx(published_tflops, rel=0.01)


def test_h200_peaks_at_its_maximum_clock_scale_with_the_clock():
    """At the 1980 MHz the driver reports, each tensor peak is 1980/1830 of the quoted one: the table is per clock."""
    at_max = {math: peaks.peak_gflops("sm_90", math, H200_SMS, 1980) / 1e3 for math in ("fp32", "tf32", "bf16", "fp8")}
    assert at_max["fp32"] == pytest.approx(66.9, rel=0.01)
    assert at_max["tf32"] == pytest.approx(494.7 * 1980 / 1830, rel=0.01)
    assert at_max["bf16"] == pytest.approx(989.4 * 1980 / 1830, rel=0.01)
    assert at_max["fp8"] == pytest.approx(1978.9 * 1980 / 1830, rel=0.01)
    assert peaks.peak_gflops("sm_90a", "bf16", H200_SMS, 1500) == pytest.approx(at_max["bf16"] * 1e3 * 1500 / 1980)


@pytest.mark.parametrize("arch, sms, clock_mhz, figures", [
    ("sm_80", 108, 1410, {"fp32": 19.5, "tf32": 156, "bf16": 312, "int8": 624}),            # A100
    ("sm_86", 84, 1800, {"fp32": 38.7, "tf32": 77.4, "fp16": 154.8, "int8": 309.7}),        # RTX A6000
    ("sm_89", 142, 2505, {"fp32": 91.1, "tf32": 182.1, "fp16": 364.2, "fp8": 728.5}),       # RTX 6000 Ada
])
def test_other_architectures_match_their_whitepapers(arch, sms, clock_mhz, figures):
    for math, tflops in figures.items():
        assert peaks.peak_gflops(arch, math, sms, clock_mhz) / 1e3 == pytest.approx(tflops, rel=0.01), math


def test_geforce_parts_halve_fp32_accumulating_tensor_math():
    # RTX 4090 (Ada whitepaper): 128 SMs at 2520 MHz; FP16 with FP32 accumulate 165.2, with FP16 330.3; INT8 660.6.
    assert peaks.peak_gflops("sm_89", "fp16", 128, 2520, "NVIDIA GeForce RTX 4090") / 1e3 == pytest.approx(165.2, rel=0.01)
    assert peaks.peak_gflops("sm_89", "fp16", 128, 2520, "NVIDIA GeForce RTX 4090", accumulate="fp16") / 1e3 == \
        pytest.approx(330.3, rel=0.01)
    assert peaks.peak_gflops("sm_89", "int8", 128, 2520, "NVIDIA GeForce RTX 4090") / 1e3 == pytest.approx(660.6, rel=0.01)


def test_unknown_figures_are_none():
    assert peaks.peak_gflops("sm_80", "fp8", 108, 1410) is None     # no FP8 tensor cores before Ada
    assert peaks.peak_gflops("sm_75", "fp16", 40, 1500) is None
    assert peaks.peak_gflops("sm_90", "bf16", 0, 1980) is None


def test_fp32_rates_agree_with_the_occupancy_tables_lanes():
    for arch, rates in peaks.OPS_PER_CLOCK_PER_SM.items():
        assert rates["fp32"] == 2 * FP32_LANES_PER_SM[(int(arch[3]), int(arch[4]))], arch


def test_math_kind_of_a_case():
    assert peaks.math_kind(None) == "fp32" and peaks.math_kind(None, "tf32") == "tf32"
    assert peaks.math_kind({"a": "bf16", "c": "fp32"}) == "bf16"
    assert peaks.math_kind({"a": "e4m3", "b": "e5m2"}) == "fp8"
    assert peaks.math_kind({"a": "int8", "c": "int32"}) == "int8"


def test_a_bf16_case_moves_two_byte_elements():
    types = {"a": "bf16", "b": "bf16", "c": "bf16", "accumulate": "fp32"}
    assert bytes_moved(1024, 512, 256, types) == 2 * (1024 * 256 + 256 * 512 + 1024 * 512)
    assert bytes_moved(1024, 512, 256, {**types, "c": "fp32"}) == 2 * (1024 * 256 + 256 * 512) + 4 * 1024 * 512
    assert bytes_moved(64, 64, 64, {"a": "e4m3", "b": "e4m3", "c": "bf16"}) == 64 * 64 * (1 + 1 + 2)
    run = read_results(RESULTS / "tma-bf16-8192-h200.jsonl").run
    case = next(case for case in run.cases if case.operands is not None and case.profile is None)
    s = case.shape
    assert arithmetic_intensity(case) == (s.flops / (2 * (s.M * s.K + s.K * s.N) + 4 * s.M * s.N), False)


def test_a_bf16_case_is_a_percentage_of_the_bf16_peak():
    run = read_results(RESULTS / "tma-bf16-8192-h200.jsonl").run
    device = run.environment["device"]
    case = next(case for case in run.cases if case.operands is not None)
    assert case.math == "bf16"
    assert case.peak_gflops(device) == pytest.approx(132 * 4096 * 1980e-3)
    assert case.peak_gflops(device, clock_mhz=1530) == pytest.approx(132 * 4096 * 1530e-3)
    assert roofs([run], device) == [("bf16", pytest.approx(132 * 4096 * 1980e-3))]


def test_an_architecture_outside_the_table_keeps_its_fp32_peak_from_the_device_record():
    blackwell = {"arch": "sm_100", "sm_count": 148, "clock_khz": 1965000, "fp32_lanes_per_sm": 128}
    assert peaks.device_peak_gflops(blackwell, "fp32") == pytest.approx(148 * 256 * 1965e-3)
    assert peaks.device_peak_gflops(blackwell, "bf16") is None


def test_fp32_cases_keep_the_peak_the_device_record_gives():
    run = read_results(RESULTS / "seed-h200.json").run
    device = run.environment["device"]
    case = next(case for case in run.cases if case.gflops)
    assert case.peak_gflops(device) == pytest.approx(device["fp32_peak_gflops"])
    assert case.pct_peak == pytest.approx(100 * case.gflops / case.peak_gflops(device))


def test_a_markdown_table_says_of_which_peak_its_figures_are():
    import dataclasses

    from driver_gemm.report.formats import run_markdown

    run = read_results(RESULTS / "seed-h200.json").run
    assert "% of FP32 peak" in run_markdown(run)
    case = next(case for case in run.cases if case.pct_peak is not None)
    run.cases = [dataclasses.replace(case, precision="tf32")]
    assert "% of FP32 peak" not in run_markdown(run) and "| % of peak |" in run_markdown(run)


@pytest.mark.parametrize("device", [{"compute_capability": [9, 0, 1], "sm_count": 132, "clock_khz": 1980000},
                                    {"arch": "hopper", "sm_count": 132, "clock_khz": 1980000}])
def test_a_device_record_of_no_known_architecture_has_no_peak_rather_than_an_error(device):
    assert peaks.device_peak_gflops(device, "bf16") is None
