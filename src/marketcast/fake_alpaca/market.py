"""The fake Alpaca's market: its clock (``GET /v2/clock``, NYSE sessions in New York time) and its bars (Alpaca's
bar objects from a frame, or a deterministic wiggle)."""

from __future__ import annotations

from functools import lru_cache

import pandas as pd

STAMP = "%Y-%m-%dT%H:%M:%SZ"


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
