"""Nsight Compute per case: the command line, and parsing ncu's --csv --page raw output.

tests/data/ncu-raw-sm90.csv is written in the format ncu prints with ``--csv --page raw`` (ncu's own
lines first, a quoted header of metric names, a units row, one quoted row per launch with thousands
separators; "n/a" where a metric could not be collected), with the figures of a v10 profile on an H200;
a GPU run confirms the metric names.
"""

import stat
from pathlib import Path

import pytest

from driver_gemm.errors import ToolMissingError
from driver_gemm.measure.profile import (METRICS, ProfileError, find_ncu, ncu_command, parse_ncu_csv, run_ncu,
                                         summarize_profile)

DATA = Path(__file__).resolve().parent / "data"
V10 = "v10[BM=256,BK=32,WGS=2,STAGES=4,GROUP=8]"


def test_the_command_profiles_one_launch_in_the_case_range_at_the_gpus_own_clocks():
    command = ncu_command(["driver-gemm", "run", "specs/tf32.yaml"], V10, "4096x4096x4096", "sgemm_tf32_wgmma",
                         ncu="/opt/ncu")
    assert command[0] == "/opt/ncu" and command[-3:] == ["driver-gemm", "run", "specs/tf32.yaml"]
    text = " ".join(command)
    assert "--clock-control none" in text and "--csv --page raw" in text and "--launch-count 1" in text
    assert command[command.index("--nvtx-include") + 1] == f"driver-gemm@{V10} 4096x4096x4096/"
    assert "--nvtx" in command and command[command.index("--kernel-name") + 1] == "regex:sgemm_tf32_wgmma"
    assert command[command.index("--metrics") + 1].split(",") == list(METRICS)


def test_parse_the_raw_csv_page():
    launches = parse_ncu_csv((DATA / "ncu-raw-sm90.csv").read_text())
    assert len(launches) == 2
    first = launches[0]
    assert first.kernel.startswith("void sgemm_tf32_wgmma<256, 32, 2, 4, 8>")
    assert first.grid == "(32, 16, 1)" and first.block == "(256, 1, 1)"
    assert first.values["gpu__time_duration.sum"] == 457984.0                 # "457,984"
    assert first.values["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"] == 1048576.0
    assert first.units["gpu__time_duration.sum"] == "nsecond"
    assert launches[1].values["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"] is None   # n/a
    assert parse_ncu_csv("==PROF== nothing profiled\n") == []


def test_summary_scales_units_and_ranks_stalls():
    launch = parse_ncu_csv((DATA / "ncu-raw-sm90.csv").read_text())[0]
    flops = 2 * 4096 ** 3
    summary = summarize_profile(launch, flops)
    assert summary["duration_us"] == pytest.approx(457.984)
    assert summary["dram_bytes"] == pytest.approx((197.53 + 67.11) * 1e6)
    assert summary["l2_bytes"] == pytest.approx(1.87e9)
    assert summary["achieved_occupancy_pct"] == 12.47 and summary["tensor_pipe_pct"] == 64.76
    assert summary["fma_pipe_pct"] == 18.93 and summary["shared_bank_conflicts"] == 1048576
    assert [s["reason"] for s in summary["top_stalls"]] == ["mio_throttle", "barrier", "math_pipe_throttle"]
    assert summary["arithmetic_intensity"] == pytest.approx(flops / ((197.53 + 67.11) * 1e6))
    assert summarize_profile(launch)["arithmetic_intensity"] is None


def test_without_ncu_a_clear_message(monkeypatch):
    monkeypatch.delenv("DRIVER_GEMM_NCU", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ToolMissingError, match="needs Nsight Compute's ncu"):
        find_ncu()
    with pytest.raises(ToolMissingError, match="not found"):
        run_ncu(["/nonexistent/ncu", "--version"])


def fake_ncu(tmp_path, body: str) -> str:
    script = tmp_path / "ncu"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_run_ncu_reads_what_ncu_prints_and_reports_failures(tmp_path, monkeypatch):
    ncu = fake_ncu(tmp_path, f"cat {DATA / 'ncu-raw-sm90.csv'}\n")
    monkeypatch.setenv("DRIVER_GEMM_NCU", ncu)
    assert find_ncu() == ncu
    launches = run_ncu(ncu_command(["true"], V10, "4096x4096x4096", "sgemm_tf32_wgmma", ncu=ncu))
    assert len(launches) == 2
    failing = fake_ncu(tmp_path, "echo '==ERROR== Failed to profile kernel' >&2\nexit 1\n")
    with pytest.raises(ProfileError, match="exited with 1 and profiled 0 launch.*Failed to profile"):
        run_ncu([failing])
