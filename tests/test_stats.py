import math

import numpy as np
import pytest

from driver_gemm.measure.stats import RunningNoise, gflops, quantile, summarize


def test_summary_matches_numpy():
    samples = [1.0, 1.2, 0.9, 1.1, 5.0, 1.05, 0.95]
    summary = summarize(samples, "noise-threshold")
    assert summary.median_ms == pytest.approx(np.median(samples))
    assert summary.mean_ms == pytest.approx(np.mean(samples))
    assert summary.stdev_ms == pytest.approx(np.std(samples, ddof=1))
    assert summary.q1_ms == pytest.approx(np.percentile(samples, 25))
    assert summary.q3_ms == pytest.approx(np.percentile(samples, 75))
    assert (summary.min_ms, summary.max_ms, summary.samples) == (0.9, 5.0, 7)
    assert summary.noise == pytest.approx(np.std(samples, ddof=1) / np.mean(samples))
    assert summary.rel_spread == pytest.approx((np.percentile(samples, 75) - np.percentile(samples, 25))
                                               / np.median(samples))
    assert summary.stop_reason == "noise-threshold"
    assert summary.as_dict()["noise"] == summary.noise


def test_single_sample():
    summary = summarize([2.0])
    assert summary.median_ms == 2.0 and summary.stdev_ms == 0.0 and summary.rel_spread == 0.0


@pytest.mark.parametrize("bad", [[], [1.0, -1.0], [1.0, math.nan], [math.inf]])
def test_bad_samples(bad):
    with pytest.raises(ValueError):
        summarize(bad)


def test_running_noise_agrees_with_batch():
    rng = np.random.default_rng(1)
    values = rng.normal(10, 0.3, 500)
    noise = RunningNoise()
    for value in values:
        noise.add(float(value))
    assert noise.relative_stdev == pytest.approx(np.std(values, ddof=1) / np.mean(values), rel=1e-9)
    assert RunningNoise().relative_stdev == math.inf


def test_quantile_interpolates():
    assert quantile([1, 2, 3, 4], 0.5) == 2.5
    assert quantile([5], 0.9) == 5


def test_gflops():
    # The seed article's v4 on 1024x512x1024: 2*M*N*K = 1.07 GFLOP in 0.0806 ms.
    assert gflops(2 * 1024 * 512 * 1024, 0.0806) == pytest.approx(13321, rel=1e-3)
    assert math.isnan(gflops(1, 0.0))


def test_summary_keeps_rounded_samples_and_round_trips_through_json():
    import json

    from driver_gemm.measure.stats import TimingSummary

    samples = [0.0361234, 0.0369876, 1.23456789, 0.0361234]
    summary = summarize(samples, "noise-stable", launches_per_sample=20, wall_s=1.25,
                        sm_clock_mhz=1980.0, throttle_reasons=("sw_power_cap",))
    assert summary.samples_ms == (0.03612, 0.03699, 1.235, 0.03612)
    assert summary.median_ms == pytest.approx(np.median(samples)), "statistics use the unrounded samples"
    written = json.loads(json.dumps(summary.as_dict()))
    assert written["samples_ms"] == [0.03612, 0.03699, 1.235, 0.03612]
    again = TimingSummary.from_dict(written)
    assert again == summary and again.throttle_reasons == ("sw_power_cap",)
    assert summarize(samples, keep_samples=False).samples_ms == ()


def test_summary_from_an_older_record_has_no_samples_or_clocks():
    from driver_gemm.measure.stats import TimingSummary

    old = {"median_ms": 1.0, "mean_ms": 1.0, "min_ms": 1.0, "max_ms": 1.0, "stdev_ms": 0.0, "q1_ms": 1.0,
           "q3_ms": 1.0, "samples": 3, "total_ms": 3.0, "stop_reason": "converged", "noise": 0.0}
    summary = TimingSummary.from_dict(old)
    assert summary.samples_ms == () and summary.sm_clock_mhz is None and summary.launches_per_sample == 1


