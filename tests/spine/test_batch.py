"""make_batch: windows end at the decision bar, pad on the left, and extrapolate time honestly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from marketcast.data.calendar import calendar_for
from marketcast.forecast import INPUT_FIELDS, make_batch
from tests.conftest import make_ohlcv


def test_windows_end_at_the_decision_bar():
    frame = make_ohlcv(50)
    batch = make_batch(frame, [9, 49], context=5, horizon=2)
    assert batch.values.shape == (2, 5, len(INPUT_FIELDS))
    np.testing.assert_array_equal(batch.field("close")[0], frame["close"].to_numpy()[5:10])
    np.testing.assert_array_equal(batch.last_close(), frame["close"].to_numpy()[[9, 49]])
    assert batch.mask.all()


def test_left_padding_repeats_first_bar_and_is_masked():
    frame = make_ohlcv(50)
    batch = make_batch(frame, [2], context=5)
    np.testing.assert_array_equal(batch.mask[0], [False, False, True, True, True])
    np.testing.assert_array_equal(batch.field("open")[0, :3], np.repeat(frame["open"].iloc[0], 3))


def test_missing_volume_is_zero():
    frame = make_ohlcv(20).drop(columns="volume")
    assert (make_batch(frame, [19], 5).field("volume") == 0).all()


def test_future_timestamps_skip_weekends_for_business_day_bars():
    frame = make_ohlcv(30, start="2024-01-01", freq="B")  # Mon 2024-01-01 ...
    batch = make_batch(frame, [4], context=5, horizon=3)  # window ends Fri 2024-01-05
    got = pd.DatetimeIndex(batch.future_timestamps[0])
    assert list(got.strftime("%Y-%m-%d")) == ["2024-01-08", "2024-01-09", "2024-01-10"]


def test_future_timestamps_follow_intraday_spacing():
    frame = make_ohlcv(30, start="2024-01-01 00:00", freq="15min")
    batch = make_batch(frame, [29], context=10, horizon=2, calendar=calendar_for("crypto"))
    assert pd.Timestamp(batch.future_timestamps[0, 1]) == pd.Timestamp("2024-01-01 07:45")  # row 29 = 07:15, +2 x 15 min


def test_future_timestamps_follow_the_exchange_calendar():
    frame = make_ohlcv(30, start="2024-06-10", freq="B")  # window ends Wed 2024-07-03, then Independence Day
    batch = make_batch(frame, [17], context=5, horizon=3)  # stocks (XNYS) by default
    assert list(pd.DatetimeIndex(batch.future_timestamps[0]).strftime("%m-%d")) == ["07-05", "07-08", "07-09"]
    crypto = make_batch(make_ohlcv(30, start="2024-06-10"), [23], context=5, horizon=3,
                        calendar=calendar_for("crypto"))  # ends Wed 07-03: 24/7, so no day is skipped
    assert list(pd.DatetimeIndex(crypto.future_timestamps[0]).strftime("%m-%d")) == ["07-04", "07-05", "07-06"]
    hourly = make_ohlcv(11)  # yfinance-like hourly stock bars: 09:30 .. 15:30 New York, then 07-03 09:30 .. 12:30
    hourly.index = pd.DatetimeIndex([*pd.date_range("2024-07-02 13:30", periods=7, freq="h", tz="UTC"),
                                     *pd.date_range("2024-07-03 13:30", periods=4, freq="h", tz="UTC")],
                                    name="timestamp")
    batch = make_batch(hourly, [10], context=11, horizon=2)  # 07-03 closes at 13:00 New York (17:00 UTC)
    assert list(pd.DatetimeIndex(batch.future_timestamps[0]).strftime("%m-%d %H:%M")) == ["07-05 13:30",
                                                                                         "07-05 14:30"]


def test_bad_window_ends():
    with pytest.raises(ValueError, match="window ends"):
        make_batch(make_ohlcv(10), [10], context=3)


def _reference_batch(frame, ends, context):
    """Each window copied row by row, as make_batch once built it."""
    data = frame[list(INPUT_FIELDS)].to_numpy()
    stamps = frame.index.tz_convert("UTC").tz_localize(None).to_numpy("datetime64[ns]")
    rows = np.array([[max(r, max(t - context + 1, 0)) for r in range(t - context + 1, t + 1)] for t in ends])
    mask = np.array([[r >= 0 for r in range(t - context + 1, t + 1)] for t in ends])
    return data[rows], mask, stamps[rows]


@pytest.mark.parametrize("ends", [[0, 1, 2, 3, 4, 5, 6, 7], [39, 3, 20, 20, 0], [25]])
def test_strided_windows_equal_windows_copied_row_by_row(ends):
    frame = make_ohlcv(40)
    batch = make_batch(frame, ends, context=6)
    values, mask, stamps = _reference_batch(frame, ends, 6)
    np.testing.assert_array_equal(batch.values, values)
    np.testing.assert_array_equal(batch.mask, mask)
    np.testing.assert_array_equal(batch.timestamps, stamps)
    assert not batch.values.flags.writeable  # a view of the bars: models read it, never write it


class CountingCalendar:
    """The XNYS calendar, counting how often future bar times are asked for."""

    def __init__(self):
        self.inner, self.calls = calendar_for("stock"), 0

    def next_bar_times_many(self, lasts, interval, n):
        self.calls += 1
        return self.inner.next_bar_times_many(lasts, interval, n)


def test_future_timestamps_are_computed_only_when_read_and_once():
    frame = make_ohlcv(60, freq="B")
    cal = CountingCalendar()
    batch = make_batch(frame, np.arange(10, 60), context=8, horizon=2, calendar=cal)
    joined = type(batch).concat([batch, make_batch(frame, [5], context=8, horizon=2, calendar=cal)])
    assert cal.calls == 0  # the baseline never reads them, so never pays for the calendar
    first = joined.future_timestamps
    assert cal.calls == 2 and first.shape == (51, 2)
    assert joined.future_timestamps is first and cal.calls == 2


def test_future_timestamps_equal_extrapolating_each_window_alone():
    """Windows of mixed spacing (daily, then hourly bars, a single bar, a gap of weeks) are grouped by
    interval; each gets what extrapolating its own stamps gives."""
    from marketcast.forecast.base import _extrapolate

    daily = pd.date_range("2024-01-02", periods=30, freq="B", tz="UTC")
    hourly = pd.date_range("2024-02-14 14:30", periods=30, freq="h", tz="UTC")
    later = pd.DatetimeIndex(["2024-04-01 14:30", "2024-04-15 14:30"], tz="UTC")
    frame = make_ohlcv(62)
    frame.index = pd.DatetimeIndex([*daily, *hourly, *later], name="timestamp")
    ends = np.arange(0, 62)
    cal = calendar_for("crypto")
    batch = make_batch(frame, ends, context=7, horizon=3, calendar=cal)
    stamps = frame.index.tz_localize(None).to_numpy("datetime64[ns]")
    for i, t in enumerate(ends):
        expected = _extrapolate(stamps[max(t - 6, 0):t + 1], stamps[t], 3, cal)
        np.testing.assert_array_equal(batch.future_timestamps[i], expected, err_msg=str(t))
