"""Read OHLCV bars from CSV or Parquet exports (yfinance, Alpaca, lowercase) into :class:`Bars`.

Column names are matched case-insensitively in any order; ``Adj Close`` and unknown extra columns are
ignored; an unnamed first column holding dates is taken as the index. Timestamps become UTC (naive ones
are read as UTC, or in ``--timezone``'s zone, see :mod:`marketcast.data.zones`; numbers are epoch times by
magnitude, see :mod:`marketcast.data.timestamps`). Every problem is one line naming the file, the row and the
column (:mod:`marketcast.data.validate`).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from marketcast.data.detect import resolve_asset_class
from marketcast.data.bars import PRICE_COLUMNS, Bars
from marketcast.data.read import HEAD_ROWS, SUFFIXES, TIME_NAMES, large_csv, read_table
from marketcast.data.timestamps import parse_timestamps
from marketcast.data.zones import check_timezone, localise, naive, warn_local_session
from marketcast.data.validate import MAX_JUMP, Source, cell, check_bars, first_true, warn_jumps
from marketcast.data.symbols import check_symbol
from marketcast.errors import ConfigError, DataError, DataWarning

ON_DUPLICATE = ("error", "first", "last")


def _normalise_columns(frame: pd.DataFrame, source: Source) -> pd.DataFrame:
    """Lower-case names, find the timestamp column, drop columns we do not use."""
    frame = frame.rename(columns={c: str(c).strip().lower().replace(" ", "_") for c in frame.columns})
    unnamed = [c for c in frame.columns if c.startswith("unnamed:") or c in ("", "index", "level_0")]
    time_col = next((c for c in TIME_NAMES if c in frame.columns), None)
    if time_col is None and unnamed:
        time_col = unnamed[0]
    if time_col is None and len(frame.columns) == 1 and source.kind == "csv":
        source.fail(None, None, f"line {source.first_line} holds a single column {str(frame.columns[0])[:60]!r}",
                    "separate the columns with ',' (or ';', tab or '|')")
    if time_col is None:
        source.fail(None, "timestamp", f"missing column (expected one of {', '.join(TIME_NAMES)})",
                    "export the bars with a Date or timestamp column")
    frame = frame.rename(columns={time_col: "timestamp"})
    for col in PRICE_COLUMNS:
        if col not in frame.columns:
            source.fail(None, col, "missing required column",
                        f"the file needs columns {', '.join(PRICE_COLUMNS)} (any case, any order)")
    keep = ["timestamp", *PRICE_COLUMNS] + [c for c in ("volume", "symbol") if c in frame.columns]
    if (twice := next((c for c in keep if (frame.columns == c).sum() > 1), None)) is not None:
        source.fail(None, twice, "two columns have this name", "keep one of them")
    return frame[keep]


def _parse_numbers(frame: pd.DataFrame, source: Source) -> pd.DataFrame:
    out = {}
    for col in [c for c in (*PRICE_COLUMNS, "volume") if c in frame.columns]:
        cells = frame[col]
        if pd.api.types.is_bool_dtype(cells.dtype):
            source.fail(0, col, "holds true/false, not numbers", "export the prices as numbers")
        if not pd.api.types.is_numeric_dtype(cells.dtype):
            cells = pd.to_numeric(cells.astype("string").str.strip(), errors="coerce")
        numbers = cells.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = np.isnan(numbers) & frame[col].notna().to_numpy()
        if (row := first_true(bad)) is not None:
            source.fail(row, col, f"{cell(frame[col].iloc[row])} is not a number", "fix or drop that row")
        out[col] = numbers
    return pd.DataFrame(out)


def _pick_symbol(frame: pd.DataFrame, source: Source, symbol: str | None) -> tuple[pd.DataFrame, Source, str | None]:
    """One symbol's rows of a file that has a ``symbol`` column (Alpaca)."""
    if "symbol" not in frame.columns:
        return frame, source, symbol
    names = frame["symbol"].astype("string")
    symbols = [str(x) for x in names.dropna().unique()]
    if len(symbols) > 1:
        if symbol is None or symbol not in symbols:
            wanted = "pass the one to load (--symbol)" if symbol is None else f"none is {symbol!r}"
            raise DataError(f"{source.path}: holds {len(symbols)} symbols ({', '.join(symbols[:5])}); {wanted}")
        mine = (names == symbol).fillna(False).to_numpy(dtype=bool)
        return frame[mine].reset_index(drop=True), source.keep(mine), symbol
    return frame, source, symbol if symbol is not None or not symbols else symbols[0]


