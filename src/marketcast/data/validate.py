"""Bar validation: the first problem found becomes one clear :class:`DataError` line naming the row the way
the user finds it (a CSV's line, a Parquet file's row group); implausible but usable bars give a warning."""

from __future__ import annotations

import warnings
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import numpy as np
import pandas as pd

from marketcast.data.bars import PRICE_COLUMNS
from marketcast.errors import DataError, DataWarning

# Relative slack for high/low consistency: exports round each column separately.
_SLACK = 1e-9
# Magnitudes the models can use: they run in float32 and square deviations (scalers, variances), so values
# beyond these overflow or vanish (float32 reaches 3.4e38; its normal numbers start at 1.2e-38).
PRICE_RANGE = (1e-12, 1e15)
MAX_VOLUME = 1e18
# The fewest bars a forecast can use: every model reads at least two returns.
MIN_BARS = 3
# A bar whose prices move more than this factor from the previous close is flagged (a missing split
# adjustment, a unit change, a typo); ``--max-jump`` changes it.
MAX_JUMP = 5.0


@dataclass(frozen=True)
class Source:
    """Where bars came from, and how to name one of their rows in a message.

    ``kind`` is "csv" (rows are named with their line; the header is on ``first_line``), "parquet" (with
    their row group, 0-based as pyarrow's ``read_row_group`` counts) or "" (in memory). ``origin`` maps each
    row of the frame to its row in the file when rows were dropped (blank lines, another symbol's, duplicates).
    """

    path: str
    kind: str = ""
    group_starts: tuple[int, ...] = ()
    origin: np.ndarray | None = None
    first_line: int = 1

    def row(self, i: int) -> str:
        """``row N (line L)``, ``row N (row group G)`` or ``row N`` for frame row ``i`` (0-based)."""
        r = int(self.origin[i]) if self.origin is not None else int(i)
        if self.kind == "csv":
            return f"row {r + 1} (line {r + self.first_line + 1})"
        if self.kind == "parquet" and self.group_starts:
            return f"row {r + 1} (row group {bisect_right(self.group_starts, r) - 1})"
        return f"row {r + 1}"

    def fail(self, i: int | None, column: str | None, problem: str, fix: str) -> NoReturn:
        """Raise the one-line error: ``FILE: row N (line L), column 'C': problem; fix``."""
        where = "".join([f"{self.row(i)}, " if i is not None else "", f"column '{column}': " if column else ""])
        raise DataError(f"{self.path}: {where}{problem}; {fix}")

    def keep(self, mask: np.ndarray) -> "Source":
        """The same source after keeping only the frame rows where ``mask`` is true."""
        origin = np.arange(len(mask)) if self.origin is None else self.origin
        return Source(self.path, self.kind, self.group_starts, origin[np.asarray(mask, dtype=bool)], self.first_line)


def as_source(source: Source | str | Path) -> Source:
    return source if isinstance(source, Source) else Source(str(source))


def cell(value) -> str:
    """A file's cell as a message shows it: text quoted (so '' and ' ' are visible), numbers plain."""
    return repr(value) if isinstance(value, str) else str(value)


def first_true(mask) -> int | None:
    """Position of the first true value of a boolean array, None when there is none."""
    mask = np.asarray(mask, dtype=bool)
    return int(np.argmax(mask)) if mask.any() else None


