"""One exit-code table for every command, and one funnel that turns every error into a line and a code."""

from __future__ import annotations

import fcntl
import importlib
import os
import subprocess
import sys

import pytest

from driver_gemm.cli import (EXIT_BROKEN_PIPE, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NO_GPU, EXIT_OK, EXIT_USAGE,
                             exit_code_for, main)
from driver_gemm.errors import (CompileError, ConfigError, CudaError, DriverGemmError, NoGpuError, SpecError,
                                ToolMissingError, UsageError)
from driver_gemm.measure.baseline import CublasUnavailable
from driver_gemm.runners.distribute import DaskUnavailable
from driver_gemm.results.read import MAX_RESULTS_BYTES
from driver_gemm.specfile.expr import ExpressionError

from conftest import ROOT, SPECS, _gpu_missing_reason
from test_spec import MINIMAL, write

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
main_module = importlib.import_module("driver_gemm.cli.main")   # the module, which the function's name hides
NO_GPU = pytest.mark.skipif(_gpu_missing_reason() is None, reason="checks the behaviour on a machine with no GPU")


@pytest.mark.parametrize("error, code", [
    (SpecError("bad key"), EXIT_USAGE),
    (ConfigError("grid too small"), EXIT_USAGE),
    (UsageError("bad option"), EXIT_USAGE),
    (ExpressionError("1 +"), EXIT_USAGE),
    (NoGpuError("no driver"), EXIT_NO_GPU),
    (ToolMissingError("no compute-sanitizer"), EXIT_NO_GPU),
    (CublasUnavailable("no cuBLAS"), EXIT_NO_GPU),
    (DaskUnavailable("no Dask"), EXIT_NO_GPU),
    (CudaError("cuLaunchKernel", "CUDA_ERROR_ILLEGAL_ADDRESS"), EXIT_FAILED),
    (CompileError("broken.cu:6: error"), EXIT_FAILED),
    (DriverGemmError("a case failed"), EXIT_FAILED),
    (RuntimeError("a bug"), EXIT_FAILED),
    (KeyboardInterrupt(), EXIT_INTERRUPTED),
    (BrokenPipeError(), EXIT_BROKEN_PIPE),
])
def test_one_table_maps_every_error_to_its_code(error, code):
    assert exit_code_for(error) == code


