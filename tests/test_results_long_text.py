"""Text of any length in a results file, quoted short: a refusal or a warning quotes at most a few hundred characters
of it, never a line of 100,000 on stderr; and a spec's or a kernel's name longer than a spec may give it is refused
as no run's, where every message that names the run would quote it whole."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from driver_gemm.cli import EXIT_OK, EXIT_USAGE, main
from driver_gemm.errors import UsageError
from driver_gemm.results.read import load_results

from conftest import ROOT

SEED = ROOT / "tests" / "data" / "results" / "seed-h200.json"
LONG = "x" * 100_000
MOST_LINE = 1000     # a message's line: the place, the words, and quotes of a few hundred characters at most


def seed() -> dict:
    return json.loads(SEED.read_text(encoding="utf-8"))


def written(tmp_path: Path, document: dict, name: str = "long.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def refusal(path: Path, capsys) -> str:
    assert main(["show", str(path)]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"driver-gemm: {path}")
    assert len(err) < MOST_LINE, err[:200]
    return err


@pytest.mark.parametrize("where, field", [("spec", "spec"), ("case name", "cases[1].name")])
def test_a_name_longer_than_a_spec_may_give_is_refused(where, field, tmp_path, capsys):
    document = seed()
    if where == "spec":
        document["spec"] = LONG
    else:
        document["cases"][1]["name"] = LONG
    path = written(tmp_path, document)
    with pytest.raises(UsageError) as refused:
        load_results(path)
    assert refused.value.field == field and "a name of 100,000 characters" in str(refused.value)
    assert "at most 100" in refusal(path, capsys)


def test_a_name_of_a_hundred_characters_reads(tmp_path):
    document = seed()
    document["spec"] = "s" * 100
    assert load_results(written(tmp_path, document)).spec == "s" * 100


def test_a_long_shape_label_is_quoted_short(tmp_path, capsys):
    document = seed()
    document["cases"][0]["shape"]["label"] = LONG
    err = refusal(written(tmp_path, document), capsys)
    assert "cases[0].shape.label: label \"xxx" in err and "is not M x N x K = 1024x512x1024" in err


def test_a_long_record_type_of_a_case_log_is_quoted_short(tmp_path, capsys):
    document = seed()
    header = {"type": "run", **{key: value for key, value in document.items() if key != "cases"}}
    lines = [json.dumps(header), json.dumps({"type": LONG, **document["cases"][0]})]
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    err = refusal(path, capsys)
    assert f"{path}:2: type: record type 'xxx" in err and "more characters" in err


def test_a_case_repeated_under_a_long_label_is_quoted_short(tmp_path, capsys):
    document = seed()
    case = document["cases"][1]
    case["kernel"] = LONG
    again = copy.deepcopy(case)
    again["seed"] += 1
    document["cases"].append(again)
    err = refusal(written(tmp_path, document), capsys)
    assert "more characters" in err and "is also cases[1], with other figures" in err


def test_compare_warns_of_long_versions_and_gpus_quoting_them_short(tmp_path, capsys):
    old, new = seed(), seed()
    new["environment"]["nvrtc_version"] = LONG
    new["environment"]["device"]["uuid"] = "GPU-" + "G" * 100_000
    new_path = written(tmp_path, new, "new.json")
    assert main(["compare", str(written(tmp_path, old, "old.json")), str(new_path)]) == EXIT_OK
    said = "".join(capsys.readouterr())     # the warnings follow the table, wherever it goes
    warnings = [line for line in said.splitlines() if line.startswith("warning: the runs differ in")]
    assert any(line.startswith("warning: the runs differ in nvrtc: 13.0 -> xxx") for line in warnings), warnings
    assert any(line.startswith("warning: the runs differ in GPU: NVIDIA H200") for line in warnings), warnings
    assert all(len(line) < MOST_LINE for line in said.splitlines())
