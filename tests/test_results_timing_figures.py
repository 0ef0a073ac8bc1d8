"""Timing figures a file keeps without its raw samples, held to what a run's summary is: a count of samples that its
total and mean are of, a mean within its samples' range, and SM clocks that are a GPU's (0: none read). Each is
refused naming the file (or the case log's line) and the field, before `show` prints 9,223,372,036,854,775,808
samples or `compare` a clock change of +inf%."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from driver_gemm.cli import EXIT_OK, EXIT_USAGE, main
from driver_gemm.errors import UsageError
from driver_gemm.results.read import load_results

from conftest import ROOT

SEED = ROOT / "tests" / "data" / "results" / "seed-h200.json"     # its timings keep no raw samples
KERNEL_CASE = 1


def with_timing(tmp_path: Path, part: str = "timing", **fields) -> Path:
    """The seed results with fields of one kernel case's timing (or another part) changed."""
    document = json.loads(SEED.read_text(encoding="utf-8"))
    document["cases"][KERNEL_CASE].setdefault(part, {}).update(fields)
    path = tmp_path / "timing.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def seed_timing() -> dict:
    return json.loads(SEED.read_text(encoding="utf-8"))["cases"][KERNEL_CASE]["timing"]


WRONG_TIMINGS = {
    "a count of 2**63": (lambda t: {"samples": 2**63}, "timing.samples", "samples = 9,223,372,036,854,775,808 at"),
    "one sample short": (lambda t: {"samples": t["samples"] - 100}, "timing.samples", "not total_ms ="),
    "a total of other samples": (lambda t: {"total_ms": t["total_ms"] * 3}, "timing.samples", "not total_ms ="),
    "a mean above the largest": (lambda t: {"mean_ms": t["max_ms"] * 2}, "timing.mean_ms",
                                 "is outside min_ms = "),
    "a denormal clock": (lambda t: {"sm_clock_mhz": 5e-324}, "timing.sm_clock_mhz",
                         "MHz is no figure a GPU run gives (1 to 100000 MHz)"),
    "a clock of a hertz": (lambda t: {"sm_clock_reference_mhz": 1e-6}, "timing.sm_clock_reference_mhz",
                           "MHz is no figure a GPU run gives"),
}


@pytest.mark.parametrize("variant", sorted(WRONG_TIMINGS))
def test_a_timing_no_run_writes_is_refused_naming_its_field(variant, tmp_path):
    change, field, words = WRONG_TIMINGS[variant]
    path = with_timing(tmp_path, **change(seed_timing()))
    with pytest.raises(UsageError) as refused:
        load_results(path)
    assert refused.value.where == str(path) and refused.value.field == f"cases[{KERNEL_CASE}].{field}"
    assert words in str(refused.value)


def test_the_vendor_s_clock_in_rounds_is_a_clock_too(tmp_path):
    path = with_timing(tmp_path, "interleaved", kernel_ms=2.0, vendor_ms=0.04, vendor_sm_clock_mhz=5e-324)
    with pytest.raises(UsageError) as refused:
        load_results(path)
    assert refused.value.field == f"cases[{KERNEL_CASE}].interleaved.vendor_sm_clock_mhz"


@pytest.mark.parametrize("command", ["show", "compare"])
def test_each_command_refuses_them_with_one_line(command, tmp_path, capsys):
    path = with_timing(tmp_path, samples=2**63)
    argv = ["show", str(path)] if command == "show" else ["compare", str(SEED), str(path)]
    assert main(argv) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"driver-gemm: {path}: cases[{KERNEL_CASE}].timing.samples: ")


def test_a_case_log_line_is_named_by_its_line(tmp_path):
    document = json.loads(SEED.read_text(encoding="utf-8"))
    header = {"type": "run", **{key: value for key, value in document.items() if key != "cases"}}
    cases = [{"type": "case", **case} for case in document["cases"]]
    cases[KERNEL_CASE]["timing"]["samples"] = 2**63
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(json.dumps(record) for record in [header, *cases]) + "\n", encoding="utf-8")
    with pytest.raises(UsageError) as refused:
        load_results(path)
    assert refused.value.where == f"{path}:{KERNEL_CASE + 2}" and refused.value.field == "timing.samples"


def test_a_clock_of_0_is_no_clock_and_reads(tmp_path, capsys):
    path = with_timing(tmp_path, sm_clock_mhz=0, sm_clock_min_mhz=0)
    assert load_results(path).cases[KERNEL_CASE].timing.sm_clock_mhz == 0
    assert main(["compare", str(SEED), str(path)]) == EXIT_OK
    assert "inf" not in capsys.readouterr().err
