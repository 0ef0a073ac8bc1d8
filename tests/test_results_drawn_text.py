"""Text of any length from a results file, drawn: a picture draws at most `MOST_DRAWN_CHARS` of a GPU's or a
kernel's name, so that a name of 100,000 characters costs no minutes of laying out a line no picture shows."""

from __future__ import annotations

import json
import time

import pytest

from driver_gemm.cli import EXIT_OK, main
from driver_gemm.report import plots

from conftest import ROOT

SEED = ROOT / "tests" / "data" / "results" / "seed-h200.json"
CPU_SECONDS_ALLOWED = 12.0     # the plot of a seed run takes a second or two; the whole name drawn, half a minute


def test_a_long_text_is_drawn_cut_with_its_length_said_and_still_escaped():
    drawn = plots.drawn_text("$x$\x1b" + "G" * 100_000)
    assert drawn.startswith(r"\$x\$\x1b") and len(drawn) < plots.MOST_DRAWN_CHARS + 40
    escaped = len("$x$\\x1b") + 100_000       # the escape is drawn as four characters
    assert drawn.endswith(f"({escaped - plots.MOST_DRAWN_CHARS:,} more characters)")
    assert plots.drawn_text("v8[BM=128,BN=256]") == "v8[BM=128,BN=256]"


def test_a_plot_of_a_gpu_named_with_100000_characters_is_drawn_in_seconds(tmp_path):
    pytest.importorskip("matplotlib")
    document = json.loads(SEED.read_text(encoding="utf-8"))
    document["environment"]["device"]["name"] = "G" * 100_000
    path = tmp_path / "long.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    started = time.process_time()
    assert main(["plot", str(path), "-o", str(tmp_path / "p.png")]) == EXIT_OK
    assert time.process_time() - started < CPU_SECONDS_ALLOWED
