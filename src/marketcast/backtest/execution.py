"""The execution rule: where each trade exits, and which entries the broker then refuses. One definition that
the backtest settles by (``--exit``, ``exit`` in the config; default ``next-open``, :data:`DEFAULT_EXIT`).

A decision made at bar t enters on bar t+1 (at its open, or at its limit inside it) and, unless its take-profit
fills inside bar t+1 (unchanged by the rule), exits where the rule says:

==========================================  ==========================  ==========================================
bar t+1                                     ``--exit close``            ``--exit next-open`` (default)
==========================================  ==========================  ==========================================
a daily stock bar (each is its session's     bar t+1's close             bar t+2's open: the close is sent after
last)                                       (market-on-close)           the session and queued to the next open
an intraday stock bar that ends a session   bar t+2's open: a market    the same (queued to the next session)
                                            order at the bar's end (the
                                            loop sends ``cls`` on daily
                                            bars only)
any other bar: 24/7 (crypto), forex,        bar t+2's open: a market    bar t+2's open: a market order at the
futures; an intraday stock bar before the   order at the bar's end      bar's end fills at the first price after
session's last                              (the walk-forward record;   it
                                            see below)
==========================================  ==========================  ==========================================

Why ``next-open`` is the default: it is the rule every account can execute every day. Its round trip spans two
sessions, so it is never a day trade; under ``close`` each stock round trip opens and closes in one session, a
day trade, and below $25,000 of equity Alpaca's pattern-day-trader rule allows 3 of them in 5 business days
(https://docs.alpaca.markets/docs/user-protection, "Pattern Day Trader (PDT) Protection";
:mod:`marketcast.trade.risk.protections`).

Why each rule exits where it does:

* Only a stock's session ends in a closing auction. Alpaca's ``time_in_force`` ``cls`` submits a market-on-close
  order, "eligible to execute only in the market closing auction"; "CLS orders submitted after 3:50pm but before
  7:00pm ET will be rejected. CLS orders submitted after 7:00pm will be queued and routed to the following day's
  closing auction" (https://docs.alpaca.markets/docs/orders-at-alpaca#time-in-force). So the close is an exit
  price only for an order sent during the session, before 3:50 pm ET: ``close``.
* ``trade run`` decides after the session, so a stock's leftover close is sent while the market is closed and
  Alpaca queues it "for execution at the time of the next market open" (docs/trading.md): ``next-open``.
* A bar with no closing auction after it (24/7 crypto, or an intraday bar the session goes on after) exits with
  a market order at the bar's end, whose price is the next bar's open under either rule (:func:`market_exit`).
  Under ``close`` each strategy's own record still marks these bars at bar t+1's close, as the live planner
  records them (its pick reads only windows settled by its decision bar, so the pick lags no window); the
  walk-forward record, what the loop earns, exits them at bar t+2's open (on continuous 24/7 bars the next
  open is the close carried over, so the two agree there).

Two refusals follow from an exit that waits for bar t+2's open:

* Alpaca's wash: while the close of window k's position is queued (sent after the session, not yet filled),
  window k+1's entry on the same symbol could fill against it and Alpaca refuses it as a wash trade
  (https://docs.alpaca.markets/docs/user-protection, "Preventing Wash Trades at Alpaca": against a market order
  of the other side, "always rejected"; :func:`marketcast.trade.risk.protections.washes`). The queued close of a
  long is a market sell: a new long entry (a buy) washes, and so does a new short entry with a take-profit (its
  buy leg). :func:`wash_refused` scores these on each strategy's own windows (:func:`queued_close`: a stock's
  session-last bar under ``next-open``), as the live planner records each strategy, so the pick reads the
  planner's record: the entry never trades, and in a run of same-side decisions every other one trades.
* The loop's hold: the loop trades only the walk-forward pick, and it sends no entry on a symbol it still
  holds or has a working order on (``trade/loop/cycle.py`` ``plan``: ``Book.entry_conflicts``). Whenever a
  traded position's exit is a market order that fills at bar t+2's open (:func:`market_exit`: every bar under
  ``next-open``, every bar without a closing auction under ``close``, 24/7 crypto included), the next
  window's entry, on either side, is skipped: :func:`held_refused` along the pick's path (window k trades its
  pick's decision unless the trade made at k - 1, itself not refused there, still waits for its exit). Every
  wash is one of these. The walk-forward record (its returns, equity, Monte Carlo, verdict) is scored so
  (:meth:`marketcast.backtest.engine.Exits.traded`); each strategy's own record keeps its own walk.

The rule never moves a decision: every decision still reads bars <= t. Under a next-open exit a window settles on
bar t+2's open, so the walk-forward pick at window k reads the windows settled by then, k - 2 and before
(:func:`waits_for_next_open`); settlement reads bars t+1 and t+2 only. The last scored window, whose bar t+2 the
bars do not hold yet, is marked at bar t+1's close (:class:`marketcast.backtest.engine.Exits`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from marketcast.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

EXIT_RULES = ("close", "next-open")
DEFAULT_EXIT = "next-open"  # every account can execute it every day (module docstring)
DAY_NS = 86_400 * 10**9  # bars this far apart (or more) are daily: each is its session's last


def check_exit(rule: str) -> str:
    """``rule`` if it is one of :data:`EXIT_RULES`, else a :class:`ConfigError` (exit 2, one line)."""
    if rule not in EXIT_RULES:
        raise ConfigError(f"--exit must be one of {', '.join(EXIT_RULES)}, got {rule!r}; 'close' exits a stock at "
                          "the session's close, 'next-open' at the next session's open as `trade run` does")
    return rule


def describe(rule: str) -> str:
    """The rule in one sentence, as every report names it."""
    if check_exit(rule) == "close":
        return ("exit `close`: each decision at bar t is settled on bar t+1, entered there and exited at its close "
                "(a stock by market-on-close)")
    return ("exit `next-open`: each decision at bar t enters on bar t+1 and exits at bar t+2's open, as `trade run` "
            "does; an entry against the previous window's queued close is refused as a wash")


def session_last(index: "pd.DatetimeIndex", asset_class: str) -> np.ndarray:
    """``[n]`` bool: bar j ends a session with a closing auction: every daily (or longer) stock bar; an intraday
    stock bar whose next bar lies in a later session by the stock calendar (the data's last bar counts as one).
    False for every other class."""
    if asset_class != "stock":
        return np.zeros(len(index), dtype=bool)
    if not _intraday(index):
        return np.ones(len(index), dtype=bool)
    from marketcast.data.calendar import calendar_for

    session = calendar_for("stock").session_positions(index)
    return np.append(session[1:] != session[:-1], True)


def closing_auction(index: "pd.DatetimeIndex", asset_class: str, rule: str) -> np.ndarray:
    """``[n]`` bool: what the engine reads as bar j's closing auction under ``rule``. Under ``next-open`` it is
    :func:`session_last` (the bars after which a close waits queued for the next session). Under ``close`` a
    position leaves by a market-on-close order only where the loop sends one: on daily stock bars
    (``trade/loop/cycle.py`` ``_closing_auction``); an intraday stock bar, a session's last included, exits with
    a market order at the bar's end, filled at the next bar's open (the next session's), as 24/7 bars do."""
    last = session_last(index, asset_class)
    return np.zeros_like(last) if check_exit(rule) == "close" and _intraday(index) else last


def _intraday(index: "pd.DatetimeIndex") -> bool:
    """Bars closer than a day apart (the median spacing; one bar counts as daily)."""
    stamps = np.asarray(index.asi8)
    return len(stamps) >= 2 and bool(np.median(np.diff(stamps)) < DAY_NS)


def next_open_exit(rule: str, closing_auction: np.ndarray) -> np.ndarray:
    """``[N]`` bool per window: its exit is bar t+2's open (else bar t+1's close); ``closing_auction`` says
    whether each window's bar t+1 ends a stock session (:func:`session_last` at t+1; the shape is all it
    needs here, see the table)."""
    check_exit(rule)
    return np.full(np.shape(closing_auction), rule == "next-open", dtype=bool)


def queued_close(rule: str, closing_auction: np.ndarray) -> np.ndarray:
    """``[N]`` bool per window: an exit at the next open is sent while the market is closed, so it waits queued
    for the open (a stock's session-last bar under ``next-open``): the close a next entry can wash against."""
    return next_open_exit(rule, closing_auction) & np.asarray(closing_auction, dtype=bool)


def waits_for_next_open(rule: str) -> bool:
    """Whether an exit may wait for bar t+2's open. Then window j settles after window j + 1 decided, so the
    walk-forward pick at window k reads windows k - 2 and before."""
    check_exit(rule)
    return rule == "next-open"


def market_exit(rule: str, closing_auction: np.ndarray) -> np.ndarray:
    """``[N]`` bool per window: the loop's exit, where no take-profit filled, is a market order sent at the
    decision after bar t+1 and filled at bar t+2's open, so it still holds the symbol at that decision: every
    window under ``next-open``; under ``close`` each whose bar t+1 has no closing auction (24/7 bars, an
    intraday stock bar before the session's last)."""
    auction = np.asarray(closing_auction, dtype=bool)
    return next_open_exit(rule, auction) | ~auction


def wash_refused(side: np.ndarray, take_profit: np.ndarray, queues: np.ndarray) -> np.ndarray:
    """``[N]`` bool: window k's entry is refused as a wash against window k - 1's queued close.

    ``side`` ``[N]`` in {-1, 0, 1}; ``take_profit`` ``[N]`` (NaN: none); ``queues`` ``[N]``: window k's position,
    if it trades, leaves a close queued for the next open (filled, not taken profit, and :func:`queued_close`).
    Window k is refused when k - 1 traded and queued its close and k's order meets it: the same side, or the
    other side with a take-profit leg (the leg is on the queued close's other side). A refused window trades
    nothing, so it queues nothing and window k + 1 is free: in a run of windows that would each be refused
    after a traded one, every other one trades."""
    side = np.asarray(side)
    prev = np.concatenate([[0], side[:-1]])
    meets = (side != 0) & ((side == prev) | ((side == -prev) & ~np.isnan(np.asarray(take_profit, dtype=float))))
    return _after_traded(meets, queues)


def held_refused(side: np.ndarray, waits: np.ndarray) -> np.ndarray:
    """``[N]`` bool along one path of windows (the walk-forward pick's): window k's entry is not sent because
    the loop still holds the symbol that window k - 1 traded, whose exit waits for bar t+2's open.

    ``side`` ``[N]`` in {-1, 0, 1}: the path's decisions (0: flat or no pick); ``waits`` ``[N]``: window k's
    position, if it trades, is still held at the next decision (filled, not taken profit, its exit a
    :func:`market_exit`). Any side is refused (the loop skips every entry on a symbol it holds, a wash or not);
    a refused window trades nothing and holds nothing, so window k + 1 is free."""
    return _after_traded(np.asarray(side) != 0, waits)


def _after_traded(meets: np.ndarray, queues: np.ndarray) -> np.ndarray:
    """``[N]`` bool: ``meets[k]`` and window k - 1 traded and left ``queues[k - 1]`` standing, where a window
    refused so trades nothing (so leaves nothing standing). Vectorised over the runs (no loop over windows)."""
    meets = np.array(meets, dtype=bool)
    queues = np.asarray(queues, dtype=bool)
    n = len(meets)
    if n == 0:
        return np.zeros(0, dtype=bool)
    meets[0] = False
    chained = queues & meets  # would queue if traded, and is refused if k - 1 queued
    # queued[k] (traded and queued): queues[k] & not (queued[k - 1] & meets[k]). Inside a run of chained
    # windows it alternates from the run's first window, whose own value is queues[start] (refused never).
    start = np.flatnonzero(~chained)  # window 0 is never chained (meets[0] is False)
    run_start = start[np.searchsorted(start, np.arange(n), side="right") - 1]
    odd = (np.arange(n) - run_start) % 2 == 1
    queued = np.where(chained, queues[run_start] ^ odd, queues)
    return meets & np.concatenate([[False], queued[:-1]])
