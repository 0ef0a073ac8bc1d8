import pytest

from driver_gemm.cli import EXIT_OK, EXIT_USAGE, main
from driver_gemm.report.plots import bytes_moved

from conftest import ROOT

RESULTS = ROOT / "bench" / "results"


def test_bytes_moved():
    assert bytes_moved(1024, 512, 1024) == 4 * (1024 * 1024 + 1024 * 512 + 1024 * 512)


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_plot_from_committed_results(tmp_path, capsys, suffix, magic):
    pytest.importorskip("matplotlib")
    out = tmp_path / f"plot{suffix}"
    assert main(["plot", str(RESULTS / "fast-h200.json"), str(RESULTS / "seed-h200.json"), "-o", str(out)]) == EXIT_OK
    assert out.read_bytes().startswith(magic)
    if suffix == ".svg":
        text = out.read_text()
        for label in ("v8_small", "v2", "roofline (NVIDIA H200)", "% of cuBLAS SGEMM"):
            assert label in text


def test_plot_refuses_other_formats_and_empty_results(tmp_path, capsys):
    assert main(["plot", str(RESULTS / "seed-h200.json"), "-o", str(tmp_path / "p.jpg")]) == EXIT_USAGE
    empty = tmp_path / "empty.json"
    empty.write_text('{"spec": "s", "cases": []}')
    assert main(["plot", str(empty), "-o", str(tmp_path / "p.png")]) != EXIT_OK
    assert "no timed, passing case" in capsys.readouterr().err
