"""Market time: sessions, holidays, bar spacing and periods per year. The one place in marketcast that knows
time: the backtest annualises with it, ``make_batch`` extrapolates future bar times with it, and the live loop
asks it whether the market is open and which bar should exist by now.

API
---
``calendar_for(asset_class) -> MarketCalendar``
    ``stock``: XNYS (exchange_calendars: NYSE holidays, 13:00 early closes); ``crypto``: 24/7 (UTC days);
    ``forex``: FX24x5, five 24-hour sessions from Sunday 17:00 to Friday 17:00 New York, no holidays;
    ``future``: CMES (CME Globex, 17:00 Chicago the day before to 17:00, CME holidays and early closes; the
    daily 16:00-17:00 maintenance halt is not modelled). 1970 to five years ahead, built once per machine
    (kept in :mod:`marketcast.data.cache`) and loaded once per process.
``infer_interval(stamps) -> BarInterval`` (from :mod:`marketcast.data.spacing`, re-exported here)
    the bar size (``intraday`` with its step, ``daily``, ``weekly``, ``monthly``, ``quarterly``, ``yearly``,
    or ``irregular``) and how it was found; mixed spacing is a ``problem`` (``require()`` raises it) or a
    warning when rare.
``annualise(stamps, calendar, where) -> Annualisation``
    periods per year = bars per session x sessions per year, with the sentence that says so.

``MarketCalendar``
    ``sessions_per_year``        mean sessions per year of 2010-2019 on this calendar, rounded (XNYS 252,
                                 24/7 365, FX24x5 261, CMES 258)
    ``session_length``           the regular session (6.5 h on XNYS, 24 h on the others)
    ``sessions(start, end)``     the sessions (UTC ``open``, ``close``) indexed by session date
    ``is_open(ts)``              ts inside a session (open <= ts < close)
    ``next_open(ts)``, ``next_close(ts)``   the first open / close strictly after ts
    ``next_bar_times(last, interval, n)``   the n bar times after ``last``, skipping holidays and closed hours
    ``latest_bar(now, interval)``           the start of the last bar complete at ``now`` (intraday, daily)
    ``session_positions(stamps)``           the session each stamp belongs to (positions in the calendar)

Conventions. Timestamps may carry any time zone; naive ones are UTC; results are UTC. A session is labelled by
the date it closes on. A stamp belongs to the session that contains it (open <= ts <= close), otherwise to the
next session to open, so a daily bar stamped at midnight belongs to that day's session. Intraday bars are
labelled by their start; a bar exists in a session when it overlaps it, on the grid of ``step`` through the
previous bar (or through each session's open). Daily bars keep their time of day from one session to the next.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import time
from functools import lru_cache
from importlib.util import find_spec
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd

from marketcast.data.cache import cached_arrays, fingerprint
from marketcast.data.spacing import BarInterval, infer_interval, ns, ns_array, utc
from marketcast.errors import DataError

__all__ = ["Annualisation", "BarInterval", "MarketCalendar", "annualise", "calendar_for", "infer_interval"]

REFERENCE_YEARS = (2010, 2019)  # a whole decade, so leap years and one-off closures average out
PERIODS = {"weekly": 52, "monthly": 12, "quarterly": 4, "yearly": 1}


# --- calendars --------------------------------------------------------------------------------------------

def _fx_calendar(start: str, end: str):
    from exchange_calendars import ExchangeCalendar

    class FX24x5(ExchangeCalendar):
        """Spot forex: Sunday 17:00 to Friday 17:00 New York, each session 17:00 to 17:00, no holidays."""

        name = "FX24x5"
        tz = ZoneInfo("America/New_York")
        open_times = ((None, time(17)),)
        close_times = ((None, time(17)),)

        @property
        def open_offset(self) -> int:
            return -1

    return FX24x5(start=start, end=end)


DESCRIPTIONS = {
    "XNYS": "New York Stock Exchange sessions from exchange_calendars, holidays and early closes included",
    "24/7": "every day around the clock (UTC days)",
    "FX24x5": "forex, Sunday 17:00 to Friday 17:00 New York in five 24-hour sessions",
    "CMES": "CME Globex from exchange_calendars, 17:00 Chicago the day before to 17:00, CME holidays",
}


class MarketCalendar:
    """One market's sessions as arrays of UTC nanoseconds (see the module docstring for the API)."""

    def __init__(self, name: str, labels: np.ndarray, opens: np.ndarray, closes: np.ndarray) -> None:
        self.name = name
        self.description = DESCRIPTIONS[name]
        self.labels, self.opens, self.closes = labels, opens, closes  # session dates at midnight; UTC ns
        first, last = (pd.Timestamp(f"{y}-01-01").value for y in (REFERENCE_YEARS[0], REFERENCE_YEARS[1] + 1))
        ref = (self.labels >= first) & (self.labels < last)
        self.sessions_per_year_exact = ref.sum() / (REFERENCE_YEARS[1] - REFERENCE_YEARS[0] + 1)
        self.sessions_per_year = int(round(self.sessions_per_year_exact))
        self.session_length = pd.Timedelta(int(np.median(self.closes[ref] - self.opens[ref])))

    def __repr__(self) -> str:
        return f"MarketCalendar({self.name!r}, {utc(self.opens[0]):%Y-%m-%d} .. {utc(self.closes[-1]):%Y-%m-%d})"

    @property
    def sessions_per_year_text(self) -> str:
        return (f"{self.sessions_per_year} sessions a year ({self.name}: {self.description}; the mean of "
                f"{REFERENCE_YEARS[0]}-{REFERENCE_YEARS[1]} is {self.sessions_per_year_exact:.1f})")

    def _check(self, positions: np.ndarray, what, size: int | None = None) -> np.ndarray:
        """``positions`` if all lie in [0, size) (default: the sessions), else a DataError naming ``what``
        (a callable is only called then)."""
        bad = (positions < 0) | (positions >= (len(self.opens) if size is None else size))
        if bad.any():
            raise DataError(f"{what() if callable(what) else what} lies outside the {self.name} calendar "
                            f"({utc(self.opens[0]):%Y-%m-%d} .. {utc(self.closes[-1]):%Y-%m-%d})")
        return positions

    def session_positions(self, stamps) -> np.ndarray:
        """Position of the session each stamp belongs to: the one containing it, else the next to open."""
        return self._positions(ns_array(stamps))

    def _positions(self, t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(self.opens, t, side="right") - 1
        inside = (k >= 0) & (t <= self.closes[np.maximum(k, 0)])
        pos = np.where(inside, k, k + 1)
        pos[t < self.labels[0]] = -1  # before the calendar's first session date: unknown, not its first session
        return self._check(pos, lambda: f"a timestamp ({utc(t[0])} .. {utc(t[-1])})")

    def sessions(self, start, end) -> pd.DataFrame:
        """Sessions whose date lies in [start, end], with UTC ``open`` and ``close``."""
        lo = np.searchsorted(self.labels, pd.Timestamp(start).tz_localize(None).normalize().value, side="left")
        hi = np.searchsorted(self.labels, pd.Timestamp(end).tz_localize(None).normalize().value, side="right")
        index = pd.DatetimeIndex(self.labels[lo:hi], name="session")
        return pd.DataFrame({"open": pd.DatetimeIndex(self.opens[lo:hi], tz="UTC"),
                             "close": pd.DatetimeIndex(self.closes[lo:hi], tz="UTC")}, index=index)

    def is_open(self, ts) -> bool:
        t = ns(ts)
        k = int(np.searchsorted(self.opens, t, side="right")) - 1
        return k >= 0 and t < self.closes[k]

    def next_open(self, ts) -> pd.Timestamp:
        i = int(np.searchsorted(self.opens, ns(ts), side="right"))
        return utc(self.opens[self._check(np.array([i]), ts)[0]])

    def next_close(self, ts) -> pd.Timestamp:
        i = int(np.searchsorted(self.closes, ns(ts), side="right"))
        return utc(self.closes[self._check(np.array([i]), ts)[0]])

    def _grid(self, k0: int, k1: int, step: int, phase: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Starts (and session closes) of every bar overlapping sessions k0..k1: on ``phase + j * step`` when a
        phase is given, else from each session's open."""
        o, c = self.opens[k0:k1 + 1], self.closes[k0:k1 + 1]
        first = o if phase is None else phase + ((o - phase) // step) * step
        count = -(-(c - first) // step)
        offsets = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
        starts, closes = np.repeat(first, count) + step * offsets, np.repeat(c, count)
        starts, keep = np.unique(starts, return_index=True)  # sessions that touch share a bar on a phase grid
        return starts, closes[keep]

    def next_bar_times(self, last, interval: BarInterval, n: int) -> pd.DatetimeIndex:
        """The ``n`` bar times after ``last`` for bars of ``interval`` (see the module docstring)."""
        return pd.DatetimeIndex(self.next_bar_times_many([last], interval, n)[0]).tz_localize("UTC")

    def next_bar_times_many(self, lasts, interval: BarInterval, n: int) -> np.ndarray:
        """``[len(lasts), n]`` naive-UTC ``datetime64[ns]``: :meth:`next_bar_times` for many last bars."""
        t = ns_array(lasts)
        j = np.arange(1, n + 1)
        if interval.kind == "intraday":
            out = np.empty((len(t), n), dtype=np.int64)
            step = interval.step.value
            for phase in np.unique(t % step):
                rows = np.flatnonzero(t % step == phase)
                k = self._positions(t[rows])
                grid, _ = self._grid(int(k.min()), min(int(k.max()) + n + 2, len(self.opens) - 1), step, int(phase))
                pos = np.searchsorted(grid, t[rows], side="right")[:, None] + j[None, :] - 1
                out[rows] = grid[self._check(pos, "a future bar", len(grid))]
        elif interval.kind == "daily":
            k = self._positions(t)
            nxt = self._check(k[:, None] + j[None, :], "a future session")
            out = t[:, None] + (self.labels[nxt] - self.labels[k][:, None])
        elif interval.kind in ("weekly", "irregular"):
            out = t[:, None] + interval.step.value * j[None, :]
        else:
            months = {"monthly": 1, "quarterly": 3, "yearly": 12}[interval.kind]
            out = np.array([[_add_months(pd.Timestamp(x), months * m).value for m in j] for x in t], dtype=np.int64)
        return out.astype("datetime64[ns]")

    def latest_bar(self, now, interval: BarInterval, anchor=None) -> pd.Timestamp:
        """The start of the last bar complete at ``now``: for daily bars the date of the last closed session
        (midnight UTC); for intraday bars on the grid through ``anchor`` (default: each session's open)."""
        t = ns(now)
        if interval.kind == "daily":
            k = int(np.searchsorted(self.closes, t, side="right")) - 1
            return utc(self.labels[self._check(np.array([k]), now)[0]])
        if interval.kind != "intraday":
            raise ValueError(f"latest_bar knows intraday and daily bars, not {interval.kind}")
        k = int(self._check(np.array([np.searchsorted(self.opens, t, side="right") - 1]), now)[0])
        step = interval.step.value
        starts, closes = self._grid(max(k - 1, 0), k, step, None if anchor is None else ns(anchor) % step)
        done = np.flatnonzero(np.minimum(starts + step, closes) <= t)
        return utc(starts[done[-1]])


def _add_months(ts: pd.Timestamp, months: int) -> pd.Timestamp:
    """``ts`` plus whole months; a month-end stays a month-end (Jun 30 + 6 months = Dec 31)."""
    if ts.is_month_end:
        return ts + pd.offsets.MonthEnd(months)
    return ts + pd.DateOffset(months=months)


def _sessions(name: str, start: str, end: str) -> dict[str, np.ndarray]:
    """Session labels, opens and closes (ns) of calendar ``name`` from exchange_calendars."""
    import exchange_calendars as xc

    schedule = (_fx_calendar(start, end) if name == "FX24x5" else xc.get_calendar(name, start=start, end=end)).schedule
    return {"labels": pd.DatetimeIndex(schedule.index).as_unit("ns").asi8, "opens": ns_array(schedule["open"]),
            "closes": ns_array(schedule["close"])}


@lru_cache(maxsize=None)
def _calendar(name: str) -> MarketCalendar:
    """Built once per machine: importing exchange_calendars and building a calendar take about a second,
    so the sessions are kept in :mod:`marketcast.data.cache`, keyed by the installed exchange_calendars and
    this file."""
    start, end = "1970-01-01", f"{pd.Timestamp.now().year + 5}-12-31"
    source = find_spec("exchange_calendars")
    tag = fingerprint(source.origin, __file__) if source is not None and source.origin else "unknown"
    family = f"calendar-{name.replace('/', '')}-{start[:4]}-{end[:4]}"
    return MarketCalendar(name, **cached_arrays(f"{family}-{tag}", lambda: _sessions(name, start, end), family))


def calendar_for(asset_class: str) -> MarketCalendar:
    """The calendar of an asset class (``stock``, ``crypto``, ``forex``, ``future``)."""
    from marketcast.data.asset import RULES, check_asset_class

    return _calendar(RULES[check_asset_class(asset_class)].calendar)


# --- periods per year -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Annualisation:
    """Periods per year of a series of bars, and the sentence that says how they were found."""

    periods_per_year: float
    interval: BarInterval
    calendar: str
    how: str
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"periods_per_year": self.periods_per_year, "bar_interval": self.interval.label,
                "calendar": self.calendar, "how": self.how, "warnings": list(self.warnings)}


def annualise(stamps, calendar: MarketCalendar, where: str = "bars") -> Annualisation:
    """Periods per year of bars at ``stamps`` on ``calendar``; mixed spacing raises a :class:`DataError`.

    Intraday: bars per session (the median count over the data's sessions, or the regular session divided
    by the bar when the data hold fewer than 3 sessions) x sessions per year. Daily: the sessions per year.
    Weekly, monthly, quarterly, yearly: 52, 12, 4, 1.
    """
    interval = infer_interval(stamps).require(where)
    warnings = list(interval.warnings)
    if interval.kind in PERIODS:
        periods = PERIODS[interval.kind]
        return Annualisation(periods, interval, calendar.name, f"{interval.how}: {periods} a year",
                             tuple(warnings))
    positions = calendar.session_positions(stamps)
    regular = math.ceil(calendar.session_length / interval.step) if interval.kind == "intraday" else 1
    if interval.kind == "intraday":
        counts = np.unique(positions, return_counts=True)[1]
        if len(counts) >= 3:
            per_session = float(np.median(counts))
            source = f"the median over {len(counts):,} sessions in the data"
            if abs(per_session - regular) > 0.1 * regular:
                warnings.append(f"a session holds {per_session:g} bars in the data but {regular} in the regular "
                                f"{calendar.name} session: extended hours or missing bars?")
        else:
            per_session, source = float(regular), f"a regular {calendar.name} session"
    else:
        per_session = 1.0
        steps = np.diff(positions)
        shared, holes = int((steps == 0).sum()), steps - 1
        if shared:
            warnings.append(f"{shared:,} bars fall in the same {calendar.name} session as the bar before: are "
                            "these bars of another market? set --asset-class")
        if (holes > 0).any():
            i = int(np.argmax(holes))
            warnings.append(f"{int(holes[holes > 0].sum()):,} {calendar.name} sessions have no bar, the longest "
                            f"run {int(holes[i])} before {pd.DatetimeIndex(stamps)[i + 1]:%Y-%m-%d}")
    periods = per_session * calendar.sessions_per_year
    periods = int(periods) if float(periods).is_integer() else periods
    if interval.kind == "intraday":
        how = (f"{interval.how}; {per_session:g} bars a session ({source}) x {calendar.sessions_per_year_text} "
               f"= {periods:,g}")
    else:
        how = f"{interval.how}; one bar a session x {calendar.sessions_per_year_text} = {periods:,g}"
    return Annualisation(periods, interval, calendar.name, how, tuple(warnings))
