"""The fake Alpaca's market: its clock (``GET /v2/clock``, NYSE sessions in New York time), a session's phases
(:func:`phases`: the open, the ``cls`` cutoff, the close, early closes included) and where a ``cls`` order sent at
a time goes (:func:`closing_auction`), and its bars (Alpaca's bar objects from a frame, or a deterministic
wiggle).

The phases come from NYSE's calendar (exchange_calendars ``XNYS``: 9:30 to 16:00 New York time, 13:00 on its
early closes, e.g. the day after Thanksgiving). The ``cls`` cutoff is Alpaca's ("Time in Force",
https://docs.alpaca.markets/docs/orders-at-alpaca; alpacahq/alpaca-docs ``content/trading/orders.md``): "CLS
orders submitted after 3:50pm but before 7:00pm ET will be rejected. CLS orders submitted after 7:00pm will be
queued and routed to the following day's closing auction." Alpaca names no cutoff for an early close; NYSE's
closing-auction entry cutoff is 3:50 pm, ten minutes before a 4:00 pm close (NYSE, "Opening and closing
auctions": MOC and LOC "can be entered until 3:50 p.m."), and its closing rule runs "as of 4:00 p.m. (or earlier,
in the case of an earlier scheduled close)" (NYSE Rule 123C, as amended by Information Memo 09-20). The fake's
assumption, stated: the cutoff is :data:`CLS_CUTOFF` before the session's scheduled close, 12:50 pm on a 1:00 pm
early close. On a day NYSE has no session nothing is late, so a ``cls`` order then waits for the next session's
close (the page names the window on trading days only; the fake's reading)."""

from __future__ import annotations

from functools import lru_cache

import pandas as pd

STAMP = "%Y-%m-%dT%H:%M:%SZ"
NEW_YORK = "America/New_York"
CLS_CUTOFF = pd.Timedelta(minutes=10)  # cls orders after (close - this) are refused: 3:50 pm on a 4:00 pm close
CLS_REOPENS = pd.Timedelta(hours=19)  # from 7:00 pm New York time a cls order is queued for the next close
MIDDAY = pd.Timedelta(minutes=30)  # the open phase leaves the clock this long before the cutoff


def phases(day: str) -> tuple[pd.Timestamp, pd.Timestamp, pd.Timestamp]:
    """(open, ``cls`` cutoff, close) of NYSE's session on ``day``, in UTC; early closes as the calendar has them."""
    cal = nyse_calendar()
    close = cal.session_close(day[:10])
    return cal.session_open(day[:10]), close - CLS_CUTOFF, close


def closing_auction(now: str) -> tuple[str | None, pd.Timestamp | None]:
    """Where a ``cls`` order sent at ``now`` goes: (the session whose closing auction it joins, None when Alpaca
    rejects it; the cutoff that refused it). On a session day: until its cutoff, that day's close; after the
    cutoff and before 7:00 pm, rejected; from 7:00 pm, the next session's close. On a day without a session, the
    next session's close."""
    cal, t = nyse_calendar(), utc(now)
    day = t.tz_convert(NEW_YORK).normalize()
    label = day.tz_localize(None)
    if cal.is_session(label):
        _, cutoff, _ = phases(label.strftime("%Y-%m-%d"))
        if t <= cutoff:
            return label.strftime("%Y-%m-%d"), None
        if t < day + CLS_REOPENS:
            return None, cutoff
    return cal.date_to_session(label + pd.Timedelta(days=1), direction="next").strftime("%Y-%m-%d"), None


def daily_bars(n: int) -> list[dict]:
    """``n`` daily bars with a deterministic wiggle (enough history for the planner's windows)."""
    import math
    from datetime import date, timedelta

    out, close = [], 170.0
    for d in range(n):
        prev, close = close, 170.0 + 8 * math.sin(d / 5.0) + 3 * math.cos(d * 1.7)
        day = date(2024, 1, 1) + timedelta(days=d)
        out.append({"t": f"{day.isoformat()}T04:00:00Z", "o": prev, "h": max(prev, close) * 1.006,
                    "l": min(prev, close) * 0.994, "c": close, "v": 5e7})
    return out


@lru_cache(maxsize=1)
def nyse_calendar():
    """NYSE's sessions, built once per process (about 1 s on a loaded machine): :class:`FakeAlpaca` builds it at
    start-up, so no request waits for it under the fake's lock while the client's timeout runs."""
    import exchange_calendars as xc

    return xc.get_calendar("XNYS", start="2010-01-01")


def market_clock(now: str) -> dict:
    """``GET /v2/clock`` at the fake's time ``now``: Alpaca answers in New York time with its offset, whether the
    stock market is open, and its next open and close; while it is open ``next_open`` is the next session's
    (https://docs.alpaca.markets/reference/getclock; the entity's example in alpacahq/alpaca-docs
    ``data/webapi/entities/clock.yaml``: ``{"timestamp": "2022-04-28T14:07:04.451420928-04:00", "is_open": true,
    "next_open": "2022-04-29T09:30:00-04:00", "next_close": "2022-04-28T16:00:00-04:00"}``). The sessions are
    NYSE's from exchange_calendars, apart from the loop's own calendar module."""
    t, cal = utc(now), nyse_calendar()
    ny = lambda x: x.tz_convert("America/New_York").isoformat()  # noqa: E731
    return {"timestamp": ny(t), "is_open": bool(cal.is_open_on_minute(t)), "next_open": ny(cal.next_open(t)),
            "next_close": ny(cal.next_close(t))}


def utc(text: str) -> pd.Timestamp:
    ts = pd.Timestamp(text)
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def bars_of(frame: pd.DataFrame) -> list[dict]:
    """Alpaca's bar objects from an OHLCV frame (a UTC DatetimeIndex)."""
    return [{"t": t.strftime(STAMP), "o": float(r.open), "h": float(r.high), "l": float(r.low),
             "c": float(r.close), "v": float(getattr(r, "volume", 0.0))}
            for t, r in zip(frame.index, frame.itertuples())]
