"""--calibrate conformal through the engine on the embedded daily files and on a heavy-tailed 24/7 series
(issue 54): after the warm-up each equal-tailed interval covers its nominal share of the next closes within 3
points, and each tail misses half the rest within 3 points.

Why 1,500 windows: an interval that is exactly calibrated covers 80 % of n outcomes with a binomial sd of
sqrt(0.16 / n), 2.6 points over the 240 calibrated windows of a 290-window run, so "within 3 points" cannot be
asked of one such run (a perfect forecaster misses it a quarter of the time). Over 24 GARCH skew-t runs of 290
windows the conformal 80 % interval covered 80.6 % on average (sd 2.9 points across runs): the issue's 85.5 % on
one crypto file is within that spread. At 1,450 calibrated windows the sd is 1.05 points.

The heavy-tailed series: GARCH(1, 1) returns with Hansen's (1994) skewed Student-t innovations (``arch``'s
``SkewStudent``; Bollerslev 1986), parameters set for daily BTC-like moves: about 3.5 % daily sd, skewness -0.1 to
-0.7, kurtosis 6-13 (asserted per series), on every calendar day (24/7, asset class crypto)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from arch.univariate import GARCH, ConstantMean, SkewStudent

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import run_backtest
from scipy.stats import norm

from marketcast.data.bars import Bars
from marketcast.forecast.base import ContextBatch, Forecast
from marketcast.forecast.baseline import BaselineForecaster

LEVELS = (0.5, 0.8, 0.9, 0.95)
WINDOWS, WARM_UP = 1500, 50


def garch_skew_t(n: int, seed: int) -> tuple[Bars, np.ndarray]:
    """Daily bars of a GARCH(1, 1) skew-t log-return series (percent parameters: omega 0.37, alpha 0.10,
    beta 0.87, so a 3.5 % unconditional sd; nu 5, lambda -0.1), 500 burn-in draws dropped; the bar opens at the
    previous close and its wicks are half-normal 1 % beyond the body."""
    model = ConstantMean(None, volatility=GARCH(1, 0, 1), distribution=SkewStudent(seed=np.random.RandomState(seed)))
    r = model.simulate([0.0, 0.37, 0.10, 0.87, 5.0, -0.1], n + 500)["data"].to_numpy()[500:] / 100.0
    close = 30_000.0 * np.exp(np.cumsum(r))
    open_ = np.r_[30_000.0, close[:-1]]
    wick = np.abs(np.random.default_rng(seed).normal(0.0, 0.01, (n, 2)))
    index = pd.date_range("2017-01-01", periods=n, freq="D", tz="UTC", name="timestamp")
    frame = pd.DataFrame({"open": open_, "high": np.maximum(open_, close) * (1 + wick[:, 0]),
                          "low": np.minimum(open_, close) * (1 - wick[:, 1]), "close": close, "volume": 1.0},
                         index=index)
    return Bars(f"GARCH{seed}", frame, "crypto", "synthetic"), r


class GaussianForecaster:
    """Close samples ``last * exp(0.8 sd z)``, z the normal quantiles at (i + 0.5) / S and sd that of the last 64
    log moves of the context: it follows the volatility but has thin tails and is too narrow, so on fat-tailed
    moves its 50 % interval and its 95 % one are off in opposite directions until recalibrated. High and low lie
    0.5 % beyond the close. Deterministic: a window's forecast depends on its context alone."""

    name = "gaussian"
    fields = ("close", "high", "low")

    def forecast(self, batch: ContextBatch, horizon: int, num_samples: int, seed: int = 0) -> Forecast:
        close = np.asarray(batch.values, dtype=np.float64)[:, -65:, 3]
        sd = np.diff(np.log(close), axis=1).std(axis=1)  # [B]
        z = norm.ppf((np.arange(num_samples) + 0.5) / num_samples)
        c = batch.last_close()[:, None] * np.exp(0.8 * sd[:, None] * z[None])  # [B, S]
        out = np.stack([c, c * 1.005, c * 0.995], axis=1)[..., None].repeat(horizon, axis=-1)
        return Forecast(out, self.fields, {"model": self.name})


def tail_misses(result, bars: Bars, level: float) -> tuple[float, float]:
    """The share of calibrated windows' (after the warm-up) next closes below and above the samples'
    equal-tailed ``level`` interval (numpy's linear quantiles, as the coverage report forms them)."""
    frame = bars.frame
    rows = frame.index.get_indexer(result.decision_times)
    after = np.arange(result.windows) >= WARM_UP  # an uncalibrated run: the same windows
    keep = after if result.calibrated is None else result.calibrated[:result.windows]
    y = (frame["close"].to_numpy()[rows + 1] / frame["close"].to_numpy()[rows] - 1.0)[keep]
    lo, hi = np.quantile(result.sample_returns["close"][:result.windows][keep], [(1 - level) / 2, (1 + level) / 2],
                         axis=-1)
    return float(np.mean(y < lo)), float(np.mean(y > hi))


def worst(result, bars: Bars) -> float:
    """The largest miss of the Done-when over the levels: |coverage - nominal| or |a tail's miss - half the rest|."""
    out = 0.0
    for level in LEVELS:
        below, above = tail_misses(result, bars, level)
        half = (1 - level) / 2
        out = max(out, abs(1 - below - above - level), abs(below - half), abs(above - half))
    return out


def config(method: str) -> BacktestConfig:
    return BacktestConfig(windows=WINDOWS, strategies=("simple",), spa=False, bootstrap_reps=10, calibrate=method,
                          calibration_min_windows=WARM_UP)


@pytest.mark.parametrize("seed", [2, 3])
def test_conformal_is_within_3_points_per_interval_and_tail_on_a_heavy_tailed_24_7_series(seed):
    bars, r = garch_skew_t(WINDOWS + 600, seed)
    z = r - r.mean()
    sd, skew, kurt = r.std(), (z ** 3).mean() / r.std() ** 3, (z ** 4).mean() / r.var() ** 2
    assert 0.025 < sd < 0.045 and -0.8 < skew < 0.0 and 6.0 < kurt < 13.0, (sd, skew, kurt)
    for model in (BaselineForecaster(), GaussianForecaster()):
        fixed = run_backtest(bars, model, config("conformal"))
        assert int(fixed.calibrated.sum()) == WINDOWS - WARM_UP
        assert worst(fixed, bars) <= 0.03, model.name
    assert worst(run_backtest(bars, GaussianForecaster(), config("none")), bars) > 0.06  # the test can tell


def test_conformal_is_within_3_points_per_interval_and_tail_on_the_embedded_daily_files(embedded_bars):
    for bars in embedded_bars:
        for model in (BaselineForecaster(), GaussianForecaster()):
            fixed = run_backtest(bars, model, config("conformal"))
            assert int(fixed.calibrated.sum()) == WINDOWS - WARM_UP
            assert worst(fixed, bars) <= 0.03, (bars.symbol, model.name)
