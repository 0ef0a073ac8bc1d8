"""scripts/ncu_vs_vendor.py: the ncu commands it runs and its report, on pages made up here in ncu's CSV formats
(profiling needs a GPU and Nsight Compute)."""

from pathlib import Path

import pytest


@pytest.fixture()
def script(load_script):
    return load_script("ncu_vs_vendor")


def raw_page(kernel: str, values: dict[str, str]) -> str:
    names = ["ID", "Kernel Name", *values]
    units = ["", "", *("" for _ in values)]
    row = ["0", kernel, *values.values()]
    quoted = [",".join(f'"{cell}"' for cell in line) for line in (names, units, row)]
    return "==PROF== Disconnected from process 1\n" + "\n".join(quoted) + "\n"


def source_page(kernel: str, rows: list[tuple[str, str, int, int, dict[str, int]]]) -> str:
    reasons = ["stall_long_sb", "stall_wait", "stall_barrier"]
    header = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed", *reasons,
              *(f"{reason} (Not Issued)" for reason in reasons)]
    lines = [f'"Kernel Name","{kernel}",', ",".join(f'"{name}"' for name in header)]
    for address, sass, samples, executed, by_reason in rows:
        cells = [address, sass, str(samples), f"{executed:,}", *(str(by_reason.get(r, 0)) for r in reasons),
                 *("0" for _ in reasons)]
        lines.append(",".join(f'"{cell}"' for cell in cells))
    return "\n".join(lines) + "\n"


def test_each_side_is_one_launch_profiled_with_flushed_caches_and_the_clocks_left_alone(script):
    commands = script.run_commands("specs/suite.yaml", "v13-bf16-out", "1001x520x776")
    assert commands["ours"][-2:] == ["--no-baseline", "--no-timing"]       # the case alone, checked once
    assert "--no-baseline" not in commands["vendor"]                       # the case with its vendor row
    command = script.profile_command(commands["vendor"], "nvjet_sm90_tst_96x64", Path("out/vendor"))
    assert command[command.index("--clock-control") + 1] == "none"
    assert command[command.index("--cache-control") + 1] == "all"
    assert command[command.index("--kernel-name") + 1] == "regex:nvjet_sm90_tst_96x64"
    assert command[command.index("--launch-count") + 1] == "1"
    assert command[command.index("-o") + 1] == "out/vendor"
    assert command[-len(commands["vendor"]):] == commands["vendor"]
    assert "SourceCounters" in command                                     # the per-instruction stall samples


def test_the_report_puts_both_launches_side_by_side_with_their_stalls(script, tmp_path):
    (tmp_path / "ours-raw.csv").write_text(raw_page("gemm_tma_ws_multicast<16>", {
        "gpu__time_duration.sum": "7488", "sm__cycles_active.max": "10,234",
        "sm__pipe_tensor_cycles_active.max": "9984", "launch__cluster_size": "4", "sm__cycles_active.avg": "7297.31",
        "gpc__cycles_elapsed.avg.per_second": "1,830,000,000"}))
    (tmp_path / "vendor-raw.csv").write_text(raw_page("nvjet_sm90_tst_96x64_64x8_2x4_h_bz_NNN", {
        "gpu__time_duration.sum": "6592", "sm__cycles_active.max": "9087",
        "sm__pipe_tensor_cycles_active.max": "9984", "launch__cluster_size": "8", "sm__cycles_active.avg": "n/a"}))
    (tmp_path / "ours-source.csv").write_text(source_page("gemm_tma_ws_multicast<16>", [
        ("0x10", "@!P0  BRA 0x50", 30, 4992, {"stall_long_sb": 28, "stall_wait": 2}),
        ("0x20", "HGMMA.64x96x16.F32.BF16 R24, gdesc[UR8].tnspB, R24", 10, 4992, {"stall_wait": 10}),
    ]))
    (tmp_path / "vendor-source.csv").write_text(source_page("nvjet", [
        ("0x30", "WARPGROUP.DEPBAR.LE gsb0, 0x1", 5, 4608, {"stall_barrier": 5}),
        ("0x40", "@!P2  NANOSLEEP.SYNCS 0xc350", 15, 519, {"stall_long_sb": 15}),
    ]))
    lines = script.report(tmp_path).splitlines()
    assert lines[0] == "ours:   gemm_tma_ws_multicast<16>"
    assert lines[1] == "vendor: nvjet_sm90_tst_96x64_64x8_2x4_h_bz_NNN"
    rows = {line[:34].strip(): line[34:].split() for line in lines[3:16]}
    assert rows["duration (ns)"] == ["7,488", "6,592"]
    assert rows["SM clock (MHz)"] == ["1,830", "-"]                         # from Hz
    assert rows["busiest SM: active cycles"] == ["10,234", "9,087"]
    assert rows["busiest SM: tensor-pipe cycles"] == ["9,984", "9,984"]
    assert rows["mean SM: active cycles"] == ["7,297.3", "n/a"]               # a metric ncu could not collect
    assert rows["blocks a cluster"] == ["4", "8"]
    assert rows["L2 bytes"] == ["-", "-"]                                   # not in either page
    text = "\n".join(lines)
    assert "ours: warp stall samples by reason: long_sb 70%, wait 30%" in text
    assert "vendor: warp stall samples by reason: long_sb 75%, barrier 25%" in text
    ours_top = lines[lines.index("ours: the instructions where most samples fell (share, times executed, "
                                 "main reason):") + 1:][:2]
    assert ours_top[0].split()[:4] == ["75.0%", "4,992", "@!P0", "BRA"] and ours_top[0].split()[-1] == "long_sb"
    assert ours_top[1].split()[0] == "25.0%" and ours_top[1].split()[-1] == "wait"


def test_report_mode_rewrites_the_report_from_the_folder(script, tmp_path, capsys):
    for side in ("ours", "vendor"):
        (tmp_path / f"{side}-raw.csv").write_text(raw_page(side, {"gpu__time_duration.sum": "1000"}))
        (tmp_path / f"{side}-source.csv").write_text(source_page(side, []))
    assert script.main(["--report", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert (tmp_path / "report.txt").read_text() == printed
    assert "none recorded" in printed                                     # no samples: said, not a division by zero


def test_profiling_without_the_case_or_the_vendor_kernel_is_refused(script, capsys):
    with pytest.raises(SystemExit):
        script.main(["specs/suite.yaml", "-k", "v13-bf16-out", "-s", "1001x520x776", "--out", "x"])
    assert "--vendor" in capsys.readouterr().err


def test_a_missing_ncu_or_a_folder_without_pages_is_said_plainly(script, tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        script.main(["specs/suite.yaml", "-k", "v13-bf16-out", "-s", "1001x520x776", "--ours", "gemm",
                     "--vendor", "nvjet", "--out", str(tmp_path / "out"), "--ncu", str(tmp_path / "no-ncu")])
    assert "cannot run" in str(stopped.value.code) and "--ncu" in str(stopped.value.code)
    with pytest.raises(SystemExit):
        script.main(["--report", str(tmp_path)])
    assert "no ours-raw.csv or vendor-raw.csv there" in capsys.readouterr().err
