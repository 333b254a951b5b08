"""Bar validation: the first problem found becomes one clear :class:`DataError` line."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import numpy as np
import pandas as pd

from marketcast.data.bars import PRICE_COLUMNS
from marketcast.errors import DataError

# Relative slack for high/low consistency: exports round each column separately.
_SLACK = 1e-9


def fail(path: Path | str, row: int | None, column: str, problem: str, fix: str) -> NoReturn:
    """Raise the one-line error: ``FILE: row N (line L), column 'C': problem; fix``.

    ``row`` is the 0-based data row; the CSV line adds one for the header.
    """
    where = f"row {row + 1} (line {row + 2}), " if row is not None else ""
    raise DataError(f"{path}: {where}column '{column}': {problem}; {fix}")


def _first(mask: np.ndarray) -> int | None:
    return int(np.argmax(mask)) if mask.any() else None


def check_bars(frame: pd.DataFrame, path: Path | str, min_rows: int | None = None) -> None:
    """Validate a normalised frame (UTC index, float64 OHLC[V]); raise on the first problem."""
    stamps = frame.index.asi8
    if (row := _first(np.diff(stamps) == 0)) is not None:
        fail(path, row + 1, "timestamp", f"duplicate timestamp {frame.index[row + 1]}", "drop the repeated bar")
    if (row := _first(np.diff(stamps) < 0)) is not None:
        fail(path, row + 1, "timestamp", f"{frame.index[row + 1]} is earlier than the row before",
             "sort the file by time")
    for col in [c for c in (*PRICE_COLUMNS, "volume") if c in frame.columns]:
        values = frame[col].to_numpy()
        if (row := _first(~np.isfinite(values))) is not None:
            fail(path, row, col, f"value is {values[row]} (NaN or infinite)", "fill or drop that row")
    for col in PRICE_COLUMNS:
        values = frame[col].to_numpy()
        if (row := _first(values <= 0)) is not None:
            fail(path, row, col, f"price {values[row]:g} is not positive", "fix or drop that row")
    o, h, lo, c = (frame[col].to_numpy() for col in PRICE_COLUMNS)
    if (row := _first(h < np.maximum(o, c) * (1 - _SLACK))) is not None:
        fail(path, row, "high", f"high {h[row]:g} is below max(open, close) = {max(o[row], c[row]):g}",
             "the high must be the bar's largest price")
    if (row := _first(lo > np.minimum(o, c) * (1 + _SLACK))) is not None:
        fail(path, row, "low", f"low {lo[row]:g} is above min(open, close) = {min(o[row], c[row]):g}",
             "the low must be the bar's smallest price")
    if "volume" in frame.columns and (row := _first(frame["volume"].to_numpy() < 0)) is not None:
        fail(path, row, "volume", "volume is negative", "fix or drop that row")
    if min_rows is not None and len(frame) < min_rows:
        raise DataError(
            f"{path}: has {len(frame)} rows but {min_rows} are needed (context + decision windows); "
            "use a longer file or a smaller --context/--windows"
        )
