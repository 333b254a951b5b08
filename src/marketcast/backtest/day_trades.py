"""Pattern-day-trader refusals, scored: under $25,000 of account equity the 4th day trade within 5 business days
is refused, and the backtest scores the refused round trip as the loop then trades it.

The rule. FINRA Rule 4210(f)(8)(B) (https://www.finra.org/rules-guidance/rulebooks/finra-rules/4210): a "day
trade" is "the purchasing and selling or the selling and purchasing of the same security on the same day in a
margin account"; a "pattern day trader" is a customer who "executes four or more day trades within five
business days", and must keep $25,000 of equity to day trade (4210(f)(8)(B)(iv)). Alpaca enforces it before the
fact (https://docs.alpaca.markets/docs/user-protection, "Pattern Day Trader (PDT) Protection at Alpaca"): when
"the previous day's closing account equity is less than $25,000", an order that would be the 4th day trade
within 5 business days is rejected; crypto is not counted.

What counts (issue 53's design): a filled stock round trip whose exit lies in its entry's session. Under
``--exit close`` that is every filled stock round trip on a session's last bar (the exit is the
market-on-close of the entry's session, or a take-profit inside it); under ``next-open`` a take-profit filled
in the entry's session (an exit at the next session's open is no day trade). Business days are NYSE sessions
(:func:`marketcast.data.calendar.calendar_for`), not calendar days: the 5 are the exit's session and the 4
before it.

What a refusal does: the closing order (the ``cls``) is refused, so the position is carried overnight, as the
loop does when the broker refuses it, and exits at the next session's first open; it is then no day trade and
does not count. Where the bars end before that open, the window keeps its close (as the last window under
``next-open``). Assumptions, stated: the equity is the configured one throughout (the backtest's returns are
per unit of capital, so its own P&L does not move it); each symbol and strategy is scored as the account's only
trading.

An entry with a take-profit leg is itself a potential day trade (its leg can close the position in the entry's
session): Alpaca's protection refuses "an order that could complete a day trade", and the loop's own check
(:func:`marketcast.trade.risk.protections.day_trade`) and the fake Alpaca refuse such an OTO entry once 3 day
trades were made in the 5 sessions up to the one it is sent in (the decision's, the evening before the entry).
So that entry is scored as not traded (reason ``refused_day_trade``), where an entry without a leg trades and
only its closing order is refused.

A refused window exits after the next window decided, so the walk-forward pick and the sizing skill read
windows k - 2 and before while the rule can refuse (:attr:`DayTrades.delay`), as under ``next-open``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace

from typing import TYPE_CHECKING

import numpy as np

from marketcast.backtest.fills import CLOSE, DAY_TRADE, NEXT_OPEN, TAKE_PROFIT, Fills
from marketcast.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

PDT_EQUITY = 25_000.0  # under this much equity the rule applies
PDT_TRADES = 3  # day trades allowed within the window; the next one is refused
BUSINESS_DAYS = 5


def check_equity(equity: float | None) -> float | None:
    """``equity`` if None or a positive, finite number of dollars, else a :class:`ConfigError` (exit 2)."""
    if equity is not None and (isinstance(equity, bool) or not isinstance(equity, (int, float))
                               or not math.isfinite(equity) or equity <= 0):
        raise ConfigError(f"--equity must be a positive number of dollars, got {equity!r}; for example 20000 (the "
                          f"pattern-day-trader rule applies under {PDT_EQUITY:,.0f}), or leave it out")
    return equity


def refused(day_trade: np.ndarray, session: np.ndarray, equity: float | None,
            with_leg: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(entries, exits)``, ``[N]`` bool each: window k's entry is refused (it has a take-profit leg and
    :data:`PDT_TRADES` day trades were made in the :data:`BUSINESS_DAYS` sessions before its entry's: the count
    when it is sent), or its closing order is (a day trade, :data:`PDT_TRADES` made in its session and the
    :data:`BUSINESS_DAYS` - 1 before). ``day_trade`` ``[N]`` bool, ``session`` ``[N]`` each window's entry
    session (an NYSE session position; a day trade exits in it), in time order; ``with_leg`` ``[N]`` bool: a
    filled entry sent with a take-profit leg (None: none); ``equity`` the account's (None: not applied). What is
    refused is never made, so it does not count for later windows."""
    n = len(day_trade)
    entries, exits = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    if equity is None or equity >= PDT_EQUITY:
        return entries, exits
    with_leg = np.zeros(n, dtype=bool) if with_leg is None else np.asarray(with_leg, dtype=bool)
    made: deque[int] = deque()

    def count(first: int) -> int:
        while made and made[0] < first:
            made.popleft()
        return len(made)

    for k in np.flatnonzero(np.asarray(day_trade, dtype=bool) | with_leg):
        if with_leg[k] and count(session[k] - BUSINESS_DAYS) >= PDT_TRADES:
            entries[k] = True  # sent the evening before: the 5 sessions up to the decision's
        elif day_trade[k]:
            if count(session[k] - BUSINESS_DAYS + 1) >= PDT_TRADES:
                exits[k] = True
            else:
                made.append(int(session[k]))
    return entries, exits


