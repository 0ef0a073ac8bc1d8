"""docs/performance.md from the headline results: rendered without a GPU, each figure with its file and command."""

import gzip
import json
from pathlib import Path

import pytest

import driver_gemm as dg
from driver_gemm.results.records import DispatchChoice

ROOT = Path(__file__).resolve().parent.parent

ENVIRONMENT = {"driver_gemm": "0.1.0", "nvrtc_version": "13.5", "cuda_bindings": "13.3.1", "nvmath_python": "1.0.0",
               "host": "gpu-host", "driver_version": 13000,
               "device": {"name": "NVIDIA H200", "sm_count": 132, "arch": "sm_90", "ordinal": 0}}


@pytest.fixture()
def scripts(load_script):
    """scripts/regenerate.py and scripts/render_performance.py, imported as the renderer imports its neighbour."""
    return load_script("regenerate"), load_script("render_performance")


def timing(median_ms: float, clock_mhz: float) -> dg.TimingSummary:
    return dg.TimingSummary(median_ms=median_ms, mean_ms=median_ms, min_ms=median_ms, max_ms=median_ms,
                            stdev_ms=0.0, q1_ms=median_ms, q3_ms=median_ms, samples=100, total_ms=100 * median_ms,
                            sm_clock_mhz=clock_mhz, sm_clock_min_mhz=clock_mhz)


def seed_run() -> dg.RunResult:
    shape = dg.Shape(1024, 512, 1024)
    cases = [dg.CaseResult(kernel="cublas", name="cublas", shape=shape, status="PASS", timing=timing(0.0367, 1980.0),
                           gflops=29254.0, pct_cublas=100.0),
             dg.CaseResult(kernel="v4[BM=64,BN=64,BK=16,TM=4,TN=4]", name="v4", shape=shape, status="PASS",
                           timing=timing(0.1086, 1755.0), gflops=9889.0, pct_cublas=33.8),
             dg.CaseResult(kernel="v9", name="v9", shape=shape, status="FAIL", message="wrong tail")]
    return dg.RunResult(spec="seed", spec_path="specs/seed.yaml", environment=ENVIRONMENT, cases=cases,
                        started="2031-05-06T07:08:09+00:00", finished="2031-05-06T07:08:19+00:00")


def write_gz(path: Path, text: str) -> None:
    path.write_bytes(gzip.compress(text.encode()))


@pytest.fixture()
def results(tmp_path):
    """A results folder as regenerate.py leaves it on a one-GPU machine whose bf16 step timed out with nothing."""
    folder = tmp_path / "nvidia-h200"
    folder.mkdir()
    plain = seed_run().write_json(tmp_path / "seed.json")
    write_gz(folder / "seed.json.gz", plain.read_text())
    write_gz(folder / "baselines.json.gz", json.dumps({
        "limit_pct": 3.0, "rounds": 3, "max_sm_clock_mhz": 1980.0, "locked_sm_clock_mhz": None,
        "environment": {"started": "2031-05-06T07:10:00+00:00", "gpu": "NVIDIA H200", "driver_version": 13000,
                        "nvrtc_version": "13.5", "nvmath_python": "1.0.0", "torch": "2.9.0", "triton": "3.5.0"},
        "cases": [{"combination": "bf16", "layout": "NN", "shape": "4096x4096x4096", "ours_ms": 0.2107,
                   "torch_ms": 0.2127, "ratio": 0.9904, "ours_mhz": 1610.0, "torch_mhz": 1605.0,
                   "torch_timer": "do_bench", "within_limit": True, "check": "ok (rel err 1.7e-03 over 16 rows)",
                   "error": None}]}))
    (folder / "regenerate.json").write_text(json.dumps({
        "command": "python3 scripts/regenerate.py", "started": "2031-05-06T07:08:00+00:00",
        "finished": "2031-05-06T07:13:00+00:00", "gpus": ["NVIDIA H200"],
        "steps": [{"name": "seed", "command": "python3 -m driver_gemm run specs/seed.yaml -q --json seed.json",
                   "exit_code": 1, "timed_out": False, "timeout_s": 60, "seconds": 14.2, "file": "seed.json.gz"},
                  {"name": "bf16", "command": "python3 -m driver_gemm run specs/tma-bf16.yaml -q --json bf16.json",
                   "exit_code": -9, "timed_out": True, "timeout_s": 150, "seconds": 165.0, "file": None},
                  {"name": "two-gpus", "command": "python3 scripts/two_gpus.py --only mixed",
                   "skipped": "needs 2 GPUs; this machine has 1"}]}))
    return folder


