"""What a strategy may see at bar t: the horizon-1 forecast as returns relative to close_t.

Strategies never see absolute sample arrays or any bar after t; the engine and the live loop build a
:class:`WindowView` from the forecast of the window ending at t and hand it to
:func:`marketcast.backtest.strategies.decide`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marketcast.forecast.aggregate import aggregate, quantile
from marketcast.forecast.base import Forecast

RETURN_FIELDS = ("close", "high", "low")


@dataclass(frozen=True)
class WindowView:
    """Forecast of bar t+1 made at bar t, as fractions of ``close`` (close_t).

    close_ret/high_ret/low_ret: point forecasts (``BacktestConfig.point``) of bar t+1's close/high/low.
    band_low/band_high: quantiles ``ci_band`` of the close-return samples (``ci_guard``).
    """

    timestamp: object
    close: float
    close_ret: float
    high_ret: float
    low_ret: float
    band_low: float
    band_high: float

    def price(self, ret: float) -> float:
        """Absolute price of a return relative to close_t."""
        return self.close * (1.0 + ret)


@dataclass(frozen=True)
class ForecastReturns:
    """Horizon-1 sample returns of a whole batch: ``samples[field]`` is ``[B, S]``; ``last_close`` ``[B]``."""

    last_close: np.ndarray
    samples: dict[str, np.ndarray]

    @classmethod
    def from_forecast(cls, forecast: Forecast, last_close: np.ndarray) -> "ForecastReturns":
        last_close = np.asarray(last_close, dtype=np.float64)
        if forecast.batch_size != len(last_close):
            raise ValueError(f"forecast has {forecast.batch_size} windows but {len(last_close)} closes were given")
        out = {}
        for name in RETURN_FIELDS:
            prices = np.asarray(forecast.field(name), dtype=np.float64)[:, :, 0]  # first step = bar t+1
            out[name] = prices / last_close[:, None] - 1.0
        return cls(last_close=last_close, samples=out)

    def views(self, timestamps, point: str, ci_band: tuple[float, float]) -> list[WindowView]:
        """One :class:`WindowView` per window, in batch order."""
        pts = {name: aggregate(s[:, :, None], point)[:, 0] for name, s in self.samples.items()}
        close = self.samples["close"]
        lo = quantile(close[:, :, None], ci_band[0])[:, 0]
        hi = quantile(close[:, :, None], ci_band[1])[:, 0]
        return [
            WindowView(
                timestamp=timestamps[i],
                close=float(self.last_close[i]),
                close_ret=float(pts["close"][i]),
                high_ret=float(pts["high"][i]),
                low_ret=float(pts["low"][i]),
                band_low=float(lo[i]),
                band_high=float(hi[i]),
            )
            for i in range(len(self.last_close))
        ]
