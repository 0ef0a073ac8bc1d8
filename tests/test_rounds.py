"""measure.rounds on the CPU: the rounds' order and budget, the pooled timing, the record and its figures, the spec
field and ``run --rounds``, the session's kept vendor rows, the kernel's time step and the notes under a table."""

from __future__ import annotations

import dataclasses
import json

import pytest
from rich.console import Console

from driver_gemm.errors import UsageError
from driver_gemm.measure import rounds as rounds_module
from driver_gemm.measure.rounds import KERNEL, VENDOR, interleave, pooled, round_order, round_settings
from driver_gemm.measure.stats import summarize
from driver_gemm.planning.cases import cases_of
from driver_gemm.report import clock_figures
from driver_gemm.report.tables import print_run
from driver_gemm.report.notes import markdown_notes
from driver_gemm.results.records import CaseResult, InterleavedRecord, RunResult
from driver_gemm.runners.one_gpu import _finish_figures
from driver_gemm.runners.schedule import CostModel, case_cost, timing_cost
from driver_gemm.session import steps
from driver_gemm.session.options import RunOptions
from driver_gemm.session.state import Session, VendorRow
from driver_gemm.specfile import load_spec
from driver_gemm.errors import SpecError
from driver_gemm.specfile.model import MeasureSettings, Shape
from driver_gemm.status import Status

from conftest import SPECS
from malformed import MINIMAL, write


def timing(samples, clock=None, **extra):
    return summarize(samples, "noise threshold", sm_clock_mhz=clock, sm_clock_reference_mhz=1980.0 if clock else None,
                     **extra)


class Sides:
    """Two fake measurements: each call records its side and settings, and returns the next of its timings."""

    def __init__(self, kernel, vendor):
        self.calls = []
        self.timings = {KERNEL: list(kernel), VENDOR: list(vendor)}

    def side(self, name):
        def measure(settings):
            self.calls.append((name, settings))
            summary = self.timings[name].pop(0)
            return summary, list(summary.samples_ms)
        return measure


def test_each_round_gets_a_share_of_the_budget_and_a_few_samples_at_least():
    settings = MeasureSettings(min_samples=10, min_time_s=0.6, timeout_s=3.0)
    share = round_settings(settings, 3)
    assert (share.min_samples, share.min_time_s, share.timeout_s) == (4, pytest.approx(0.2), pytest.approx(1.0))
    assert round_settings(settings, 10).min_samples == rounds_module.MIN_ROUND_SAMPLES
    assert round_settings(MeasureSettings(min_samples=2, max_samples=2), 4).min_samples == 2   # never above max
    assert round_settings(settings, 1) == settings


def test_the_sides_alternate_which_goes_first():
    assert round_order(4) == [(KERNEL, VENDOR), (VENDOR, KERNEL), (KERNEL, VENDOR), (VENDOR, KERNEL)]


def test_interleave_measures_both_sides_in_turn_and_takes_the_median_of_round_medians():
    sides = Sides([timing([1.0, 1.1, 1.2], 1700), timing([2.0, 2.1, 2.2], 1600), timing([1.5, 1.5, 1.6], 1650)],
                  [timing([0.9, 1.0, 1.0], 1800), timing([1.8, 1.8, 1.9], 1700), timing([1.2, 1.2, 1.3], 1750)])
    settings = MeasureSettings(min_samples=9, min_time_s=0.3)
    outcome = interleave(sides.side(KERNEL), sides.side(VENDOR), settings, 3)
    assert [name for name, _ in sides.calls] == [KERNEL, VENDOR, VENDOR, KERNEL, KERNEL, VENDOR]
    assert all(each == round_settings(settings, 3) for _, each in sides.calls)
    assert outcome.kernel_ms == pytest.approx(1.5) and outcome.vendor_ms == pytest.approx(1.2)
    assert InterleavedRecord.of(outcome, "cublas").pct_vendor == pytest.approx(80.0)
    assert outcome.vendor_clock_mhz == 1750
    pooled_timing = outcome.kernel_timing
    assert pooled_timing.samples == 9 and pooled_timing.median_ms == pytest.approx(1.5)
    assert pooled_timing.sm_clock_mhz == 1650


