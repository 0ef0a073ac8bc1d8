"""scripts/render_performance.py given a folder whose files cannot be read: one line naming the file (and the line
or field the results reader names) and exit 2, as `driver-gemm show` says it, never a traceback."""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import ROOT

SEED = ROOT / "tests" / "data" / "results" / "seed-h200.json"


@pytest.fixture
def render(load_script):
    return load_script("render_performance")


def refused(render, folder, capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        render.main([str(folder)])
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err and len(err.strip().splitlines()) == 1
    return err


def test_a_results_file_the_reader_refuses_is_named_with_its_field(render, tmp_path, capsys):
    document = json.loads(SEED.read_text(encoding="utf-8"))
    document["cases"][1]["timing"]["median_ms"] = -1
    (tmp_path / "seed.json.gz").write_bytes(gzip.compress(json.dumps(document).encode()))
    err = refused(render, tmp_path, capsys)
    assert f"{tmp_path / 'seed.json.gz'}: cases[1].timing.median_ms: must be greater than 0" in err


@pytest.mark.parametrize("name, data", [("regenerate.json", b'{"steps": ['),
                                        ("baselines.json.gz", b"not gzip at all")])
def test_another_json_file_of_the_folder_that_cannot_be_read_is_named(render, name, data, tmp_path, capsys):
    (tmp_path / name).write_bytes(data)
    err = refused(render, tmp_path, capsys)
    assert f"{tmp_path / name}: cannot be read as JSON: " in err
