"""The note under a memory-bound shape's table: the least bytes its GEMM moves and the rate each case moved them at,
against the roofline's ridge of the run's GPU (an H200's figures, as a results file records them)."""

from rich.console import Console

import driver_gemm as dg
from driver_gemm.report.notes import least_bytes, markdown_notes, memory_notes
from driver_gemm.report.tables import print_run
from driver_gemm.results.records import InterleavedRecord, OperandsRecord

H200 = {"name": "NVIDIA H200", "arch": "sm_90", "sm_count": 132, "clock_khz": 1980000, "fp32_lanes_per_sm": 128,
        "memory_bandwidth_gbs": 4814.304}
BF16_OUT = {"a": "bf16", "b": "bf16", "c": "bf16", "accumulate": "fp32"}


def timing(ms: float) -> dg.TimingSummary:
    return dg.TimingSummary(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, stdev_ms=0.0, q1_ms=ms, q3_ms=ms,
                            samples=100, total_ms=100 * ms)


def case(kernel: str, shape: dg.Shape, ms: float | None, types: dict | None = BF16_OUT, **extra) -> dg.CaseResult:
    operands = OperandsRecord(types=types, layout="NN") if types else None
    return dg.CaseResult(kernel=kernel, name=kernel, shape=shape, status="PASS",
                         timing=timing(ms) if ms else None, operands=operands, **extra)


def run_of(*cases: dg.CaseResult, device: dict | None = None) -> dg.RunResult:
    return dg.RunResult(spec="t", spec_path=None, cases=list(cases),
                        environment={"device": H200 if device is None else device})


def test_least_bytes_are_a_and_b_read_and_c_written_once_in_their_storage_types():
    decode = dg.Shape(1, 8192, 8192)
    assert least_bytes(case("k", decode, 0.04)) == 2 * (8192 + 8192 * 8192 + 8192)
    assert least_bytes(case("k", decode, 0.04, types=None)) == 4 * (8192 + 8192 * 8192 + 8192)   # FP32 storage
    fp8 = {"a": "e4m3", "b": "e4m3", "c": "bf16", "accumulate": "fp32"}
    assert least_bytes(case("k", decode, 0.04, types=fp8)) == 8192 + 8192 * 8192 + 2 * 8192


def test_a_decode_shape_gets_one_line_with_each_cases_rate():
    shape = dg.Shape(1, 8192, 8192)
    vendor = case("cublaslt-bf16-NN", shape, 0.0440)
    ours = case("v14", shape, 0.0500,                              # timed in rounds: their median is its time
                interleaved=InterleavedRecord(vendor="cublaslt-bf16-NN", rounds=3, kernel_ms=0.0439,
                                              vendor_ms=0.0440))
    notes = memory_notes(run_of(vendor, ours), [vendor, ours])
    assert notes == ["memory-bound: 1.0 FLOP a byte, under the ridge at 222 (BF16 peak over DRAM peak); at least "
                     "134.3 MB to move: cublaslt-bf16-NN 3.05 TB/s (63%), v14 3.06 TB/s (64%) of the 4.81 TB/s "
                     "DRAM peak"]


def test_a_compute_bound_shape_an_untimed_case_and_a_gpu_without_a_bandwidth_get_no_line():
    square = dg.Shape(4096, 4096, 4096)                             # 1365 FLOP a byte: far past the ridge
    assert memory_notes(run_of(case("v15", square, 0.19)), [case("v15", square, 0.19)]) == []
    decode = dg.Shape(1, 4096, 4096)
    failed = case("v14", decode, None)
    assert memory_notes(run_of(failed), [failed]) == []
    timed = case("v14", decode, 0.017)
    assert memory_notes(run_of(timed, device={k: v for k, v in H200.items() if k != "memory_bandwidth_gbs"}),
                        [timed]) == []


def test_cases_of_other_math_on_one_shape_get_lines_of_their_own():
    shape = dg.Shape(16, 4096, 4096)
    bf16 = case("v14-bf16", shape, 0.017)
    fp32 = case("v8", shape, 0.030, types=None)                     # FP32: 4-byte operands, the FP32 ridge
    notes = memory_notes(run_of(bf16, fp32), [bf16, fp32])
    assert len(notes) == 2
    assert "(BF16 peak over DRAM peak); at least 33.8 MB to move: v14-bf16 " in notes[0]
    assert "under the ridge at 14 (FP32 peak over DRAM peak); at least 67.6 MB to move: v8 " in notes[1]


def test_the_note_is_printed_under_the_table_and_in_the_markdown_notes():
    shape = dg.Shape(1, 14336, 4096)
    cases = [case("cublaslt-bf16-NN", shape, 0.0406), case("v14", shape, 0.0412)]
    run = run_of(*cases)
    note = memory_notes(run, cases)[0]
    console = Console(width=400, record=True)
    print_run(run, console)
    assert note in console.export_text()
    assert f"- 1x14336x4096: {note}" in markdown_notes(run)


def test_a_case_of_a_type_this_package_does_not_know_gets_no_line_and_stops_nothing():
    shape = dg.Shape(1, 8192, 8192)
    unknown = case("v99", shape, 0.044, types={"a": "bf17", "b": "bf16", "c": "bf16", "accumulate": "fp32"})
    known = case("v14", shape, 0.044)
    notes = memory_notes(run_of(unknown, known), [unknown, known])
    assert len(notes) == 1 and "v14 3.05 TB/s" in notes[0] and "v99" not in notes[0]