def _columns_and_numbers(raw: pd.DataFrame, source: Source, symbol: str | None):
    """The symbol's rows, their source, the symbol and the parsed number columns; refuses what is not bars."""
    frame, source, symbol = _pick_symbol(_normalise_columns(raw, source), source, symbol)
    return frame, source, symbol, _parse_numbers(frame, source)


def _drop_duplicates(values: pd.DataFrame, source: Source, on_duplicate: str) -> tuple[pd.DataFrame, Source]:
    """Keep the first or last bar of each repeated timestamp (``error`` leaves them to :func:`check_bars`)."""
    if on_duplicate == "error":
        return values, source
    keep = ~values.index.duplicated(keep=on_duplicate)
    if keep.all():
        return values, source
    dropped = int((~keep).sum())
    warnings.warn(DataWarning(
        f"{source.path}: dropped {dropped} bar(s) whose timestamp repeats (kept the {on_duplicate}), the first at "
        f"{source.row(first_true(~keep))} ({values.index[~keep][0]})"), stacklevel=3)
    return values[keep], source.keep(keep)


def load_bars(
    source: str | Path,
    symbol: str | None = None,
    asset_class: str | None = None,
    min_rows: int | None = None,
    on_duplicate: str = "error",
    max_jump: float = MAX_JUMP,
    need: str | None = None,
    periods_per_year: float | None = None,
    on_bad_line: str = "error",
    timezone: str | None = None,
) -> Bars:
    """Load and validate one symbol's bars from a CSV/Parquet file.

    ``symbol`` defaults to the file's ``symbol`` column (Alpaca) or its stem; a file holding several
    symbols needs ``symbol`` to pick one. ``min_rows`` is the context the caller needs (``need`` says why).
    ``on_duplicate``: ``error`` (default), or keep the ``first``/``last`` bar of a repeated timestamp, with a
    warning. A bar moving more than ``max_jump`` times the previous close gives a warning naming it.
    ``asset_class`` overrides what the bar times and the name say (:mod:`marketcast.data.detect`);
    ``periods_per_year`` overrides the calendar's periods per year. ``on_bad_line``: a CSV line that cannot be
    split into the header's fields is an ``error`` (default), or ``skip`` drops such lines with one warning.
    ``timezone``: the IANA zone of naive times (default UTC; :mod:`marketcast.data.zones` warns when intraday
    stock bars look exchange-local).
    """
    check_timezone(timezone)
    if on_duplicate not in ON_DUPLICATE:
        raise ConfigError(f"--on-duplicate {on_duplicate!r}: choose one of {', '.join(ON_DUPLICATE)}")
    path = Path(source)
    if large_csv(path):  # garbage is refused from the first rows, before the whole file is held in memory
        _columns_and_numbers(*read_table(path, on_bad_line=on_bad_line, head=HEAD_ROWS), symbol)
    raw, src = read_table(path, on_bad_line=on_bad_line)
    frame, src, symbol, values = _columns_and_numbers(raw, src, symbol)
    symbol = symbol or path.stem.upper()
    values.index = parse_timestamps(frame["timestamp"], src)
    local = naive(frame["timestamp"])
    if local and timezone is not None:
        values.index = localise(values.index, timezone, str(path))
    values, src = _drop_duplicates(values, src, on_duplicate)
    check_bars(values, src, min_rows=min_rows, need=need)
    warn_jumps(values, src, max_jump)
    cls, why = resolve_asset_class(symbol, values.index, asset_class, where=str(path))
    if local and timezone is None:
        warn_local_session(values.index, cls, str(path))
    return Bars(symbol=symbol, frame=values, asset_class=cls, source=str(path), asset_reason=why,
                periods=periods_per_year)


def symbol_files(data_dir: str | Path) -> dict[str, Path]:
    """``SYMBOL -> file`` for every ``<SYMBOL>.csv``/``.parquet`` in ``data_dir`` (stems upper-cased; where
    a symbol has several files, the first in name order)."""
    folder = Path(data_dir)
    if folder.exists() and not folder.is_dir():
        raise DataError(f"{folder}: is a file, not a data directory; pass --data-dir a folder of <SYMBOL>.csv files")
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
    path = symbol_files(folder).get(check_symbol(symbol).upper())
    if path is None:
        raise DataError(f"{folder}: no {symbol}.csv or {symbol}.parquet; add the file or choose another symbol")
    return path
