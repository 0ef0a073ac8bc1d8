"""Energy per launch from NVML's energy counter, with a fake NVML: the counter read before and after the
sampling window, the launches of the window (throttled ones and bursts included), the case's figures, their
round trip through a results file and its schema, and `show`'s table."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from driver_gemm.measure.clocks import ClockReading, NvmlClocks
from driver_gemm.measure.stats import StopReason, summarize
from driver_gemm.measure.timing import EnergyWindow, ThrottlePolicy, _measure
from driver_gemm.results.records import CaseResult, EnergyRecord, RunResult
from driver_gemm.specfile.model import MeasureSettings, Shape
from driver_gemm.specfile.sample_patterns import SamplePattern
from driver_gemm.status import Status


class NVMLError(Exception):
    pass


def fake_nvml(energy=None, fails=False):
    def total(handle):
        if fails:
            raise NVMLError("not supported")
        return next(energy)
    nvml = SimpleNamespace(NVMLError=NVMLError, nvmlShutdown=lambda: None)
    if energy is not None or fails:
        nvml.nvmlDeviceGetTotalEnergyConsumption = total
    return nvml


def test_the_counter_is_read_in_millijoules_or_not_at_all():
    assert NvmlClocks(fake_nvml(iter([123_456])), "h", 1980.0).energy_mj() == 123_456
    assert NvmlClocks(fake_nvml(fails=True), "h", 1980.0).energy_mj() is None
    assert NvmlClocks(fake_nvml(), "h", 1980.0).energy_mj() is None          # an NVML without the call


def summary(samples=10, discarded=0):
    return summarize([0.2] * samples, StopReason.NOISE_THRESHOLD, discarded_samples=discarded)


def test_a_window_counts_every_launch_it_made():
    clocks = SimpleNamespace(energy_mj=iter([1_000, 3_000]).__next__)
    ticks = iter([10.0, 12.5])
    window = EnergyWindow(clocks, now=lambda: next(ticks))
    done = window.close(summary(samples=10, discarded=2), launches_per_sample=4)
    assert (done.energy_j, done.energy_window_s, done.energy_launches) == (2.0, 2.5, 48)


@pytest.mark.parametrize("clocks", [None, SimpleNamespace(), SimpleNamespace(energy_mj=lambda: None),
                                    SimpleNamespace(energy_mj=iter([5_000, 1_000]).__next__)])
def test_no_counter_or_a_counter_that_went_back_leaves_the_summary_as_it_was(clocks):
    before = summary()
    assert EnergyWindow(clocks).close(before, 1) == before
    assert "energy_j" not in before.as_dict()          # older readers see the summary they always did


class FakeEvent:
    def record(self, stream):
        pass

    def synchronize(self):
        pass

    def elapsed_ms_since(self, start):
        return 0.5

    def close(self):
        pass


def test_measure_reads_the_counter_around_the_samples_not_the_warmup():
    readings = []
    counter = iter(range(10_000, 10**9, 7_000))

    def energy_mj():
        readings.append(launched[0])
        return next(counter)

    launched = [0]
    clocks = SimpleNamespace(reference_mhz=1980.0, read=lambda: ClockReading(1900, 0), energy_mj=energy_mj)
    device = SimpleNamespace(event=FakeEvent)
    stream = SimpleNamespace(synchronize=lambda: None)
    settings = MeasureSettings(warmup=3, min_samples=8, max_samples=8, min_time_s=0.0)

    def launch():
        launched[0] += 1

    timing, samples = _measure(launch, device, stream, settings, None, None, 1, clocks, ThrottlePolicy(), 0.0,
                               SamplePattern())
    assert len(samples) == 8
    assert readings == [3, 11]                      # after the 3 warm-ups; after the 8 samples
    assert (timing.energy_j, timing.energy_launches) == (7.0, 8)
    record = EnergyRecord.of(timing, Shape(1024, 1024, 1024).flops)
    assert record.joules_per_launch == pytest.approx(7.0 / 8)
    assert record.gflops_per_watt == pytest.approx(2 * 1024 ** 3 / 1e9 / (7.0 / 8))
    assert record.average_w == pytest.approx(7.0 / timing.energy_window_s)


def test_the_energy_goes_through_a_results_file_its_schema_and_show(tmp_path, capsys):
    from driver_gemm.cli import main
    from driver_gemm.results import read

    timing = dataclasses.replace(summary(), energy_j=12.0, energy_window_s=0.6, energy_launches=3000)
    shape = Shape(4096, 4096, 4096)
    case = CaseResult("v12p", "v12p", shape, Status.PASS, timing=timing, energy=EnergyRecord.of(timing, shape.flops))
    plain = CaseResult("v11", "v11", shape, Status.PASS, timing=summary())
    path = RunResult("energy", None, cases=[case, plain]).write_json(tmp_path / "energy.json")
    again = read.read_results(path).run.cases
    assert again[0].energy == case.energy and again[0].timing.energy_launches == 3000
    assert again[1].energy is None and "energy" not in plain.as_dict()
    bad = json.loads(json.dumps(case.as_dict()))
    bad["energy"]["joules_per_launch"] = -1
    with pytest.raises(Exception, match="joules_per_launch"):
        read.check_against_schema(bad, {"$ref": "#/$defs/case"}, "x")
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.startswith("v12p") and "4096x4096x4096" in row)
    assert line.split()[2:5] == ["4.000", "20", "34,360"]      # mJ/launch, W, GFLOP/s/W


def test_a_finished_case_gets_its_energy_figures_beside_its_gflops():
    from driver_gemm.runners.one_gpu import _finish_figures

    timing = dataclasses.replace(summary(), energy_j=6.0, energy_window_s=0.5, energy_launches=1500)
    shape = Shape(2048, 2048, 2048)
    case = CaseResult("k", "k", shape, Status.PASS, timing=timing)
    _finish_figures(case, None, None)
    assert case.energy.joules_per_launch == pytest.approx(0.004) and case.gflops is not None
    quiet = CaseResult("k", "k", shape, Status.PASS, timing=summary())
    _finish_figures(quiet, None, None)
    assert quiet.energy is None
