"""``marketcast forecast SYMBOL``: the quantile fan of the next bars, optionally as a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import pandas as pd
import typer

from marketcast.backtest.next_bars import calibrate, fan_table, next_bars
from marketcast.backtest.prepare import DataOptions
from marketcast.backtest.report import calibration_only_json
from marketcast.backtest.tables import calibration_table
from marketcast.commands import options
from marketcast.console import console, err_console, print_json
from marketcast.data.validate import MIN_BARS
from marketcast.errors import ConfigError
from marketcast.fileio import check_writable
from marketcast.forecast.exposure import exposure_lines

CALIBRATION_WINDOWS = 250


def _plot_path(plot: Optional[Path]) -> Optional[Path]:
    """``--plot``, checked as the command line is parsed: a .png path that can be written (exit 3 otherwise)."""
    if plot is not None and plot.suffix.lower() != ".png":
        raise ConfigError(f"--plot {plot}: the chart is written as PNG; give a path ending in .png")
    if plot is not None:
        check_writable(plot, "--plot", folder=False)
    return plot


def forecast(
    symbol: Annotated[str, typer.Argument(help="Symbol: SP500/NASDAQ embedded, or <SYMBOL>.csv in --data-dir.")],
    horizon: options.Horizon = 8,
    samples: options.Samples = 512,
    model: options.Model = "baseline",
    context: options.Context = 512,
    min_context: options.MinContext = None,
    data_dir: options.DataDir = None,
    weights: options.Weights = None,
    require_clean: options.RequireClean = False,
    device: options.Device = "cpu",
    dtype: options.Dtype = "float32",
    seed: options.Seed = 0,
    on_duplicate: options.OnDuplicate = "error",
    on_bad_line: options.OnBadLine = "error", timezone: options.Timezone = None,
    asset_class: options.AssetClass = None,
    periods_per_year: options.PeriodsPerYear = None,
    plot: Annotated[Optional[Path], typer.Option(
        callback=_plot_path, help="Also write the fan chart to this PNG file, e.g. fan.png.")] = None,
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
    from marketcast.backtest.period import Period

    if (windows is not None or min_context is not None) and not calibration:
        raise ConfigError("--windows and --min-context pick the windows --calibration scores; add --calibration")
    if start is not None and not calibration:
        raise ConfigError("--start picks the windows --calibration scores; add --calibration, or use --end alone "
                          "to forecast from an earlier bar")
    period = Period.of(windows, start, end, default=CALIBRATION_WINDOWS)
    if calibration and plot is not None:
        raise ConfigError("--calibration prints coverage, not a fan; drop --plot")
    data = DataOptions(data_dir, asset_class, on_duplicate, on_bad_line, periods_per_year, MIN_BARS, timezone)
    model_options = {"name": model, "weights": weights, "device": device, "dtype": dtype, "seed": seed}
    if calibration:
        result = calibrate(symbol, data, model_options, period, context, samples, min_context, require_clean)
        print_json(calibration_only_json(result)) if as_json else console.print(calibration_table([result]))
        _print_exposure(result.symbol, result.forecast_meta, result.windows, as_json)
        return
    fan = next_bars(symbol, data, model_options, period.end, context, horizon, samples, require_clean)
    _show_fan(fan, model, seed, plot, as_json)


def _show_fan(fan, model: str, seed: int, plot: Optional[Path], as_json: bool) -> None:
    """The fan as a table (or --json), its chart with --plot, and what the weights may have seen of its bar."""
    if fan.compile is not None:
        err_console.print(fan.compile.line(), markup=False, highlight=False)
    if plot is not None:
        _plot_fan(plot, fan.history, fan.steps, fan.close_q, fan.symbol, model, exposure_lines(fan.exposure, 1))
        err_console.print(f"wrote {plot}")
    print_json(fan.json(model, seed)) if as_json else console.print(fan_table(fan, model))
    _print_exposure(fan.symbol, fan.exposure, 1, as_json)


def _print_exposure(symbol: str, meta: dict, windows: int, as_json: bool) -> None:
    """What the weights may have seen (:func:`~marketcast.forecast.exposure.exposure_lines`), one line each under
    the table (on stderr beside --json, whose document carries the same keys)."""
    for line in exposure_lines(meta, windows):
        (err_console if as_json else console).print(f"{symbol}: {line}", highlight=False, markup=False,
                                                    soft_wrap=True)


def _plot_fan(path: Path, history: pd.Series, steps: pd.DatetimeIndex, close_q: dict, symbol: str,
              model: str, notes: list[str]) -> None:
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
    ax.set_title("\n".join([f"{symbol}: {model} forecast", *notes]), **({"fontsize": 8} if notes else {}))
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
