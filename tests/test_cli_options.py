"""Options and settings that were accepted and then ignored, or refused late: each is now refused with exit 2
before any GPU is asked for, honoured, or said once.

--scheduler (no local GPU; its address and --device), tune --from with the search's options, run's gates that
could never be judged, output paths that name no file, plot --tune on a run's results, an unwritable cache
folder, the compile bounds' values, and a compile child that cannot be started.
"""

from __future__ import annotations

import math
import os
import sys

import pytest

from driver_gemm.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from driver_gemm.cuda import bounded, cache
from driver_gemm.cuda.compile import compile_text
from driver_gemm.cuda.compile_child import out_of_memory
from driver_gemm.errors import CompileError, DriverGemmError, NoGpuError, SpecError, UsageError

from conftest import ROOT, SPECS
from test_malformed_options import refused

SEED = str(SPECS / "seed.yaml")
SWEEP = str(SPECS / "sweep-v4.yaml")
RESULTS = ROOT / "tests" / "data" / "results"
SEED_RESULTS = str(RESULTS / "seed-h200.json")
SWEEP_RESULTS = str(RESULTS / "tune-v4-h200.json.gz")
SMALL_KERNEL = 'extern "C" __global__ void small(float* out) { out[0] = 1.0f; }\n'


# ------------------------------------------------------------------------------------------ run --scheduler


