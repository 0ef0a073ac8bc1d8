"""scripts/kernel_durations.py's pairing of profiled kernels with a run's cases, on records made up here (the
profiling itself needs a GPU and torch)."""

from types import SimpleNamespace

import pytest


@pytest.fixture()
def durations_script(load_script):
    return load_script("kernel_durations")


def case(kernel, instance, median_ms, baseline=False):
    return SimpleNamespace(kernel=kernel, instance=instance, is_baseline=baseline,
                           timing=SimpleNamespace(median_ms=median_ms), shape=SimpleNamespace(label="127x4104x1032"))


def test_each_case_gets_its_own_instances_launches_and_the_vendor_its_most_launched_kernel(durations_script):
    run = SimpleNamespace(cases=[
        case("cublaslt-bf16-NN", None, 0.0104, baseline=True),
        case("v15[STAGES=6]", "gemm_tma_ws_multicast<16, 0, 6>", 0.0122),
        case("v15[STAGES=8]", "gemm_tma_ws_multicast<16, 0, 8>", 0.0120),
    ])
    recorded = {"void gemm_tma_ws_multicast<16, 0, 6>(TensorMap, int)": [8.0, 9.0, 10.0],
                "void gemm_tma_ws_multicast<16, 0, 8>(TensorMap, int)": [7.0, 7.5],
                "nvjet_sm90_tst_96x64_64x8_4x2_h_bz_NNN": [6.9] * 40,       # the timed algorithm
                "nvjet_sm90_tst_64x64_64x13_1x2_h_bz_NNT": [7.5] * 12}      # a candidate of the pre-selection
    rows = {row["case"]: row for row in durations_script.shape_rows(run, recorded)}
    vendor, six, eight = rows["cublaslt-bf16-NN"], rows["v15[STAGES=6]"], rows["v15[STAGES=8]"]
    assert vendor["vendor_kernel"] == "nvjet_sm90_tst_96x64_64x8_4x2_h_bz_NNN" and vendor["launches"] == 40
    assert (six["kernel_us"], six["launches"]) == (9.0, 3) and (eight["kernel_us"], eight["launches"]) == (7.25, 2)
    assert six["front_end_us"] == pytest.approx(12.2 - 9.0)
    assert six["pct_vendor_kernels_only"] == pytest.approx(100 * 6.9 / 9.0)
    assert six["pct_vendor_events"] == pytest.approx(100 * 10.4 / 12.2)


def test_a_kernel_spelled_otherwise_is_found_by_its_function_and_copies_and_the_gate_are_left_out(durations_script):
    events = [SimpleNamespace(name=name, device_type="DeviceType.CUDA",
                              time_range=SimpleNamespace(elapsed_us=lambda value=value: value))
              for name, value in (("Memset (Device)", 30.0), ("hold_stream", 900.0), ("gemm_tma_ws_split", 6.0),
                                  ("nvjet_a", 5.0), ("nvjet_a", 5.2))]
    recorded = durations_script.kernel_durations_us(events)
    assert set(recorded) == {"gemm_tma_ws_split", "nvjet_a"}
    run = SimpleNamespace(cases=[case("cublaslt-bf16-NN", None, 0.0085, baseline=True),
                                 case("v13", "gemm_tma_ws_split<(int)16, 0>", 0.0093)])
    rows = {row["case"]: row for row in durations_script.shape_rows(run, recorded)}
    assert rows["v13"]["kernel_us"] == 6.0 and rows["cublaslt-bf16-NN"]["kernel_us"] == pytest.approx(5.1)