def section(page: str, title_start: str) -> str:
    start = page.index(f"## {title_start}")
    end = page.find("\n## ", start + 1)
    return page[start:] if end < 0 else page[start:end]


def test_the_page_names_each_file_and_command_and_shows_the_figures_of_its_input(scripts, results):
    _, render = scripts
    page = render.render(results)
    seed = section(page, "Seed kernels")
    assert "`bench/results/nvidia-h200/seed.json.gz`" in seed
    assert "`python3 -m driver_gemm run specs/seed.yaml -q --json seed.json`" in seed
    assert "`python3 scripts/regenerate.py`" in seed and "exit status 1 after 14.2 s" in seed
    assert "ran 2031-05-06T07:08:09+00:00" in seed and "GPU NVIDIA H200 (132 SMs, sm_90)" in seed
    assert "driver 13.0" in seed and "NVRTC 13.5" in seed and "nvmath-python 1.0.0" in seed
    assert "| v4[BM=64,BN=64,BK=16,TM=4,TN=4] | PASS | 0.1086 | 9,889 | 33.8 | cublas | 1,755 |" in seed
    assert "| cublas | PASS | 0.0367 | 29,254 | 100.0 |  | 1,980 |" in seed
    assert "| v9 | FAIL | - | - | - | cublas | - |" in seed
    baselines = section(page, "Baselines check")
    assert "`bench/results/nvidia-h200/baselines.json.gz`" in baselines
    assert "| bf16 | NN | 4096x4096x4096 | 0.2107 | 0.2127 | 99.0 | 1,610 | 1,605 | do_bench | yes |" in baselines
    assert "torch 2.9.0" in baselines and "triton 3.5.0" in baselines


def test_a_missing_headline_says_not_regenerated_and_why_and_keeps_no_figure(scripts, results):
    _, render = scripts
    page = render.render(results)
    bf16 = section(page, "BF16 ladder")
    assert "Not regenerated on this machine: its command exited with -9 after 165.0 s (timed out)" in bf16
    assert "`bench/results/nvidia-h200/bf16.json.gz`" in bf16 and "|" not in bf16
    two = section(page, "Two GPUs")
    assert "Not regenerated on this machine: needs 2 GPUs; this machine has 1." in two and "|" not in two
    fp32 = section(page, "FP32 ladder")       # not in the manifest at all: the documented command is named
    assert "Not regenerated on this machine: no results file" in fp32
    assert "`python3 -m driver_gemm run specs/fast.yaml -s 4096x4096x4096 -q --json fp32.json`" in fp32


def test_a_gpu_test_log_beside_the_results_is_named_with_its_summary(scripts, results):
    _, render = scripts
    assert "GPU test suite" not in render.render(results)
    write_gz(results / "gpu-tests.log.gz", "....s...\n=== 79 passed, 1 skipped in 201.3s ===\n")
    tests = section(render.render(results), "GPU test suite")
    assert "`bench/results/nvidia-h200/gpu-tests.log.gz`" in tests and "`scripts/gpu_check.sh tests`" in tests
    assert "Summary: 79 passed, 1 skipped in 201.3s." in tests


def test_the_command_line_prints_the_page_and_refuses_a_missing_folder(scripts, results, capsys, tmp_path):
    _, render = scripts
    assert render.main([str(results)]) == 0
    assert capsys.readouterr().out == render.render(results)
    with pytest.raises(SystemExit):
        render.main([str(tmp_path / "absent")])


def test_the_results_folder_is_named_after_the_gpu(scripts):
    regenerate, _ = scripts
    assert regenerate.folder_name("NVIDIA H200") == "nvidia-h200"
    assert regenerate.folder_name("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert {step.file for step in regenerate.STEPS} >= {"seed.json.gz", "fp32.json.gz", "tf32.json.gz",
                                                         "bf16.json.gz", "baselines.json.gz", "two-gpus.json.gz"}
    assert len(regenerate.STEPS) + 2 <= 8       # the files a device command can hand back: results, manifest, page


