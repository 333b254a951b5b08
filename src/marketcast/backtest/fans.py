"""Forecast fans at chosen decision bars: what the model said about the next bars, computed with the backtest.

The backtest forecasts one bar ahead. A fan asks the same forecaster, from the same context (bars <= t
only, :func:`~marketcast.forecast.base.make_batch`), for ``horizon`` bars at once, with the run's samples
and seed, and keeps the quantile bands of the close. The dates are the user's (``--fan-date``) or, by
default, evenly spread decision bars whose whole realised path is in the data. They are computed where the
results are made (``marketcast backtest``, a sweep's forecast server) and stored on the result, so a report
only draws them, against the bars, and never runs a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import SymbolResult, decision_ends, decision_rows
from marketcast.data.bars import Bars
from marketcast.errors import ConfigError
from marketcast.forecast.base import Forecaster, make_batch
from marketcast.forecast.floor import floor_paths

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
HORIZON = 20  # bars ahead: a trading month of daily bars
DEFAULT_COUNT = 3


@dataclass(frozen=True)
class Fan:
    """The close quantiles of one multi-bar forecast made at ``decision_time`` (the closes around it are the
    bars', read by the report that draws it)."""

    decision_time: pd.Timestamp
    times: pd.DatetimeIndex  # the forecast's bar times (from the market calendar)
    quantiles: dict[float, np.ndarray]  # q -> [horizon] close


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


def fan_horizon(windows: int, horizon: int = HORIZON) -> int:
    """``horizon``, or fewer when the run has fewer ``windows`` (so the first decision bar has a whole path)."""
    return max(1, min(horizon, windows))


def fan_rows(rows: np.ndarray, bars: Bars, dates: Sequence[pd.Timestamp] = (), horizon: int = HORIZON,
             count: int = DEFAULT_COUNT) -> np.ndarray:
    """Row positions of the fans' decision bars among the settled decision ``rows``: for each date the last
    one at or before it (it must lie in the run's decision span), else ``count`` evenly spread ones with a
    whole realised path."""
    times = bars.frame.index[rows]
    if dates:
        check_dates(dates, bars.symbol, times[0], bars.frame.index[rows[-1] + 1])
        return np.unique([rows[times.searchsorted(date, side="right") - 1] for date in dates])
    whole = rows[rows + horizon <= len(bars) - 1]
    pick = np.unique(np.linspace(0, len(whole) - 1, min(count, len(whole))).round().astype(int))
    return whole[pick]


def forecast_fans(forecaster: Forecaster, bars: Bars, rows: np.ndarray, config: BacktestConfig,
                  dates: Sequence[pd.Timestamp] = (), horizon: int = HORIZON) -> tuple[Fan, ...]:
    """The fans of one symbol whose settled decision bars are ``rows``, in one batched forecaster call with the
    run's context, samples and seed."""
    h = fan_horizon(len(rows), horizon)
    rows = fan_rows(rows, bars, dates, h)
    frame = bars.frame
    batch = make_batch(frame, rows, config.context, horizon=h, calendar=bars.calendar)
    fc = forecaster.forecast(batch, horizon=h, num_samples=config.num_samples, seed=config.seed)
    fc = floor_paths(fc, batch.last_close(), frame.index[rows], bars.symbol)
    bands = {q: fc.quantile(q, "close") for q in QUANTILES}
    return tuple(Fan(decision_time=frame.index[t],
                     times=pd.DatetimeIndex(batch.future_timestamps[i]).tz_localize("UTC"),
                     quantiles={q: np.asarray(b[i, :h], dtype=np.float64) for q, b in bands.items()})
                 for i, t in enumerate(rows))


def result_fans(forecaster: Forecaster, result: SymbolResult, bars: Bars, dates: Sequence[pd.Timestamp] = (),
                horizon: int = HORIZON) -> tuple[Fan, ...]:
    """:func:`forecast_fans` at a finished result's decision bars (``bars``: the ones it read, or a longer
    span of the same file)."""
    return forecast_fans(forecaster, bars, decision_rows(result, bars), result.config, dates, horizon)


def add_fans(results: Sequence[SymbolResult], bars: Sequence[Bars], forecaster: Forecaster,
             dates: Sequence[pd.Timestamp] = ()) -> None:
    """Store each result's fans on it (``result.fans``), from the run's own forecaster."""
    by_symbol = {b.symbol: b for b in bars}
    for result in results:
        result.fans = result_fans(forecaster, result, by_symbol[result.symbol], dates)


def stored_fans(result: SymbolResult, bars: Bars, dates: Sequence[pd.Timestamp] = ()) -> tuple[Fan, ...] | None:
    """The result's stored fans at ``dates`` (all of them without dates), or None when one is not stored (a
    run recorded before fans were stored, or another date): only then does a model have to run again."""
    if not result.fans:
        return None
    if not dates:
        return tuple(result.fans)
    rows = fan_rows(decision_rows(result, bars), bars, dates, fan_horizon(result.windows))
    by_time = {fan.decision_time: fan for fan in result.fans}
    wanted = bars.frame.index[rows]
    return tuple(by_time[t] for t in wanted) if all(t in by_time for t in wanted) else None