def test_help_lists_the_exit_codes(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for line in ("exit codes:", "  0    every case passed", "  1    a case failed", "  2    bad input",
                 "  3    no CUDA driver or GPU, or a tool", "  130  interrupted", "  141  stdout was closed"):
        assert line in out, line
    assert f"{MAX_RESULTS_BYTES >> 20} MiB at most" in out   # the documented cap is the one applied


def test_unknown_architectures_name_the_option(capsys):
    assert main(["plan", "--arch", "bogus", "-k", "v1"]) == EXIT_USAGE
    assert capsys.readouterr().err.startswith("driver-gemm: --arch: not a GPU architecture: 'bogus'")
    assert main(["plan", "--arch", "sm_999", "-k", "v1"]) == EXIT_USAGE
    assert capsys.readouterr().err.startswith("driver-gemm: --arch: unknown architecture sm_999")


@pytest.mark.parametrize("argv", [["plan", "--sms", "many"], ["compare", "a.json"], ["plot", "a.json"],
                                  ["run", "--sanitize", "everything"], ["nonsense"], []])
def test_command_line_mistakes_are_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == EXIT_USAGE
    assert "driver-gemm: error:" in capsys.readouterr().err


@pytest.mark.parametrize("argv, expected", [
    (["plan", "--sms", "0"], "--sms: an SM count is 1 to 10,000, got 0"),
    (["plan", "--sms", "99999999999999999999"], "--sms: an SM count is 1 to 10,000, got 99,999,999,999,999,999,999"),
    (["compare", "a.json", "b.json", "--threshold", "-5"], "--threshold: a threshold is a percentage"),
    (["compare", "a.json", "b.json", "--threshold", "nan"], "--threshold: a threshold is a percentage"),
    (["plot", "a.json", "-o", "x.jpg"], "--output: the picture is .png or .svg"),
    (["run", str(SPECS / "seed.yaml"), str(SPECS / "seed.yaml"), "--json", "r.json"],
     "--json: --json with several specs writes one file per spec"),
    (["run", str(SPECS / "seed.yaml"), str(SPECS / "seed.yaml"), "--sanitize", "memcheck", "--json", "r.json"],
     "--json: --json with several specs writes one file per spec"),
    (["run", str(SPECS / "seed.yaml"), str(SPECS / "tf32.yaml"), "--resume", "r.jsonl"],
     "--resume: --resume continues one run"),
    (["run", "--sanitize", "memcheck", "--resume", "r.jsonl"], "--sanitize: --sanitize runs each case"),
    (["run", "--device", "0,1", "--in-process"], "--device: several GPUs (--device 0,1) and --scheduler run cases"),
])
def test_bad_options_are_exit_2_in_one_line(argv, expected, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"driver-gemm: {expected}") and err.count("\n") == 1, err
    assert not list(tmp_path.iterdir())


def test_an_internal_error_is_one_line_and_debug_shows_the_traceback(monkeypatch, capsys):
    def broken(args, out):
        raise ZeroDivisionError("division by zero in a table")

    monkeypatch.setattr(main_module.COMMANDS["info"], "execute", broken)
    assert main(["info"]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err == ("driver-gemm: internal error: ZeroDivisionError: division by zero in a table (please report "
                   "it; rerun with --debug for the traceback)\n")
    for argv in (["--debug", "info"], ["info", "--debug"]):
        assert main(argv) == EXIT_FAILED
        err = capsys.readouterr().err
        assert "Traceback (most recent call last)" in err and "ZeroDivisionError" in err


def test_an_interrupt_is_130(monkeypatch, capsys):
    def interrupted(args, out):
        raise KeyboardInterrupt

    monkeypatch.setattr(main_module.COMMANDS["plan"], "execute", interrupted)
    assert main(["plan"]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "driver-gemm: interrupted\n"


def test_plan_summary_and_exit_code(tmp_path, capsys):
    spec = write(tmp_path, MINIMAL.replace("[64, 32, 16]", "[64, 32, 16]\n  - [128, 64, 32]"))
    assert main(["plan", str(spec), "--arch", "sm_90"]) == EXIT_OK
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == "2 ok, 0 INVALID"
    invalid = write(tmp_path, MINIMAL.replace("block: [BN / TN, BM / TM]", "block: [BN, BM]"), "invalid.yaml")
    assert main(["plan", str(invalid), "--arch", "sm_90"]) == EXIT_FAILED
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == "0 ok, 1 INVALID"


def test_plot_without_matplotlib_is_3_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # import matplotlib now raises ImportError
    out = tmp_path / "p.png"
    assert main(["plot", str(ROOT / "tests" / "data" / "results" / "seed-h200.json"), "-o", str(out)]) == EXIT_NO_GPU
    assert "plots need matplotlib, which is not installed" in capsys.readouterr().err
    assert not out.exists()


def test_sanitize_without_compute_sanitizer_is_3(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))   # no compute-sanitizer anywhere
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--sanitize", "memcheck", "-k", "v1", "-q"]) == EXIT_NO_GPU
    err = capsys.readouterr().err
    assert err == ("driver-gemm: --sanitize needs compute-sanitizer, which is not on the PATH "
                   "(it comes with the CUDA toolkit)\n")
    assert not list(tmp_path.iterdir())


@NO_GPU
def test_sanitize_without_a_gpu_is_3(tmp_path, monkeypatch, capsys):
    fake = tmp_path / "bin" / "compute-sanitizer"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--sanitize", "memcheck", "-k", "v1", "-q"]) == EXIT_NO_GPU
    err = capsys.readouterr().err
    assert err.startswith("driver-gemm: no CUDA driver on this machine") and "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["bin"]


@pytest.mark.parametrize("output", ["--csv", "--markdown", "table"])
def test_a_closed_pipe_ends_quietly(output, tmp_path):
    """``driver-gemm plan | head -1``: the reader goes away; no traceback, no 'Exception ignored', exit 141."""
    spec = write(tmp_path, MINIMAL.replace("  - [64, 32, 16]",
                                           "  - {M: {from: 16, to: 1024, step: 16}, N: {from: 16, to: 512, step: 16}, "
                                           "K: 64}"))
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, F_SETPIPE_SZ, 4096)   # a small pipe, so that the writer blocks on it as a head would
    argv = [sys.executable, "-m", "driver_gemm", "plan", str(spec), "--arch", "sm_90"]
    child = subprocess.Popen(argv + ([output] if output != "table" else []), stdout=write_end,
                             stderr=subprocess.PIPE, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        first = reader.readline()
    err = child.stderr.read().decode()
    child.wait(timeout=120)
    assert first.strip()
    assert err == "" and child.returncode == EXIT_BROKEN_PIPE, err


@NO_GPU
def test_run_without_a_gpu_reports_what_cannot_launch_first(tmp_path, capsys):
    spec = write(tmp_path, """\
shapes: [[64, 64, 64], [1001, 513, 777]]
kernels:
  - name: too-wide
    source: ../kernels/02_smem_tiles.cu
    function: sgemm_smem_tiles
    params: {TILE: 32}
    block: [TILE, TILE * 2]
    grid: [ceil(N / TILE), ceil(M / TILE)]
""")
    assert main(["run", str(spec)]) == EXIT_FAILED == main(["plan", str(spec)])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("driver-gemm: ")][:2]
    assert len(lines) == 2 and all("Traceback" not in line for line in lines)
    # once for the kernel, with the shapes it holds for
    assert lines[0].startswith(f"driver-gemm: {spec}:7: kernels[too-wide].block: 2048 threads per block")
    assert lines[0].endswith("at 64x64x64, 1001x513x777]")
    assert "2 case(s) cannot launch as written" in lines[1] and "no GPU" in lines[1]
    assert not (tmp_path / "results").exists()


@NO_GPU
def test_run_without_a_gpu_of_a_spec_that_would_launch_is_exit_3(capsys):
    assert main(["run", str(SPECS / "seed.yaml")]) == EXIT_NO_GPU
    assert "no CUDA driver" in capsys.readouterr().err


@NO_GPU
@pytest.mark.parametrize("change, expected", [
    (("BK: 16", "BK: 0"), "the size of an array must be greater than zero"),        # params that do not instantiate
    (("function: sgemm_coarsen_2d", "function: sgemm_nothere"), 'identifier "sgemm_nothere" is undefined'),
])
def test_run_without_a_gpu_reports_kernels_that_do_not_build_first(tmp_path, monkeypatch, capsys, change, expected):
    """As plan does (exit 1, a kernel did not compile), not 'no GPU' alone: the spec's own mistakes come first."""
    spec = write(tmp_path, MINIMAL.replace(*change))
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    assert main(["run", str(spec)]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert err.rstrip().splitlines()[-1] == ("driver-gemm: 1 kernel build(s) failed (the lines above; `driver-gemm "
                                             "plan` shows every case); this machine has no GPU either")
    assert sorted(tmp_path.rglob("*")) == before


@NO_GPU
@pytest.mark.parametrize("change, code, expected", [
    (("block: [BN / TN, BM / TM]", "block: [4096, 1]"), EXIT_FAILED, "(2 cannot launch as written, 0 do not build;"),
    (("BK: 16", "BK: [0, -1]"), EXIT_FAILED, "(0 cannot launch as written, 4 do not build;"),
])
def test_tune_without_a_gpu_says_when_no_configuration_can_run(tmp_path, monkeypatch, capsys, change, code, expected):
    spec = write(tmp_path, MINIMAL.replace(*change).replace("TM: 4", "TM: [4, 2]"))
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    assert main(["tune", str(spec)]) == code
    err = capsys.readouterr().err
    count = 2 * (2 if "BK: [0, -1]" in change[1] else 1)     # TM swept too
    assert f"none of the {count} kernel case(s) of the sweep can run " + expected in err, err
    assert err.rstrip().endswith("this machine has no GPU either") and "Traceback" not in err
    assert sorted(tmp_path.rglob("*")) == before


@NO_GPU
def test_tune_without_a_gpu_of_a_sweep_with_one_runnable_configuration_is_exit_3(tmp_path, monkeypatch, capsys):
    spec = write(tmp_path, MINIMAL.replace("BK: 16", "BK: [0, 16]"))    # BK 0 does not build; BK 16 does
    monkeypatch.chdir(tmp_path)
    assert main(["tune", str(spec)]) == EXIT_NO_GPU
    assert "no CUDA driver" in capsys.readouterr().err
