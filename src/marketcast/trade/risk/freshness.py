"""Fresh data only. A bar older than the calendar says it should be, bars that went back in time, a quote too
old or too wide: no new entry for that symbol, a WARNING, and the reason in the cycle's record.

The calendar (:mod:`marketcast.data.calendar`) knows which bar should exist at a moment: for daily bars the
last session that has closed (by session, so Alpaca's bars stamped at midnight New York count as their day),
for intraday bars the last complete bar on the data's own grid. A bar is *due* once it has been complete for
``stale_after_s``; data whose last bar is older than the due one is stale. Bars after the last complete one (a
session still trading, a file ahead of the clock) are never decided on: :func:`complete` cuts them off.
Bars of another spacing (weekly and longer) have no due bar here: they are never called stale.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from marketcast.data.bars import Bars
from marketcast.data.calendar import MarketCalendar, calendar_for, infer_interval
from marketcast.trade.types import Quote

SPACING_BARS = 64  # the last bars whose gaps say the spacing (enough for intraday grids across a weekend)


@dataclass(frozen=True)
class Freshness:
    stale_after_s: float = 3600.0  # how long after a bar completes it must be in the data
    max_quote_age_s: float = 60.0
    max_spread: float = 0.01  # ask / bid - 1 of a real quote


def utc(ts) -> pd.Timestamp:
    t = pd.Timestamp(ts)
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def latest_complete(bars: Bars, at) -> pd.Timestamp | None:
    """The bar (its start; for daily bars the session date) of ``bars``' spacing last complete at ``at``."""
    index = bars.frame.index
    interval = infer_interval(index[-SPACING_BARS:])
    if interval.kind == "daily":
        return bars.calendar.latest_bar(utc(at), interval)
    if interval.kind == "intraday":
        return bars.calendar.latest_bar(utc(at), interval, anchor=index[-1])
    return None


def _sessions(calendar: MarketCalendar, stamps) -> list[int]:
    return [int(p) for p in calendar.session_positions(pd.DatetimeIndex([utc(s) for s in stamps]))]


def _behind(bars: Bars, stamp, due: pd.Timestamp) -> bool:
    """``stamp`` (a bar of ``bars``) lies before the bar ``due``: by session for daily bars, by time otherwise."""
    if infer_interval(bars.frame.index[-SPACING_BARS:]).kind == "daily":
        mine, wanted = _sessions(bars.calendar, [stamp, due])
        return mine < wanted
    return utc(stamp) < due


def newer_bar_due(bars: Bars, now) -> bool:
    """A bar later than ``bars``' last one is complete at ``now`` (always True for spacings without a calendar
    rule, or too few bars to tell one)."""
    if len(bars.frame) < 2:
        return True
    due = latest_complete(bars, now)
    return due is None or _behind(bars, bars.frame.index[-1], due)


def complete(bars: Bars, now) -> Bars:
    """``bars`` without the bars not complete at ``now`` (an in-progress session, bars later than the clock)."""
    if len(bars.frame) < 2:
        return bars
    last = latest_complete(bars, now)
    if last is None:
        return bars
    index = bars.frame.index
    if infer_interval(index[-SPACING_BARS:]).kind == "daily":
        keep = bars.calendar.session_positions(index) <= _sessions(bars.calendar, [last])[0]
    else:
        keep = index <= last
    return bars if keep.all() else replace(bars, frame=bars.frame[keep])


def stale_reason(bars: Bars, now, cfg: Freshness) -> str | None:
    """Why ``bars`` are too old to enter on at ``now``, or None."""
    at = utc(now) - pd.Timedelta(seconds=cfg.stale_after_s)
    due = latest_complete(bars, at) if len(bars.frame) >= 2 else None
    last = bars.frame.index[-1]
    if due is None or not _behind(bars, last, due):
        return None
    return (f"stale data: the last bar is {utc(last):%Y-%m-%d %H:%M}, but the {bars.calendar.name} calendar says "
            f"the bar of {due:%Y-%m-%d %H:%M} was complete by {at:%Y-%m-%d %H:%M} UTC (stale_after_s "
            f"{cfg.stale_after_s:g})")


def went_back(last, seen) -> str | None:
    """Why bars whose last is ``last`` cannot be trusted after the loop saw ``seen`` (None when in order)."""
    if seen is not None and utc(last) < utc(seen):
        return (f"data moved backwards: the last bar is {utc(last):%Y-%m-%d %H:%M}, the loop already saw "
                f"{utc(seen):%Y-%m-%d %H:%M}")
    return None


