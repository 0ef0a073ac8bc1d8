"""End-to-end on a GPU: every kernel right on awkward shapes, broken kernels caught, faults survived.

Run on a machine with a CUDA driver; elsewhere each test is skipped with the reason.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from driver_gemm.status import Status
from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.options import Placement, RunOptions
from driver_gemm.specfile import load_spec

from conftest import ROOT, SPECS
from gpu_specs import AWKWARD_SHAPES, quick, with_measure, write_spec

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def seed_run():
    spec = load_spec(SPECS / "seed.yaml")
    spec = quick(spec.select(shapes=["1024x512x1024", *AWKWARD_SHAPES]))
    return run_spec(spec)


def test_every_seed_kernel_passes_on_seed_and_awkward_shapes(seed_run):
    failed = [(c.kernel, c.shape.label, c.status, c.message) for c in seed_run.cases if c.status != Status.PASS]
    assert not failed
    kernels = {c.kernel for c in seed_run.cases}
    assert {"cublas", "v0", "v1", "v2[TILE=32]"} <= kernels and len(kernels) == 6
    assert len(seed_run.cases) == 6 * (1 + len(AWKWARD_SHAPES))
    for case in seed_run.cases:
        assert case.verification.unwritten == 0 and case.verification.rel_fro_error < 1e-5
        assert case.timing.samples >= 3 and case.timing.median_ms > 0


def test_cublas_baseline_passes_and_sets_percentages(seed_run):
    for case in seed_run.cases:
        if case.kernel == "cublas":
            assert case.status == Status.PASS and case.pct_cublas == pytest.approx(100.0)
        else:
            assert case.pct_cublas is not None and case.pct_cublas > 0


def test_our_occupancy_agrees_with_the_driver(seed_run):
    for case in seed_run.cases:
        if case.kernel != "cublas":
            occupancy = case.occupancy
            assert occupancy.blocks_per_sm == occupancy.driver_blocks_per_sm, (case.kernel, occupancy)
            # and the compiler's report, parsed from the NVRTC log, is what the driver loaded
            assert case.resources.registers == case.attributes.registers, (case.kernel, case.resources)
            assert case.resources.static_shared_bytes == case.attributes.static_shared_bytes


def test_run_records_the_device_and_versions(seed_run):
    device = seed_run.environment["device"]
    assert device["sm_count"] > 0 and device["l2_bytes"] > 0 and device["fp32_peak_gflops"] > 0
    assert seed_run.environment["nvrtc_version"]
    assert all(case.device.uuid == device["uuid"] for case in seed_run.cases)


def test_every_shipped_kernel_passes_on_awkward_shapes(tmp_path):
    for path in sorted(SPECS.glob("*.yaml")):      # the sweeps' configurations too
        spec = dataclasses.replace(load_spec(path).select(shapes=AWKWARD_SHAPES), baseline=False)
        run = run_spec(spec, options=RunOptions(time=False))
        # sweeps may hold configurations their constraints refuse (Status.INVALID); every other case must pass
        failed = [(path.name, c.kernel, c.shape.label, c.status, c.message) for c in run.cases
                  if c.status not in (Status.PASS, Status.INVALID)]
        assert not failed


V3_NO_TAIL = """\
    - name: v3-no-tail
      source: "@TESTS@/v3_no_tail_write.cu"
      function: sgemm_coarsen_1d_no_tail
      params: {BM: 64, BN: 64, BK: 16, TN: 4}
      block: [BN / TN, BM]
      grid: [ceil(N / BN), ceil(M / BM)]
      tile: [BM, BN]
    """


def test_broken_tail_write_is_a_fail_with_unwritten_columns(tmp_path):
    spec = load_spec(write_spec(tmp_path, V3_NO_TAIL, ["1001x513x777", "1024x512x1024"], "baseline: false\n"))
    run = run_spec(spec)
    ragged, even = run.cases
    assert ragged.status == Status.FAIL and even.status == Status.PASS
    assert ragged.verification.unwritten == 1001      # column 512 of every row
    assert ragged.verification.wrong == 0
    diagnosis = ragged.diagnosis
    assert diagnosis.summary == "1001 elements unwritten: columns 512 = block column 8, every row; every other element right"
    first = diagnosis.first_mismatches[0]
    assert (first["row"], first["col"], first["kind"], first["got"]) == (0, 512, "unwritten", None)
    assert first["block"] == [8, 0] and first["thread"] == [0, 0]


def test_grid_that_misses_rows_is_diagnosed(tmp_path):
    spec = load_spec(write_spec(tmp_path, """\
        - name: v4-short-grid
          source: "@KERNELS@/04_coarsen_2d.cu"
          function: sgemm_coarsen_2d
          params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}
          block: [BN / TN, BM / TM]
          grid: [ceil(N / BN), 15]
        """, ["1001x513x777"], "baseline: false\n"))
    # 15 blocks of 64 rows: a grid the plan cannot read coverage from (M // BM it refuses before launch), so
    # it runs, and the rows it misses are found in C
    case, = run_spec(spec).cases
    assert case.status == Status.FAIL and case.verification.unwritten == 41 * 513
    assert case.diagnosis.summary == "21033 elements unwritten: rows 960-1000, every column; every other element right"


def test_alpha_beta_kernel_with_its_own_argument_order(tmp_path):
    spec = load_spec(write_spec(tmp_path, """\
        - name: axpby
          source: "@TESTS@/sgemm_alpha_beta.cu"
          function: sgemm_alpha_beta
          signature: [M, N, K, alpha, A, B, beta, C]
          block: [16, 16]
          grid: [ceil(N / 16), ceil(M / 16)]
        """, ["127x33x65", "64x64x64"], "baseline: false\nscalars: {alpha: 2.0, beta: 0.5}\n"))
    run = run_spec(spec)
    assert [c.status for c in run.cases] == [Status.PASS, Status.PASS]


FAULTS = """\
    - name: wild
      source: "@TESTS@/faults.cu"
      function: write_wild
      block: [32]
      grid: [1]
    - name: v1
      source: "@KERNELS@/01_naive_col_on_x.cu"
      function: sgemm_naive_col_on_x
      block: [32, 32]
      grid: [ceil(N / 32), ceil(M / 32)]
    - name: trap
      source: "@TESTS@/faults.cu"
      function: trap_now
      block: [32]
      grid: [1]
    - name: spin
      source: "@TESTS@/faults.cu"
      function: spin_forever
      block: [32]
      grid: [1]
    - name: v2
      source: "@KERNELS@/02_smem_tiles.cu"
      function: sgemm_smem_tiles
      params: {TILE: 16}
      block: [TILE, TILE]
      grid: [ceil(N / TILE), ceil(M / TILE)]
    """


def test_isolated_run_survives_faults_and_hangs(tmp_path):
    spec = load_spec(write_spec(tmp_path, FAULTS, ["64x64x64"], "baseline: false\n"))
    spec = with_measure(spec, case_timeout_s=10.0)
    seen = []
    run = run_spec(spec, RunOptions(), Placement(isolate=True), on_result=seen.append)
    wild, good, trap, spin, good_after = run.cases
    assert [c.kernel for c in run.cases] == ["wild", "v1", "trap", "spin", "v2[TILE=16]"]
    assert seen == run.cases
    assert wild.status == Status.ERROR and "CUDA_ERROR_ILLEGAL_ADDRESS" in wild.message
    assert good.status == Status.PASS
    assert trap.status == Status.ERROR and "CUDA_ERROR_" in trap.message
    assert spin.status == Status.TIMEOUT and "10 s" in spin.message
    assert good_after.status == Status.PASS


def test_in_process_run_records_what_a_fault_stopped(tmp_path):
    # In a child process of its own: after the fault, CUDA is unusable in the process that ran it.
    spec = write_spec(tmp_path, FAULTS, ["64x64x64"], "baseline: false\n")
    out = tmp_path / "r.json"
    done = subprocess.run([sys.executable, "-m", "driver_gemm", "run", str(spec), "--in-process", "-k", "wild",
                           "-k", "v1", "--json", str(out), "-q"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1, done.stderr
    wild, good = json.loads(out.read_text())["cases"]
    assert wild["status"] == Status.ERROR and "CUDA_ERROR_ILLEGAL_ADDRESS" in wild["message"]
    assert good["status"] == Status.ERROR and good["message"].startswith("not run: CUDA is unusable in this process")


def test_invalid_config_is_refused_and_others_run(tmp_path):
    spec = load_spec(write_spec(tmp_path, """\
        - name: too-big
          source: "@KERNELS@/01_naive_col_on_x.cu"
          function: sgemm_naive_col_on_x
          block: [64, 32]
          grid: [ceil(N / 64), ceil(M / 32)]
        - name: v1
          source: "@KERNELS@/01_naive_col_on_x.cu"
          function: sgemm_naive_col_on_x
          block: [32, 32]
          grid: [ceil(N / 32), ceil(M / 32)]
        """, ["64x64x64"], "baseline: false\n"))
    invalid, good = run_spec(spec).cases
    assert invalid.status == Status.INVALID and "2048 threads per block" in invalid.message
    assert good.status == Status.PASS


def test_cli_run_exit_codes_and_json(tmp_path):
    out = tmp_path / "r.json"
    ok = subprocess.run([sys.executable, "-m", "driver_gemm", "run", str(SPECS / "seed.yaml"), "-k", "v1", "-k", "v4",
                         "-s", "127x33x65", "--json", str(out), "-q"], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0, ok.stderr
    data = json.loads(out.read_text())
    assert [c["kernel"].split("[")[0] for c in data["cases"]] == ["cublas", "v1", "v4"]
    assert "127x33x65" in ok.stdout and "PASS" in ok.stdout
    broken = write_spec(tmp_path, V3_NO_TAIL, ["127x33x65"], "baseline: false\n")
    failed = subprocess.run([sys.executable, "-m", "driver_gemm", "run", str(broken), "--json",
                             str(tmp_path / "f.json"), "-q"], capture_output=True, text=True, cwd=ROOT)
    assert failed.returncode == 1
    assert "FAIL" in failed.stdout and "unwritten" in failed.stdout


def test_device_handles_are_released(tmp_path):
    from driver_gemm.cuda.device import Device

    with Device(0) as device:
        stream = device.stream()
        buffer = device.alloc(1 << 20)
        data = np.arange(1 << 18, dtype=np.float32)
        buffer.upload(data, stream)
        assert np.array_equal(buffer.download(data.shape, np.float32, stream), data)
        buffer.close()
        assert buffer.closed and not stream.closed
    assert stream.closed


SANITIZE = """\
    - name: oob
      source: "@TESTS@/v1_oob_read.cu"
      function: sgemm_oob_read
      block: [32, 32]
      grid: [ceil(N / 32), ceil(M / 32)]
    - name: nosync
      source: "@TESTS@/v2_missing_sync.cu"
      function: sgemm_tiles_missing_sync
      params: {TILE: 16}
      block: [TILE, TILE]
      grid: [ceil(N / TILE), ceil(M / TILE)]
    - name: v2
      source: "@KERNELS@/02_smem_tiles.cu"
      function: sgemm_smem_tiles
      params: {TILE: 16}
      block: [TILE, TILE]
      grid: [ceil(N / TILE), ceil(M / TILE)]
    """


def sanitized(tmp_path, tool, kernels):
    spec = write_spec(tmp_path, SANITIZE, ["64x64x64"])
    out = tmp_path / f"{tool}.json"
    command = [sys.executable, "-m", "driver_gemm", "run", str(spec), "--sanitize", tool, "--json", str(out), "-q"]
    for kernel in kernels:
        command += ["-k", kernel]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    return done, {c["kernel"]: c for c in json.loads(out.read_text())["cases"]}


def test_memcheck_finds_the_out_of_bounds_read(tmp_path):
    done, cases = sanitized(tmp_path, "memcheck", ["oob", "v2[TILE=16]"])
    assert done.returncode == 1, done.stderr
    findings = cases["oob"]["sanitizer"]["findings"]
    assert cases["oob"]["status"] == Status.FAIL and findings
    assert any("Invalid __global__ read" in f["kind"] and "sgemm_oob_read" in (f["kernel"] or "") for f in findings)
    assert cases["v2[TILE=16]"]["status"] == Status.PASS and not cases["v2[TILE=16]"]["sanitizer"]["findings"]
    assert "memcheck: " in done.stdout and "Invalid __global__ read" in done.stdout


def test_racecheck_finds_the_missing_barrier(tmp_path):
    done, cases = sanitized(tmp_path, "racecheck", ["nosync", "v2[TILE=16]"])
    findings = cases["nosync[TILE=16]"]["sanitizer"]["findings"]
    assert findings and any("sgemm_tiles_missing_sync" in (f["kernel"] or "") for f in findings), findings
    assert not cases["v2[TILE=16]"]["sanitizer"]["findings"]


def test_error_map_is_saved_for_a_failing_case(tmp_path):
    from driver_gemm.session.state import RunOptions

    spec = load_spec(write_spec(tmp_path, V3_NO_TAIL, ["1001x513x777"], "baseline: false\n"))
    case, = run_spec(spec, options=RunOptions(time=False, artifacts=tmp_path / "maps")).cases
    picture = tmp_path / "maps" / "v3-no-tail_BM_64_BN_64_BK_16_TN_4_1001x513x777.png"
    assert case.status == Status.FAIL and case.timing is None
    assert case.diagnosis.error_map == str(picture)
    assert picture.read_bytes().startswith(b"\x89PNG")


def test_killed_run_resumes_without_losing_or_repeating_a_case(tmp_path):
    spec = load_spec(SPECS / "seed.yaml")
    shapes = ["64x64x64", "127x33x65", "96x96x96"]
    out = tmp_path / "r.json"
    lines = tmp_path / "r.jsonl"
    command = [sys.executable, "-m", "driver_gemm", "run", str(SPECS / "seed.yaml"), "-q"]
    for shape in shapes:
        command += ["-s", shape]
    child = subprocess.Popen(command + ["--json", str(out)], cwd=ROOT, start_new_session=True)
    try:
        import time
        for _ in range(1200):   # until a few cases are on disk
            if lines.exists() and lines.read_text().count('"type": "case"') >= 4:
                break
            time.sleep(0.05)
    finally:
        import os
        import signal
        os.killpg(child.pid, signal.SIGKILL)   # the run and its worker, with no chance to clean up
        child.wait()
    from driver_gemm.results.read import read_finished_cases

    _, before = read_finished_cases(lines)
    total = len(shapes) * (len(spec.kernels) + 1)
    assert 4 <= len(before) < total
    # without --json, the summary goes beside the lines: r.json again
    resumed = subprocess.run(command + ["--resume", str(lines)], cwd=ROOT, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    _, after = read_finished_cases(lines)
    keys = [(c.kernel, c.shape.label) for c in after]
    assert len(keys) == total and len(set(keys)) == total
    final = json.loads(out.read_text())["cases"]
    assert sorted((c["kernel"], c["shape"]["label"]) for c in final) == sorted(keys)
    assert all(c["status"] == Status.PASS for c in final)


def test_two_gpus_share_a_run(tmp_path):
    from driver_gemm.cuda.device import device_count

    if device_count() < 2:
        pytest.skip("needs two GPUs")
    pytest.importorskip("distributed")
    out = tmp_path / "two.json"
    shapes = ["1024x1024x1024", "2048x2048x2048", "1001x513x777", "512x512x512"]
    command = [sys.executable, "-m", "driver_gemm", "run", str(SPECS / "seed.yaml"), "-k", "v4", "-q",
               "--device", "0,1", "--json", str(out)]
    for shape in shapes:
        command += ["-s", shape]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    cases = json.loads(out.read_text())["cases"]
    assert sorted((c["kernel"], c["shape"]["label"]) for c in cases) == sorted(
        (k, s) for k in ("cublas", "v4[BM=64,BN=64,BK=16,TM=4,TN=4]") for s in shapes)
    assert len({c["device"]["uuid"] for c in cases}) == 2