def test_regenerate_keeps_going_past_a_failed_and_a_timed_out_step_and_renders_what_it_has(
        scripts, tmp_path, monkeypatch):
    regenerate, _ = scripts
    written = seed_run().write_json(tmp_path / "recorded.json")
    copy = f"import shutil, sys; shutil.copy({str(written)!r}, sys.argv[1])"
    steps = (regenerate.Step("seed", "Seed kernels", ("python3", "-c", copy, "{json}"), 30),
             regenerate.Step("fp32", "FP32 ladder", ("python3", "-c", "raise SystemExit(3)"), 30),
             regenerate.Step("tf32", "TF32 ladder", ("python3", "-c", "import time; time.sleep(60)"), 1),
             regenerate.Step("two-gpus", "Two GPUs", ("python3", "-c", "pass"), 30, min_gpus=2))
    monkeypatch.setattr(regenerate, "STEPS", steps)
    monkeypatch.setattr(regenerate, "STEP_NAMES", tuple(step.name for step in steps))
    monkeypatch.setattr(regenerate, "local_gpus", lambda: ["NVIDIA H200"])
    page = tmp_path / "performance.md"
    assert regenerate.main(["--out", str(tmp_path / "out"), "--page", str(page)]) == 1
    folder = tmp_path / "out" / "nvidia-h200"
    assert sorted(path.name for path in folder.iterdir()) == ["regenerate.json", "seed.json.gz"]
    assert [c.kernel for c in dg.load_results(folder / "seed.json.gz").cases][:1] == ["cublas"]
    manifest = json.loads((folder / "regenerate.json").read_text())
    by_name = {record["name"]: record for record in manifest["steps"]}
    assert by_name["fp32"]["exit_code"] == 3 and by_name["fp32"]["file"] is None
    assert by_name["tf32"]["timed_out"] and by_name["tf32"]["file"] is None
    assert "needs 2 GPUs" in by_name["two-gpus"]["skipped"]
    assert by_name["seed"]["command"].endswith(" seed.json")     # the scratch folder is not named
    text = page.read_text()
    assert "| v4[BM=64,BN=64,BK=16,TM=4,TN=4] | PASS | 0.1086 |" in text
    assert text.count("Not regenerated on this machine") == 5    # of the six headlines the page has, only seed ran


def test_the_committed_page_is_the_rendering_of_the_committed_results(scripts):
    _, render = scripts
    folders = [path for path in (ROOT / "bench" / "results").glob("*") if path.is_dir()]
    if not folders:
        pytest.skip("no committed headline results")
    assert len(folders) == 1, "docs/performance.md renders one GPU's folder"
    assert (ROOT / "docs" / "performance.md").read_text() == render.render(folders[0])



def test_a_vendor_rows_algorithm_is_named_under_its_table(scripts, results, tmp_path):
    from driver_gemm.measure.vendor_choice import AlgorithmChoice

    _, render = scripts
    run = seed_run()
    run.cases.append(dg.CaseResult(kernel="cublaslt-bf16-NN", name="cublaslt", shape=run.cases[0].shape,
                                   status="PASS", timing=timing(0.02, 1700.0),
                                   algorithm=AlgorithmChoice(rank=3, algo_id=66, tile="256x128", stages="64x4",
                                                             split_k=1, candidates=8, choice="best")))
    write_gz(results / "seed.json.gz", run.write_json(tmp_path / "with-lt.json").read_text())
    seed = section(render.render(results), "Seed kernels")
    assert "- cublaslt-bf16-NN: best of 8: heuristic #3, algo 66, tile 256x128, stages 64x4, split-K 1" in seed


def test_a_cluster_launch_that_spills_into_another_wave_is_named_under_its_table(scripts, results, tmp_path):
    from driver_gemm.results.records import LaunchRecord, OccupancyRecord

    _, render = scripts
    run = seed_run()
    case = run.cases[1]
    run.cases[1] = dg.CaseResult(kernel=case.kernel, name=case.name, shape=case.shape, status=case.status,
                                 timing=case.timing, launch=LaunchRecord(grid=(132, 1, 1), total_blocks=132),
                                 occupancy=OccupancyRecord(cluster=(4, 1, 1), driver_max_active_clusters=30,
                                                           driver_waves=1.0, driver_cluster_waves=1.1))
    write_gz(results / "seed.json.gz", run.write_json(tmp_path / "clusters.json").read_text())
    seed = section(render.render(results), "Seed kernels")
    assert (f"- {case.kernel}: its 33 clusters of 4 blocks take 2 waves (1.10): 30 fit at once "
            "(cuOccupancyMaxActiveClusters), where its 132 blocks alone would take 1 (1.00)") in seed


