"""What a strategy may see at bar t: the horizon-1 forecast as returns relative to close_t.

Strategies never see absolute sample arrays or any bar after t; the engine and the live loop build a
:class:`WindowView` from the forecast of the window ending at t and hand it to
:func:`marketcast.backtest.strategies.decide`; the engine reads every window's view at once from
:class:`ForecastViews`.

A forecast with quantiles of its own (``Forecast.quantiles``: Toto 2.0, Chronos-2, TimesFM, TiRex) is read from
them where a view asks for a quantile: a ``median``/``pNN``/``quantile_Q`` point forecast and the ``ci_band``
bounds come from the knots (:func:`marketcast.forecast.quantiles.value_at`: the knot itself at a knot level),
not from the sample paths drawn from them; a mean or trimmed-mean point stays on the samples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Iterator, Sequence

import numpy as np

from marketcast.forecast.aggregate import aggregate, quantile
from marketcast.forecast.base import Forecast

RETURN_FIELDS = ("close", "high", "low")
ATR_PERIOD = 14  # bars of the average true range (Wilder 1978) that scales MaxDiff's grid


def atr_fraction(high: np.ndarray, low: np.ndarray, close: np.ndarray, ends: np.ndarray,
                 period: int = ATR_PERIOD) -> np.ndarray:
    """ATR% of each decision bar t in ``ends``: the mean true range of bars t-period+1 .. t divided by close_t.

    True range (Wilder 1978, *New Concepts in Technical Trading Systems*): ``max(high_i, close_{i-1}) -
    min(low_i, close_{i-1})``, ``high_i - low_i`` for the first bar of the series. A plain mean of the last
    ``period`` true ranges (fewer where the series starts later), not Wilder's recursive smoothing, so the value
    depends only on bars t-period .. t, never on a bar after t, nor on how far back the series starts. The
    terms are added in a fixed order, so one window alone and a batch of them give the same value exactly.
    """
    high, low, close = (np.asarray(a, dtype=np.float64) for a in (high, low, close))
    ends = np.asarray(ends, dtype=np.int64)
    total = np.zeros(len(ends))
    count = np.zeros(len(ends))
    for lag in range(period - 1, -1, -1):  # oldest first
        i = ends - lag
        ok = i >= 0
        j = np.where(ok, i, 0)
        prev = close[np.maximum(j - 1, 0)]
        tr = np.where(j > 0, np.maximum(high[j], prev) - np.minimum(low[j], prev), high[j] - low[j])
        total = total + np.where(ok, tr, 0.0)
        count = count + ok
    return total / count / close[ends]


@dataclass(frozen=True)
class WindowView:
    """Forecast of bar t+1 made at bar t, as fractions of ``close`` (close_t).

    close_ret/high_ret/low_ret: point forecasts (``BacktestConfig.point``) of bar t+1's close/high/low.
    band_low/band_high: quantiles ``ci_band`` of the close return (``ci_guard``): of its samples, or of the
    model's own quantiles where it has them (:meth:`ForecastReturns.quantile`).
    atr: ATR% of bars <= t (:func:`atr_fraction`), the unit of MaxDiff's "atr" grid; 0 (no range known: zero
    offsets) where a view is made by hand.
    """

    timestamp: object
    close: float
    close_ret: float
    high_ret: float
    low_ret: float
    band_low: float
    band_high: float
    atr: float = 0.0

    def price(self, ret: float) -> float:
        """Absolute price of a return relative to close_t."""
        return self.close * (1.0 + ret)


def knot_level(spec: str) -> float | None:
    """The probability a point spec asks for when it is a quantile (``median`` 0.5, ``p25`` 0.25,
    ``quantile_0.3``/``quantile_30`` 0.3, as :mod:`marketcast.forecast.aggregate` reads them), strictly inside
    (0, 1); None for any other spec (mean, trimmed means, mixes)."""
    s = spec.strip().lower()
    if s == "median":
        return 0.5
    if m := re.fullmatch(r"p(\d+(?:\.\d+)?)", s):
        q = float(m[1]) / 100.0
    elif m := re.fullmatch(r"quantile_(\d+(?:\.\d+)?)", s):
        q = float(m[1])
        q = q / 100.0 if q >= 1 else q
    else:
        return None
    return q if 0.0 < q < 1.0 else None


@dataclass(frozen=True)
class ForecastReturns:
    """Horizon-1 sample returns of a whole batch: ``samples[field]`` is ``[B, S]``; ``last_close`` ``[B]``;
    ``quantiles[field]`` ``[B, K]`` the model's own quantiles at ``levels`` as returns (None: a sample model)."""

    last_close: np.ndarray
    samples: dict[str, np.ndarray]
    quantiles: dict[str, np.ndarray] | None = None
    levels: tuple[float, ...] = ()

    @classmethod
    def from_forecast(cls, forecast: Forecast, last_close: np.ndarray) -> "ForecastReturns":
        last_close = np.asarray(last_close, dtype=np.float64)
        if forecast.batch_size != len(last_close):
            raise ValueError(f"forecast has {forecast.batch_size} windows but {len(last_close)} closes were given")
        out, knots = {}, None if forecast.quantiles is None else {}
        for name in RETURN_FIELDS:
            prices = np.asarray(forecast.field(name), dtype=np.float64)[:, :, 0]  # first step = bar t+1
            out[name] = prices / last_close[:, None] - 1.0
            if knots is not None:
                q = np.asarray(forecast.quantiles, dtype=np.float64)[:, forecast.fields.index(name), :, 0]
                knots[name] = q / last_close[:, None] - 1.0
        levels = tuple(float(v) for v in forecast.quantile_levels) if knots is not None else ()
        return cls(last_close=last_close, samples=out, quantiles=knots, levels=levels)

    def quantile(self, name: str, q: float) -> np.ndarray:
        """``[B]`` quantile ``q`` of field ``name``'s return: from the knots when the forecast has them
        (:func:`marketcast.forecast.quantiles.value_at`), else from the samples (numpy's linear rule)."""
        if self.quantiles is not None and 0.0 < q < 1.0:
            from marketcast.forecast.quantiles import value_at  # imports torch: only quantile models pay for it

            return value_at(self.quantiles[name][:, :, None], self.levels, q)[:, 0]
        return quantile(self.samples[name][:, :, None], q)[:, 0]

    def point(self, name: str, spec: str) -> np.ndarray:
        """``[B]`` point forecast of field ``name`` by ``spec``: a quantile spec (:func:`knot_level`) reads the
        knots when there are any, every other spec the samples."""
        level = knot_level(spec)
        if self.quantiles is not None and level is not None:
            return self.quantile(name, level)
        return aggregate(self.samples[name][:, :, None], spec)[:, 0]

    def views(self, timestamps, point: str, ci_band: tuple[float, float], atr=None) -> "ForecastViews":
        """Every window's view, in batch order; ``atr`` ``[B]`` each window's ATR% (:func:`atr_fraction`, zero
        when not given)."""
        pts = {name: self.point(name, point) for name in self.samples}
        return ForecastViews(
            timestamps=timestamps,
            close=self.last_close,
            close_ret=pts["close"],
            high_ret=pts["high"],
            low_ret=pts["low"],
            band_low=self.quantile("close", ci_band[0]),
            band_high=self.quantile("close", ci_band[1]),
            atr=np.zeros(len(self.last_close)) if atr is None else np.asarray(atr, dtype=np.float64),
        )


@dataclass(frozen=True, eq=False)
class ForecastViews:
    """The views of many windows as arrays ``[N]`` (what the vectorised strategies read); ``views[k]`` is window
    k's :class:`WindowView` and ``views[a:b]`` a slice of them."""

    timestamps: Sequence
    close: np.ndarray
    close_ret: np.ndarray
    high_ret: np.ndarray
    low_ret: np.ndarray
    band_low: np.ndarray
    band_high: np.ndarray
    atr: np.ndarray

    def price(self, ret: np.ndarray) -> np.ndarray:
        """Absolute prices of returns relative to each window's close_t (:meth:`WindowView.price`)."""
        return self.close * (1.0 + ret)

    def __len__(self) -> int:
        return len(self.close)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return ForecastViews(*(getattr(self, f.name)[k] for f in fields(self)))
        return WindowView(self.timestamps[k], *(float(getattr(self, f.name)[k]) for f in fields(self)[1:]))

    def __iter__(self) -> Iterator[WindowView]:
        return (self[k] for k in range(len(self)))

    def __eq__(self, other) -> bool:
        if not isinstance(other, ForecastViews):
            return NotImplemented
        return list(self.timestamps) == list(other.timestamps) and all(
            np.array_equal(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)[1:])