def check_bars(frame: pd.DataFrame, source: Source | str | Path, min_rows: int | None = None,
               need: str | None = None) -> None:
    """Validate a normalised frame (UTC index, float64 OHLC[V]); raise on the first problem.

    ``need`` says why ``min_rows`` rows are needed and how to get them.
    """
    src = as_source(source)
    if len(frame) == 0:
        raise DataError(f"{src.path}: holds no bars (a header and no rows); export the bars again")
    stamps = frame.index.asi8
    if (row := first_true(np.diff(stamps) == 0)) is not None:
        src.fail(row + 1, "timestamp", f"duplicate timestamp {frame.index[row + 1]} (as the row before)",
                 "drop the repeated bar, or pass --on-duplicate first|last to keep one of them")
    if (row := first_true(np.diff(stamps) < 0)) is not None:
        src.fail(row + 1, "timestamp", f"{frame.index[row + 1]} is earlier than the row before",
                 "sort the file by time")
    for col in [c for c in (*PRICE_COLUMNS, "volume") if c in frame.columns]:
        values = frame[col].to_numpy()
        if (row := first_true(~np.isfinite(values))) is not None:
            src.fail(row, col, f"value is {values[row]} (NaN or infinite)", "fill or drop that row")
    low, high = PRICE_RANGE
    for col in PRICE_COLUMNS:
        values = frame[col].to_numpy()
        if (row := first_true(values <= 0)) is not None:
            src.fail(row, col, f"price {values[row]:g} is not positive", "fix or drop that row")
        if (row := first_true((values < low) | (values > high))) is not None:
            src.fail(row, col, f"price {values[row]:g} is outside {low:g} .. {high:g}, the range the float32 "
                     "models can compute with", "check the units of the file, or fix or drop that row")
    o, h, lo, c = (frame[col].to_numpy() for col in PRICE_COLUMNS)
    if (row := first_true(h < np.maximum(o, c) * (1 - _SLACK))) is not None:
        src.fail(row, "high", f"high {h[row]:g} is below max(open, close) = {max(o[row], c[row]):g}",
                 "the high must be the bar's largest price")
    if (row := first_true(lo > np.minimum(o, c) * (1 + _SLACK))) is not None:
        src.fail(row, "low", f"low {lo[row]:g} is above min(open, close) = {min(o[row], c[row]):g}",
                 "the low must be the bar's smallest price")
    if "volume" in frame.columns:
        volume = frame["volume"].to_numpy()
        if (row := first_true(volume < 0)) is not None:
            src.fail(row, "volume", "volume is negative", "fix or drop that row")
        if (row := first_true(volume > MAX_VOLUME)) is not None:
            src.fail(row, "volume", f"volume {volume[row]:g} is above {MAX_VOLUME:g}, more than the float32 "
                     "models can compute with", "check the units of the file, or fix or drop that row")
    check_rows(len(frame), src, min_rows, need)


def check_rows(rows: int, source: Source | str | Path, min_rows: int | None, need: str | None = None) -> None:
    """At least ``min_rows`` bars; ``need`` says why and how to get them."""
    if min_rows is not None and rows < min_rows:
        need = need or "the context and decision windows need them; use a longer file or a smaller --context/--windows"
        raise DataError(f"{as_source(source).path}: has {rows} rows but {min_rows} are needed ({need})")


def jump_warning(frame: pd.DataFrame, source: Source | str | Path, max_jump: float = MAX_JUMP) -> str | None:
    """The first bar whose open, high, low or close is more than ``max_jump`` times (or less than
    1/``max_jump`` of) the previous close, as one line; None when every move is plausible."""
    if len(frame) < 2:
        return None
    src = as_source(source)
    prev = frame["close"].to_numpy()[:-1]
    ratios = np.stack([frame[c].to_numpy()[1:] / prev for c in PRICE_COLUMNS], axis=1)
    factor = np.maximum(ratios, 1.0 / ratios)
    jumps = (factor > max_jump).any(axis=1)
    if (row := first_true(jumps)) is None:
        return None
    col = PRICE_COLUMNS[int(np.argmax(factor[row]))]
    more = int(jumps.sum()) - 1
    return (f"{src.path}: {src.row(row + 1)}, column '{col}': {frame[col].iloc[row + 1]:g} is "
            f"{ratios[row, PRICE_COLUMNS.index(col)]:.3g}x the previous close {prev[row]:g}"
            f"{f' ({more} more such bars)' if more else ''}; check for a missing split adjustment or a unit "
            f"change (the threshold is --max-jump {max_jump:g})")


def warn_jumps(frame: pd.DataFrame, source: Source | str | Path, max_jump: float = MAX_JUMP) -> None:
    if (message := jump_warning(frame, source, max_jump)) is not None:
        warnings.warn(DataWarning(message), stacklevel=2)
