"""Quantile forecasts as a first-class input of the backtest: the knots ride through the floor, the
recalibration and ``take``; the median, the ci band and the CRPS/coverage read them; the mean reads the samples."""

from __future__ import annotations

from dataclasses import replace
from statistics import NormalDist

import numpy as np
import pytest

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import calibrated_forecast, run_backtest
from marketcast.backtest.skill import forecast_skill
from marketcast.backtest.views import ForecastReturns, knot_level
from marketcast.calibrate.coverage import coverage
from marketcast.calibrate.crps import crps_ensemble, crps_quantiles
from marketcast.calibrate.recalibrate import recalibrate, settled_mask
from marketcast.errors import ConfigError, ForecastWarning
from marketcast.forecast.base import Forecast
from marketcast.forecast.floor import FLOOR_FRACTION, floor_paths
from marketcast.forecast.quantiles import NINE, sample_paths, value_at

from .helpers import QuantileForecaster, random_bars

CONFIG = BacktestConfig(windows=40, context=32, num_samples=101, maxdiff_min_history=5, spa=False,
                        bootstrap_reps=50)
CHRONOS = (0.01, 0.05, *np.round(np.arange(0.1, 0.91, 0.05), 2), 0.95, 0.99)  # Chronos-2's 21 levels
Z = NormalDist().inv_cdf


def _expected(bars, n_windows, fc: QuantileForecaster):
    """Each settled window's close move (the knots' median return) from the bars alone."""
    c = bars.frame["close"].to_numpy()
    ends = np.arange(len(c) - 1 - n_windows, len(c) - 1)
    return 0.5 * (c[ends] / c[ends - 1] - 1.0)


def test_views_follow_the_quantiles_for_median_and_band_and_the_samples_for_the_mean():
    bars = random_bars(120, seed=3)
    fc = QuantileForecaster(disagree=True)  # samples: median and mean at knots' median - 0.4 %, 3x as wide
    move = _expected(bars, CONFIG.windows, fc)
    med = run_backtest(bars, fc, CONFIG)
    np.testing.assert_allclose(med.views.close_ret, move, rtol=0, atol=1e-12)
    np.testing.assert_allclose(med.views.high_ret, move + 0.006, rtol=0, atol=1e-12)
    np.testing.assert_allclose(med.views.low_ret, move - 0.006, rtol=0, atol=1e-12)
    # ci band (0.4, 0.6): both knots, so exactly the knots, not the samples' 3x wider band
    np.testing.assert_allclose(med.views.band_low, move + 0.01 * Z(0.4), rtol=0, atol=1e-12)
    np.testing.assert_allclose(med.views.band_high, move + 0.01 * Z(0.6), rtol=0, atol=1e-12)
    samples = med.sample_returns["close"][:CONFIG.windows]
    assert np.abs(np.median(samples, axis=1) - (move - 0.004)).max() < 1e-12  # what the samples would have said
    # the mean is not a quantile: it stays on the samples
    mean = run_backtest(bars, fc, replace(CONFIG, point="mean"))
    np.testing.assert_allclose(mean.views.close_ret, move - 0.004, rtol=0, atol=1e-12)
    np.testing.assert_allclose(mean.views.band_low, med.views.band_low, rtol=0, atol=0)
    # a band between knots interpolates linearly between them; p25 alike
    mid = run_backtest(bars, fc, replace(CONFIG, ci_band=(0.45, 0.55), point="p25"))
    np.testing.assert_allclose(mid.views.band_low, move + 0.01 * (Z(0.4) + Z(0.5)) / 2, rtol=0, atol=1e-12)
    np.testing.assert_allclose(mid.views.band_high, move + 0.01 * (Z(0.5) + Z(0.6)) / 2, rtol=0, atol=1e-12)
    np.testing.assert_allclose(mid.views.close_ret, move + 0.01 * (Z(0.2) + Z(0.3)) / 2, rtol=0, atol=1e-12)


def test_chronos_levels_put_the_95_band_on_knots():
    bars = random_bars(80, seed=4)
    fc = QuantileForecaster(levels=CHRONOS, disagree=True)
    move = _expected(bars, 30, fc)
    r = run_backtest(bars, fc, replace(CONFIG, windows=30, ci_band=(0.05, 0.95)))
    np.testing.assert_allclose(r.views.band_low, move + 0.01 * Z(0.05), rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.views.band_high, move + 0.01 * Z(0.95), rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.views.close_ret, move, rtol=0, atol=1e-12)


