"""A number that YAML reads as text only because it is quoted (``alpha: "1.0e-05"``) is refused with a hint that says
so, rather than one that repeats the text as the way to write it."""

from __future__ import annotations

import pytest
import yaml

from malformed import MINIMAL, refused


@pytest.mark.parametrize("setting, field", [
    ("scalars: {{alpha: {n}}}", "scalars.alpha"),
    ("verify: {{tolerance: {n}}}", "verify.tolerance"),
])
@pytest.mark.parametrize("number", ['"1.0e-05"', '"2.5E+3"', "'0.5'", '"16"'])
def test_a_quoted_number_is_said_to_be_quoted(tmp_path, monkeypatch, capsys, setting, field, number):
    error = refused(tmp_path, MINIMAL + setting.format(n=number) + "\n", monkeypatch, capsys, field=field)
    text = yaml.safe_load(number)
    assert error.hint is not None and "quoted" in error.hint and "remove the quotes" in error.hint, error.hint
    assert f"write {text}" not in error.hint, error.hint          # not the text it already is
    assert isinstance(yaml.safe_load(f"x: {text}")["x"], (int, float))  # unquoted, YAML reads it as a number


def test_text_yaml_never_reads_as_a_number_still_gets_the_spelling_it_would(tmp_path, monkeypatch, capsys):
    error = refused(tmp_path, MINIMAL + "scalars: {alpha: 1e-5}\n", monkeypatch, capsys, field="scalars.alpha")
    assert error.hint is not None and "write 1.0e-5" in error.hint and "quoted" not in error.hint, error.hint
