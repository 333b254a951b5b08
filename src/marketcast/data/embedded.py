"""The embedded default: real daily S&P 500 and NASDAQ bars (1999-2018) shipped in the ``arch`` package.

They let ``make run`` work offline on real market data. ``--data-dir`` replaces them with user files. The
files are read where ``arch`` installed them, without importing ``arch`` (its import pulls in scipy and
statsmodels, about a second, for two 5,031-row CSV files). The bars parsed from a file are kept in
:mod:`marketcast.data.cache`, keyed by that file: parsing its dates and numbers took a default backtest about
0.03 s a symbol, reading them back 1 ms.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pandas as pd

from marketcast.data.cache import cached_arrays, fingerprint
from marketcast.data.detect import resolve_asset_class
from marketcast.data.bars import Bars
from marketcast.data.load import find_symbol_file, load_bars
from marketcast.data.validate import check_bars, check_rows
from marketcast.errors import DataError

EMBEDDED = {"SP500": "arch.data.sp500", "NASDAQ": "arch.data.nasdaq"}
DEFAULT_SYMBOLS = tuple(EMBEDDED)


COLUMNS = ("open", "high", "low", "close", "volume")


def _arch_csv_path(module: str) -> Path:
    spec = find_spec("arch")  # a top-level spec: arch is located, not imported
    if spec is None or not spec.submodule_search_locations:
        raise DataError("the embedded SP500/NASDAQ bars ship with the arch package, which is not installed; "
                        "install marketcast's dependencies or use --data-dir DIR")
    name = module.rsplit(".", 1)[1]
    return Path(spec.submodule_search_locations[0], "data", name, f"{name}.csv.gz")


def _read_arch_csv(module: str) -> pd.DataFrame:
    """What ``arch.data.<name>.load()`` returns (dates parsed, numbers as floats), read from its package folder."""
    raw = pd.read_csv(_arch_csv_path(module), index_col="Date")
    raw.index = pd.to_datetime(raw.index, format="%m/%d/%Y")
    return raw


def _parsed(module: str) -> dict[str, np.ndarray]:
    """The bars of ``module``'s file as arrays: ``time`` (int64 ns, UTC midnight) and :data:`COLUMNS` (float64)."""
    raw = _read_arch_csv(module)
    frame = raw.rename(columns=str.lower)[list(COLUMNS)].astype("float64")
    return {"time": pd.DatetimeIndex(raw.index).as_unit("ns").asi8, **{c: frame[c].to_numpy() for c in COLUMNS}}


def _arch_frame(module: str) -> pd.DataFrame:
    """``module``'s bars as the ``timestamp``-indexed (UTC) float64 frame of :data:`COLUMNS`, parsed once per
    machine (the cache is keyed by the file's size and time)."""
    path = _arch_csv_path(module)
    family = f"embedded-{module.rsplit('.', 1)[1]}"
    arrays = cached_arrays(f"{family}-{fingerprint(path)}", lambda: _parsed(module), family)
    index = pd.DatetimeIndex(arrays["time"].view("datetime64[ns]"), name="timestamp").tz_localize("UTC")
    return pd.DataFrame({c: arrays[c] for c in COLUMNS}, index=index)


def load_embedded(symbol: str, asset_class: str | None = None, periods_per_year: float | None = None) -> Bars:
    """Embedded bars for ``SP500`` or ``NASDAQ`` (5,031 daily rows each); ``asset_class`` overrides "stock"."""
    key = symbol.upper()
    if key not in EMBEDDED:
        raise DataError(
            f"no embedded data for {symbol!r}; embedded symbols are {', '.join(EMBEDDED)} "
            "(use --data-dir DIR with <SYMBOL>.csv for others)"
        )
    frame = _arch_frame(EMBEDDED[key])
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