def test_pooled_sums_what_adds_up_and_keeps_the_lowest_clock():
    first = dataclasses.replace(timing([1.0, 2.0], 1700, wall_s=0.5, discarded_samples=2, throttled_fraction=0.5,
                                       throttle_reasons=("power cap",)),
                                sm_clock_min_mhz=1500, energy_j=2.0, energy_window_s=0.4, energy_launches=4)
    second = dataclasses.replace(timing([3.0], 1800, wall_s=0.25, throttled_fraction=0.0,
                                        throttle_reasons=("power cap", "thermal")),
                                 sm_clock_min_mhz=1600, energy_j=1.0, energy_window_s=0.2, energy_launches=2)
    both = pooled([first, second], [1.0, 2.0, 3.0])
    assert (both.samples, both.median_ms, both.wall_s, both.discarded_samples) == (3, 2.0, 0.75, 2)
    assert (both.sm_clock_mhz, both.sm_clock_min_mhz, both.throttled_fraction) == (1750, 1500, 0.25)
    assert both.throttle_reasons == ("power cap", "thermal")
    assert (both.energy_j, both.energy_window_s, both.energy_launches) == (3.0, pytest.approx(0.6), 6)
    # a round without the energy counter: no energy figure for the whole, rather than a partial one
    assert pooled([first, dataclasses.replace(second, energy_j=None)], [1.0, 2.0, 3.0]).energy_j is None


def kernel_case(shape=Shape(64, 32, 16), **changes):
    return CaseResult(kernel="v4", name="v4", shape=shape, status=Status.PASS, **changes)


def test_the_record_gives_the_case_its_percent_and_survives_json():
    outcome = interleave(Sides([timing([2.0]), timing([2.2])], [timing([1.0]), timing([1.2])]).side(KERNEL),
                         Sides([], [timing([1.0]), timing([1.2])]).side(VENDOR), MeasureSettings(), 2)
    record = InterleavedRecord.of(outcome, "cublas")
    assert (record.rounds, record.kernel_round_ms, record.vendor_round_ms) == (2, (2.0, 2.2), (1.0, 1.2))
    case = kernel_case(timing=outcome.kernel_timing, interleaved=record)
    _finish_figures(case, baseline_ms=5.0, peak=None)
    assert case.pct_cublas == pytest.approx(100 * 1.1 / 2.1)       # its rounds' vendor time, not the row's 5 ms
    again = CaseResult.from_dict(json.loads(json.dumps(case.as_dict())))
    assert again.interleaved == record
    alone = kernel_case(timing=timing([2.0]))
    _finish_figures(alone, baseline_ms=1.0, peak=None)
    assert alone.pct_cublas == pytest.approx(50.0) and "interleaved" not in alone.as_dict()


def test_the_spec_field_and_its_limits(tmp_path):
    assert load_spec(write(tmp_path, MINIMAL + "measure: {rounds: 3}\n")).measure.rounds == 3
    assert load_spec(write(tmp_path, MINIMAL)).measure.rounds == 1
    for bad, says in (("0", "at least 1"), ("101", "at most 100")):
        with pytest.raises(SpecError) as info:
            load_spec(write(tmp_path, MINIMAL + f"measure: {{rounds: {bad}}}\n"))
        assert info.value.field == "measure.rounds" and says in info.value.message


def test_run_rounds_replaces_every_specs_own():
    from driver_gemm.cli.run import with_rounds

    specs = [load_spec(SPECS / "seed.yaml"), load_spec(SPECS / "fast.yaml")]
    assert [spec.measure.rounds for spec in with_rounds(specs, "4")] == [4, 4]
    assert with_rounds(specs, None) is specs
    for bad in ("0", "101", "two", "1.5", "-3", "٣"):
        with pytest.raises(UsageError) as info:
            with_rounds(specs, bad)
        assert info.value.field == "--rounds"


def test_a_kernel_timed_in_rounds_is_priced_with_its_vendor_rows_share():
    spec = load_spec(SPECS / "seed.yaml").select(["v4"], ["1024x512x1024"])
    alone = {case.label: case_cost(case, spec) for case in cases_of(spec)}
    spec3 = dataclasses.replace(spec, measure=dataclasses.replace(spec.measure, rounds=3))
    in_rounds = {case.label: case_cost(case, spec3) for case in cases_of(spec3)}
    assert in_rounds["cublas"] == pytest.approx(alone["cublas"])               # a vendor row is timed once
    kernel = next(label for label in alone if label != "cublas")
    # and again beside each kernel: about as long as it takes alone, the rounds sharing one budget per side
    model = CostModel()
    vendor_alone = timing_cost(spec.shapes[0].flops / (model.baseline_tflops * 1e12), spec.measure, model.flush_s)
    assert in_rounds[kernel] - alone[kernel] == pytest.approx(vendor_alone, rel=0.1)


class Buffer:
    def __init__(self, name):
        self.name, self.closed = name, False

    def close(self):
        self.closed = True


def bare_session():
    """A `Session` without a GPU: just the state `keep_vendor_row` and `vendor_row` work on."""
    session = Session.__new__(Session)
    session.vendor_rows, session.buffer_shape = {}, None
    session.buffers, session.typed_buffers = {}, {}
    return session


