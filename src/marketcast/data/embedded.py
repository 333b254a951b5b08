"""The embedded default: real daily S&P 500 and NASDAQ bars (1999-2018) shipped in the ``arch`` package.

They let ``make run`` work offline on real market data. ``--data-dir`` replaces them with user files. The
files are read where ``arch`` installed them, without importing ``arch`` (its import pulls in scipy and
statsmodels, about a second, for two 5,031-row CSV files).
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import pandas as pd

from marketcast.data.detect import resolve_asset_class
from marketcast.data.bars import Bars
from marketcast.data.load import find_symbol_file, load_bars
from marketcast.data.validate import check_bars, check_rows
from marketcast.errors import DataError

EMBEDDED = {"SP500": "arch.data.sp500", "NASDAQ": "arch.data.nasdaq"}
DEFAULT_SYMBOLS = tuple(EMBEDDED)


def _read_arch_csv(module: str) -> pd.DataFrame:
    """What ``arch.data.<name>.load()`` returns (dates parsed, numbers as floats), read from its package folder."""
    spec = find_spec("arch")  # a top-level spec: arch is located, not imported
    if spec is None or not spec.submodule_search_locations:
        raise DataError("the embedded SP500/NASDAQ bars ship with the arch package, which is not installed; "
                        "install marketcast's dependencies or use --data-dir DIR")
    name = module.rsplit(".", 1)[1]
    path = Path(spec.submodule_search_locations[0], "data", name, f"{name}.csv.gz")
    raw = pd.read_csv(path, index_col="Date")
    raw.index = pd.to_datetime(raw.index, format="%m/%d/%Y")
    return raw


def load_embedded(symbol: str, asset_class: str | None = None, periods_per_year: float | None = None) -> Bars:
    """Embedded bars for ``SP500`` or ``NASDAQ`` (5,031 daily rows each); ``asset_class`` overrides "stock"."""
    key = symbol.upper()
    if key not in EMBEDDED:
        raise DataError(
            f"no embedded data for {symbol!r}; embedded symbols are {', '.join(EMBEDDED)} "
            "(use --data-dir DIR with <SYMBOL>.csv for others)"
        )
    raw = _read_arch_csv(EMBEDDED[key])
    frame = raw.rename(columns=str.lower)[["open", "high", "low", "close", "volume"]].astype("float64")
    frame.index = pd.DatetimeIndex(raw.index, name="timestamp").tz_localize("UTC")
    source = f"arch:{EMBEDDED[key]}"
    check_bars(frame, source)
    cls, why = resolve_asset_class(key, frame.index, asset_class, where=source)
    return Bars(symbol=key, frame=frame, asset_class=cls, source=source, asset_reason=why, periods=periods_per_year)


def load_symbol(
    symbol: str,
    data_dir: str | Path | None = None,
    asset_class: str | None = None,
    min_rows: int | None = None,
    on_duplicate: str = "error",
    periods_per_year: float | None = None,
    on_bad_line: str = "error",
    timezone: str | None = None,
) -> Bars:
    """``symbol`` from ``data_dir`` when given, else from the embedded dataset (which has no duplicates and no
    malformed lines)."""
    if data_dir is None:
        bars = load_embedded(symbol, asset_class, periods_per_year)
        check_rows(len(bars), bars.source, min_rows)
        return bars
    return load_bars(find_symbol_file(data_dir, symbol), symbol=symbol.upper(), asset_class=asset_class,
                     min_rows=min_rows, on_duplicate=on_duplicate, periods_per_year=periods_per_year,
                     on_bad_line=on_bad_line, timezone=timezone)
