"""Command-line values that cannot work, refused with exit 2 before anything runs, asks for a GPU or is written.

Each class below was answered with exit 3 ('no GPU') on a machine without one,
with an internal error, or only after a whole run (losing its results), before
these checks: option values read late, files to write that can never be
written where they are named, gates that could never fail.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from driver_gemm.cli import EXIT_OK, EXIT_USAGE, main
from driver_gemm.tune.strategies import BudgetError, parse_budget

from conftest import ROOT, SPECS

SEED = str(SPECS / "seed.yaml")
SWEEP = str(SPECS / "sweep-v4.yaml")
SEED_RESULTS = str(ROOT / "tests" / "data" / "results" / "seed-h200.json")
SWEEP_RESULTS = str(ROOT / "tests" / "data" / "results" / "tune-v4-h200.json.gz")
OTHER_RESULTS = str(ROOT / "tests" / "data" / "results" / "tf32-h200.json")   # v8, v9: no kernel case of the seed spec


def _tree(folder: Path) -> dict:
    return {str(p): p.stat().st_mtime_ns for p in folder.rglob("*")}


def refused(argv, tmp_path, monkeypatch, capsys, field: str, message: str = "", named: str | None = None) -> str:
    """`argv` ends in exit 2 with one line naming `field` (and `named`), no traceback, and nothing written."""
    workdir = tmp_path / "cwd"
    workdir.mkdir(exist_ok=True)
    monkeypatch.chdir(workdir)
    before = _tree(tmp_path)
    capsys.readouterr()
    assert main([str(a) for a in argv]) == EXIT_USAGE, argv
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("driver-gemm: "), err
    assert f"{field}: " in lines[0], (field, lines[0])
    assert message in lines[0], (message, lines[0])
    if named is not None:
        assert str(named) in lines[0], (named, lines[0])
    assert _tree(tmp_path) == before, "a refused command must write nothing"
    return lines[0]


# ------------------------------------------------------------------------------------------ files to write


def _unwritable(tmp_path: Path, kind: str, name: str) -> Path:
    """A path that can never be written as a file: an existing folder, a device, a path under a file."""
    if kind == "folder":
        folder = tmp_path / name
        folder.mkdir()
        return folder
    if kind == "device":
        return Path("/dev/null")
    a_file = tmp_path / "plain-file"
    a_file.write_text("x")
    return a_file / name


@pytest.mark.parametrize("kind", ["folder", "device", "under a file"])
@pytest.mark.parametrize("command", ["run --json", "run --sanitize --json", "tune --json", "tune --from --out",
                                     "tune --from --dispatch", "plot -o"])
def test_files_to_write_that_cannot_be_written(command, kind, tmp_path, monkeypatch, capsys):
    suffix = {"plot -o": "x.png", "tune --from --out": "w.yaml", "tune --from --dispatch": "d.yaml"}.get(command,
                                                                                                          "r.json")
    if kind == "device" and command == "plot -o":
        pytest.skip("a device has no .png name")
    target = _unwritable(tmp_path, kind, suffix)
    outside = tmp_path / "elsewhere"
    argv = {
        "run --json": ["run", SEED, "--json", target],
        "run --sanitize --json": ["run", SEED, "--sanitize", "memcheck", "--json", target],
        "tune --json": ["tune", SWEEP, "--json", target],
        "tune --from --out": ["tune", SWEEP, "--from", SWEEP_RESULTS, "--out", target],
        "tune --from --dispatch": ["tune", SWEEP, "--from", SWEEP_RESULTS, "--out", outside / "w.yaml",
                                   "--dispatch", target],
        "plot -o": ["plot", SEED_RESULTS, "-o", target],
    }[command]
    field = {"plot -o": "--output", "tune --from --out": "--out", "tune --from --dispatch": "--dispatch"}.get(
        command, "--json")
    refused(argv, tmp_path, monkeypatch, capsys, field, named=target)
    assert not outside.exists(), "the winners must not be written when the dispatch spec cannot be"


def test_a_results_folder_that_is_a_file_is_refused_before_the_run(tmp_path, monkeypatch, capsys):
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "results").write_text("not a folder")     # where results go by default
    refused(["run", SEED], tmp_path, monkeypatch, capsys, "--json", "is not a folder")
    refused(["tune", SWEEP, "--from", SWEEP_RESULTS], tmp_path, monkeypatch, capsys, "--out", "is not a folder")


@pytest.mark.parametrize("argv, field", [
    (["run", SEED, "--json", "{tmp}/r.jsonl"], "--json"),        # the whole file would be its own case log
    (["tune", SWEEP, "--json", "{tmp}/t.json.gz"], "--json"),
    (["tune", SWEEP, "--json", "{tmp}/t.jsonl"], "--json"),
    (["run", SEED, "--artifacts", SEED_RESULTS], "--artifacts"),  # a file where a folder is filled
])
def test_output_names_of_the_wrong_kind(argv, field, tmp_path, monkeypatch, capsys):
    refused([str(a).format(tmp=tmp_path) for a in argv], tmp_path, monkeypatch, capsys, field)


def test_a_missing_folder_for_an_output_is_made(tmp_path, monkeypatch, capsys):
    out = tmp_path / "new" / "deeper" / "w.yaml"
    monkeypatch.chdir(tmp_path)
    assert main(["tune", SWEEP, "--from", SWEEP_RESULTS, "--out", str(out)]) == EXIT_OK
    assert out.is_file()


# ------------------------------------------------------------------------------ values read before the GPU


@pytest.mark.parametrize("value", ["", "0", "-5", "abc", "MAX", "1e3", "1500.5", "99999999999999999999999",
                                   "１５００"])
def test_lock_clocks_values(value, tmp_path, monkeypatch, capsys):
    refused(["run", SEED, "--lock-clocks", value], tmp_path, monkeypatch, capsys, "--lock-clocks",
            "give a clock in MHz")


@pytest.mark.parametrize("value", ["", "fastest", "best:0", "best:1000", "heuristic:4"])
def test_baseline_choices(value, tmp_path, monkeypatch, capsys):
    refused(["run", SEED, "--baseline", value], tmp_path, monkeypatch, capsys, "--baseline",
            "give best, best:N")


@pytest.mark.parametrize("value", ["", "idle", "flush-idle", "flush-idle:0", "burst:0", "do-bench:2"])
def test_sample_patterns(value, tmp_path, monkeypatch, capsys):
    refused(["run", SEED, "--samples", value], tmp_path, monkeypatch, capsys, "--samples", "give flush")


@pytest.mark.parametrize("value, message", [("-1", "GPU ordinal"), ("0,-1", "GPU ordinal"), ("0,0", "each GPU once"),
                                            ("1,2,1", "each GPU once"), (str(2 ** 40), "GPU ordinal")])
def test_devices_values(value, message, tmp_path, monkeypatch, capsys):
    refused(["run", SEED, "--device", value], tmp_path, monkeypatch, capsys, "--device", message)


@pytest.mark.parametrize("command", ["run", "tune"])
def test_negative_device_ordinals(command, tmp_path, monkeypatch, capsys):
    spec = SEED if command == "run" else SWEEP
    refused([command, spec, "--device", "-1"], tmp_path, monkeypatch, capsys, "--device", "GPU ordinal")
    monkeypatch.setenv("DRIVER_GEMM_DEVICE", "-2")
    refused([command, spec], tmp_path, monkeypatch, capsys, "DRIVER_GEMM_DEVICE", "GPU ordinal")


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "1e308"])
def test_threshold_not_finite(value, tmp_path, monkeypatch, capsys):
    # 1e308 is finite but past what compare_runs takes: refused here, not an internal error after the run.
    refused(["run", SEED, "--baseline-results", SEED_RESULTS, "--threshold", value], tmp_path,
            monkeypatch, capsys, "--threshold", "a percentage from 0 to below 1,000,000")



@pytest.mark.parametrize("value, message", [("inf", "above 0"), ("1e400", "above 0"), ("nan", "above 0"),
                                            ("nope=50", "no kernel named 'nope'"),
                                            ("v1=5=6", "no kernel named 'v1=5'"), ("V1=50", "no kernel named 'V1'")])
def test_min_pct_values_and_names(value, message, tmp_path, monkeypatch, capsys):
    refused(["run", SEED, "--min-pct", value], tmp_path, monkeypatch, capsys, "--min-pct", message)


def test_baseline_results_of_another_spec_or_without_cases(tmp_path, monkeypatch, capsys):
    refused(["run", SEED, "--baseline-results", OTHER_RESULTS], tmp_path, monkeypatch, capsys, "--baseline-results",
            "no case of these results (spec 'tf32') is a case of this run", named=OTHER_RESULTS)
    refused(["run", SEED, "-k", "v1", "-s", "64x64x64", "--baseline-results", SEED_RESULTS], tmp_path, monkeypatch,
            capsys, "--baseline-results", "no case of these results")
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"spec": "seed", "cases": []}))
    refused(["run", SEED, "--baseline-results", empty], tmp_path, monkeypatch, capsys, "--baseline-results",
            named=empty)


@pytest.mark.parametrize("seed", ["-1", str(2 ** 63)])
def test_tune_seed_range(seed, tmp_path, monkeypatch, capsys):
    refused(["tune", SWEEP, "--strategy", "random", "--seed", seed], tmp_path, monkeypatch, capsys, "--seed")


@pytest.mark.parametrize("budget", ["", "1s,1s", "40,40", "5m,1h,3", "infs", "nanm", "1e400s", "-infh"])
def test_tune_budgets(budget, tmp_path, monkeypatch, capsys):
    refused(["tune", SWEEP, f"--budget={budget}"], tmp_path, monkeypatch, capsys, "--budget")
    with pytest.raises(BudgetError):
        parse_budget(budget)


def test_good_budgets_still_read():
    for text, seconds, count in (("300s", 300, None), ("1.5h", 5400, None), ("40", None, 40), ("5m,40", 300, 40),
                                 ("40, 300S", 300, 40)):
        budget = parse_budget(text)
        assert (budget.seconds, budget.configurations) == (seconds, count), text


def test_plan_for_an_architecture_nvrtc_cannot_build(tmp_path, monkeypatch, capsys):
    from driver_gemm.cuda.compile import supported_archs

    too_old = min(supported_archs()) - 5        # known to the limits tables, older than NVRTC builds
    line = refused(["plan", SEED, "-k", "v1", "--arch", f"sm_{too_old}"], tmp_path, monkeypatch, capsys, "--arch",
                   "cannot compile for")
    assert f"sm_{min(supported_archs())}" in line


@pytest.mark.parametrize("arch, message", [
    ("sm_122", "unknown architecture sm_122"),          # no GPU: its hint lists the architectures that plan
    ("sm_88", "no architecture table for sm_88"),       # NVRTC builds it, but no limits table: offline, no plan
    ("sm_110a", "no architecture table for sm_110a"),
    ("sm_70", "cannot compile for sm_70"),             # a table, but NVRTC 13 builds no Volta
])
def test_every_architecture_a_refused_arch_names_then_plans(arch, message, tmp_path, monkeypatch, capsys):
    import re

    from driver_gemm.cuda.compile import compile_text, supported_archs
    from driver_gemm.cuda.occupancy import ARCHES, base_arch
    from driver_gemm.planning.spec_plan import plannable_archs
    from driver_gemm.specfile.archs import KNOWN_ARCHS

    if arch == "sm_70" and 70 in supported_archs():
        pytest.skip("this NVRTC still builds Volta")
    line = refused(["plan", SEED, "-k", "v1", "--arch", arch], tmp_path, monkeypatch, capsys, "--arch", message)
    named = set(re.findall(r"\bsm_[0-9]+[af]?\b", line)) - {arch}
    # One list in every refusal: the real architectures with a table that this NVRTC builds.
    assert named == set(plannable_archs()) and "sm_75" in named and "sm_88" not in named, line
    assert set(plannable_archs()) == {name for name in KNOWN_ARCHS if base_arch(name) in ARCHES
                                      and int(re.sub(r"\D", "", name)) in supported_archs()}
    for name in sorted(named):
        capsys.readouterr()
        assert main(["plan", SEED, "-k", "v1", "-s", "64x64x64", "--arch", name]) == EXIT_OK, name
        compile_text("__global__ void k(float* c) { c[0] = 1.0f; }\n", "k.cu", ["k"], name, use_cache=False)


def test_a_misspelt_arch_is_pointed_only_at_one_that_plans(tmp_path, monkeypatch, capsys):
    # sm88 is another spelling of sm_88, a real GPU with no limits table: not offered, since it would be refused.
    line = refused(["plan", SEED, "-k", "v1", "--arch", "sm88"], tmp_path, monkeypatch, capsys, "--arch",
                   "not a GPU architecture: 'sm88'")
    assert "did you mean" not in line
    line = refused(["plan", SEED, "-k", "v1", "--arch", "sm_089"], tmp_path, monkeypatch, capsys, "--arch",
                   "unknown architecture sm_089")
    assert "did you mean sm_89?" in line


def test_show_of_results_without_cases_says_so(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"spec": "seed", "cases": []}))
    refused(["show", empty], tmp_path, monkeypatch, capsys, str(empty), "no cases in these results")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_folder_without_write_permission(tmp_path, monkeypatch, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        refused(["plot", SEED_RESULTS, "-o", locked / "x.png"], tmp_path, monkeypatch, capsys, "--output",
                "permission denied")
    finally:
        locked.chmod(0o755)