def quote_reasons(q: Quote, now, cfg: Freshness, wanted: bool, required: bool) -> list[str]:
    """Why a quote cannot price an entry: none came although real quotes were ``wanted`` (ADD_LATEST on a broker
    that has them) and are ``required`` (``require_quote``), it is older than ``max_quote_age_s`` at ``now`` (not
    checked without a clock), or wider than ``max_spread``."""
    if not wanted:
        return []
    if q.source != "real":
        return ["no real quote (require_quote)"] if required else []
    out = []
    if now is not None and q.timestamp:
        age = (utc(now) - utc(q.timestamp)).total_seconds()
        if age > cfg.max_quote_age_s:
            out.append(f"quote is {age:,.0f} s old (max_quote_age_s {cfg.max_quote_age_s:g})")
    if q.spread > cfg.max_spread:
        out.append(f"spread {q.spread:.3%} is wider than max_spread {cfg.max_spread:.3%}")
    return out


def queued_until(asset_class: str, now, decision_ts: str) -> str | None:
    """When an order sent at ``now`` (None: at the close of the decision bar's session, as in a replay) can
    first trade, if its market is closed then: the next session's open (UTC), else None. A stock exit
    placed after the close waits for the next open (Alpaca: "Order Lifecycle", orders sent outside market
    hours are queued); crypto trades 24/7 and never waits."""
    calendar = calendar_for(asset_class)
    when = utc(now) if now is not None else calendar.next_close(utc(decision_ts))
    if calendar.is_open(when):
        return None
    return f"{calendar.next_open(when):%Y-%m-%d %H:%M} UTC"


CLS_CUTOFF = pd.Timedelta(minutes=10)  # before the session's close: 3:50 pm ET on a 4:00 pm close


def cls_cutoff(now) -> pd.Timestamp | None:
    """The latest moment a market-on-close (``cls``) order sent at ``now`` still reaches today's closing
    auction: 10 minutes before the stock session's close, if the session is open at ``now``; None when it is
    not (the market is closed).

    Alpaca, https://docs.alpaca.markets/docs/orders-at-alpaca ("Time in Force", ``cls``): "CLS orders submitted
    after 3:50pm but before 7:00pm ET will be rejected. CLS orders submitted after 7:00pm will be queued and
    routed to the following day's closing auction." Alpaca gives no cutoff for an early close (13:00 ET); the
    cutoff is taken to move with the calendar's close, 10 minutes before it (12:50 ET), as the exchanges'
    closing-auction entry cutoffs do. The loop never sends a ``cls`` outside the session at all (after 7:00 pm
    one would wait for the next day's auction: not the close the backtest scores)."""
    calendar = calendar_for("stock")
    when = utc(now)
    if not calendar.is_open(when):
        return None
    return calendar.next_close(when) - CLS_CUTOFF


CLS_REOPENS = pd.Timedelta(hours=19)  # 7:00 pm New York time: from then a cls order is queued for the next close


def cls_rejected_at(now) -> pd.Timestamp | None:
    """The cutoff for which Alpaca rejects a ``cls`` order sent at ``now`` (the venue's rule, which the pre-check
    judges: :func:`marketcast.trade.risk.protections.on_close`), or None when it takes it: rejected on a stock
    session day after the session's cutoff (:data:`CLS_CUTOFF` before its close: 3:50 pm ET, 12:50 pm on an
    early close; "after 3:50pm", so 3:50:00 itself is in time) and before 7:00 pm ET; taken before the cutoff
    (for today's close), from 7:00 pm and on a day without a session (queued for the next session's close).
    Same page and wording as :func:`cls_cutoff`; the loop's own rule, stricter, is :func:`before_cls_cutoff`."""
    t = utc(now)
    day = t.tz_convert("America/New_York").normalize()
    session = calendar_for("stock").sessions(day.tz_localize(None), day.tz_localize(None))
    if session.empty:
        return None
    cutoff = session["close"].iloc[0] - CLS_CUTOFF
    return cutoff if cutoff < t < day + CLS_REOPENS else None


def before_cls_cutoff(now) -> bool:
    """Whether a ``cls`` order sent at ``now`` reaches this session's closing auction (:func:`cls_cutoff`)."""
    cutoff = cls_cutoff(now)
    return cutoff is not None and utc(now) < cutoff


def in_a_later_session(now, decision_ts: str) -> bool:
    """Whether the stock session is open at ``now`` and is a later one than daily bar ``decision_ts``'s (a daily
    bar is labelled by its session's date, at or after midnight UTC, so its session is the first to close after
    the label): a held position's ``cls`` exit goes out only then (:mod:`marketcast.trade.loop.on_close`)."""
    calendar = calendar_for("stock")
    when = utc(now)
    return bool(calendar.is_open(when) and calendar.next_close(when) > calendar.next_close(utc(decision_ts)))
