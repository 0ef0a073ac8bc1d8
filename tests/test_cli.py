import shutil
import subprocess
import sys

import pytest

from driver_gemm.cli import EXIT_FAILED, EXIT_NO_GPU, EXIT_OK, EXIT_USAGE, main

from conftest import ROOT, SPECS
from test_spec import MINIMAL, write

NO_GPU = pytest.mark.skipif(
    __import__("conftest")._gpu_missing_reason() is None, reason="checks the behaviour on a machine with no GPU")


@NO_GPU
def test_run_without_a_gpu_says_so_in_one_line():
    before = set((ROOT / "results").glob("*")) if (ROOT / "results").exists() else set()
    done = subprocess.run([sys.executable, "-m", "driver_gemm", "run"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == EXIT_NO_GPU
    after = set((ROOT / "results").glob("*")) if (ROOT / "results").exists() else set()
    assert after == before   # no empty results left behind
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("driver-gemm: no CUDA driver on this machine")


@NO_GPU
def test_info_without_a_gpu(capsys):
    assert main(["info"]) == EXIT_NO_GPU
    out, err = capsys.readouterr()
    assert "NVRTC" in out and "no CUDA driver" in err


def test_plan_of_the_seed_spec(capsys):
    assert main(["plan", "--arch", "sm_90"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "seed: launch plan for sm_90 (132 SMs, H100 SXM / H200)" in out
    line = next(l for l in out.splitlines() if l.strip().startswith("v4#1") and "1001x513x777" in l)
    assert line.split() == ["v4#1", "1001x513x777", "9x16", "16x16", "54", "8192+0", "4", "50%", "regs", "0.27",
                            "ok"]
    assert "v4#1 = v4[BM=64,BN=64,BK=16,TM=4,TN=4]" in out
    assert out.rstrip().splitlines()[-1] == "10 ok, 0 INVALID"


def test_plan_for_another_architecture_and_sm_count(capsys):
    assert main(["plan", "--arch", "sm_86", "--sms", "84", "-k", "v2", "-s", "4096x4096x4096"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "launch plan for sm_86 (84 SMs" in out
    row = next(l for l in out.splitlines() if l.strip().startswith("v2"))
    assert "128x128 " in row and " 1 " in row and "warps" in row   # 1536 threads per SM: 1 block of 1024


def test_plan_reports_an_invalid_configuration(tmp_path, capsys):
    spec = write(tmp_path, MINIMAL.replace("block: [BN / TN, BM / TM]", "block: [BN, BM]"))
    assert main(["plan", str(spec)]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert "INVALID" in out and "4096 threads per block" in out and "spec.yaml:8" in out


def test_malformed_spec_is_one_line_and_exit_2(tmp_path):
    spec = write(tmp_path, MINIMAL.replace("grid:", "gird:"))
    done = subprocess.run([sys.executable, "-m", "driver_gemm", "plan", str(spec)], capture_output=True, text=True)
    assert done.returncode == EXIT_USAGE
    assert "Traceback" not in done.stderr
    assert "spec.yaml:9: kernels[v4].gird: unknown field 'gird' (hint: did you mean 'grid'?)" in done.stderr


def test_missing_spec_file(capsys):
    assert main(["plan", "no/such/spec.yaml"]) == EXIT_USAGE
    assert "no/such/spec.yaml: cannot read spec" in capsys.readouterr().err


def test_unknown_kernel_and_bad_shape(capsys):
    assert main(["plan", "-k", "v9"]) == EXIT_USAGE
    assert "no kernel named v9" in capsys.readouterr().err
    assert main(["plan", "-s", "12x12"]) == EXIT_USAGE
    assert "--shape: shape '12x12' is not MxNxK" in capsys.readouterr().err


def test_bad_command_line_is_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == EXIT_USAGE


def test_compile_error_in_plan(tmp_path, capsys):
    spec = write(tmp_path, """\
shapes: [[8, 8, 8]]
kernels:
  - source: ../kernels/broken_syntax.cu
    function: broken
    block: [32]
    grid: [1]
""")
    shutil.copy(ROOT / "tests" / "kernels" / "broken_syntax.cu", tmp_path / "kernels")
    assert main(["plan", str(spec)]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "broken_syntax.cu:6: error:" in err and "undeclared_accumulator" in err


def test_module_entry_point():
    done = subprocess.run([sys.executable, "-m", "driver_gemm", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("driver-gemm ")


def test_bad_device_variable_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setenv("DRIVER_GEMM_DEVICE", "first")
    assert main(["plan"]) == EXIT_USAGE
    assert "DRIVER_GEMM_DEVICE: must be a GPU ordinal, got 'first'" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_device_variable_is_unset_as_the_plugin_and_the_other_variables_read_it(value, monkeypatch):
    from driver_gemm.cli.common import env_device

    monkeypatch.setenv("DRIVER_GEMM_DEVICE", value)
    assert env_device() == 0


@NO_GPU
def test_tune_without_a_gpu(tmp_path, capsys):
    assert main(["tune", str(SPECS / "sweep-v4.yaml"), "-s", "64x64x64", "-q", "--json",
                 str(tmp_path / "tune.json")]) == EXIT_NO_GPU
    assert "no CUDA driver" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())   # nothing ran, nothing written


@NO_GPU
def test_several_gpus_without_a_gpu(tmp_path, capsys):
    assert main(["run", "--device", "0,1", "--json", str(tmp_path / "r.json")]) == EXIT_NO_GPU
    assert main(["run", "--device", "first", "--json", str(tmp_path / "r.json")]) == EXIT_USAGE
    assert "--device: give a GPU ordinal, GPU ordinals such as 0,1" in capsys.readouterr().err


def test_plan_spec_is_a_library_function():
    import pytest

    from driver_gemm.errors import ConfigError
    from driver_gemm.planning.spec_plan import plan_spec, plan_target
    from driver_gemm.specfile import load_spec

    planned = plan_spec(load_spec(SPECS / "seed.yaml"), arch="sm_90", sm_count=100)
    assert planned.target.arch == "sm_90" and not planned.target.from_device and planned.sm_count == 100
    assert len(planned.plans) == 10 and planned.ok and planned.summary() == "10 ok, 0 INVALID"
    assert [p.kernel.name for p in planned.plans[::2]] == ["v0", "v1", "v2", "v3", "v4"]
    with pytest.raises(ConfigError, match="arch: not a GPU architecture: 'bogus'"):
        plan_target("bogus")
    with pytest.raises(ConfigError, match="no architecture table for sm_999"):
        plan_target("sm_999")
    assert plan_target("sm_100").limits.arch == "sm_100"


def test_plan_sms_is_the_sm_count_a_persistent_grid_reads(tmp_path, capsys):
    spec = write(tmp_path, MINIMAL.replace("grid: [ceil(N / BN), ceil(M / BM)]",
                                           'grid: ["min(sm_count, ceil(N / BN) * ceil(M / BM))"]')
                 .replace("[64, 32, 16]", "[4096, 4096, 64]"))
    assert main(["plan", str(spec), "--arch", "sm_90", "--sms", "100"]) == EXIT_OK
    row = next(l for l in capsys.readouterr().out.splitlines() if l.strip().startswith("v4"))
    assert row.split()[2] == "100"
    assert main(["plan", str(spec), "--arch", "sm_90"]) == EXIT_OK
    row = next(l for l in capsys.readouterr().out.splitlines() if l.strip().startswith("v4"))
    assert row.split()[2] == "132"


def test_plan_spec_keeps_compile_errors_apart(tmp_path):
    from driver_gemm.planning.spec_plan import plan_spec
    from driver_gemm.specfile import load_spec

    spec = write(tmp_path, f"""\
shapes: [[8, 8, 8]]
kernels:
  - source: {ROOT / 'tests' / 'kernels' / 'broken_syntax.cu'}
    function: broken
    block: [32]
    grid: [1]
""")
    planned = plan_spec(load_spec(spec, allow_outside_sources=True), arch="sm_90")
    assert not planned.plans and len(planned.compile_errors) == 1 and not planned.ok
    assert planned.summary() == "0 ok, 0 INVALID, 1 compile(s) failed"