def test_a_run_on_a_dask_cluster_asks_this_machine_for_no_gpu(tmp_path, monkeypatch, capsys):
    from driver_gemm.cuda import device
    from driver_gemm.runners import distribute

    def no_gpu():
        raise NoGpuError("no CUDA driver on this machine (test)")

    def cluster(devices, scheduler):
        raise DriverGemmError(f"reached the cluster at {scheduler}")

    monkeypatch.setattr(device, "device_count", no_gpu)    # as on a machine without one, with or without a GPU
    monkeypatch.setattr(distribute, "gpu_cluster", cluster)
    monkeypatch.chdir(tmp_path)
    code = main(["run", SEED, "-q", "--scheduler", "tcp://127.0.0.1:8786", "--json", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert "reached the cluster at tcp://127.0.0.1:8786" in err and "no CUDA driver" not in err
    assert code == EXIT_FAILED


@pytest.mark.parametrize("device", ["0,1", "0", "all"])
def test_scheduler_takes_no_device(device, tmp_path, monkeypatch, capsys):
    refused(["run", SEED, "--scheduler", "tcp://127.0.0.1:1", "--device", device], tmp_path, monkeypatch, capsys,
            "--scheduler", "--device")


def test_scheduler_takes_no_in_process(tmp_path, monkeypatch, capsys):
    refused(["run", SEED, "--scheduler", "tcp://127.0.0.1:1", "--in-process"], tmp_path, monkeypatch, capsys,
            "--scheduler", "--in-process")


@pytest.mark.parametrize("address", ["not a url", "", " ", ":8786", "tcp://", "tcp://:8786", "tcp:// host:8786",
                                     "://host:8786"])
def test_scheduler_address_with_no_host_or_with_spaces(address, tmp_path, monkeypatch, capsys):
    refused(["run", SEED, "--scheduler", address], tmp_path, monkeypatch, capsys, "--scheduler",
            "a Dask scheduler's address")


@pytest.mark.parametrize("address", ["tcp://10.0.0.1:8786", "host:8786", "tls://host.example:8786", "inproc://x",
                                     "ucx://host:13337", "[::1]:8786", "host"])
def test_scheduler_addresses_dask_takes_are_let_through(address):
    from driver_gemm.cli.run import _scheduler_address

    assert _scheduler_address(address)


# ------------------------------------------------------------------------------------------ tune --from


@pytest.mark.parametrize("extra, option", [(["--fresh"], "--fresh"), (["--budget", "40"], "--budget"),
                                           (["--strategy", "random"], "--strategy"), (["--seed", "0"], "--seed"),
                                           (["--json", "t.json"], "--json")])
def test_tune_from_refuses_the_options_of_a_search(extra, option, tmp_path, monkeypatch, capsys):
    line = refused(["tune", SWEEP, "--from", SWEEP_RESULTS, "--out", tmp_path / "w.yaml", *extra], tmp_path,
                   monkeypatch, capsys, "--from", option)
    assert "give one or the other" in line


def test_tune_from_alone_still_picks(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["tune", SWEEP, "--from", SWEEP_RESULTS, "--out", str(tmp_path / "w.yaml")]) == EXIT_OK
    assert (tmp_path / "w.yaml").is_file()


# ------------------------------------------------------------------------------------------ run's gates


def test_threshold_without_baseline_results(tmp_path, monkeypatch, capsys):
    refused(["run", SEED, "--threshold", "5"], tmp_path, monkeypatch, capsys, "--threshold", "--baseline-results")


@pytest.mark.parametrize("option", ["--no-timing", "--no-baseline"])
def test_min_pct_that_can_never_be_judged(option, tmp_path, monkeypatch, capsys):
    refused(["run", SEED, option, "--min-pct", "50"], tmp_path, monkeypatch, capsys, "--min-pct", option)
    refused(["run", SEED, option, "--min-pct", "v1=50"], tmp_path, monkeypatch, capsys, "--min-pct", option)


@pytest.mark.parametrize("option, off", [
    (["--rounds", "3"], "--no-timing"), (["--samples", "burst:4"], "--no-timing"),
    (["--timer", "cupti"], "--no-timing"), (["--timer", "events"], "--no-timing"),
    (["--baseline", "heuristic"], "--no-baseline"), (["--baseline", "best:4"], "--no-timing"),
])
def test_an_option_of_what_a_run_times_is_refused_where_nothing_of_it_is_timed(option, off, tmp_path, monkeypatch,
                                                                              capsys):
    line = refused(["run", SEED, off, *option], tmp_path, monkeypatch, capsys, option[0], off)
    assert "leave one of them out" in line


def test_the_default_baseline_and_timer_still_go_with_no_timing(monkeypatch):
    from driver_gemm.cli.main import build_parser
    from driver_gemm.cli.run import _check_option_combinations, _run_options

    args = build_parser().parse_args(["run", SEED, "--no-timing", "--no-baseline"])
    _check_option_combinations(args)
    options = _run_options(args)
    assert options.timer == "events" and options.baseline_choice.as_json() == \
        _run_options(build_parser().parse_args(["run", "--baseline", "best"])).baseline_choice.as_json()


# ------------------------------------------------------------------------------------------ run's outputs


@pytest.mark.parametrize("option, value", [("--json", "out/"), ("--json", f"out{os.sep}"), ("--json", ""),
                                           ("--artifacts", ""), ("--artifacts", " ")])
def test_output_paths_that_name_no_file(option, value, tmp_path, monkeypatch, capsys):
    refused(["run", SEED, option, value], tmp_path, monkeypatch, capsys, option)


def test_an_artifacts_folder_may_end_in_a_separator(tmp_path):
    from driver_gemm.cli.run import _output_path

    assert _output_path("maps/", "--artifacts", folder=True).name == "maps"


# ------------------------------------------------------------------------------------------ plot --tune


def test_plot_tune_of_a_run_names_the_file(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    refused(["plot", SEED_RESULTS, "-o", tmp_path / "x.png", "--tune"], tmp_path, monkeypatch, capsys, "--tune",
            "not a tune's results", named=SEED_RESULTS)


def test_plot_tune_of_a_tune_still_draws(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    picture = tmp_path / "tune.svg"
    assert main(["plot", "--tune", str(RESULTS / "tune-v8-small-h200.json.gz"), "-o", str(picture)]) == EXIT_OK
    assert picture.is_file()


# ------------------------------------------------------------------------------------------ the cache folder


@pytest.mark.parametrize("where", ["file", "under a file", "/dev/null"])
def test_an_unwritable_cache_folder_is_one_warning_and_the_command_goes_on(where, tmp_path, monkeypatch, capsys):
    file = tmp_path / "cachefile"
    file.write_text("not a folder")
    folder = {"file": file, "under a file": file / "sub", "/dev/null": os.devnull}[where]
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(folder))
    monkeypatch.setattr(cache, "_unwritable_folders", set())     # as in a new process
    assert main(["plan", SEED, "--arch", "sm_90", "-k", "v1", "-k", "v2"]) == EXIT_OK   # two entries, one warning
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "cannot be written" in line]
    assert len(warnings) == 1, err
    assert f"the disk cache in {folder}" in warnings[0] and "not a folder" in warnings[0]


def test_a_cache_folder_under_the_home_of_no_such_user_is_refused_naming_the_variable(tmp_path, monkeypatch,
                                                                                        capsys):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", "~no-such-user-of-driver-gemm/cache")
    line = refused(["plan", SEED, "--arch", "sm_90", "-k", "v1"], tmp_path, monkeypatch, capsys,
                   "DRIVER_GEMM_CACHE_DIR", "the home folder it names cannot be found here")
    assert "internal error" not in line


# ------------------------------------------------------------------------------------------ the compile bounds


@pytest.mark.parametrize("variable, value", [(bounded.TIMEOUT_VARIABLE, "nan"), (bounded.TIMEOUT_VARIABLE, "-1"),
                                             (bounded.TIMEOUT_VARIABLE, "99999999999"),
                                             (bounded.MEMORY_VARIABLE, "-5")])
@pytest.mark.parametrize("command", [["plan", SEED, "-k", "v4"], ["run", SEED, "-k", "v4"],
                                     ["tune", SWEEP, "--from", SWEEP_RESULTS, "--out", "w.yaml"]],
                         ids=["plan", "run", "tune"])
def test_a_compile_bound_that_is_no_bound_is_refused_with_the_cache_warm(command, variable, value, tmp_path,
                                                                        monkeypatch, capsys):
    assert main(["plan", SEED, "--arch", "sm_90", "-k", "v4"]) == EXIT_OK     # the kernel now in the cache
    monkeypatch.setenv(variable, value)
    refused(command, tmp_path, monkeypatch, capsys, variable)


@pytest.mark.parametrize("value", ["1e30", "99999999999999999999999", str((1 << 36) + 1)])
def test_a_memory_cap_no_process_could_reach_is_refused(value, monkeypatch):
    monkeypatch.setenv(bounded.MEMORY_VARIABLE, value)
    with pytest.raises(UsageError) as info:
        bounded.compile_bounds()
    assert info.value.field == bounded.MEMORY_VARIABLE and "at most" in str(info.value)


def test_a_memory_cap_no_process_could_reach_is_exit_2_naming_the_variable(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DRIVER_GEMM_NO_CACHE", "1")
    monkeypatch.setenv(bounded.MEMORY_VARIABLE, "1e30")
    assert main(["plan", SEED, "--arch", "sm_90", "-k", "v1"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"{bounded.MEMORY_VARIABLE}: must be at most" in err and "Traceback" not in err


def test_the_largest_memory_cap_is_still_taken(monkeypatch):
    monkeypatch.setenv(bounded.MEMORY_VARIABLE, str(1 << 36))
    assert bounded.compile_bounds().memory_bytes == 1 << 56


def test_a_cap_too_small_to_load_nvrtc_is_said_as_running_out_of_memory(monkeypatch):
    # Below the smallest cap the environment may set (a usage error): the child's own reading, should NVRTC's
    # library outgrow that floor.
    monkeypatch.setattr(bounded, "MIN_MEMORY_MB", 1)
    monkeypatch.setenv(bounded.MEMORY_VARIABLE, "64")     # the interpreter starts; NVRTC's library cannot map
    with pytest.raises(CompileError) as info:
        compile_text(SMALL_KERNEL, "small.cu", ["small"], "sm_90", use_cache=False)
    message = str(info.value)
    assert "NVRTC ran out of memory within 64 MiB" in message and bounded.MEMORY_VARIABLE in message
    assert "Traceback" not in message


def test_what_counts_as_running_out_of_memory_in_the_child():
    try:
        try:
            raise OSError("libnvrtc.so.13: failed to map segment from shared object")
        except OSError as loader:
            raise RuntimeError(f"Failed to dlopen libnvrtc.so.13: {loader}") from loader
    except RuntimeError as wrapped:
        assert out_of_memory(wrapped)
    assert out_of_memory(MemoryError())
    assert not out_of_memory(RuntimeError("Failed to dlopen libnvrtc.so.13: cannot open shared object file"))


def test_a_timeout_of_0_is_no_time_limit(monkeypatch):
    monkeypatch.setenv(bounded.TIMEOUT_VARIABLE, "0")
    bounds = bounded.compile_bounds()
    assert bounds.seconds == math.inf and bounds.describe().startswith("no time limit")
    cubin = compile_text(SMALL_KERNEL, "small.cu", ["small"], "sm_90", use_cache=False)
    assert "small" in cubin.lowered_names


# ------------------------------------------------------------------------------------------ starting the child


def test_a_child_that_cannot_be_started_is_a_compile_error_naming_it(tmp_path):
    missing = tmp_path / "no-such-compiler"
    with pytest.raises(CompileError) as info:
        bounded.run_bounded([str(missing), "-v"], None, 10)
    assert str(info.value) == f"could not start {missing}: No such file or directory"


def test_an_interpreter_that_cannot_run_fails_the_compile_naming_the_child(tmp_path, monkeypatch):
    interpreter = tmp_path / "python"
    interpreter.write_text("not executable")
    monkeypatch.setattr(sys, "executable", str(interpreter))
    with pytest.raises(CompileError) as info:
        compile_text(SMALL_KERNEL, "small.cu", ["small"], "sm_90", use_cache=False)
    assert str(info.value) == (f"could not start {interpreter} -m driver_gemm.cuda.compile_child: "
                               "Permission denied")


@pytest.mark.parametrize("command", [["plan", ""], ["run", "seed", "  "], ["tune", ""]])
def test_an_empty_spec_argument_is_refused_by_name_not_read_as_the_current_folder(command, capsys):
    # Path("") is ".", which the spec reader would call a folder that is no spec.
    with pytest.raises(SystemExit) as info:
        main(command)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument SPEC: the spec argument is empty: name a spec file or a shipped spec" in err
    assert "a folder" not in err


def test_the_library_refuses_an_empty_spec_name_too():
    from driver_gemm.specfile.shipped import resolve_spec

    with pytest.raises(SpecError, match="the spec argument is empty: name a spec file or a shipped spec"):
        resolve_spec("  ")
