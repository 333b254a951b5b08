"""The embedded default: real daily S&P 500 and NASDAQ bars (1999-2018) shipped in the ``arch`` package.

They let ``make run`` work offline on real market data. ``--data-dir`` replaces them with user files.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

import pandas as pd

from marketcast.data.asset import infer_asset_class
from marketcast.data.bars import Bars
from marketcast.data.load import find_symbol_file, load_bars
from marketcast.data.validate import check_bars, check_rows
from marketcast.errors import DataError

EMBEDDED = {"SP500": "arch.data.sp500", "NASDAQ": "arch.data.nasdaq"}
DEFAULT_SYMBOLS = tuple(EMBEDDED)


def load_embedded(symbol: str, asset_class: str | None = None) -> Bars:
    """Embedded bars for ``SP500`` or ``NASDAQ`` (5,031 daily rows each); ``asset_class`` overrides "stock"."""
    key = symbol.upper()
    if key not in EMBEDDED:
        raise DataError(
            f"no embedded data for {symbol!r}; embedded symbols are {', '.join(EMBEDDED)} "
            "(use --data-dir DIR with <SYMBOL>.csv for others)"
        )
    raw = import_module(EMBEDDED[key]).load()
    frame = raw.rename(columns=str.lower)[["open", "high", "low", "close", "volume"]].astype("float64")
    frame.index = pd.DatetimeIndex(raw.index, name="timestamp").tz_localize("UTC")
    source = f"arch:{EMBEDDED[key]}"
    check_bars(frame, source)
    return Bars(symbol=key, frame=frame, asset_class=infer_asset_class(key, asset_class), source=source)


def load_symbol(
    symbol: str,
    data_dir: str | Path | None = None,
    asset_class: str | None = None,
    min_rows: int | None = None,
    on_duplicate: str = "error",
) -> Bars:
    """``symbol`` from ``data_dir`` when given, else from the embedded dataset (which has no duplicates)."""
    if data_dir is None:
        bars = load_embedded(symbol, asset_class)
        check_rows(len(bars), bars.source, min_rows)
        return bars
    return load_bars(find_symbol_file(data_dir, symbol), symbol=symbol.upper(), asset_class=asset_class,
                     min_rows=min_rows, on_duplicate=on_duplicate)
