"""`show --csv` of a case a ``dispatch:`` table picked: its family in ``name``, and the entry, its shape and the rule
that picked it in columns of their own, as `plan --csv` gives them; empty for a case no table picked."""

import csv
import dataclasses
import io

from driver_gemm.report.formats import RUN_CSV_HEADER, run_csv
from driver_gemm.results.read import read_results
from driver_gemm.results.records import DispatchChoice

from conftest import ROOT

RESULTS = ROOT / "tests" / "data" / "results" / "seed-h200.json"


def test_a_dispatched_case_says_its_entry_and_rule_and_another_case_says_nothing():
    run = read_results(RESULTS).run
    picked = dataclasses.replace(run.cases[0], name="family",
                                 dispatch=DispatchChoice(2, "1024x512x1024", "when", table="family"))
    run = dataclasses.replace(run, cases=[picked, *run.cases[1:]])
    rows = list(csv.DictReader(io.StringIO(run_csv(run))))
    assert tuple(rows[0]) == RUN_CSV_HEADER
    assert (rows[0]["name"], rows[0]["dispatch_entry"], rows[0]["dispatch_shape"], rows[0]["dispatch_rule"]) == \
        ("family", "2", "1024x512x1024", "when")
    assert all(rows[1][column] == "" for column in ("dispatch_entry", "dispatch_shape", "dispatch_rule"))