def test_a_suite_check_shows_each_shapes_figure_and_params_beside_the_run_before(scripts, results, tmp_path):
    import dataclasses

    _, render = scripts
    small, skinny = dg.Shape(1024, 512, 1024), dg.Shape(1, 4096, 4096)

    def suite(splits: dict, pct: dict) -> dg.RunResult:
        cases = []
        for shape in (small, skinny):
            cases.append(dg.CaseResult(kernel="cublaslt-bf16-NN", name="cublaslt", shape=shape, status="PASS",
                                       timing=timing(0.02, 1700.0), pct_cublas=100.0))
            if shape.label in pct:
                cases.append(dg.CaseResult(kernel=f"v13[SPLITS={splits[shape.label]}]", name="v13", shape=shape,
                                           status="PASS", timing=timing(0.03, 1700.0), pct_cublas=pct[shape.label]))
        return dataclasses.replace(seed_run(), cases=cases)

    checks = results / "checks"
    checks.mkdir()
    now = suite({"1024x512x1024": 2}, {"1024x512x1024": 60.0})
    now_large = suite({"1x4096x4096": 4}, {"1x4096x4096": 80.0})              # the step's second part
    before = suite({"1024x512x1024": 4}, {"1024x512x1024": 40.0})        # cut short before the second shape
    write_gz(checks / "now.json.gz", now.write_json(tmp_path / "now.json").read_text())
    write_gz(checks / "now-large.json.gz", now_large.write_json(tmp_path / "now-large.json").read_text())
    write_gz(checks / "before.json.gz", before.write_json(tmp_path / "before.json").read_text())
    (results / "checks.json").write_text(json.dumps({"about": "Beside.", "checks": [
        {"title": "Suite", "kind": "suite", "file": "checks/now.json.gz", "parts": ["checks/now-large.json.gz"],
         "before": "checks/before.json.gz", "command": "scripts/gpu_check.sh suite", "date": "2031-05-06"}]}))
    page = section(render.render(results), "Focused checks")
    files = page.split("- files: ")[1].splitlines()[0]                          # both parts named on one line
    assert "checks/now.json.gz`, `" in files and files.endswith("checks/now-large.json.gz`")
    assert "| v13: shape | % of cuBLAS before | its params | % of cuBLAS | params |" in page
    assert "| 1024x512x1024 | 40.0 | SPLITS=4 | 60.0 | SPLITS=2 |" in page
    assert "| 1x4096x4096 | - | - | 80.0 | SPLITS=4 |" in page                   # from the second part
    assert "- geometric mean over 1 shape: 60.0% (before: 40.0%)" in page       # the shapes both runs have
    assert f"- geometric mean over all 2 shapes of this run: {(60.0 * 80.0) ** 0.5:.1f}%" in page
    assert "- lowest: 60.0% at 1024x512x1024" in page                          # over this run's shapes
    assert "cublaslt" not in page.split("| v13: shape")[1]                       # vendor rows are the 100%


def test_a_suite_family_is_one_table_whichever_kernel_its_dispatch_ran(scripts, results, tmp_path):
    import dataclasses

    _, render = scripts
    small, skinny = dg.Shape(1024, 512, 1024), dg.Shape(1, 4096, 4096)
    cases = [dg.CaseResult(kernel="v13[BN=64]", name="v13", shape=small, status="PASS", timing=timing(0.03, 1700.0),
                           pct_cublas=90.0, dispatch=DispatchChoice(0, small.label, "exact")),
             dg.CaseResult(kernel="v14[MT=8]", name="v13", shape=skinny, status="PASS", timing=timing(0.02, 1700.0),
                           pct_cublas=110.0, dispatch=DispatchChoice(1, skinny.label, "exact", table="v13")),
             dg.CaseResult(kernel="v11", name="v11", shape=small, status="PASS", timing=timing(0.03, 1700.0),
                           pct_cublas=50.0)]
    checks = results / "checks"
    checks.mkdir()
    run = dataclasses.replace(seed_run(), cases=cases)
    write_gz(checks / "suite.json.gz", run.write_json(tmp_path / "suite.json").read_text())
    (results / "checks.json").write_text(json.dumps({"about": "Beside.", "checks": [
        {"title": "Suite", "kind": "suite", "file": "checks/suite.json.gz", "kernels": ["v13"],
         "command": "scripts/gpu_check.sh suite", "date": "2031-05-06"}]}))
    page = section(render.render(results), "Focused checks")
    assert "| 1024x512x1024 | 90.0 | BN=64 |" in page
    assert "| 1x4096x4096 | 110.0 | v14[MT=8] |" in page                 # the member's whole label
    assert "v14: shape" not in page and "v11" not in page                   # one table, the one asked for
    assert f"- geometric mean over 2 shapes: {(90.0 * 110.0) ** 0.5:.1f}%" in page
    assert "- lowest: 90.0% at 1024x512x1024" in page


