"""JSON nested too deeply for Python's reader (100,000 brackets), which gives up without saying where: the refusal
says where the nesting passes what any results file holds, by line and column (a case log's line: its column)."""

from __future__ import annotations

import json

import pytest

from driver_gemm.cli import EXIT_USAGE, main
from driver_gemm.errors import UsageError
from driver_gemm.results.read import DEEPEST_SHOWN, load_results

from conftest import ROOT

SEED = ROOT / "tests" / "data" / "results" / "seed-h200.json"
DEEP = "[" * 100_000 + "]" * 100_000


def test_a_deep_value_of_a_whole_file_is_placed_by_line_and_column(tmp_path, capsys):
    text = json.dumps(json.loads(SEED.read_text(encoding="utf-8")), indent=1)
    at = text.index('"spec_path"')
    line = text.count("\n", 0, at) + 1
    text = text[:at] + f'"settings_note": "[[[ a string nests nothing", "deep": {DEEP},\n ' + text[at:]
    path = tmp_path / "deep.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as refused:
        load_results(path)
    # the file's object is the first level, and the line begins with an indent of one space
    column = 1 + len('"settings_note": "[[[ a string nests nothing", "deep": ') + DEEPEST_SHOWN
    assert str(refused.value) == (f"{path}: not a results file: JSON nested too deeply (more than {DEEPEST_SHOWN} "
                                  f"levels from line {line}, column {column})")
    assert main(["show", str(path)]) == EXIT_USAGE
    assert f"from line {line}, column {column})" in capsys.readouterr().err


def test_a_deep_line_of_a_case_log_is_placed_by_its_line_and_column(tmp_path):
    document = json.loads(SEED.read_text(encoding="utf-8"))
    header = json.dumps({"type": "run", **{key: value for key, value in document.items() if key != "cases"}})
    path = tmp_path / "deep.jsonl"
    path.write_text(f'{header}\n{{"type": "case", "x": {DEEP}}}\n', encoding="utf-8")
    with pytest.raises(UsageError) as refused:
        load_results(path)
    column = len('{"type": "case", "x": ') + DEEPEST_SHOWN     # the line's object is the first level
    assert str(refused.value) == (f"{path}:2: not a JSON line of a case log: JSON nested too deeply (more than "
                                  f"{DEEPEST_SHOWN} levels from column {column})")
