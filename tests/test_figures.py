"""The pictures of a comparison, of raw samples and clocks, and of a tune, drawn from recorded results on the
Agg backend; and `compare --json` / `--markdown` for CI."""

from __future__ import annotations

import json

import pytest

from driver_gemm.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from driver_gemm.report.comparison import compare_runs
from driver_gemm.results.provenance import Provenance
from driver_gemm.results.read import read_results

from conftest import ROOT

RESULTS = ROOT / "tests" / "data" / "results"
OLD, NEW = RESULTS / "seed-before-h200.json", RESULTS / "seed-h200.json"


def _comparisons():
    return compare_runs(read_results(OLD).run, read_results(NEW).run)


def test_the_comparison_picture_has_a_row_per_timed_case_coloured_by_verdict():
    pytest.importorskip("matplotlib")
    from driver_gemm.report.figures import VERDICT_COLOURS, comparison_figure

    comparisons = _comparisons()
    timed = [c for c in comparisons if c.change is not None and c.verdict in VERDICT_COLOURS]
    figure = comparison_figure(comparisons, "old -> new")
    axes = figure.axes[0]
    assert len(axes.get_yticklabels()) == len(timed)
    points = [collection for collection in axes.collections if len(collection.get_offsets())]
    assert len(points) == len(timed)
    slower = sum(c.verdict == "SLOWER" for c in timed)
    assert f"{slower} SLOWER" in axes.get_title()
    bands = [line for line in axes.get_lines() if line.get_linewidth() == 6]
    assert len(bands) == len(timed)
    # Each band holds its point: the change lies between the changes the quartiles allow.
    for comparison, band in zip(timed, bands):
        low, high = sorted(band.get_xdata())
        assert low <= 100 * comparison.change <= high


def test_compare_writes_the_picture_and_json(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    picture = tmp_path / "compare.svg"
    code = main(["compare", str(OLD), str(NEW), "--json", "--plot", str(picture)])
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert code == (EXIT_FAILED if document["regression"] else EXIT_OK)
    assert len(document["cases"]) == len(_comparisons())
    assert set(document["cases"][0]) == {"kernel", "shape", "gpu", "verdict", "change", "old", "new"}
    assert sum(document["counts"].values()) == len(document["cases"])
    assert document["cases"][0]["old"]["median_ms"] > 0
    assert any(line.startswith("GPU: NVIDIA H200 GPU-") for line in document["warnings"])
    assert "warning: the runs differ in GPU" in captured.err and f"plot: {picture}" in captured.err
    assert picture.read_text().startswith("<?xml")


def test_compare_markdown_ends_with_what_differs(capsys):
    main(["compare", str(OLD), str(NEW), "--markdown"])
    out = capsys.readouterr().out
    assert out.startswith("| kernel |") and "> warning: the runs differ in nvrtc: 13.5 -> 13.0" in out


def test_compare_notes_sources_that_differ_for_the_same_kernel_name(tmp_path, capsys):
    old, new = read_results(OLD).run, read_results(OLD).run
    old.provenance = Provenance(kernels={"v4": "a" * 64, "v0": "c" * 64})
    new.provenance = Provenance(kernels={"v4": "b" * 64, "v0": "c" * 64})
    main(["compare", str(old.write_json(tmp_path / "old.json")), str(new.write_json(tmp_path / "new.json"))])
    err = capsys.readouterr()
    assert "note: sources differ (by digest) for kernel(s) of the same name: v4" in err.out + err.err
    assert "warning" not in err.out + err.err


def test_compare_refuses_a_picture_onto_an_input_before_reading(tmp_path, capsys):
    copy = tmp_path / "new.json"
    copy.write_bytes(NEW.read_bytes())
    assert main(["compare", str(OLD), str(copy), "--plot", str(copy)]) == EXIT_USAGE
    assert copy.read_bytes() == NEW.read_bytes()
    assert main(["compare", str(OLD), str(NEW), "--plot", str(tmp_path / "c.jpg")]) == EXIT_USAGE


def test_the_samples_picture_has_two_panels_per_case_with_its_samples_and_clock():
    pytest.importorskip("matplotlib")
    from driver_gemm.report.figures import sampled_cases, samples_figure

    run = read_results(RESULTS / "tma-bf16-8192-h200.jsonl").run
    cases = sampled_cases([run])
    figure = samples_figure(cases)
    windows = [axes for axes in figure.axes if axes.get_xlabel() == "sample, in the order taken"]
    assert len(windows) == len(cases)
    series = windows[0].get_lines()[0]
    assert list(series.get_ydata()) == list(cases[0].timing.samples_ms)
    clock_axes = [axes for axes in figure.axes if axes.get_ylabel() == "MHz"]
    assert len(clock_axes) == len(cases)
    assert [line.get_ydata()[0] for line in clock_axes[0].get_lines()] == [cases[0].timing.sm_clock_mhz,
                                                                         cases[0].timing.sm_clock_min_mhz]


def test_show_plot_writes_the_samples_picture(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    picture = tmp_path / "samples.png"
    assert main(["show", str(RESULTS / "tma-bf16-8192-h200.jsonl"), "--plot", str(picture)]) == EXIT_OK
    assert picture.read_bytes().startswith(b"\x89PNG")


def test_the_tune_picture_has_each_configuration_and_the_best_so_far(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from driver_gemm.report.figures import best_so_far, tune_figure, tune_groups

    assert best_so_far([None, 3.0, 4.0, 2.0, None, 2.5]) == [None, 3.0, 3.0, 2.0, 2.0, 2.0]
    path = RESULTS / "tune-v8-order-h200.json.gz"
    run = read_results(path).run
    groups = tune_groups(run)
    figure = tune_figure(run)
    panels = [axes for axes in figure.axes if axes.axison]
    assert len(panels) == len(groups)
    for panel, cases in zip(panels, groups.values()):
        points = panel.collections[0].get_offsets()
        assert len(points) == sum(case.ok and case.median_ms is not None for case in cases)
        best = panel.get_lines()[0].get_ydata()
        assert best[-1] == min(case.median_ms for case in cases if case.ok)
    picture = tmp_path / "tune.svg"
    assert main(["plot", "--tune", str(path), "-o", str(picture)]) == EXIT_OK
    assert "best so far" in picture.read_text()
    capsys.readouterr()
    # A tune's full measurements keep their summaries only: no samples to draw, said so, nothing written.
    assert main(["plot", "--samples", str(path), "-o", str(tmp_path / "s.png")]) == EXIT_USAGE
    assert "no case with raw samples to draw" in capsys.readouterr().err and not (tmp_path / "s.png").exists()
