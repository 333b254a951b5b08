"""``marketcast data check FILE`` (validate a bars file) and ``data fetch`` (bars from Alpaca, Yahoo or a crypto
exchange into files)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import numpy as np
import typer
from rich.table import Table

from marketcast.commands.options import AsJson, AssetClass, OnBadLine, OnDuplicate, PeriodsPerYear, Timezone
from marketcast.console import console, print_json
from marketcast.data.asset import asset_classes
from marketcast.data.validate import MAX_JUMP, MIN_BARS

app = typer.Typer(no_args_is_help=True)


def _jump(value: float) -> float:
    if not value > 1.0:
        raise typer.BadParameter(f"{value:g} is not above 1 (a factor between consecutive bars).")
    return value


@app.command("check")
def check(
    file: Annotated[Path, typer.Argument(help="CSV or Parquet export (yfinance, Alpaca, lowercase).")],
    symbol: Annotated[Optional[str], typer.Option(help="Symbol to pick from a multi-symbol file, e.g. SP500.")] = None,
    asset_class: AssetClass = None,
    periods_per_year: PeriodsPerYear = None,
    min_rows: Annotated[int, typer.Option(
        min=1, help=f"Fail with fewer bars than this (default {MIN_BARS}: a forecast reads at least two returns; "
                    "a backtest needs --windows + 2).")] = MIN_BARS,
    on_duplicate: OnDuplicate = "error",
    on_bad_line: OnBadLine = "error",
    timezone: Timezone = None,
    max_jump: Annotated[float, typer.Option(
        callback=_jump, help="Warn about a bar whose prices move more than this factor from the previous close "
                             "(a missing split adjustment, a unit change).")] = MAX_JUMP,
    as_json: AsJson = False,
) -> None:
    """Validate FILE; exit 2 with the row and column of the first problem."""
    from marketcast.data import load_bars
    from marketcast.data.ticks import price_decimals

    named = (symbol or file.stem).upper()  # the symbol a SYMBOL=CLASS override must name
    bars = load_bars(file, symbol=symbol, asset_class=asset_classes(asset_class, [named])[named], min_rows=min_rows,
                     on_duplicate=on_duplicate, periods_per_year=periods_per_year,
                     max_jump=max_jump, on_bad_line=on_bad_line, timezone=timezone,
                     need=f"--min-rows {min_rows}; a forecast reads at least {MIN_BARS} bars, two returns; "
                          "use a longer file")
    frame = bars.frame
    spacing = float(np.median(np.diff(frame.index.asi8))) / 1e9 if len(frame) > 1 else float("nan")
    close = frame["close"]
    if as_json:
        print_json({"file": file, "symbol": bars.symbol, "asset_class": bars.asset_class,
                    "periods_per_year": bars.periods_per_year, "why": bars.asset_reason, "rows": len(frame),
                    "first": frame.index[0], "last": frame.index[-1], "median_spacing_s": spacing,
                    "columns": list(frame.columns), "close_min": close.min(), "close_max": close.max()})
        return
    decimals = price_decimals(close)
    table = Table(title=f"{file}: OK", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("symbol", bars.symbol)
    table.add_row("asset class", f"{bars.asset_class} ({bars.periods_per_year} periods/year)")
    table.add_row("why", bars.asset_reason)
    table.add_row("rows", f"{len(frame):,}")
    table.add_row("first / last", f"{frame.index[0]} / {frame.index[-1]}")
    table.add_row("median spacing", "-" if spacing != spacing else
                  f"{spacing / 86400:.3g} days" if spacing >= 86400 else f"{spacing:.0f} s")
    table.add_row("columns", ", ".join(frame.columns))
    table.add_row("close min / max", f"{close.min():,.{decimals}f} / {close.max():,.{decimals}f}")
    console.print(table)


@app.command("fetch")
def fetch(
    symbols: List[str] = typer.Argument(..., help="Symbols as the source names them: AAPL, ^GSPC, EURUSD=X, BTC-USD "
                                                   "(yahoo); BTC/USDT (ccxt, written as BTC-USDT.csv); AAPL, BTCUSD "
                                                   "(alpaca)."),
    start: str = typer.Option(..., "--start", metavar="DATE", help="First day, e.g. 2020-01-01 (UTC)."),
    end: Optional[str] = typer.Option(None, "--end", metavar="DATE", help="Last day, included (default: now)."),
    timeframe: str = typer.Option("1Day", "--timeframe", help="1Day, 1Hour, 15Min, 1Min, 1Week, 1Month."),
    source: str = typer.Option("alpaca", "--source", help="alpaca (extra alpaca; keys from APCA_API_KEY_ID and "
                                                          "APCA_API_SECRET_KEY), yahoo (extra yahoo: pip install "
                                                          "'marketcast\\[yahoo]'; no keys) or ccxt:EXCHANGE, e.g. "
                                                          "ccxt:binance (extra crypto: pip install "
                                                          "'marketcast\\[crypto]'; public bars, no keys)."),
    adjustment: Optional[str] = typer.Option(None, "--adjustment", help="What the prices are adjusted for: all "
                                             "(splits and dividends, the default: total returns), split; alpaca "
                                             "also dividend, raw; ccxt: none."),
    out_dir: Path = typer.Option(Path("data"), "--out-dir", help="Folder for <SYMBOL>.csv (a --data-dir); an "
                                                                 "existing file gets only the bars after its last."),
    fmt: str = typer.Option("csv", "--format", help="csv or parquet."),
    asset_class: AssetClass = None,
    feed: Optional[str] = typer.Option(None, "--feed", help="Alpaca stock feed: iex or sip (default: your plan's)."),
    as_json: AsJson = False,
) -> None:
    """Download bars into OUT_DIR/<SYMBOL>.csv; nothing is written unless every symbol came back valid."""
    import pandas as pd

    from marketcast.data.sources import FetchRequest, download
    from marketcast.errors import ConfigError

    def day(text: str, flag: str):
        try:
            return pd.Timestamp(text).tz_localize(None).to_pydatetime()
        except (ValueError, TypeError):
            raise ConfigError(f"{flag} {text!r} is not a date; use YYYY-MM-DD") from None

    # --end names the last day wanted: the request ends (exclusive) at the midnight after it
    request = FetchRequest(symbols=symbols, start=day(start, "--start"),
                           end=day(end, "--end") + pd.Timedelta("1D") if end else None, timeframe=timeframe,
                           source=source, out_dir=out_dir, fmt=fmt, adjustment=adjustment,
                           asset_classes=asset_classes(asset_class, symbols), feed=feed)
    done = download(request)
    rows, new = sum(len(f.frame) for f in done), sum(f.new for f in done)
    if as_json:
        print_json({"source": done[0].meta["source"], "timeframe": timeframe, "format": fmt,
                    "adjustment": done[0].meta["adjustment"], "out_dir": str(out_dir), "rows": rows, "new": new,
                    "files": [{"symbol": f.symbol, "file": str(f.path), "rows": len(f.frame), "new": f.new,
                               "first": str(f.frame.index[0]), "last": str(f.frame.index[-1]),
                               "asset_class": f.asset_class, "adjustment": f.adjustment,
                               "missing_bars": f.missing, "repaired": f.repaired} for f in done]})
        return
    for f in done:
        console.print(f"{f.path}: {len(f.frame):,} bars ({f.new:,} new), {f.frame.index[0]:%Y-%m-%d %H:%M} .. "
                      f"{f.frame.index[-1]:%Y-%m-%d %H:%M} UTC, {f.asset_class}, adjusted for "
                      f"{ADJUSTED_SHORT[f.adjustment]}, {'-' if f.missing is None else f.missing} missing bars, "
                      f"{f.repaired} repaired rows", highlight=False, soft_wrap=True)
    console.print(f"wrote {len(done)} files ({new:,} new bars, {rows:,} in all) from {done[0].meta['source']} to "
                  f"{out_dir}/", highlight=False, soft_wrap=True)


ADJUSTED_SHORT = {"all": "splits and dividends", "split": "splits", "dividend": "dividends", "raw": "nothing",
                  "none": "nothing"}