def test_value_at_is_the_knot_at_a_knot_and_the_quantile_function_between():
    knots = np.array([[[-2.0], [-1.0], [0.0], [1.0], [3.0]]])  # [1, 5, 1] at levels below
    levels = (0.1, 0.25, 0.5, 0.75, 0.9)
    for i, q in enumerate(levels):
        assert value_at(knots, levels, q)[0, 0] == knots[0, i, 0]
    assert value_at(knots, levels, 0.6)[0, 0] == pytest.approx(0.4)  # 0 + (0.6 - 0.5) / 0.25 * 1
    # above 0.9 the exponential tail: b = 0.1 * (3 - 1) / 0.15, x = 3 + b ln(0.1 / 0.01)
    assert value_at(knots, levels, 0.99)[0, 0] == pytest.approx(3 + 0.1 * 2 / 0.15 * np.log(10))
    with pytest.raises(ValueError, match="outside"):
        value_at(knots, levels, 1.0)
    assert [knot_level(s) for s in ("median", "p25", "quantile_0.3", "quantile_70", "mean", "trimmed_mean_10",
                                    "p0")] == [0.5, 0.25, 0.3, 0.7, None, None, None]


def test_take_and_the_floor_carry_the_knots_and_the_floor_commutes_with_the_quantiles():
    # 11 sorted samples: numpy's quantile at 0.1 .. 0.9 is exactly sample 1 .. 9, so these are the knots
    last = np.array([100.0, 50.0])
    rets = np.array([-1.5, -0.9995, -0.998, -0.5, -0.1, 0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    samples = np.broadcast_to((last[:, None] * (1 + rets))[:, None, :, None], (2, 3, 11, 1)).copy()
    knots = samples[:, :, 1:10].copy()
    fc = Forecast(samples, ("close", "high", "low"), {"model": "q"}, knots, NINE)
    assert np.array_equal(fc.take([1]).quantiles, knots[[1]]) and fc.take([1]).quantile_levels == NINE
    with pytest.warns(ForecastWarning, match="floored"):
        out = floor_paths(fc, last, [0, 1], "X")
    floor = FLOOR_FRACTION * last[:, None, None, None]
    assert np.array_equal(out.quantiles, np.maximum(knots, floor)) and out.quantile_levels == NINE
    assert (out.quantiles[:, :, 0] == floor[:, :, 0]).all() and (out.quantiles[:, :, 1] > floor[:, :, 0]).all()
    at_levels = np.moveaxis(np.quantile(out.samples, NINE, axis=2), 0, 2)
    np.testing.assert_array_equal(at_levels, out.quantiles)


@pytest.mark.parametrize("route", ["prefix", "mask"])
def test_conformal_moves_the_knots_exactly_as_the_samples_at_the_knot_levels(route):
    rng = np.random.default_rng(0)
    w, s, h = 200, 64, 2
    x = rng.normal(0, 0.5, (w, s, h)) + rng.normal(0, 1, (w, 1, h))
    y = rng.normal(0, 1, (w, h)) + x.mean(axis=1)  # wider than the forecasts: conformal widens
    knots = np.moveaxis(np.quantile(x, NINE, axis=1), 0, 1)  # [W, 9, H]
    how = dict(horizon=1) if route == "prefix" else dict(settled_before=settled_mask(w, 1))
    r = recalibrate(x, y, "conformal", min_windows=30, knots=knots, knot_levels=NINE, **how)
    assert r.calibrated.sum() == w - 30
    moved = np.moveaxis(np.quantile(r.samples, NINE, axis=1), 0, 1)
    # the map is linear between the samples each scored bound interpolates and through the knots of the 80 %
    # bounds, so knots and sample quantiles agree; only where an inner bound's correction reaches past an
    # outer one's (both then move out further than their own) can the 10 % and 90 % ones part
    assert np.abs(r.knots - moved)[:, 1:8].max() < 1e-12
    assert (np.abs(r.knots - moved)[:, [0, 8]] < 1e-12).mean() > 0.98
    assert np.abs(r.knots - knots)[r.calibrated].min() >= 0 and np.abs(r.knots - knots)[r.calibrated].max() > 0.1
    np.testing.assert_array_equal(r.knots[~r.calibrated], knots[~r.calibrated])  # the warm-up is untouched
    flat = recalibrate(x[:, :, 0], y[:, 0], "conformal", min_windows=30, knots=knots[:, :, 0], knot_levels=NINE,
                       **how)
    np.testing.assert_allclose(flat.knots, r.knots[:, :, 0], rtol=0, atol=1e-12)  # [W, K] in, [W, K] out


def test_quantile_mapping_moves_the_knots_as_the_samples_within_sampling_error():
    rng = np.random.default_rng(1)
    w, s = 300, 4000
    centre = rng.normal(0, 1, w)
    knots = centre[:, None] + 0.5 * np.array([Z(q) for q in NINE])[None]  # [W, 9]: a normal with sd 0.5
    x = sample_paths(knots[:, None, :, None], NINE, np.arange(w, dtype=np.uint64), 3, s)[:, 0, :, 0]  # [W, S]
    y = centre + rng.normal(0, 0.8, w)  # the truth is wider than the forecast
    r = recalibrate(x, y, "quantile", horizon=1, min_windows=50, knots=knots, knot_levels=NINE, seed=2)
    moved = np.quantile(r.samples, NINE, axis=1).T
    gap = np.abs(r.knots - moved)[r.calibrated]
    assert gap.max() < 0.08 and np.median(gap) < 0.02  # sampling error of 4,000 paths (max 0.073, median 0.008)
    assert np.abs(r.knots - knots)[r.calibrated].max() > 0.3  # the map did move them (up to 0.42, median 0.17)
    with pytest.raises(ConfigError, match="knots"):
        recalibrate(x, y, "quantile", horizon=1, min_windows=50, knots=knots[:, :5], knot_levels=NINE)


def test_the_engine_recalibrates_the_knots_with_the_samples():
    bars = random_bars(120, seed=8)
    config = replace(CONFIG, windows=100, calibrate="conformal", calibration_min_windows=30)
    c = bars.frame["close"].to_numpy()
    ends = np.arange(len(c) - 1 - 100, len(c))
    rng = np.random.default_rng(5)
    samples = c[ends, None, None, None] * np.exp(rng.normal(0, 0.01, (len(ends), 3, 101, 1)))
    knots = np.moveaxis(np.quantile(samples, NINE, axis=2), 0, 2)
    got, done = calibrated_forecast(Forecast(samples, ("close", "high", "low"), {}, knots, NINE), bars, ends,
                                    config)
    assert done.sum() > 0 and got.quantile_levels == NINE
    np.testing.assert_allclose(got.quantiles, np.moveaxis(np.quantile(got.samples, NINE, axis=2), 0, 2),
                               rtol=1e-12, atol=0)
    assert not np.allclose(got.quantiles[done], knots[done])


def test_quantile_crps_on_a_hand_computed_case():
    knots, levels = np.array([[-1.0, 0.0, 1.0], [-1.0, 0.0, 1.0]]), (0.25, 0.5, 0.75)
    # y = 0.5: pinball 0.25 * 1.5 + 0.5 * 0.5 + 0.25 * 0.5 = 0.75, times 2 / 3;  y = -2: 0.75 + 1 + 0.75 = 2.5
    np.testing.assert_allclose(crps_quantiles(knots, levels, np.array([0.5, -2.0]), axis=-1), [0.5, 5 / 3])
    x = np.random.default_rng(0).normal(size=(6, 50))
    y = np.random.default_rng(1).normal(size=6)  # the sample CRPS is this sum at (i - 1/2) / S
    np.testing.assert_allclose(crps_quantiles(np.sort(x, axis=-1), (np.arange(50) + 0.5) / 50, y, axis=-1),
                               crps_ensemble(x, y, axis=-1), rtol=1e-13)
    with pytest.raises(ConfigError, match="levels"):
        crps_quantiles(knots, (0.25, 0.5), np.array([0.5, -2.0]), axis=-1)
    point = {f: np.zeros(2) for f in ("close", "high", "low")}
    actual = {f: np.array([0.5, -2.0]) for f in point}
    samples = {f: np.array([[-1.0, 1.0], [-1.0, 1.0]]) for f in point}
    skill = forecast_skill(point, samples, actual, quantiles={f: knots for f in point}, levels=levels)
    assert skill["crps_quantile"] == skill["crps_quantile_close"] == pytest.approx((0.5 + 5 / 3) / 2)
    assert skill["crps"] == pytest.approx(np.mean(crps_ensemble(samples["close"], actual["close"], axis=-1)))
    assert "crps_quantile" not in forecast_skill(point, samples, actual)


def test_coverage_reads_the_knots_when_both_bounds_are_knots():
    n = 50
    y = np.linspace(-0.5, 0.5, n)
    samples = np.tile(np.linspace(-2, 2, 101), (n, 1))  # every interval covers every outcome
    knots = np.tile(0.9 + 0.01 * np.arange(9.0), (n, 1))  # all above every outcome: nothing covered
    got = {c.nominal: c for c in coverage(samples, y, axis=-1, knots=knots, knot_levels=NINE)}
    assert (got[0.8].rate, got[0.8].source) == (0.0, "quantiles")  # 0.1 and 0.9 are knots
    assert (got[0.5].rate, got[0.5].source) == (1.0, "samples")  # 0.25 and 0.75 are not
    assert (got[0.95].rate, got[0.95].source) == (1.0, "samples")
    chronos = np.tile(0.9 + 0.01 * np.arange(21.0), (n, 1))
    got = {c.nominal: c.source for c in coverage(samples, y, axis=-1, knots=chronos, knot_levels=CHRONOS)}
    assert got == {0.5: "quantiles", 0.8: "quantiles", 0.9: "quantiles", 0.95: "samples"}


def test_a_quantile_model_reports_both_crps_and_knot_coverage():
    bars = random_bars(150, seed=6)
    r = run_backtest(bars, QuantileForecaster(), replace(CONFIG, windows=100, num_samples=256))
    rets = r.quantile_returns["close"][:100]
    actual = bars.frame["close"].to_numpy()[-100:] / bars.frame["close"].to_numpy()[-101:-1] - 1
    assert r.skill["crps_quantile"] == pytest.approx(crps_quantiles(rets, NINE, actual, axis=-1).mean(), rel=1e-12)
    assert 0 < r.skill["crps_quantile"] and 0 < r.skill["crps"]
    cov = {c["nominal"]: c for c in r.calibration_report["fields"]["close"]["coverage"]}
    assert cov[0.8]["source"] == "quantiles" and cov[0.5]["source"] == "samples"
    inside = ((actual >= rets[:, 0]) & (actual <= rets[:, -1])).sum()
    assert cov[0.8]["covered"] == inside


def test_the_live_planner_sees_the_quantile_views():
    from marketcast.backtest.orders import Costs
    from marketcast.trade.loop.planner import BacktestPlanner

    bars = random_bars(120, seed=3)
    config = BacktestConfig(windows=20, context=32, num_samples=101)
    signal = BacktestPlanner(QuantileForecaster(disagree=True), config).plan(bars, Costs(0.0005))
    c = bars.frame["close"].to_numpy()
    move = 0.5 * (c[-1] / c[-2] - 1.0)  # the latest window's knot median, not the samples' (0.4 % lower)
    assert signal.metrics["forecast_high"] == pytest.approx(c[-1] * (1 + move + 0.006), rel=1e-12)
    assert signal.metrics["forecast_low"] == pytest.approx(c[-1] * (1 + move - 0.006), rel=1e-12)


def test_toto2_random_4m_runs_through_the_backtest_with_both_crps():
    pytest.importorskip("torch")
    from marketcast.forecast.toto2 import Toto2Config, Toto2Forecaster

    toto = Toto2Forecaster.from_config(Toto2Config.size("4m"), seed=1)
    bars = random_bars(160, seed=2)
    r = run_backtest(bars, toto, replace(CONFIG, windows=60, context=64, num_samples=64))
    assert np.isfinite([r.skill["crps"], r.skill["crps_quantile"]]).all()
    assert r.skill["crps"] > 0 and r.skill["crps_quantile"] > 0
    q = r.quantile_returns
    np.testing.assert_array_equal(r.views.close_ret, q["close"][:60, NINE.index(0.5)])
    np.testing.assert_array_equal(r.views.band_low, q["close"][:60, NINE.index(0.4)])
    cov = {c["nominal"]: c["source"] for c in r.calibration_report["fields"]["close"]["coverage"]}
    assert cov[0.8] == "quantiles"
    print(f"toto2 random 4m, 60 windows: crps {r.skill['crps']:.5f}, crps_quantile {r.skill['crps_quantile']:.5f}")


def test_quantiles_that_do_not_fit_the_samples_are_refused_in_one_line():
    from marketcast.errors import MarketcastError

    class Bad(QuantileForecaster):
        def forecast(self, batch, horizon, num_samples, seed=0):
            fc = super().forecast(batch, horizon, num_samples, seed)
            return Forecast(fc.samples, fc.fields, fc.meta, fc.quantiles[:, :, :5], fc.quantile_levels)

    with pytest.raises(MarketcastError, match=r"returned quantiles \(41, 3, 5, 1\) at levels .* expected "
                                              r"\(41, 3, 9, 1\)"):
        run_backtest(random_bars(80, seed=1), Bad(), CONFIG)
