"""`show A B` says which file each table is of: a heading line per file in the terminal and in Markdown, and in
CSV one table with a `file` column under one header row, so that a CSV reader meets no second header."""

from __future__ import annotations

import csv
import io
import shutil

from driver_gemm.cli import EXIT_OK, main

from conftest import ROOT

DATA = ROOT / "tests" / "data" / "results"


def two_files(tmp_path):
    first, second = tmp_path / "first.json", tmp_path / "odd_*name*.json"
    shutil.copy(DATA / "seed-h200.json", first)
    shutil.copy(DATA / "seed-before-h200.json", second)
    return first, second


def test_each_files_tables_come_under_its_name(tmp_path, capsys):
    first, second = two_files(tmp_path)
    assert main(["show", str(first), str(second)]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    at = [lines.index(str(first)), lines.index(str(second))]
    assert at[0] == 0 and at[0] < at[1]
    assert sum("(M x N x K) on NVIDIA H200" in line for line in lines[:at[1]]) == 2     # the first file's two shapes
    assert sum("(M x N x K) on NVIDIA H200" in line for line in lines[at[1]:]) == 2


def test_markdown_names_each_file_as_code_outside_the_tables(tmp_path, capsys):
    first, second = two_files(tmp_path)
    assert main(["show", "--markdown", str(first), str(second)]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    named = lines.index(f"`{second}`")
    assert lines[0] == f"`{first}`" and lines[named - 1] == "" and lines[named + 1] == ""
    assert lines[named - 2].startswith("|")         # the first file's last row, ended by the blank line


def test_csv_is_one_table_with_a_file_column(tmp_path, capsys):
    first, second = two_files(tmp_path)
    assert main(["show", "--csv", str(first), str(second)]) == EXIT_OK
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [row["file"] for row in rows] == [str(first)] * 12 + [str(second)] * 12
    assert all(row["spec"] == "seed" and row["status"] == "PASS" for row in rows)


def test_one_file_is_shown_without_its_name(tmp_path, capsys):
    first, _ = two_files(tmp_path)
    assert main(["show", "--csv", str(first)]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("spec,kernel,") and str(first) not in out
    assert main(["show", str(first)]) == EXIT_OK
    assert str(first) not in capsys.readouterr().out
