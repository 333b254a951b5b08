"""Each validation problem gives one line naming the file, the row and the column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from marketcast.data import load_bars
from marketcast.errors import DataError
from tests.conftest import make_ohlcv


def _write(tmp_path, frame: pd.DataFrame, name="bad.csv"):
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


def _frame():
    return make_ohlcv(12).reset_index()


def _expect(path, *fragments):
    with pytest.raises(DataError) as info:
        load_bars(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_missing_column(tmp_path):
    _expect(_write(tmp_path, _frame().drop(columns="low")), "column 'low'", "missing required column")


def test_missing_timestamp_column(tmp_path):
    _expect(_write(tmp_path, _frame().drop(columns="timestamp")), "column 'timestamp'", "missing column")


def test_unparseable_timestamp(tmp_path):
    frame = _frame().astype({"timestamp": str})
    frame.loc[4, "timestamp"] = "not-a-date"
    _expect(_write(tmp_path, frame), "row 5 (line 6)", "column 'timestamp'", "'not-a-date'")


def test_duplicate_timestamp(tmp_path):
    frame = _frame()
    frame.loc[7, "timestamp"] = frame.loc[6, "timestamp"]
    _expect(_write(tmp_path, frame), "row 8", "column 'timestamp'", "duplicate")


def test_non_increasing_timestamp(tmp_path):
    frame = _frame()
    frame.loc[[3, 4], "timestamp"] = frame.loc[[4, 3], "timestamp"].to_numpy()
    _expect(_write(tmp_path, frame), "row 5", "earlier than the row before")


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_nan_and_inf(tmp_path, value):
    frame = _frame()
    frame.loc[2, "close"] = value
    _expect(_write(tmp_path, frame), "row 3", "column 'close'", "NaN or infinite")


def test_text_in_numeric_column(tmp_path):
    frame = _frame().astype({"open": object})
    frame.loc[9, "open"] = "abc"
    _expect(_write(tmp_path, frame), "row 10", "column 'open'", "not a number")


def test_non_positive_price(tmp_path):
    frame = _frame()
    frame.loc[1, ["open", "low"]] = [0.0, 0.0]
    _expect(_write(tmp_path, frame), "row 2", "column 'open'", "not positive")


def test_high_below_open_or_close(tmp_path):
    frame = _frame()
    frame.loc[6, "high"] = max(frame.loc[6, "open"], frame.loc[6, "close"]) * 0.99
    frame.loc[6, "low"] = min(frame.loc[6, "low"], frame.loc[6, "high"])
    _expect(_write(tmp_path, frame), "row 7", "column 'high'", "below max(open, close)")


def test_low_above_open_or_close(tmp_path):
    frame = _frame()
    frame.loc[8, "low"] = min(frame.loc[8, "open"], frame.loc[8, "close"]) * 1.01
    _expect(_write(tmp_path, frame), "row 9", "column 'low'", "above min(open, close)")


def test_fewer_rows_than_context(tmp_path):
    path = _write(tmp_path, _frame())
    with pytest.raises(DataError, match=r"has 12 rows but 64 are needed"):
        load_bars(path, min_rows=64)


def test_unreadable_parquet(tmp_path):
    path = tmp_path / "junk.parquet"
    path.write_bytes(b"this is not parquet")
    with pytest.raises(DataError, match="not a readable Parquet file"):
        load_bars(path)
