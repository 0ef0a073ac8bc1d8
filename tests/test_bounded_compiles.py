"""Compiles are bounded in time and memory, stop on the first Ctrl-C, and leave no process or file behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from driver_gemm.cuda import bounded
from driver_gemm.cuda.compile import compile_text
from driver_gemm.cuda.nvcc import find_nvcc
from driver_gemm.errors import CompileError, UsageError

from conftest import ROOT
from test_spec import MINIMAL, write

# Each level doubles the text the preprocessor makes: 39 levels is 2**39 copies, far past any bound.
DOUBLING = "".join(f"#define X{i + 1} X{i} X{i}\n" for i in range(39)).replace("X0 X0", "1 + 1", 1) + \
    "extern \"C\" __global__ void runaway(float* out) { out[0] = X39; }\n"


RUNAWAY_KERNEL = DOUBLING.replace("float* out", "const float* A, const float* B, float* C").replace("out[0]", "C[0]")


def children_of(pid: int) -> list[int]:
    """Every descendant of `pid`, from /proc (psutil is not needed)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_runaway_macro_is_stopped_at_the_time_bound_naming_the_kernel_and_the_bound(monkeypatch):
    monkeypatch.setenv(bounded.TIMEOUT_VARIABLE, "3")
    began = time.monotonic()
    with pytest.raises(CompileError) as info:
        compile_text(DOUBLING, "runaway.cu", ["runaway"], "sm_90", use_cache=False)
    assert time.monotonic() - began < 30
    message = str(info.value)
    assert message.startswith("runaway.cu (runaway): the compile (NVRTC, then the reading of its log) was stopped "
                              "after 3 s, the time a compile may take")
    assert bounded.TIMEOUT_VARIABLE in message
    assert not [pid for pid in children_of(os.getpid()) if alive(pid)]


def test_a_runaway_macro_is_stopped_at_the_memory_bound(monkeypatch):
    monkeypatch.setenv(bounded.TIMEOUT_VARIABLE, "200")
    monkeypatch.setenv(bounded.MEMORY_VARIABLE, "400")     # NVRTC's process starts at about 320 MiB
    with pytest.raises(CompileError) as info:
        compile_text(DOUBLING, "runaway.cu", ["runaway"], "sm_90", use_cache=False)
    message = str(info.value)
    assert message.startswith("runaway.cu (runaway): NVRTC ran out of memory within 400 MiB"), message
    assert bounded.MEMORY_VARIABLE in message


def test_a_good_kernel_still_compiles_in_its_child_and_an_error_keeps_its_log():
    cubin = compile_text('extern "C" __global__ void k(float* out) { out[0] = 1; }', "k.cu", ["k"], "sm_90",
                         use_cache=False)
    assert cubin.symbol("k") == "k" and cubin.image
    with pytest.raises(CompileError) as info:
        compile_text('extern "C" __global__ void k(float* out) { out[0] = nothere; }', "k.cu", ["k"], "sm_90",
                     use_cache=False)
    assert 'identifier "nothere" is undefined' in str(info.value) and "nothere" in info.value.log


@pytest.mark.parametrize("name, value", [(bounded.TIMEOUT_VARIABLE, "soon"), (bounded.MEMORY_VARIABLE, "-1"),
                                         (bounded.TIMEOUT_VARIABLE, "inf"), (bounded.MEMORY_VARIABLE, "\uff11"),
                                         (bounded.TIMEOUT_VARIABLE, "1_0")])   # float() takes both
def test_a_bound_that_is_no_number_names_its_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(UsageError, match=name):
        bounded.compile_bounds()


@pytest.mark.parametrize("value", ["1", "10", "0.5", "255"])
def test_a_memory_cap_too_small_for_the_compiles_own_process_is_refused_by_name(monkeypatch, value):
    # Below it the child fails before NVRTC reads the source, in words that do not name the cap (Python's own
    # SystemError, ptxas giving up): the bound is refused instead, saying what it must be. 0 is no cap.
    monkeypatch.setenv(bounded.MEMORY_VARIABLE, value)
    with pytest.raises(UsageError, match=f"must be at least {bounded.MIN_MEMORY_MB} MiB") as info:
        bounded.compile_bounds()
    assert info.value.field == bounded.MEMORY_VARIABLE
    monkeypatch.setenv(bounded.MEMORY_VARIABLE, "0")
    assert bounded.compile_bounds().memory_bytes is None


@pytest.mark.parametrize("log, alone", [
    ("ptxas fatal   : Ptx assembly aborted due to errors\n", True),
    ("ptxas error   : Entry function 'k' uses too much shared data\nptxas fatal   : Ptx assembly aborted due to "
     "errors\n", False),
    ("k.cu(3): error: identifier \"x\" is undefined\n", False),
])
def test_ptxas_giving_up_with_no_error_of_its_own_is_read_as_memory_under_a_cap(log, alone):
    from driver_gemm.cuda.compile import _ptxas_gave_up_alone

    assert _ptxas_gave_up_alone(log) is alone


