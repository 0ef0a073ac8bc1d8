import pytest

from driver_gemm.cli import EXIT_OK, EXIT_USAGE, main
from driver_gemm.report.plots import bytes_moved

from conftest import ROOT

RESULTS = ROOT / "tests" / "data" / "results"


def test_bytes_moved():
    assert bytes_moved(1024, 512, 1024) == 4 * (1024 * 1024 + 1024 * 512 + 1024 * 512)


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_plot_from_committed_results(tmp_path, capsys, suffix, magic):
    pytest.importorskip("matplotlib")
    out = tmp_path / f"plot{suffix}"
    assert main(["plot", str(RESULTS / "fast-h200.json.gz"), str(RESULTS / "seed-h200.json"), "-o", str(out)]) == EXIT_OK
    assert out.read_bytes().startswith(magic)
    if suffix == ".svg":
        text = out.read_text()
        for label in ("v8_small", "v2", "roofline (NVIDIA H200)", "% of cuBLAS SGEMM"):
            assert label in text


def test_a_plot_drawn_leaves_stderr_free_of_font_fallback_warnings(tmp_path, capsys, caplog):
    pytest.importorskip("matplotlib")
    with caplog.at_level("WARNING"):
        assert main(["plot", str(RESULTS / "seed-h200.json"), "-o", str(tmp_path / "p.png")]) == EXIT_OK
    assert not [record for record in caplog.records if record.name.startswith("matplotlib.font_manager")]
    assert "findfont" not in capsys.readouterr().err


@pytest.mark.parametrize("field", ["gflops", "pct_cublas"])
def test_a_figure_no_gpu_reaches_is_refused_naming_the_case(tmp_path, capsys, field):
    pytest.importorskip("matplotlib")
    import json

    run = json.loads((RESULTS / "seed-h200.json").read_text())
    index, case = next((index, case) for index, case in enumerate(run["cases"]) if case.get(field))
    case[field] = 1.7e308
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(run))
    assert main(["plot", str(edited), "-o", str(tmp_path / "p.png")]) == EXIT_USAGE
    err = capsys.readouterr().err
    # refused as the file is read, as show, compare and tune --from refuse it: the file and the case's field named
    assert f"edited.json: cases[{index}].{field}: 1.7e+308" in err and "is no figure a GPU run gives" in err
    assert not (tmp_path / "p.png").exists()


def test_plot_refuses_other_formats_and_empty_results(tmp_path, capsys):
    assert main(["plot", str(RESULTS / "seed-h200.json"), "-o", str(tmp_path / "p.jpg")]) == EXIT_USAGE
    empty = tmp_path / "empty.json"
    empty.write_text('{"spec": "s", "cases": []}')
    assert main(["plot", str(empty), "-o", str(tmp_path / "p.png")]) != EXIT_OK
    assert "no timed, passing case" in capsys.readouterr().err


def test_a_sweep_plot_keeps_the_fastest_in_the_legend(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from driver_gemm.report.plots import TOP_SERIES, series_of, top_series
    from driver_gemm.results.read import read_results

    run = read_results(RESULTS / "tune-v8-small-h200.json.gz").run
    series = series_of([run])
    shown, rest = top_series(series)
    assert shown[0] == "cublas" and len(shown) == TOP_SERIES + 1 and len(rest) == len(series) - len(shown)
    best = [max(c.gflops for c in series[k]) for k in shown[1:]]
    assert best == sorted(best, reverse=True) and best[-1] >= max(max(c.gflops for c in series[k]) for k in rest)
    out = tmp_path / "sweep.svg"
    assert main(["plot", str(RESULTS / "tune-v8-small-h200.json.gz"), "-o", str(out)]) == EXIT_OK
    text = out.read_text()
    assert f"{len(rest)} slower configurations" in text
    assert f"({TOP_SERIES} fastest of {len(series) - 1})" in text
    assert "v8#1: v8[" in text   # short name in the panel, full label in the legend


def test_plot_of_results_with_no_timed_case_is_bad_input(tmp_path, capsys):
    from driver_gemm.cli import EXIT_USAGE

    failed = tmp_path / "failed.json"
    failed.write_text('{"spec": "s", "cases": [{"kernel": "k", "name": "k", "status": "FAIL", '
                      '"shape": {"M": 8, "N": 8, "K": 8}}]}')
    assert main(["plot", str(failed), "-o", str(tmp_path / "p.png")]) == EXIT_USAGE
    assert capsys.readouterr().err == f"driver-gemm: {failed}: no timed, passing case to plot\n"
    assert not (tmp_path / "p.png").exists()


def test_results_with_only_baseline_rows_plot_without_the_share_panel(tmp_path):
    """run -k cublas gives no kernel row to put as a % of the baseline: the panel says so instead of failing."""
    pytest.importorskip("matplotlib")
    from driver_gemm.report.plots import plot_results
    from driver_gemm.results.read import read_results

    run = read_results(ROOT / "tests" / "data" / "results" / "seed-h200.json").run
    run.cases = [case for case in run.cases if case.is_baseline]
    assert run.cases
    out = plot_results([run], tmp_path / "baselines.png")
    assert out.stat().st_size > 10_000
