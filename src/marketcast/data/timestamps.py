"""A file's date column to UTC nanosecond timestamps, whatever form the export chose.

Text is parsed as ISO 8601 or any format pandas reads (naive means UTC); dates written NN/NN/YYYY are day
first when some first number is over 12 (European), else month first (US). Numbers are epoch times whose unit
is told by magnitude: the instants 1971..2100 are 3.2e7..4.1e9 in seconds, 3.2e10..4.1e12 in milliseconds,
3.2e13..4.1e15 in microseconds and 3.2e16..4.1e18 in nanoseconds, four ranges that do not overlap; eight-digit
integers 19000101..21001231 are YYYYMMDD. Anything else is refused with the row named, never read as
nanoseconds since 1970.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from marketcast.data.validate import Source, cell, first_true

_FIRST, _LAST = pd.Timestamp("1971-01-01").value, pd.Timestamp("2100-01-01").value
EPOCH_UNITS = {"seconds": 10**9, "milliseconds": 10**6, "microseconds": 10**3, "nanoseconds": 1}
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
_NUMERIC_DATE = r"^\s*(\d{1,2})[/.-](\d{1,2})[/.-]\d{2,4}\b"  # 31/01/2024, 01.31.2024, 31-01-24 ...
ISO_FIX = "write dates as ISO 8601 such as 2024-01-31 or 2024-01-31T14:30:00Z"


def parse_timestamps(values: pd.Series, source: Source) -> pd.DatetimeIndex:
    """UTC ``datetime64[ns]`` stamps of ``values``; the first value that is no date is one error line."""
    values = values.reset_index(drop=True)
    if len(values) == 0:  # a header without rows: check_bars says so
        return pd.DatetimeIndex([], dtype="datetime64[ns, UTC]", name="timestamp")
    if isinstance(values.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_any_dtype(values.dtype):
        return _from_datetimes(values, source)
    if pd.api.types.is_bool_dtype(values.dtype):
        source.fail(0, "timestamp", "holds true/false, not dates", ISO_FIX)
    if pd.api.types.is_numeric_dtype(values.dtype):
        return _from_numbers(values, values, source)
    text = values.astype("string")
    first = text.dropna().iloc[0].strip() if text.notna().any() else ""
    if _NUMBER.match(first):  # numbers as text (a Parquet string column): epoch or YYYYMMDD when all are
        numbers = pd.to_numeric(text.str.strip(), errors="coerce")
        if (numbers.notna() == text.notna()).all():
            return _from_numbers(numbers, values, source)
    parsed = pd.to_datetime(text.astype(object), errors="coerce", utc=True, format="mixed",
                            dayfirst=_day_first(text, source))
    if (row := first_true(parsed.isna())) is not None:
        source.fail(row, "timestamp", f"cannot parse {cell(values.iloc[row])} as a date/time", ISO_FIX)
    return _stamps(parsed)


def _day_first(text: pd.Series, source: Source) -> bool:
    """Whether dates written ``NN/NN/YYYY`` (or with ``.``/``-``) put the day first: yes when some first number
    is over 12, no when some second one is; a column with both is refused. pandas reads each cell on its own,
    month first when it can, so 13/01/2020 after 12/01/2020 (1 December) came out of order and was blamed on
    the sorting."""
    parts = text.str.extract(_NUMERIC_DATE)
    if parts.isna().any(axis=None):
        return False
    first, second = parts[0].astype(int).to_numpy(), parts[1].astype(int).to_numpy()
    day, month = first_true(first > 12), first_true(second > 12)
    if day is not None and month is not None:
        source.fail(max(day, month), "timestamp", f"{cell(text.iloc[month])} puts the day second but "
                    f"{cell(text.iloc[day])} puts it first", ISO_FIX)
    return day is not None


def _stamps(parsed) -> pd.DatetimeIndex:
    return pd.DatetimeIndex(parsed, name="timestamp").as_unit("ns")


def _from_datetimes(values: pd.Series, source: Source) -> pd.DatetimeIndex:
    index = pd.DatetimeIndex(values)
    if index.tz is None:
        index = index.tz_localize("UTC")
    if (row := first_true(index.isna())) is not None:
        source.fail(row, "timestamp", "is empty", "fill or drop that row")
    ns = index.tz_convert("UTC")
    bounds = (ns < pd.Timestamp.min.tz_localize("UTC")) | (ns > pd.Timestamp.max.tz_localize("UTC"))
    if (row := first_true(bounds)) is not None:
        source.fail(row, "timestamp", f"{values.iloc[row]} is outside the years 1677..2262 that nanosecond "
                    "timestamps hold", "fix or drop that row")
    return _stamps(ns)


def _from_numbers(numbers: pd.Series, values: pd.Series, source: Source) -> pd.DatetimeIndex:
    """Epoch times or YYYYMMDD; integers are converted exactly (float64 would round nanoseconds)."""
    x = numbers.to_numpy(dtype=np.float64, na_value=np.nan)
    if (row := first_true(~np.isfinite(x))) is not None:
        source.fail(row, "timestamp", f"{cell(values.iloc[row])} is not a date", "fill or drop that row")
    if ((x >= 19000101) & (x <= 21001231) & (x == np.floor(x))).all():
        parsed = pd.to_datetime(x.astype(np.int64).astype(str), format="%Y%m%d", errors="coerce", utc=True)
        if (row := first_true(parsed.isna())) is None:
            return _stamps(parsed)
        source.fail(row, "timestamp", f"{cell(values.iloc[row])} is not a YYYYMMDD date", ISO_FIX)
    median = float(np.median(np.abs(x)))
    unit = next((name for name, ns in EPOCH_UNITS.items() if _FIRST <= median * ns <= _LAST), None)
    if unit is None:
        source.fail(0, "timestamp", f"the numbers in the date column (such as {cell(values.iloc[0])}) are neither "
                    "epoch seconds, milliseconds, microseconds nor nanoseconds of a date in 1971..2100, "
                    "nor YYYYMMDD", ISO_FIX)
    ns = x * EPOCH_UNITS[unit]
    if (row := first_true((ns < _FIRST) | (ns > _LAST))) is not None:
        source.fail(row, "timestamp", f"{cell(values.iloc[row])} is not epoch {unit} of a date in 1971..2100 like "
                    "the other rows", ISO_FIX)
    if pd.api.types.is_integer_dtype(numbers.dtype):
        ns = numbers.to_numpy(dtype=np.int64) * EPOCH_UNITS[unit]
    else:
        ns = np.round(ns).astype(np.int64)
    return _stamps(pd.to_datetime(ns, unit="ns", utc=True))
