"""``marketcast forecast SYMBOL``: the quantile fan of the next bars, optionally as a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
import typer
from rich.table import Table

from marketcast.console import console, err_console
from marketcast.errors import ConfigError

FAN = (0.1, 0.25, 0.5, 0.75, 0.9)


def forecast(
    symbol: str = typer.Argument(..., help="Symbol: SP500/NASDAQ embedded, or <SYMBOL>.csv in --data-dir."),
    horizon: int = typer.Option(8, "--horizon", "-H", min=1, help="Bars ahead to forecast."),
    samples: int = typer.Option(512, "--samples", "-n", min=1, help="Sample paths."),
    model: str = typer.Option("baseline", "--model", "-m", help="baseline | toto | kronos"),
    context: int = typer.Option(512, "--context", min=3, help="Bars of history the model sees."),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help="Folder with <SYMBOL>.csv/.parquet."),
    weights: Optional[str] = typer.Option(None, "--weights", help="Checkpoint folder, hub id, or 'random'."),
    device: str = typer.Option("cpu", "--device", help="cpu | cuda | cuda:N"),
    dtype: str = typer.Option("float32", "--dtype", help="float32 | bfloat16"),
    seed: int = typer.Option(0, "--seed", help="Sampling seed (same seed, same paths)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write the fan chart to this PNG."),
) -> None:
    """Forecast the next bars of SYMBOL and print the quantile fan."""
    from marketcast.data import load_symbol
    from marketcast.forecast import load_forecaster, make_batch

    if plot is not None and plot.suffix.lower() != ".png":
        raise ConfigError(f"--plot {plot}: the chart is written as PNG; give a path ending in .png")
    bars = load_symbol(symbol, data_dir=data_dir, min_rows=3)
    forecaster = load_forecaster(model, weights=weights, device=device, dtype=dtype, seed=seed)
    end = len(bars) - 1
    batch = make_batch(bars.frame, [end], min(context, len(bars)), horizon, calendar=bars.calendar)
    result = forecaster.forecast(batch, horizon, samples, seed=seed)
    steps = pd.DatetimeIndex(batch.future_timestamps[0]).tz_localize("UTC")
    daily = bool((steps.normalize() == steps).all())
    last_close = float(batch.last_close()[0])

    table = Table(title=f"{bars.symbol} {model} forecast from {bars.frame.index[-1]:%Y-%m-%d} "
                        f"(close {last_close:,.2f}, {result.num_samples} samples)")
    table.add_column("step", justify="right")
    table.add_column("time")
    for q in FAN:
        table.add_column(f"close P{q * 100:g}", justify="right")
    table.add_column("high P50", justify="right")
    table.add_column("low P50", justify="right")
    table.add_column("P50 vs last", justify="right")
    close_q = {q: result.quantile(q, "close")[0] for q in FAN}
    high_med, low_med = result.quantile(0.5, "high")[0], result.quantile(0.5, "low")[0]
    for k in range(horizon):
        change = close_q[0.5][k] / last_close - 1
        table.add_row(str(k + 1), f"{steps[k]:%Y-%m-%d}" if daily else f"{steps[k]:%Y-%m-%d %H:%M}", *(f"{close_q[q][k]:,.2f}" for q in FAN),
                      f"{high_med[k]:,.2f}", f"{low_med[k]:,.2f}", f"{change:+.2%}")
    console.print(table)
    if plot is not None:
        _plot_fan(plot, bars.frame["close"].iloc[-min(len(bars), 120):], steps, close_q, bars.symbol, model)
        err_console.print(f"wrote {plot}")


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
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
