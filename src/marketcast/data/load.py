"""Read OHLCV bars from CSV or Parquet exports (yfinance, Alpaca, lowercase) into :class:`Bars`.

Column names are matched case-insensitively in any order; ``Adj Close`` and unknown extra columns are
ignored; an unnamed first column holding dates is taken as the index. Timestamps become UTC (naive ones
are read as UTC). Every problem is reported by :mod:`marketcast.data.validate` with file, row and column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from marketcast.data.asset import infer_asset_class
from marketcast.data.bars import PRICE_COLUMNS, Bars
from marketcast.data.validate import check_bars, fail
from marketcast.errors import DataError

SUFFIXES = (".csv", ".parquet", ".pq")
_TIME_NAMES = ("timestamp", "date", "datetime", "time")


def _read_table(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise DataError(f"{path}: no such file; pass a CSV or Parquet file of OHLCV bars")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            return pd.read_csv(path)
        if suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
            # a named index (yfinance's Date, alpaca-py's (symbol, timestamp) MultiIndex) holds columns we need
            if isinstance(frame.index, pd.DatetimeIndex) or any(name is not None for name in frame.index.names):
                frame = frame.reset_index()
            return frame
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise DataError(f"{path}: cannot be read as {suffix[1:]}: {str(exc).splitlines()[0]}") from None
    raise DataError(f"{path}: unsupported file type {suffix!r}; use one of {', '.join(SUFFIXES)}")


def _normalise_columns(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Lower-case names, find the timestamp column, drop columns we do not use."""
    renamed = {c: str(c).strip().lower().replace(" ", "_") for c in frame.columns}
    frame = frame.rename(columns=renamed)
    unnamed = [c for c in frame.columns if c.startswith("unnamed:") or c in ("", "index")]
    time_col = next((c for c in _TIME_NAMES if c in frame.columns), None)
    if time_col is None and unnamed:
        time_col = unnamed[0]
    if time_col is None:
        fail(path, None, "timestamp", f"missing column (expected one of {', '.join(_TIME_NAMES)})",
             "export the bars with a Date or timestamp column")
    frame = frame.rename(columns={time_col: "timestamp"})
    for col in PRICE_COLUMNS:
        if col not in frame.columns:
            fail(path, None, col, "missing required column",
                 f"the file needs columns {', '.join(PRICE_COLUMNS)} (any case, any order)")
    keep = ["timestamp", *PRICE_COLUMNS] + [c for c in ("volume", "symbol") if c in frame.columns]
    return frame[keep]


def _parse_timestamps(values: pd.Series, path: Path) -> pd.DatetimeIndex:
    parsed = pd.to_datetime(values, errors="coerce", utc=True, format="mixed")
    bad = parsed.isna().to_numpy()
    if bad.any():
        row = int(np.argmax(bad))
        fail(path, row, "timestamp", f"cannot parse {values.iloc[row]!r} as a date/time",
             "use ISO 8601 such as 2024-01-31 or 2024-01-31T14:30:00Z")
    return pd.DatetimeIndex(parsed, name="timestamp")


def _parse_numbers(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    out = {}
    for col in [c for c in (*PRICE_COLUMNS, "volume") if c in frame.columns]:
        numbers = pd.to_numeric(frame[col], errors="coerce")
        bad = numbers.isna().to_numpy() & frame[col].notna().to_numpy()
        if bad.any():
            row = int(np.argmax(bad))
            fail(path, row, col, f"{frame[col].iloc[row]!r} is not a number", "fix or drop that row")
        out[col] = numbers.to_numpy(dtype=np.float64)
    return pd.DataFrame(out)


def load_bars(
    source: str | Path,
    symbol: str | None = None,
    asset_class: str | None = None,
    min_rows: int | None = None,
) -> Bars:
    """Load and validate one symbol's bars from a CSV/Parquet file.

    ``symbol`` defaults to the file's ``symbol`` column (Alpaca) or its stem; a file holding several
    symbols needs ``symbol`` to pick one. ``min_rows`` is the context the caller needs.
    """
    path = Path(source)
    frame = _normalise_columns(_read_table(path), path)
    if "symbol" in frame.columns:
        symbols = [str(x) for x in frame["symbol"].dropna().astype(str).unique()]
        if len(symbols) > 1:
            if symbol is None or symbol not in symbols:
                wanted = "pass the one to load" if symbol is None else f"none is {symbol!r}"
                raise DataError(f"{path}: holds {len(symbols)} symbols ({', '.join(symbols[:5])}); {wanted}")
            frame = frame[frame["symbol"].astype(str) == symbol].reset_index(drop=True)
        elif symbol is None and symbols:
            symbol = symbols[0]
    symbol = symbol or path.stem.upper()
    index = _parse_timestamps(frame["timestamp"], path)
    values = _parse_numbers(frame, path)
    values.index = index
    check_bars(values, path, min_rows=min_rows)
    return Bars(symbol=symbol, frame=values, asset_class=infer_asset_class(symbol, asset_class), source=str(path))


def symbol_files(data_dir: str | Path) -> dict[str, Path]:
    """``SYMBOL -> file`` for every ``<SYMBOL>.csv``/``.parquet`` in ``data_dir`` (stems upper-cased; where
    a symbol has several files, the first in name order)."""
    folder = Path(data_dir)
    if not folder.is_dir():
        raise DataError(f"{folder}: data directory does not exist; pass --data-dir with <SYMBOL>.csv files")
    found: dict[str, Path] = {}
    for candidate in sorted(folder.iterdir()):
        if candidate.suffix.lower() in SUFFIXES and not candidate.name.startswith("."):
            found.setdefault(candidate.stem.upper(), candidate)
    return found


def find_symbol_file(data_dir: str | Path, symbol: str) -> Path:
    """``DIR/<SYMBOL>.csv`` or ``.parquet`` (case-insensitive stem)."""
    folder = Path(data_dir)
    path = symbol_files(folder).get(symbol.upper())
    if path is None:
        raise DataError(f"{folder}: no {symbol}.csv or {symbol}.parquet; add the file or choose another symbol")
    return path
