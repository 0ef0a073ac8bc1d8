"""Settings that would make every check pass or every case stop: a relative tolerance of 1 or more (what a C of
zeros has) with no absolute bound, and a case's time limit at or below its sampling's."""

from __future__ import annotations

import pytest

from driver_gemm.specfile import load_spec

from malformed import MINIMAL, refused, write


@pytest.mark.parametrize("verify, field", [("{tolerance: 2.0}", "verify.tolerance"),
                                           ("{tolerance: 1.0e+300}", "verify.tolerance"),
                                           ("{tolerance: {rel: 1.0}}", "verify.tolerance.rel"),
                                           ("{tf32_tolerance: 1.0}", "verify.tf32_tolerance")])
def test_a_relative_tolerance_of_1_or_more_is_refused(tmp_path, monkeypatch, capsys, verify, field):
    error = refused(tmp_path, f"verify: {verify}\n" + MINIMAL, monkeypatch, capsys, field=field)
    assert "passes a kernel that writes zeros (whose relative error is 1)" in error.message


def test_tolerances_below_1_or_beside_an_absolute_bound_load(tmp_path):
    assert load_spec(write(tmp_path, "verify: {tolerance: 0.5, tf32_tolerance: 0.9}\n" + MINIMAL)).verify
    settings = load_spec(write(tmp_path, "verify: {tolerance: {rel: 1.0, abs: 1.0e-3}}\n" + MINIMAL)).verify
    assert settings.rel_tolerance == 1.0 and settings.abs_tolerance == 1.0e-3


@pytest.mark.parametrize("measure, field", [("{timeout_s: 1.0, case_timeout_s: 0.5}", "measure.case_timeout_s"),
                                            ("{timeout_s: 2.0, case_timeout_s: 2.0}", "measure.case_timeout_s"),
                                            ("{timeout_s: 400}", "measure.timeout_s")])
def test_a_case_time_limit_at_or_below_the_sampling_time_is_refused(tmp_path, monkeypatch, capsys, measure, field):
    error = refused(tmp_path, f"measure: {measure}\n" + MINIMAL, monkeypatch, capsys, field=field)
    assert "is not above timeout_s" in error.message and "recorded as TIMEOUT" in error.message


def test_a_case_time_limit_above_the_sampling_time_loads(tmp_path):
    measure = load_spec(write(tmp_path, "measure: {timeout_s: 0.5, case_timeout_s: 30}\n" + MINIMAL)).measure
    assert measure.case_timeout_s == 30 and measure.timeout_s == 0.5