def test_one_sigint_stops_a_compiling_plan_at_once_with_nothing_left(tmp_path):
    spec = write(tmp_path, MINIMAL.replace("../kernels/04_coarsen_2d.cu", "../kernels/runaway.cu")
                 .replace("function: sgemm_coarsen_2d", "function: runaway")
                 .replace("params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}", "params: {}")
                 .replace("block: [BN / TN, BM / TM]", "block: [1]").replace("grid: [ceil(N / BN), ceil(M / BM)]",
                                                                            "grid: [1]")
                 + "    signature: [A, B, C]\n")
    (tmp_path / "kernels" / "runaway.cu").write_text(RUNAWAY_KERNEL)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DRIVER_GEMM_NO_CACHE": "1"}
    child = subprocess.Popen([sys.executable, "-m", "driver_gemm", "plan", "--arch", "sm_90", str(spec)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:    # until NVRTC's child is compiling
        compilers = [pid for pid in children_of(child.pid)
                     if b"compile_child" in cmdline(pid)]
        if compilers:
            break
        time.sleep(0.1)
    assert compilers, "the compile never started"
    time.sleep(1)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=30)
    assert time.monotonic() - sent < 10
    assert child.returncode == 130, err
    assert "interrupted" in err.decode() and "Traceback" not in err.decode()
    assert not any(alive(pid) for pid in compilers)


@pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc")
def test_sigterm_during_nvcc_takes_its_children_and_temporary_files(tmp_path):
    spec = write(tmp_path, MINIMAL.replace("../kernels/04_coarsen_2d.cu", "../kernels/runaway.cu")
                 .replace("function: sgemm_coarsen_2d", "function: runaway").replace(
                     "params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}", "params: {}\n    compiler: nvcc")
                 .replace("block: [BN / TN, BM / TM]", "block: [1]").replace("grid: [ceil(N / BN), ceil(M / BM)]",
                                                                            "grid: [1]")
                 + "    signature: [A, B, C]\n")
    (tmp_path / "kernels" / "runaway.cu").write_text(RUNAWAY_KERNEL)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DRIVER_GEMM_NO_CACHE": "1", "TMPDIR": str(scratch)}
    child = subprocess.Popen([sys.executable, "-m", "driver_gemm", "plan", "--arch", "sm_90", str(spec)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    deadline = time.monotonic() + 60
    tools = []
    while time.monotonic() < deadline and not tools:
        tools = [pid for pid in children_of(child.pid)
                 if any(name in cmdline(pid) for name in (b"cudafe", b"cc1plus", b"cicc"))]
        time.sleep(0.1)
    assert tools, "nvcc never started its tools"
    every = children_of(child.pid)
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=30)
    assert child.returncode == 130, err
    time.sleep(0.5)
    assert not any(alive(pid) for pid in every)
    assert list(scratch.iterdir()) == []


def _sleeper(seconds: float) -> list[str]:
    return [sys.executable, "-c", f"import time; time.sleep({seconds})"]


def test_an_interrupted_compile_spec_stops_only_its_own_compiles_and_leaves_no_stop_behind(tmp_path, monkeypatch):
    from driver_gemm.planning import build
    from driver_gemm.specfile import load_spec

    spec = load_spec(write(tmp_path, MINIMAL.replace("TM: 4, TN: 4", "TM: [2, 4], TN: 4")))
    first = build.kernels_of(spec)[0].label
    started = threading.Event()
    seen: dict[str, object] = {}

    def fake_build(kernels, target):
        if kernels[0].label == first:        # the program the interrupt comes from, once its sibling compiles
            started.wait(30)
            time.sleep(0.3)
            raise KeyboardInterrupt
        started.set()
        try:
            seen["sibling"] = bounded.run_bounded(_sleeper(30), None, 60).returncode
        except bounded.ChildStopped as stopped:
            seen["sibling"] = stopped.reason
        raise CompileError("stopped")

    def other_call() -> None:               # a compile another thread runs for a call of its own
        seen["other"] = bounded.run_bounded(_sleeper(2), None, 60).returncode

    monkeypatch.setattr(build, "build_kernels", fake_build)
    other = threading.Thread(target=other_call)
    other.start()
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        build.compile_spec(spec, "sm_90", jobs=2)
    other.join(30)
    deadline = time.monotonic() + 30
    while "sibling" not in seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert time.monotonic() - began < 20
    # The interrupted call's own compile is killed and said to be stopped (not a crash, nor out of memory) ...
    assert seen["sibling"] == "stopped"
    # ... the other thread's compile runs to its end ...
    assert seen["other"] == 0
    # ... and a later compile, from any thread, runs.
    later: dict[str, object] = {}

    def compile_later() -> None:
        try:
            later["code"] = bounded.run_bounded([sys.executable, "-c", "pass"], None, 60).returncode
        except bounded.ChildStopped as stopped:
            later["code"] = stopped.reason
    thread = threading.Thread(target=compile_later)
    thread.start()
    thread.join(30)
    assert later["code"] == 0
    assert not [pid for pid in children_of(os.getpid()) if alive(pid)]


def test_stopping_a_scope_kills_its_running_child_and_the_children_of_scopes_inside_it():
    seen: dict[str, object] = {}

    with bounded.stop_scope() as outer:
        def inner_call() -> None:
            with bounded.stop_scope():
                try:
                    bounded.run_bounded(_sleeper(30), None, 60)
                except bounded.ChildStopped as stopped:
                    seen["inner"] = stopped.reason
        thread = threading.Thread(target=bounded.in_scope(inner_call))
        thread.start()
        time.sleep(1)
        outer.stop()
        thread.join(20)
    assert seen["inner"] == "stopped"
    assert bounded.run_bounded([sys.executable, "-c", "pass"], None, 60).returncode == 0