def test_a_kept_vendor_row_owns_its_buffers_and_goes_when_the_shape_changes():
    session = bare_session()
    one, two = Shape(64, 32, 16), Shape(128, 64, 32)
    session.buffers, session.buffer_shape = {"A": Buffer("A"), "C": Buffer("C")}, one
    session.keep_vendor_row(one, "cublas", launch=lambda: None, typed=False)
    row = session.vendor_row(one, "cublas")
    assert set(row.buffers) == {"A", "C"} and session.buffers == {} and session.buffer_shape is None
    session.typed_buffers = {"A": Buffer("tA")}
    session.keep_vendor_row(one, "cublaslt-bf16-NN", launch=lambda: None, typed=True)
    assert session.typed_buffers == {} and session.vendor_row(one, "cublaslt-bf16-NN").buffers["A"].name == "tA"
    assert session.vendor_row(one, "cublas") is row                   # the shape's other row stays
    session.buffers = {"A": Buffer("A2")}
    kept = [row.buffers["A"], row.buffers["C"]]
    session.keep_vendor_row(two, "cublas", launch=lambda: None, typed=False)
    assert all(buffer.closed for buffer in kept)                      # the first shape's rows let go
    assert session.vendor_row(one, "cublas") is None and session.vendor_row(two, None) is None
    assert list(session.vendor_rows) == [(two, "cublas")]


class FakeRun:
    """What `steps.time` reads of a case's run."""

    def __init__(self, session, spec, baseline_label="cublas"):
        case = next(case for case in cases_of(spec) if not case.is_baseline)
        self.case = dataclasses.replace(case, baseline_label=baseline_label)
        self.session, self.spec = session, spec
        self.record = kernel_case(shape=self.case.shape)
        self.launch = "kernel launch"


def test_the_time_step_interleaves_only_where_the_session_kept_the_vendor_row(monkeypatch):
    measured = []

    def fake_measure(launch, device, stream, settings, flusher, gate, *, clocks, timer):
        measured.append(launch)
        return timing([2.0 if launch == "kernel launch" else 1.0]), [1.0]

    monkeypatch.setattr(steps, "measure", fake_measure)
    session = bare_session()
    session.options, session.device, session.stream, session.flusher, session.gate = RunOptions(), *[None] * 4
    session.clocks, session._cublas_loading = None, None
    spec = load_spec(SPECS / "seed.yaml").select(["v4"], ["1024x512x1024"])
    spec2 = dataclasses.replace(spec, measure=dataclasses.replace(spec.measure, rounds=2))
    shape = spec.shapes[0]
    session.vendor_rows[shape, "cublas"] = VendorRow("vendor launch", {})
    run = FakeRun(session, spec)                               # rounds: 1 - the kept row is not used
    steps.time(run)
    assert measured == ["kernel launch"] and run.record.interleaved is None
    measured.clear()
    run = FakeRun(session, spec2)
    steps.time(run)
    assert measured == ["kernel launch", "vendor launch", "vendor launch", "kernel launch"]
    assert run.record.interleaved.vendor == "cublas" and run.record.interleaved.pct_vendor == pytest.approx(50.0)
    measured.clear()
    run = FakeRun(session, spec2, baseline_label="cublaslt-bf16-NN")      # no such row kept: timed alone
    steps.time(run)
    assert measured == ["kernel launch"] and run.record.interleaved is None


def test_the_table_says_which_times_a_percent_in_rounds_is_the_ratio_of():
    shape = Shape(64, 32, 16)
    vendor = CaseResult(kernel="cublas", name="cublas", shape=shape, status=Status.REF, timing=timing([1.0], 1900))
    record = InterleavedRecord(vendor="cublas", rounds=3, kernel_ms=2.0, vendor_ms=1.5, vendor_sm_clock_mhz=1600.0,
                               kernel_round_ms=(2.0, 2.0, 2.1), vendor_round_ms=(1.5, 1.4, 1.5))
    case = kernel_case(timing=timing([2.0], 1500), interleaved=record, gflops=1.0, pct_cublas=75.0)
    run = RunResult(spec="t", spec_path=None, cases=[vendor, case])
    note = "v4: 75.0% of cublas in 3 interleaved rounds: 2 ms against 1.5 ms, each the median of its rounds' medians"
    console = Console(width=200, record=True)
    print_run(run, console)
    assert note in console.export_text()
    assert f"- 64x32x16: {note}" in markdown_notes(run)
    # at equal clock, against the vendor's clock in those rounds (1600 MHz), not its own row's (1900)
    assert clock_figures.equal_clock_pct(case, vendor) == pytest.approx(75.0 * 1600 / 1500)
