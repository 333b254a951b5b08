"""``marketcast data check FILE``: validate a bars file and say what was found."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.table import Table

from marketcast.console import console

app = typer.Typer(no_args_is_help=True)


@app.command("check")
def check(
    file: Path = typer.Argument(..., help="CSV or Parquet export (yfinance, Alpaca, lowercase)."),
    symbol: Optional[str] = typer.Option(None, "--symbol", help="Symbol to pick from a multi-symbol file."),
    asset_class: Optional[str] = typer.Option(None, "--asset-class", help="stock | crypto (default: inferred)."),
    min_rows: Optional[int] = typer.Option(None, "--min-rows", help="Fail if fewer rows than this."),
) -> None:
    """Validate FILE; exit 2 with the row and column of the first problem."""
    from marketcast.data import load_bars

    bars = load_bars(file, symbol=symbol, asset_class=asset_class, min_rows=min_rows)
    frame = bars.frame
    spacing = np.median(np.diff(frame.index.asi8)) / 1e9 if len(frame) > 1 else float("nan")
    table = Table(title=f"{file}: OK", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("symbol", bars.symbol)
    table.add_row("asset class", f"{bars.asset_class} ({bars.periods_per_year} periods/year)")
    table.add_row("rows", f"{len(frame):,}")
    table.add_row("first / last", f"{frame.index[0]} / {frame.index[-1]}")
    table.add_row("median spacing", f"{spacing / 86400:.3g} days" if spacing >= 86400 else f"{spacing:.0f} s")
    table.add_row("columns", ", ".join(frame.columns))
    table.add_row("close min / max", f"{frame['close'].min():,.4f} / {frame['close'].max():,.4f}")
    console.print(table)
