"""``marketcast data check FILE``: validate a bars file and say what was found."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import typer
from rich.table import Table

from marketcast.console import console
from marketcast.data.validate import MAX_JUMP, MIN_BARS
from marketcast.options import AssetClass, OnDuplicate

app = typer.Typer(no_args_is_help=True)


def _jump(value: float) -> float:
    if not value > 1.0:
        raise typer.BadParameter(f"{value:g} is not above 1 (a factor between consecutive bars).")
    return value


@app.command("check")
def check(
    file: Annotated[Path, typer.Argument(help="CSV or Parquet export (yfinance, Alpaca, lowercase).")],
    symbol: Annotated[Optional[str], typer.Option(help="Symbol to pick from a multi-symbol file.")] = None,
    asset_class: AssetClass = None,
    min_rows: Annotated[int, typer.Option(
        min=1, help=f"Fail with fewer bars than this (default {MIN_BARS}: a forecast reads at least two returns; "
                    "a backtest needs --windows + 2).")] = MIN_BARS,
    on_duplicate: OnDuplicate = "error",
    max_jump: Annotated[float, typer.Option(
        callback=_jump, help="Warn about a bar whose prices move more than this factor from the previous close "
                             "(a missing split adjustment, a unit change).")] = MAX_JUMP,
) -> None:
    """Validate FILE; exit 2 with the row and column of the first problem."""
    from marketcast.data import load_bars
    from marketcast.data.ticks import price_decimals

    bars = load_bars(file, symbol=symbol, asset_class=asset_class, min_rows=min_rows, on_duplicate=on_duplicate,
                     max_jump=max_jump,
                     need=f"--min-rows {min_rows}; a forecast reads at least {MIN_BARS} bars, two returns; "
                          "use a longer file")
    frame = bars.frame
    spacing = float(np.median(np.diff(frame.index.asi8))) / 1e9 if len(frame) > 1 else float("nan")
    close = frame["close"]
    decimals = price_decimals(close)
    table = Table(title=f"{file}: OK", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("symbol", bars.symbol)
    table.add_row("asset class", f"{bars.asset_class} ({bars.periods_per_year} periods/year)")
    table.add_row("rows", f"{len(frame):,}")
    table.add_row("first / last", f"{frame.index[0]} / {frame.index[-1]}")
    table.add_row("median spacing", "-" if spacing != spacing else
                  f"{spacing / 86400:.3g} days" if spacing >= 86400 else f"{spacing:.0f} s")
    table.add_row("columns", ", ".join(frame.columns))
    table.add_row("close min / max", f"{close.min():,.{decimals}f} / {close.max():,.{decimals}f}")
    console.print(table)