@dataclass(frozen=True)
class DayTrades:
    """The rule for one symbol's settled windows: ``entry`` ``[N]`` the session of bar t+1, ``after`` ``[N]`` the
    session of bar t+2 (-1 past the bars), ``carried`` ``[N]`` the open of the first bar of a later session than
    bar t+1's (NaN: none in the bars), ``equity`` (None: not applied)."""

    equity: float | None
    entry: np.ndarray
    after: np.ndarray
    carried: np.ndarray

    @classmethod
    def of(cls, equity: float | None, index: "pd.DatetimeIndex", asset_class: str, opens: np.ndarray,
           settled: np.ndarray) -> "DayTrades":
        n = len(settled)
        if equity is None or equity >= PDT_EQUITY or asset_class != "stock":
            return cls(None, np.zeros(n, dtype=np.int64), np.full(n, -1), np.full(n, np.nan))
        from marketcast.data.calendar import calendar_for

        session = calendar_for("stock").session_positions(index)
        entry = session[settled + 1]
        after = np.where(settled + 2 < len(session), session[np.minimum(settled + 2, len(session) - 1)], -1)
        first = np.searchsorted(session, entry, side="right")  # the first bar of a later session
        carried = np.where(first < len(opens), opens[np.minimum(first, len(opens) - 1)], np.nan)
        return cls(equity, entry, after, carried)

    @property
    def applies(self) -> bool:
        return self.equity is not None

    @property
    def delay(self) -> int:
        """1 while the rule can move an exit past the next decision, else 0 (the walk-forward pick's lag)."""
        return int(self.applies)

    def day_trades(self, fills: Fills) -> np.ndarray:
        """``[N]`` bool: a filled round trip that exits in its entry's session (a close or a take-profit in bar
        t+1; an exit at bar t+2's open where bar t+2 is in the same session)."""
        same = np.isin(fills.reason, (CLOSE, TAKE_PROFIT)) | ((fills.reason == NEXT_OPEN) & (self.after == self.entry))
        return fills.filled & same

    def scored(self, walks: dict) -> dict:
        """Each strategy's walk with its refused day trades carried to the next session's open (reason
        :data:`~marketcast.backtest.fills.NEXT_OPEN`, the overnight gap in its gross return, costs as decided)."""
        if not self.applies:
            return walks
        out = {}
        for name, w in walks.items():
            f = w.fills
            with_leg = f.filled & np.isfinite(w.orders.take_profit)
            entries, exits = refused(self.day_trades(f), self.entry, self.equity, with_leg)
            moved = exits & ~np.isnan(self.carried)
            if not (moved.any() or entries.any()):
                out[name] = w
                continue
            gross = np.where(moved, w.orders.side * (self.carried / np.where(moved, f.entry_price, 1.0) - 1.0),
                             f.gross)
            f = replace(f, exit_price=np.where(moved, self.carried, f.exit_price),
                        reason=np.where(moved, NEXT_OPEN, f.reason).astype(np.int8), gross=gross)
            out[name] = replace(w, fills=f.refused(entries, DAY_TRADE))
        return out