def test_spec_kernels_against_torch_are_rendered_with_their_percent_of_torch(scripts):
    _, render = scripts
    row = {"kernel": "v13-bf16-out[BN=128]", "shape": "1x4096x4096", "samples": "do-bench", "ours_ms": 0.022,
           "torch_ms": 0.0182, "pct_of_torch": 82.4, "ours_mhz": 1980.0, "torch_mhz": 1965.0, "torch_op": "torch.mm",
           "torch_timer": "cuda-graph", "check": "PASS (rel err 1.6e-03)"}
    lines = render.baseline_tables({"rounds": 3, "limit_pct": 3.0, "cases": [], "kernel_cases": [row]})
    assert "| kernel | shape | our samples | ours ms | torch ms | % of torch | ours MHz | torch MHz | torch op |" \
           " torch timer | check |" in lines
    assert "| v13-bf16-out[BN=128] | 1x4096x4096 | do-bench | 0.0220 | 0.0182 | 82.4 | 1,980 | 1,965 | torch.mm |" \
           " cuda-graph | PASS (rel err 1.6e-03) |" in lines
    assert not any(line.startswith("| types |") for line in lines)       # no rows of vendor-only cases: no table


def test_a_tune_check_shows_per_shape_the_fastest_passing_configuration_and_the_runner_up(scripts):
    import dataclasses

    _, render = scripts
    shape = dg.Shape(1024, 512, 1024)

    def case(params, ms, pct, status="PASS"):
        return dg.CaseResult(kernel=f"v13[{params}]", name="v13", shape=shape, status=status,
                             timing=timing(ms, 1980.0), pct_cublas=pct)

    cases = [dg.CaseResult(kernel="cublaslt-bf16-NN", name="cublaslt", shape=shape, status="PASS",
                           timing=timing(0.008, 1980.0), pct_cublas=100.0),
             case("BN=128", 0.0103, 77.7), case("BN=64", 0.0093, 86.0), case("BN=64", 0.0094, 85.1),
             case("BN=32", 0.0050, 160.0, status="FAIL")]                  # fast but wrong: never the fastest
    lines = render.tune_tables(dataclasses.replace(seed_run(), cases=cases))
    assert "| v13: shape | configurations fully measured | fastest | median ms | % of cuBLAS | runner-up |" \
           " its % of cuBLAS |" in lines
    assert "| 1024x512x1024 | 3 | BN=64 | 0.0093 | 86.0 | BN=128 | 77.7 |" in lines   # the runner-up is another config
    assert not any("cublaslt" in line for line in lines)                             # the vendor row is the 100%


def test_kernel_durations_are_rendered_beside_the_event_medians(scripts):
    _, render = scripts
    rows = [{"case": "cublaslt-bf16-NN", "shape": "1001x520x776", "baseline": True, "event_us": 9.02, "kernel_us": 5.5,
             "front_end_us": 3.52, "launches": 27609, "vendor_kernel": "nvjet_96x64", "pct_vendor_events": 100.0,
             "pct_vendor_kernels_only": 100.0},
            {"case": "v15[BN=128]", "shape": "1001x520x776", "baseline": False, "event_us": 10.56, "kernel_us": None,
             "front_end_us": None, "launches": 0}]
    lines = render.kernel_duration_table({"rows": rows})
    assert "| 1001x520x776 | cublaslt-bf16-NN | 9.02 | 5.50 | 3.52 | 100.0% | 100.0% | nvjet_96x64 |" in lines
    assert "| 1001x520x776 | v15[BN=128] | 10.56 | - | - | - | - |  |" in lines     # no kernel found: no figure


def test_the_read_ceiling_is_rendered_beside_the_vendors_time(scripts):
    _, render = scripts
    rows = [{"shape": "1x8192x8192", "b_bytes": 134217728, "read_us": 42.3, "read_tb_s": 3.173, "mm_us": 43.5,
             "read_graph_us": 31.9, "read_graph_tb_s": 4.207, "mm_graph_us": 33.4},
            {"shape": "1x4096x4096", "b_bytes": 33554432, "read_us": None, "mm_us": 18.5}]   # a read that failed
    lines = render.read_ceiling_table({"rows": rows})
    assert "| 1x8192x8192 | 134.2 | 42.3 | 3.17 | 43.5 | 1.028 | 31.9 | 4.21 | 33.4 |" in lines
    assert "| 1x4096x4096 | 33.6 | - | - | 18.5 | - | - | - | - |" in lines
