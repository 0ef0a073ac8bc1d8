import math

import numpy as np
import pytest

from driver_gemm.measure.stats import RunningNoise, gflops, quantile, summarize


def test_summary_matches_numpy():
    samples = [1.0, 1.2, 0.9, 1.1, 5.0, 1.05, 0.95]
    summary = summarize(samples, "converged")
    assert summary.median_ms == pytest.approx(np.median(samples))
    assert summary.mean_ms == pytest.approx(np.mean(samples))
    assert summary.stdev_ms == pytest.approx(np.std(samples, ddof=1))
    assert summary.q1_ms == pytest.approx(np.percentile(samples, 25))
    assert summary.q3_ms == pytest.approx(np.percentile(samples, 75))
    assert (summary.min_ms, summary.max_ms, summary.samples) == (0.9, 5.0, 7)
    assert summary.noise == pytest.approx(np.std(samples, ddof=1) / np.mean(samples))
    assert summary.rel_spread == pytest.approx((np.percentile(samples, 75) - np.percentile(samples, 25))
                                               / np.median(samples))
    assert summary.stop_reason == "converged"
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
