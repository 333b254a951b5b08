"""Small real forecasters and bar builders for engine tests (the engine, not the model, is under test)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from marketcast.data.bars import Bars
from marketcast.forecast.base import ContextBatch, Forecast


def make_bars(ohlc, symbol="TEST", asset_class="stock", start="2024-01-01") -> Bars:
    arr = np.asarray(ohlc, dtype=np.float64)
    index = pd.date_range(start, periods=len(arr), freq="D", tz="UTC", name="timestamp")
    frame = pd.DataFrame(arr, columns=["open", "high", "low", "close"], index=index)
    return Bars(symbol, frame, asset_class, "test")


def random_bars(n, seed=0, symbol="RND", asset_class="stock", vol=0.01) -> Bars:
    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(rng.normal(0, vol, n)))
    open_ = close * np.exp(rng.normal(0, vol / 2, n))
    high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0, vol / 2, n)))
    low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0, vol / 2, n)))
    return make_bars(np.column_stack([open_, high, low, close]), symbol, asset_class)


def trending_bars(n, seed=0, symbol="TRD", asset_class="stock", vol=0.01, phi=0.4) -> Bars:
    """Close-to-close log returns AR(1) with coefficient ``phi`` (so a momentum forecaster has skill on them),
    each bar opening within a tenth of ``vol`` of the previous close (a market order trades the move)."""
    rng = np.random.default_rng(seed)
    shocks = rng.normal(0, vol, n)
    moves = np.empty(n)
    moves[0] = shocks[0]
    for t in range(1, n):
        moves[t] = phi * moves[t - 1] + shocks[t]
    close = 100 * np.exp(np.cumsum(moves))
    open_ = np.concatenate([[100.0], close[:-1]]) * np.exp(rng.normal(0, vol / 10, n))
    high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0, vol / 2, n)))
    low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0, vol / 2, n)))
    return make_bars(np.column_stack([open_, high, low, close]), symbol, asset_class)


class TableForecaster:
    """Returns per window looked up by the window's last timestamp: ``{ts: (close, high, low)}`` returns
    relative to the window's last close. Samples are the point return plus ``spread * linspace(-1, 1, S)``
    so the median equals the point and the P40-P60 band is ``point +- 0.2 * spread``."""

    name = "table"
    fields = ("close", "high", "low")

    def __init__(self, table, spread=0.0, default=(0.0, 0.01, -0.01)):
        self.table = {pd.Timestamp(k).tz_localize(None) if pd.Timestamp(k).tz else pd.Timestamp(k): v
                      for k, v in table.items()}
        self.spread = spread
        self.default = default
        self.calls = 0

    def forecast(self, batch: ContextBatch, horizon: int, num_samples: int, seed: int = 0) -> Forecast:
        self.calls += 1
        z = np.linspace(-1.0, 1.0, num_samples) * self.spread
        last = batch.last_close()
        out = np.empty((batch.batch_size, 3, num_samples, horizon))
        for i in range(batch.batch_size):
            rets = self.table.get(pd.Timestamp(batch.timestamps[i, -1]), self.default)
            for f, r in enumerate(rets):
                out[i, f] = (last[i] * (1.0 + r + z))[:, None]
        return Forecast(out, self.fields, {"model": self.name})


class MomentumForecaster:
    """Deterministic function of each window alone: the next return repeats the last close-to-close move
    (scaled), highs/lows from the window's mean range; noisy samples seeded by the window's own values."""

    name = "momentum"
    fields = ("close", "high", "low")

    def __init__(self):
        self.calls = 0

    def forecast(self, batch: ContextBatch, horizon: int, num_samples: int, seed: int = 0) -> Forecast:
        self.calls += 1
        close = batch.field("close")
        high, low = batch.field("high"), batch.field("low")
        last = close[:, -1]
        move = close[:, -1] / close[:, -2] - 1.0
        rng_up = np.mean(high[:, -5:] / close[:, -5:] - 1.0, axis=1)
        rng_dn = np.mean(low[:, -5:] / close[:, -5:] - 1.0, axis=1)
        out = np.empty((batch.batch_size, 3, num_samples, horizon))
        for i in range(batch.batch_size):
            g = np.random.default_rng([seed, int(abs(last[i]) * 1e6) % (2**32)])
            noise = g.normal(0, 0.005, num_samples)
            c = 0.5 * move[i] + noise
            out[i, 0] = (last[i] * (1 + c))[:, None]
            out[i, 1] = (last[i] * (1 + np.maximum(c, 0) + rng_up[i]))[:, None]
            out[i, 2] = (last[i] * (1 + np.minimum(c, 0) + rng_dn[i]))[:, None]
        return Forecast(out, self.fields, {"model": self.name})


class QuantileForecaster:
    """Quantiles of its own, like Toto 2.0, from each window alone: knots at ``levels`` of bar t+1's close
    return at half the window's last close-to-close move plus ``width`` times the standard normal quantile, high
    0.6 % above and low 0.6 % below. Samples are drawn from the knots (:func:`~marketcast.forecast.quantiles.
    sample_paths`, the real models' rule) or, with ``disagree``, a grid that says something else on purpose:
    shifted by ``shift`` and ``scale`` times as wide, symmetric (its mean and median both at the shift)."""

    name = "quantiles"
    fields = ("close", "high", "low")

    def __init__(self, levels=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9), width=0.01, disagree=False,
                 shift=-0.004, scale=3.0):
        self.levels, self.width, self.disagree, self.shift, self.scale = tuple(levels), width, disagree, shift, scale

    def knots(self, batch: ContextBatch, horizon: int) -> np.ndarray:
        """``[B, 3, K, horizon]`` prices."""
        from statistics import NormalDist

        close = batch.field("close")
        last = close[:, -1]
        move = 0.5 * (close[:, -1] / close[:, -2] - 1.0)
        z = np.array([NormalDist().inv_cdf(q) for q in self.levels])
        centre = np.stack([move, move + 0.006, move - 0.006], axis=1)  # [B, 3]
        rets = centre[:, :, None] + self.width * z[None, None, :]
        return np.repeat((last[:, None, None] * (1.0 + rets))[..., None], horizon, axis=-1)

    def forecast(self, batch: ContextBatch, horizon: int, num_samples: int, seed: int = 0) -> Forecast:
        from marketcast.forecast.quantiles import sample_paths

        knots = self.knots(batch, horizon)
        if self.disagree:
            last = batch.last_close()[:, None, None, None]
            median = knots[:, :, self.levels.index(0.5)][:, :, None, :]  # [B, 3, 1, H]
            grid = np.linspace(-1.0, 1.0, num_samples)[None, None, :, None] * self.scale * self.width
            samples = median + last * (self.shift + grid)
        else:
            samples = sample_paths(knots, self.levels, batch.window_keys(), seed, num_samples)
        return Forecast(samples, self.fields, {"model": self.name}, knots, self.levels)


def goog_hourly(start="2022-06-01", end="2022-07-29", jump="2022-07-18", seed=0) -> pd.DataFrame:
    """Hourly GOOG-like bars on NYSE sessions (09:30, 10:30, ... 15:30 New York: 7 a session, half days
    shorter), a seeded random walk around 115; before ``jump`` the prices are divided by 20, as in a file that
    joins split-adjusted history to raw bars (GOOG split 20-for-1 on 2022-07-18). The bar across the jump earns
    a long +1,900 %: compounded to a year of 1,764 hourly bars from one window it overflowed a float."""
    from marketcast.data.calendar import calendar_for

    sessions = calendar_for("stock").sessions(start, end)
    stamps = [t for o, c in zip(sessions["open"], sessions["close"]) for t in pd.date_range(o, c, freq="h")
              if t < c]
    index = pd.DatetimeIndex(stamps, name="timestamp")
    rng = np.random.default_rng(seed)
    close = 115 * np.exp(np.cumsum(rng.normal(0.0, 0.006, len(index))))
    close[index < pd.Timestamp(jump, tz="UTC")] /= 20
    open_ = np.r_[close[0], close[:-1]]
    wick = np.abs(rng.normal(0, 0.002, len(index)))
    return pd.DataFrame({"open": open_, "high": np.maximum(open_, close) * (1 + wick),
                         "low": np.minimum(open_, close) * (1 - wick), "close": close,
                         "volume": np.full(len(index), 1e6)}, index=index)
