"""Forecast fans at chosen decision bars: what the model said about the next bars, and what happened.

The backtest forecasts one bar ahead. A fan asks the same forecaster, from the same context (bars <= t
only, :func:`~marketcast.forecast.base.make_batch`), for ``horizon`` bars at once, with the run's samples
and seed, and shows the quantile bands of the close next to the realised closes. The dates are the user's
(``--fan-date``) or, by default, evenly spread decision bars whose whole realised path is in the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import SymbolResult, decision_ends
from marketcast.data.bars import Bars
from marketcast.errors import ConfigError
from marketcast.forecast.base import Forecaster, make_batch
from marketcast.forecast.floor import floor_paths
from marketcast.report.series import decision_rows

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
HORIZON = 20  # bars ahead: a trading month of daily bars
DEFAULT_COUNT = 3
HISTORY = 2  # context shown before the fan, in horizons


@dataclass(frozen=True)
class Fan:
    """The close quantiles of one multi-bar forecast made at ``decision_time``, with the path around it."""

    decision_time: pd.Timestamp
    history: pd.Series  # closes up to and including the decision bar
    times: pd.DatetimeIndex  # the forecast's bar times (from the market calendar)
    quantiles: dict[float, np.ndarray]  # q -> [horizon] close
    realised: pd.Series  # closes after the decision bar (up to ``horizon`` of them)


def parse_dates(values: Sequence[str] | None) -> list[pd.Timestamp]:
    """``--fan-date`` values as UTC timestamps (a date means midnight UTC, where daily bars are stamped)."""
    out = []
    for value in values or []:
        try:
            ts = pd.Timestamp(value)
        except (ValueError, TypeError):
            ts = pd.NaT
        if ts is pd.NaT or pd.isna(ts):
            raise ConfigError(f"--fan-date {value!r} is not a date; use YYYY-MM-DD (or an ISO time for intraday bars)")
        out.append(ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC"))
    return out


def check_dates(dates: Sequence[pd.Timestamp], symbol: str, first: pd.Timestamp, last: pd.Timestamp) -> None:
    """Every date lies in the run's span, from its first decision bar to its last settle bar."""
    for date in dates:
        if date < first or date > last:
            raise ConfigError(f"--fan-date {date:%Y-%m-%d}: {symbol}'s backtest runs from {first:%Y-%m-%d} to "
                              f"{last:%Y-%m-%d}; choose dates in that span")


def check_span(dates: Sequence[pd.Timestamp], bars: Bars, config: BacktestConfig, min_context: int) -> None:
    """Before a backtest runs: the dates lie in the span it will decide over (a typo fails in a second, not
    after the forecasts)."""
    if dates:
        ends = decision_ends(len(bars), config, min_context, f"{bars.symbol} ({bars.source or 'bars'})")
        check_dates(dates, bars.symbol, bars.frame.index[ends[0]], bars.frame.index[-1])


def fan_horizon(result: SymbolResult, horizon: int = HORIZON) -> int:
    """``horizon``, or fewer when the run has fewer windows (so the first decision bar has a whole path)."""
    return max(1, min(horizon, result.windows))


def fan_rows(result: SymbolResult, bars: Bars, dates: Sequence[pd.Timestamp] = (), horizon: int = HORIZON,
             count: int = DEFAULT_COUNT) -> np.ndarray:
    """Row positions of the fans' decision bars: for each date the last decision bar at or before it (it
    must lie in the run's decision span), else ``count`` evenly spread ones with a whole realised path."""
    rows = decision_rows(result, bars)
    times = result.decision_times
    if dates:
        check_dates(dates, result.symbol, times[0], result.settle_times[-1])
        return np.unique([rows[times.searchsorted(date, side="right") - 1] for date in dates])
    whole = rows[rows + horizon <= len(bars) - 1]
    pick = np.unique(np.linspace(0, len(whole) - 1, min(count, len(whole))).round().astype(int))
    return whole[pick]


def forecast_fans(forecaster: Forecaster, result: SymbolResult, bars: Bars, dates: Sequence[pd.Timestamp] = (),
                  horizon: int = HORIZON) -> list[Fan]:
    """The fans of one symbol, in one batched forecaster call with the run's context, samples and seed."""
    h = fan_horizon(result, horizon)
    rows = fan_rows(result, bars, dates, h)
    cfg = result.config
    frame = bars.frame
    batch = make_batch(frame, rows, cfg.context, horizon=h, calendar=bars.calendar)
    fc = forecaster.forecast(batch, horizon=h, num_samples=cfg.num_samples, seed=cfg.seed)
    fc = floor_paths(fc, batch.last_close(), frame.index[rows], bars.symbol)
    close = frame["close"]
    bands = {q: fc.quantile(q, "close") for q in QUANTILES}
    return [Fan(decision_time=frame.index[t],
                history=close.iloc[max(0, t - HISTORY * h):t + 1],
                times=pd.DatetimeIndex(batch.future_timestamps[i]).tz_localize("UTC"),
                quantiles={q: np.asarray(b[i, :h], dtype=np.float64) for q, b in bands.items()},
                realised=close.iloc[t + 1:t + 1 + h])
            for i, t in enumerate(rows)]