@pytest.mark.parametrize("value, expected", [(0.0361234, 0.03612), (123456.0, 123500.0), (0.0, 0.0),
                                             (9.99951, 10.0)])
def test_round_significant(value, expected):
    from driver_gemm.measure.stats import round_significant

    assert round_significant(value) == pytest.approx(expected, rel=1e-12)


def test_noise_history_is_not_stable_while_noise_falls():
    from driver_gemm.measure.stats import NoiseHistory

    history = NoiseHistory(window=100, min_history=10)
    for value in np.linspace(0.10, 0.05, 100):     # fed as noise values directly
        history.history.append(float(value))
    assert history.drop_across_window() == pytest.approx(0.05)
    assert not history.is_stable()


def test_noise_history_is_stable_when_flat_or_rising():
    from driver_gemm.measure.stats import NoiseHistory

    flat = NoiseHistory(window=100, min_history=10)
    for value in 0.03 + 0.0005 * np.sin(np.arange(100)):
        flat.history.append(float(value))
    assert flat.is_stable()
    rising = NoiseHistory(window=100, min_history=10)
    for value in np.linspace(0.02, 0.04, 100):
        rising.history.append(float(value))
    assert rising.drop_across_window() < 0 and rising.is_stable()


def test_noise_history_waits_for_enough_values_and_tracks_samples():
    from driver_gemm.measure.stats import NoiseHistory

    history = NoiseHistory(window=512, min_history=64)
    rng = np.random.default_rng(3)
    values = rng.normal(1.0, 0.05, 64)
    for value in values[:60]:
        history.add(float(value))
    assert len(history.history) == 59 and not history.is_stable()   # the first sample has no noise yet
    for value in values[60:]:
        history.add(float(value))
    assert history.relative_stdev == pytest.approx(np.std(values, ddof=1) / np.mean(values))
    with pytest.raises(ValueError):
        NoiseHistory(window=10, min_history=20)


def test_mann_whitney_matches_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    from driver_gemm.measure.stats import mann_whitney_u

    rng = np.random.default_rng(5)
    a = np.round(rng.normal(1.00, 0.02, 300), 2)   # rounded: many ties, as event times have
    b = np.round(rng.normal(1.01, 0.02, 200), 2)
    ours = mann_whitney_u(a, b)
    theirs = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic", use_continuity=True)
    assert ours.u == pytest.approx(theirs.statistic)
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-6)
    assert ours.probability_a_slower < 0.5 and ours.z < 0


def test_mann_whitney_on_identical_and_separated_samples():
    from driver_gemm.measure.stats import mann_whitney_u

    same = mann_whitney_u([1.0] * 5, [1.0] * 7)
    assert same.p_value == 1.0 and same.probability_a_slower == 0.5
    apart = mann_whitney_u([2.0, 2.1, 2.2, 2.3] * 10, [1.0, 1.1, 1.2] * 10)
    assert apart.probability_a_slower == 1.0 and apart.p_value < 1e-6
    with pytest.raises(ValueError):
        mann_whitney_u([], [1.0])


def test_median_ratio_interval_sees_a_real_change_and_no_change():
    from driver_gemm.measure.stats import median_ratio_interval

    rng = np.random.default_rng(11)
    old = rng.normal(1.0, 0.03, 2000)
    slower = rng.normal(1.05, 0.03, 2000)
    same = rng.normal(1.0, 0.03, 2000)
    change = median_ratio_interval(old, slower, resamples=400)
    assert change.excludes(1.0) and change.low < 1.05 < change.high
    assert change.ratio == pytest.approx(np.median(slower) / np.median(old))
    no_change = median_ratio_interval(old, same, resamples=400)
    assert not no_change.excludes(1.0)
    assert median_ratio_interval(old, slower, resamples=400) == change, "seeded: reproducible"
    with pytest.raises(ValueError):
        median_ratio_interval(old, slower, confidence=1.5)
