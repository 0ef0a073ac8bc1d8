import json

from rich.console import Console

from driver_gemm.report.tables import case_line, print_run, problems_text
from driver_gemm.results.read import load_results
from driver_gemm.results.records import CaseResult, DiagnosisRecord, RunResult, VerificationRecord
from driver_gemm.status import Status
from driver_gemm.specfile.model import Shape
from driver_gemm.measure.stats import summarize

SHAPE = Shape(1024, 512, 1024)


def sample_run() -> RunResult:
    cublas = CaseResult(kernel="cublas", name="cublas", shape=SHAPE, status=Status.PASS,
                        timing=summarize([0.040, 0.041, 0.039]), gflops=26844.0, pct_cublas=100.0, pct_peak=40.1,
                        verification=VerificationRecord(rel_fro_error=2.1e-7))
    v4 = CaseResult(kernel="v4[BM=64,BN=64,BK=16,TM=4,TN=4]", name="v4", shape=SHAPE, status=Status.PASS,
                    params={"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4},
                    timing=summarize([0.0806, 0.0810, 0.0800]), gflops=13321.0, pct_cublas=49.6, pct_peak=19.9,
                    verification=VerificationRecord(rel_fro_error=5.7e-7))
    broken = CaseResult(kernel="v3-no-tail", name="v3-no-tail", shape=Shape(1001, 513, 777), status=Status.FAIL,
                        message="1001 elements unwritten: columns 512 = block column 8, every row",
                        verification=VerificationRecord(rel_fro_error=4e-7, unwritten=1001),
                        diagnosis=DiagnosisRecord(first_mismatches=[{"row": 0, "col": 512, "expected": 1.5,
                                                                     "got": None, "kind": "unwritten",
                                                                     "block": [8, 0], "thread": [0, 0]}]))
    return RunResult(spec="seed", spec_path="specs/seed.yaml", cases=[cublas, v4, broken],
                     environment={"device": {"name": "NVIDIA H200", "fp32_peak_gflops": 66908.0, "sm_count": 132,
                                             "fp32_lanes_per_sm": 128, "clock_khz": 1980000}})


def test_table_has_the_seed_articles_columns():
    console = Console(width=200, record=True)
    print_run(sample_run(), console)
    text = console.export_text()
    assert "seed: 1024x512x1024 (M x N x K) on NVIDIA H200" in text
    for column in ("kernel", "status", "median ms", "GFLOP/s", "% cuBLAS", "% peak", "rel err", "samples", "noise"):
        assert column in text
    row = next(line for line in text.splitlines() if line.strip().startswith("v4[BM=64,BN=64,BK=16,TM=4,TN=4]"))
    for cell in ("PASS", "0.0806", "13,321", "49.6", "19.9", "5.7e-07", "3"):
        assert cell in row, cell
    assert "v4#1" not in text     # 200 columns hold the full label: nothing shortened, no legend
    assert "FP32 peak 66,908 GFLOP/s = 132 SMs x 128 lanes x 2 x 1.98 GHz" in text
    assert "C[0, 512]: expected 1.5, never written (block (8, 0), thread (0, 0))" in text


def test_problems_list_only_cases_that_did_not_pass():
    lines = problems_text(sample_run())
    assert lines[0] == "v3-no-tail at 1001x513x777: FAIL"
    assert "1001 elements unwritten" in lines[1]


def test_case_line():
    cublas, v4, broken = sample_run().cases
    assert case_line(v4) == ("v4[BM=64,BN=64,BK=16,TM=4,TN=4] 1024x512x1024 PASS  0.0806 ms  13,321 GFLOP/s  "
                             "49.6% of cuBLAS")
    assert case_line(broken).endswith("FAIL  - 1001 elements unwritten: columns 512 = block column 8, every row")


def test_json_round_trip(tmp_path):
    run = sample_run()
    path = run.write_json(tmp_path / "out" / "r.json")
    data = json.loads(path.read_text())
    assert data["cases"][1]["timing"]["median_ms"] == 0.0806
    assert data["cases"][1]["shape"] == {"M": 1024, "N": 512, "K": 1024, "label": "1024x512x1024"}
    again = load_results(path)
    assert again.cases[1].timing == run.cases[1].timing
    assert again.cases[2].shape == Shape(1001, 513, 777) and again.cases[2].status == Status.FAIL
    assert not again.ok and not list(tmp_path.rglob("*.tmp"))


def test_non_finite_numbers_become_null(tmp_path):
    run = RunResult(spec="s", spec_path=None, cases=[CaseResult(kernel="k", name="k", shape=SHAPE, status=Status.PASS,
                                                                gflops=float("nan"))])
    data = json.loads(run.write_json(tmp_path / "r.json").read_text())
    assert data["cases"][0]["gflops"] is None


def test_tf32_rows_say_which_cublas_they_are_measured_against():
    run = sample_run()
    tf32_ref = CaseResult(kernel="cublas-tf32", name="cublas-tf32", shape=SHAPE, status=Status.PASS, precision="tf32",
                          timing=summarize([0.015, 0.016]), gflops=71000.0, pct_cublas=100.0)
    v9 = CaseResult(kernel="v9[BM=128]", name="v9", shape=SHAPE, status=Status.PASS, precision="tf32",
                    timing=summarize([0.045, 0.046]), gflops=23800.0, pct_cublas=33.4)
    assert tf32_ref.is_baseline and not v9.is_baseline and run.cases[0].is_baseline
    run.cases[2:2] = [tf32_ref, v9]
    console = Console(width=200, record=True)
    print_run(run, console)
    text = console.export_text()
    assert "TF32 rows (cublas-tf32 and precision: tf32 kernels): % of cuBLAS in TF32 tensor-op math" in text
    assert "33.4% of cuBLAS TF32" in case_line(v9)
    assert "49.6% of cuBLAS" in case_line(run.cases[1]) and "TF32" not in case_line(run.cases[1])
    # the other shape's table has no TF32 row and no such caption
    assert text.count("TF32 rows") == 1
    # the precision survives the JSON round trip
    assert CaseResult.from_dict(v9.as_dict()).precision == "tf32"


def test_a_mismatch_names_its_group_and_one_whose_values_a_file_holds_as_null_is_still_shown():
    # A grouped case's mismatch names its group (no block numbers its stacked rows); a NaN or infinite value is null
    # in a results file, which the line says rather than failing on.
    run = sample_run()
    run.cases[2].diagnosis = DiagnosisRecord(first_mismatches=[
        {"row": 300, "col": 7, "expected": None, "got": 2.0, "kind": "wrong", "group": 1, "block": [0, 18]},
        {"row": 0, "col": 0, "expected": 1.0, "got": None, "kind": "unwritten", "block": [0, 0]}])
    lines = problems_text(run)
    assert "    C[300, 7]: expected NaN or infinity, got 2 (group 1, block (0, 18))" in lines
    assert "    C[0, 0]: expected 1, never written (block (0, 0))" in lines
