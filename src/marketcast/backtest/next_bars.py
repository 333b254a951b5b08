"""What ``marketcast forecast SYMBOL`` computes: the quantile fan of the next bars from the last bar (or from
``--end``), and with ``--calibration`` the coverage of the one-bar-ahead forecasts over the backtest's own
windows, prepared as every backtest is (:func:`marketcast.backtest.prepare.prepare`: tuned weights are never
scored on the bars they were tuned on). A fan from a bar on or before tuned weights' ``until`` is refused too
(:func:`marketcast.forecast.tuning.guard_weights`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from rich.table import Table

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import SymbolResult, run_many
from marketcast.backtest.period import Period, cut_at
from marketcast.backtest.prepare import DataOptions, load_inputs, prepare
from marketcast.errors import ConfigError
from marketcast.forecast.exposure import exposure_json, weigh

if TYPE_CHECKING:
    from marketcast.runtime.compile_note import CompileNote

FAN = (0.1, 0.25, 0.5, 0.75, 0.9)
HISTORY = 120  # bars of history the fan chart shows


def calibrate(symbol: str, data: DataOptions, model_options: dict, period: Period, context: int,
              samples: int, min_context: int | None = None, require_clean: bool = False) -> SymbolResult:
    """Coverage and PIT of the period's one-bar-ahead forecasts: the backtest's windows and forecast path
    (:func:`run_many` with ``calibration_only``), each from bars <= t; ``min_context`` (``--min-context``) as the
    backtest's; labelled (or with ``require_clean`` refused) as the backtest's windows are."""
    from marketcast.forecast.registry import load_forecaster

    (whole,) = load_inputs([symbol], data).bars
    forecaster = load_forecaster(**model_options)
    config = BacktestConfig(windows=period.fixed or 1, context=context, num_samples=samples,
                            seed=model_options["seed"], include_latest=False, min_context=min_context)
    prepared = prepare([whole], period, config, min_context=getattr(forecaster, "min_context", 2),
                       weights=model_options["weights"], fix="score the windows after it (--start {start})",
                       model=model_options["name"], require_clean=require_clean)
    (result,) = run_many(prepared.bars, forecaster, prepared.configs[0], calibration_only=True)
    prepared.label([result])
    return result


@dataclass
class NextBars:
    """The fan of the next ``horizon`` bars: close quantiles and median high/low per step."""

    symbol: str
    asset_class: str
    last_bar: pd.Timestamp
    last_close: float
    price: str  # the format of a price, e.g. ",.2f"
    samples: int
    steps: pd.DatetimeIndex
    close_q: dict
    high_med: np.ndarray
    low_med: np.ndarray
    history: pd.Series
    compile: CompileNote | None = None  # when compile is on: graphs from the cache, first forecast's seconds
    exposure: dict = field(default_factory=dict)  # what the weights may have seen of the last bar (Exposure.meta)

    def json(self, model: str, seed: int) -> dict:
        return {
            **({"compile": self.compile.to_json()} if self.compile is not None else {}),
            "symbol": self.symbol, "model": model, "asset_class": self.asset_class, "last_bar": self.last_bar,
            **exposure_json(self.exposure),
            "last_close": self.last_close, "samples": self.samples, "horizon": len(self.steps), "seed": seed,
            "steps": [{"step": k + 1, "time": self.steps[k],
                       **{f"close_p{q * 100:g}": self.close_q[q][k] for q in FAN},
                       "high_p50": self.high_med[k], "low_p50": self.low_med[k],
                       "p50_change": self.close_q[0.5][k] / self.last_close - 1} for k in range(len(self.steps))],
        }


def next_bars(symbol: str, data: DataOptions, model_options: dict, end: date | None, context: int, horizon: int,
              samples: int, require_clean: bool = False) -> NextBars:
    """Forecast ``horizon`` bars after the last bar on or before ``end`` (the last bar without it).

    Tuned weights (a ``tuning.json``) whose ``until`` is on or after that bar are refused in one line: the bars
    the fan forecasts are bars they were trained on, so it would look sharper than any forecast they can make.
    ``forecast`` has no --allow-in-sample; ``backtest --allow-in-sample`` shows in-sample scores, labelled. The
    fan carries the labels of its last bar (:mod:`marketcast.forecast.exposure`); ``require_clean`` refuses them."""
    from marketcast.data.ticks import price_decimals
    from marketcast.forecast import load_forecaster, make_batch
    from marketcast.forecast.floor import floor_paths
    from marketcast.runtime.compile_note import first_call

    (whole,) = load_inputs([symbol], data).bars
    bars = cut_at(whole, end, data.min_rows or 2)
    exposure = weigh(model_options["name"], model_options["weights"],
                     lambda: [(whole.symbol, whole.frame, bars.frame.index[-1:])], require_clean=require_clean,
                     fix="forecast from a later bar (--end {start} or after, or no --end)", what="the fan's last bar {bar}")
    if horizon > len(bars):  # further ahead than the history reaches back: noise, and the time steps overflow
        raise ConfigError(f"--horizon {horizon:,} is more than the {len(bars):,} bars of {bars.symbol}'s history; "
                          f"forecast at most {len(bars):,} bars ahead")
    forecaster = load_forecaster(**model_options)
    last = len(bars) - 1
    batch = make_batch(bars.frame, [last], min(context, len(bars)), horizon, calendar=bars.calendar)
    result, note = first_call(forecaster, lambda: forecaster.forecast(batch, horizon, samples,
                                                                      seed=model_options["seed"]))
    result = floor_paths(result, batch.last_close(), [bars.frame.index[last]], bars.symbol)
    return NextBars(
        bars.symbol, bars.asset_class, bars.frame.index[-1], float(batch.last_close()[0]),
        f",.{price_decimals(bars.frame['close'])}f", result.num_samples,
        pd.DatetimeIndex(batch.future_timestamps[0]).tz_localize("UTC"),
        {q: result.quantile(q, "close")[0] for q in FAN}, result.quantile(0.5, "high")[0],
        result.quantile(0.5, "low")[0], bars.frame["close"].iloc[-min(len(bars), HISTORY):], note,
        exposure.meta(whole.symbol, bars.frame.index[-1:], whole.frame))


def fan_table(fan: NextBars, model: str) -> Table:
    """The terminal table: one row per step, daily times without a clock."""
    price = fan.price
    daily = bool((fan.steps.normalize() == fan.steps).all())
    table = Table(title=f"{fan.symbol} {model} forecast from {fan.last_bar:%Y-%m-%d} "
                        f"(close {fan.last_close:{price}}, {fan.samples} samples)")
    table.add_column("step", justify="right")
    table.add_column("time")
    for q in FAN:
        table.add_column(f"close P{q * 100:g}", justify="right")
    table.add_column("high P50", justify="right")
    table.add_column("low P50", justify="right")
    table.add_column("P50 vs last", justify="right")
    for k, step in enumerate(fan.steps):
        change = fan.close_q[0.5][k] / fan.last_close - 1
        table.add_row(str(k + 1), f"{step:%Y-%m-%d}" if daily else f"{step:%Y-%m-%d %H:%M}",
                      *(f"{fan.close_q[q][k]:{price}}" for q in FAN), f"{fan.high_med[k]:{price}}",
                      f"{fan.low_med[k]:{price}}", f"{change:+.2%}")
    return table
