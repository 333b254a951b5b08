"""``marketcast forecast SYMBOL``: the quantile fan of the next bars, optionally as a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import pandas as pd
import typer
from rich.table import Table

from marketcast.commands import options
from marketcast.console import console, err_console, print_json
from marketcast.data.asset import asset_classes
from marketcast.data.validate import MIN_BARS
from marketcast.errors import ConfigError

FAN = (0.1, 0.25, 0.5, 0.75, 0.9)
CALIBRATION_WINDOWS = 250


def forecast(
    symbol: Annotated[str, typer.Argument(help="Symbol: SP500/NASDAQ embedded, or <SYMBOL>.csv in --data-dir.")],
    horizon: options.Horizon = 8,
    samples: options.Samples = 512,
    model: options.Model = "baseline",
    context: options.Context = 512,
    data_dir: options.DataDir = None,
    weights: options.Weights = None,
    device: options.Device = "cpu",
    dtype: options.Dtype = "float32",
    seed: options.Seed = 0,
    on_duplicate: options.OnDuplicate = "error",
    on_bad_line: options.OnBadLine = "error",
    asset_class: options.AssetClass = None,
    periods_per_year: options.PeriodsPerYear = None,
    plot: Annotated[Optional[Path], typer.Option(help="Also write the fan chart to this PNG file, e.g. fan.png.")] = None,
    as_json: options.AsJson = False,
    calibration: Annotated[bool, typer.Option(
        "--calibration", help="Instead of the fan: coverage of the 50/80/90/95% intervals and the PIT test of "
                              "the bar t+1 forecasts over the last --windows bars, walk-forward (the backtest's "
                              "windows).")] = False,
    windows: Annotated[Optional[str], typer.Option(
        "--windows", "-n", callback=options.windows_callback, metavar="INTEGER|all",
        help=f"With --calibration: how many of the last bars to score, or all (default {CALIBRATION_WINDOWS}).")
    ] = None,
    start: Annotated[Optional[str], typer.Option(
        "--start", callback=options.day_callback, metavar="DATE",
        help="With --calibration: score the windows whose decision bar falls in --start..--end, YYYY-MM-DD, e.g. "
             "2023-01-02 (inclusive; an alternative to --windows).")] = None,
    end: Annotated[Optional[str], typer.Option(
        "--end", callback=options.day_callback, metavar="DATE",
        help="The last bar used, YYYY-MM-DD, e.g. 2023-12-29: the fan forecasts from it; with --calibration the "
             "last decision date scored (default: the last bar).")] = None,
) -> None:
    """Forecast the next bars of SYMBOL and print the quantile fan."""
    from marketcast.backtest.period import Period, cut_at, windows_of
    from marketcast.data import load_symbol
    from marketcast.data.ticks import price_decimals
    from marketcast.forecast import load_forecaster, make_batch
    from marketcast.forecast.floor import floor_paths

    if windows is not None and not calibration:
        raise ConfigError("--windows counts the windows --calibration scores; add --calibration")
    if start is not None and not calibration:
        raise ConfigError("--start picks the windows --calibration scores; add --calibration, or use --end alone "
                          "to forecast from an earlier bar")
    period = Period.of(windows, start, end, default=CALIBRATION_WINDOWS)
    if calibration and plot is not None:
        raise ConfigError("--calibration prints coverage, not a fan; drop --plot")
    if plot is not None and plot.suffix.lower() != ".png":
        raise ConfigError(f"--plot {plot}: the chart is written as PNG; give a path ending in .png")
    bars = load_symbol(symbol, data_dir=data_dir, min_rows=MIN_BARS, on_duplicate=on_duplicate,
                       asset_class=asset_classes(asset_class, [symbol])[symbol.upper()],
                       periods_per_year=periods_per_year, on_bad_line=on_bad_line)
    forecaster = load_forecaster(model, weights=weights, device=device, dtype=dtype, seed=seed)
    if calibration:
        bars, count = windows_of(bars, period, getattr(forecaster, "min_context", 2))
        _calibration(bars, forecaster, count, context, samples, seed, as_json)
        return
    bars = cut_at(bars, period.end, MIN_BARS)
    end = len(bars) - 1
    batch = make_batch(bars.frame, [end], min(context, len(bars)), horizon, calendar=bars.calendar)
    result = forecaster.forecast(batch, horizon, samples, seed=seed)
    result = floor_paths(result, batch.last_close(), [bars.frame.index[end]], bars.symbol)
    steps = pd.DatetimeIndex(batch.future_timestamps[0]).tz_localize("UTC")
    daily = bool((steps.normalize() == steps).all())
    last_close = float(batch.last_close()[0])
    price = f",.{price_decimals(bars.frame['close'])}f"

    close_q = {q: result.quantile(q, "close")[0] for q in FAN}
    high_med, low_med = result.quantile(0.5, "high")[0], result.quantile(0.5, "low")[0]
    if plot is not None:
        _plot_fan(plot, bars.frame["close"].iloc[-min(len(bars), 120):], steps, close_q, bars.symbol, model)
        err_console.print(f"wrote {plot}")
    if as_json:
        print_json({
            "symbol": bars.symbol, "model": model, "asset_class": bars.asset_class,
            "last_bar": bars.frame.index[-1], "last_close": last_close, "samples": result.num_samples,
            "horizon": horizon, "seed": seed,
            "steps": [{"step": k + 1, "time": steps[k],
                       **{f"close_p{q * 100:g}": close_q[q][k] for q in FAN},
                       "high_p50": high_med[k], "low_p50": low_med[k],
                       "p50_change": close_q[0.5][k] / last_close - 1} for k in range(horizon)],
        })
        return
    table = Table(title=f"{bars.symbol} {model} forecast from {bars.frame.index[-1]:%Y-%m-%d} "
                        f"(close {last_close:{price}}, {result.num_samples} samples)")
    table.add_column("step", justify="right")
    table.add_column("time")
    for q in FAN:
        table.add_column(f"close P{q * 100:g}", justify="right")
    table.add_column("high P50", justify="right")
    table.add_column("low P50", justify="right")
    table.add_column("P50 vs last", justify="right")
    for k in range(horizon):
        change = close_q[0.5][k] / last_close - 1
        table.add_row(str(k + 1), f"{steps[k]:%Y-%m-%d}" if daily else f"{steps[k]:%Y-%m-%d %H:%M}",
                      *(f"{close_q[q][k]:{price}}" for q in FAN), f"{high_med[k]:{price}}", f"{low_med[k]:{price}}",
                      f"{change:+.2%}")
    console.print(table)


def _calibration(bars, forecaster, windows: int, context: int, samples: int, seed: int, as_json: bool) -> None:
    """Coverage and PIT of the last ``windows`` one-bar-ahead forecasts: the backtest's own windows and forecast
    path (:func:`marketcast.backtest.engine.run_many` with ``calibration_only``), each from bars <= t."""
    from marketcast.backtest.config import BacktestConfig
    from marketcast.backtest.engine import run_many
    from marketcast.backtest.report import calibration_only_json
    from marketcast.backtest.tables import calibration_table

    config = BacktestConfig(windows=windows, context=context, num_samples=samples, seed=seed, include_latest=False)
    (result,) = run_many([bars], forecaster, config, calibration_only=True)
    if as_json:
        print_json(calibration_only_json(result))
        return
    console.print(calibration_table([result]))


def _plot_fan(path: Path, history: pd.Series, steps: pd.DatetimeIndex, close_q: dict, symbol: str,
              model: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.plot(history.index, history.to_numpy(), color="black", lw=1.2, label="close")
    x = np.concatenate([[history.index[-1]], steps])
    join = lambda arr: np.concatenate([[history.iloc[-1]], arr])  # noqa: E731
    ax.fill_between(x, join(close_q[0.1]), join(close_q[0.9]), alpha=0.2, color="tab:blue", label="P10-P90")
    ax.fill_between(x, join(close_q[0.25]), join(close_q[0.75]), alpha=0.35, color="tab:blue", label="P25-P75")
    ax.plot(x, join(close_q[0.5]), color="tab:blue", lw=1.5, label="median")
    ax.set_title(f"{symbol}: {model} forecast")
    ax.legend(loc="upper left")
    fig.autofmt_xdate()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.png")
    try:
        fig.savefig(tmp, dpi=110)
        tmp.replace(path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
