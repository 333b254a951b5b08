"""Market calendars, bar spacing and periods per year, against dates and counts worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from marketcast.data.calendar import annualise, calendar_for, infer_interval
from marketcast.errors import DataError

UTC = "UTC"


def _days(first: str, n: int, start: str, periods: int, freq: str) -> pd.DatetimeIndex:
    """``periods`` bars of ``freq`` from ``start`` (a time of day) on each of ``n`` days from ``first``."""
    days = pd.date_range(first, periods=n, freq="D")
    return pd.DatetimeIndex(np.concatenate([
        pd.date_range(f"{d:%Y-%m-%d} {start}", periods=periods, freq=freq, tz=UTC).to_numpy() for d in days]),
        tz=UTC)


# Monday 2024-03-04 .. Friday 2024-03-08: no US holiday, before the switch to daylight saving time, so New York
# is UTC-5 (09:30 = 14:30 UTC, 17:00 = 22:00 UTC) and Chicago UTC-6 (17:00 = 23:00 UTC).
STOCK_MINUTES = _days("2024-03-04", 5, "14:30", 390, "min")  # 09:30 .. 15:59 New York
STOCK_HOURS = _days("2024-03-04", 5, "14:30", 7, "h")  # yfinance's 09:30, 10:30, .., 15:30 bars
EVERY_MINUTE = pd.date_range("2024-03-04", periods=5 * 1440, freq="min", tz=UTC)
EVERY_HOUR = pd.date_range("2024-03-04", periods=5 * 24, freq="h", tz=UTC)
FX_MINUTES = pd.date_range("2024-03-03 22:00", periods=5 * 1440, freq="min", tz=UTC)  # Sun 17:00 .. Fri 17:00
FX_HOURS = pd.date_range("2024-03-03 22:00", periods=5 * 24, freq="h", tz=UTC)
CME_MINUTES = pd.date_range("2024-03-03 23:00", periods=5 * 1440, freq="min", tz=UTC)  # Sun 17:00 Chicago ..
CME_HOURS = pd.date_range("2024-03-03 23:00", periods=5 * 24, freq="h", tz=UTC)
WEEKS = pd.date_range("2020-01-06", periods=40, freq="W-MON", tz=UTC)
MONTHS = pd.date_range("2020-01-01", periods=30, freq="MS", tz=UTC)
STOCK_DAYS = pd.DatetimeIndex(pd.bdate_range("2024-03-04", "2024-03-28"), tz=UTC)  # Good Friday 03-29 after it
ALL_DAYS = pd.date_range("2024-03-01", periods=60, freq="D", tz=UTC)
FX_DAYS = pd.DatetimeIndex(pd.bdate_range("2024-03-04", periods=40), tz=UTC)

# sessions a year = the mean of 2010-2019, rounded: XNYS 2,516 sessions (252 a year except 250 in 2012,
# Hurricane Sandy, and 251 in 2017 and 2018); 24/7 3,652 days; FX 24x5 2,609 weekdays; CME 2,578 sessions.
CASES = [
    ("stock", STOCK_MINUTES, 390 * 252), ("stock", STOCK_HOURS, 7 * 252), ("stock", STOCK_DAYS, 252),
    ("stock", WEEKS, 52), ("stock", MONTHS, 12),
    ("crypto", EVERY_MINUTE, 1440 * 365), ("crypto", EVERY_HOUR, 24 * 365), ("crypto", ALL_DAYS, 365),
    ("crypto", WEEKS, 52), ("crypto", MONTHS, 12),
    ("forex", FX_MINUTES, 1440 * 261), ("forex", FX_HOURS, 24 * 261), ("forex", FX_DAYS, 261),
    ("forex", WEEKS, 52), ("forex", MONTHS, 12),
    ("future", CME_MINUTES, 1440 * 258), ("future", CME_HOURS, 24 * 258), ("future", STOCK_DAYS, 258),
    ("future", WEEKS, 52), ("future", MONTHS, 12),
]


@pytest.mark.parametrize("asset_class, stamps, expected", CASES,
                         ids=[f"{c}-{i % 5}" for i, (c, _, _) in enumerate(CASES)])
def test_periods_per_year_for_each_bar_size_and_class(asset_class, stamps, expected):
    a = annualise(stamps, calendar_for(asset_class))
    assert a.periods_per_year == expected
    assert f"= {expected:,}" in a.how or f"{expected} a year" in a.how
    assert a.warnings == ()


def test_sessions_per_year_and_session_length():
    got = {c: (calendar_for(c).sessions_per_year, calendar_for(c).session_length) for c in
           ("stock", "crypto", "forex", "future")}
    assert got == {"stock": (252, pd.Timedelta("6h30min")), "crypto": (365, pd.Timedelta("1D")),
                   "forex": (261, pd.Timedelta("1D")), "future": (258, pd.Timedelta("1D"))}
    assert calendar_for("stock").sessions_per_year_exact == pytest.approx(2516 / 10)


def test_how_says_where_the_number_came_from():
    how = annualise(FX_HOURS, calendar_for("forex")).how
    assert how.startswith("1-hour bars: the most common gap, 100% of 119 gaps")
    assert "24 bars a session (the median over 5 sessions in the data)" in how
    assert "261 sessions a year (FX24x5" in how and how.endswith("= 6,264")
    assert annualise(MONTHS, calendar_for("crypto")).how == "monthly bars: the median gap of 29 gaps is 31 days: 12 a year"


def test_bar_interval_labels():
    assert [infer_interval(s).label for s in (STOCK_MINUTES, STOCK_HOURS, STOCK_DAYS, WEEKS, MONTHS)] == [
        "1min", "1h", "1d", "1w", "1mo"]
    assert infer_interval(pd.date_range("2024-01-01", periods=50, freq="15min")).label == "15min"


def test_mixed_spacing_is_an_error_and_a_rare_misfit_a_warning():
    five = pd.date_range("2024-03-04", periods=600, freq="5min", tz=UTC)
    mixed = five.append(pd.date_range(five[-1] + pd.Timedelta("1min"), periods=300, freq="min", tz=UTC))
    with pytest.raises(DataError, match=r"crypto bars: mixed bar spacing: 300 of 899 gaps \(33.4%\) are not whole "
                                        r"multiples of the bar \(5 minutes\), the first 1 minute before 2024-03-06 01:56"):
        annualise(mixed, calendar_for("crypto"), where="crypto bars")
    one_misfit = EVERY_MINUTE.delete(1).insert(1, EVERY_MINUTE[0] + pd.Timedelta(seconds=30))  # 30 s, then 90 s
    a = annualise(one_misfit, calendar_for("crypto"))
    assert a.periods_per_year == 1440 * 365
    assert a.warnings == ("2 of 7,199 gaps (0.0%) are not whole multiples of the bar (1 minute), the first 30 "
                          "seconds before 2024-03-04 00:00:30+00:00",)
    with pytest.raises(DataError, match="median 2 days apart"):
        annualise(pd.date_range("2024-01-01", periods=30, freq="2D", tz=UTC), calendar_for("crypto"))
    with pytest.raises(DataError, match="single bar"):
        annualise(MONTHS[:1], calendar_for("crypto"))


def test_daily_bars_that_do_not_fit_the_calendar_are_warned_about():
    a = annualise(ALL_DAYS, calendar_for("stock"))  # crypto-like daily bars read as a stock
    assert a.periods_per_year == 252
    # 18 weekend days and Good Friday (03-29) fall in the session of the Monday after them
    assert a.warnings == ("19 bars fall in the same XNYS session as the bar before: are these bars of another "
                          "market? set --asset-class",)
    gappy = STOCK_DAYS.delete([5, 6, 7])  # 2024-03-11 .. 03-13 missing
    assert annualise(gappy, calendar_for("stock")).warnings == (
        "3 XNYS sessions have no bar, the longest run 3 before 2024-03-14",)


def test_next_daily_bars_skip_weekends_and_holidays():
    stock = calendar_for("stock")
    daily = infer_interval(STOCK_DAYS)
    # Christmas 2018: 12-24 early close, 12-25 holiday; 2018-12-05 closed for President Bush's funeral
    assert list(stock.next_bar_times(pd.Timestamp("2018-12-21", tz=UTC), daily, 5).strftime("%m-%d")) == [
        "12-24", "12-26", "12-27", "12-28", "12-31"]
    assert stock.next_bar_times(pd.Timestamp("2018-12-04", tz=UTC), daily, 1)[0] == pd.Timestamp("2018-12-06", tz=UTC)
    # a time of day is kept (Alpaca stamps daily bars at midnight New York)
    assert stock.next_bar_times(pd.Timestamp("2024-07-03 04:00", tz=UTC), daily, 1)[0] == pd.Timestamp(
        "2024-07-05 04:00", tz=UTC)
    crypto = calendar_for("crypto")
    assert list(crypto.next_bar_times(pd.Timestamp("2024-07-05", tz=UTC), daily, 3).strftime("%a")) == [
        "Sat", "Sun", "Mon"]
    # forex daily bars stamped at midnight London in summer (23:00 UTC the day before)
    fx = calendar_for("forex")
    assert fx.next_bar_times(pd.Timestamp("2024-07-04 23:00", tz=UTC), daily, 2).tolist() == [
        pd.Timestamp("2024-07-07 23:00", tz=UTC), pd.Timestamp("2024-07-08 23:00", tz=UTC)]


def test_next_intraday_bars_follow_sessions_early_closes_and_weekends():
    stock = calendar_for("stock")
    hourly = infer_interval(STOCK_HOURS)
    # 2024-07-03 closes at 13:00 New York (17:00 UTC), 07-04 is a holiday
    got = stock.next_bar_times(pd.Timestamp("2024-07-03 15:30", tz=UTC), hourly, 3)
    assert got.tolist() == [pd.Timestamp(t, tz=UTC) for t in ("2024-07-03 16:30", "2024-07-05 13:30",
                                                               "2024-07-05 14:30")]
    fx = calendar_for("forex")  # Friday 16:00 New York, then Sunday 17:00 (daylight saving from 03-10)
    got = fx.next_bar_times(pd.Timestamp("2024-03-08 21:00", tz=UTC), infer_interval(FX_HOURS), 2)
    assert got.tolist() == [pd.Timestamp("2024-03-10 21:00", tz=UTC), pd.Timestamp("2024-03-10 22:00", tz=UTC)]
    crypto = calendar_for("crypto")
    got = crypto.next_bar_times(pd.Timestamp("2024-03-09 23:00", tz=UTC), infer_interval(EVERY_HOUR), 2)
    assert got.tolist() == [pd.Timestamp("2024-03-10 00:00", tz=UTC), pd.Timestamp("2024-03-10 01:00", tz=UTC)]


def test_next_monthly_and_weekly_bars():
    crypto = calendar_for("crypto")
    month_ends = pd.date_range("2020-01-31", periods=12, freq="ME", tz=UTC)
    assert list(crypto.next_bar_times(pd.Timestamp("2024-01-31", tz=UTC), infer_interval(month_ends),
                                      3).strftime("%m-%d")) == ["02-29", "03-31", "04-30"]
    assert list(crypto.next_bar_times(pd.Timestamp("2024-01-01", tz=UTC), infer_interval(MONTHS),
                                      2).strftime("%m-%d")) == ["02-01", "03-01"]
    assert crypto.next_bar_times(pd.Timestamp("2024-01-01", tz=UTC), infer_interval(WEEKS), 1)[0] == pd.Timestamp(
        "2024-01-08", tz=UTC)


def test_session_helpers_for_the_supervisor():
    stock = calendar_for("stock")
    assert stock.is_open("2024-07-03 16:59:59+00:00") and not stock.is_open("2024-07-03 17:00+00:00")
    assert not stock.is_open("2024-07-04 15:00+00:00")  # Independence Day
    assert stock.next_open("2024-07-03 17:00+00:00") == pd.Timestamp("2024-07-05 13:30", tz=UTC)
    assert stock.next_close("2024-07-03 12:00+00:00") == pd.Timestamp("2024-07-03 17:00", tz=UTC)
    assert stock.next_open(pd.Timestamp("2024-07-05 09:00", tz="America/New_York")) == pd.Timestamp(
        "2024-07-05 13:30", tz=UTC)
    hourly, daily = infer_interval(STOCK_HOURS), infer_interval(STOCK_DAYS)
    assert stock.latest_bar("2024-07-03 15:10+00:00", hourly) == pd.Timestamp("2024-07-03 13:30", tz=UTC)
    assert stock.latest_bar("2024-07-03 18:10+00:00", hourly) == pd.Timestamp("2024-07-03 16:30", tz=UTC)
    assert stock.latest_bar("2024-07-05 13:00+00:00", hourly) == pd.Timestamp("2024-07-03 16:30", tz=UTC)
    assert stock.latest_bar("2024-07-03 16:00+00:00", daily) == pd.Timestamp("2024-07-02", tz=UTC)
    assert stock.latest_bar("2024-07-03 18:00+00:00", daily) == pd.Timestamp("2024-07-03", tz=UTC)
    s = stock.sessions("2024-11-27", "2024-12-02")
    assert list(s.index.strftime("%m-%d")) == ["11-27", "11-29", "12-02"]  # Thanksgiving 11-28
    assert s.loc["2024-11-29", "close"] == pd.Timestamp("2024-11-29 18:00", tz=UTC)  # 13:00 early close
    fx = calendar_for("forex")
    assert fx.is_open("2024-03-10 21:30+00:00") and not fx.is_open("2024-03-09 12:00+00:00")
    assert fx.next_open("2024-03-09 12:00+00:00") == pd.Timestamp("2024-03-10 21:00", tz=UTC)


def test_a_stamp_belongs_to_the_session_that_holds_it_else_the_next():
    fx, stock = calendar_for("forex"), calendar_for("stock")
    labels = lambda cal, stamps: list(pd.DatetimeIndex(cal.labels[cal.session_positions(stamps)]).strftime("%a %d"))  # noqa: E731
    # Sunday 23:00 UTC is Monday's forex session; Friday 22:00 UTC (17:00 New York, the close) still Friday's
    assert labels(fx, pd.DatetimeIndex(["2024-03-03 23:00", "2024-03-08 22:00"], tz=UTC)) == ["Mon 04", "Fri 08"]
    # a daily stock bar at midnight UTC belongs to that day; Saturday's to Monday's session
    assert labels(stock, pd.DatetimeIndex(["2024-03-05", "2024-03-09"], tz=UTC)) == ["Tue 05", "Mon 11"]
    with pytest.raises(DataError, match="outside the XNYS calendar"):
        stock.session_positions(pd.DatetimeIndex(["1960-01-04"], tz=UTC))
